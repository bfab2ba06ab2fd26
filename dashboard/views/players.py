"""Players page: one item's record, its duels explained from its point of view."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import links, pages, state
from dashboard.components.explanations import (
    PLOT_CONFIG,
    fetch,
    figures,
    require_model,
    sample_note,
)
from dashboard.components.export import (
    export_name,
    export_stem,
    figure_exports,
    provenance,
    table_download,
)
from dashboard.components.guard import run_guarded
from dashboard.components.precision import precision_control
from dashboard.components.tables import paginated, without_duplicate_names
from dashboard.components.text import md
from dashboard.services import views_data
from dashboard.services.cluster import cluster_executor
from dashboard.services.explain_requests import request
from dashboard.services.training import model_description
from prefshap_core.csv_safety import to_csv_bytes
from prefshap_core.explain import Executor
from prefshap_core.plots import own_vs_opponents
from prefshap_core.plots.labels import imputed_shares
from prefshap_core.plots.own_vs_opponents import side_totals
from prefshap_core.workflow.items import ItemRecord

VIEWS = {"all": "All duels", "losses": "Losses", "wins": "Wins"}
RESULT_OF_VIEW = {"losses": "lost", "wins": "won"}


def _pick_item(loaded: state.LoadedData) -> str:
    # Most active first, so the interesting items are at the top of the list.
    choices = views_data.item_choices(loaded)
    ids, labels, counts = choices.ids, choices.labels, choices.counts
    current = state.selected_item(loaded)
    linked = links.take("player", ids)
    if linked is not None:  # a link just opened: its player wins over the widget's own
        st.session_state[f"players:item:{loaded.fingerprint}"] = linked
    item_id = st.selectbox(
        "Player (type to search by name or id)",
        ids,
        index=ids.index(current) if current in ids else 0,
        format_func=lambda i: (
            f"{labels[i]} ({i}) · {counts[i]:,} duels"
            if labels[i] != i
            else f"{i} · {counts[i]:,} duels"
        ),
        key=f"players:item:{loaded.fingerprint}",
    )
    state.select_item(loaded, item_id)
    return item_id


def _open_duel(loaded: state.LoadedData, duel: int, item_id: str) -> None:
    state.select_duel(loaded, duel, item_id)
    st.switch_page(pages.DUEL.page())


def _opponent_key(loaded: state.LoadedData, item_id: str) -> str:
    return f"players:opponent:{loaded.fingerprint}:{item_id}"


def _record(loaded: state.LoadedData, record: ItemRecord) -> None:
    c = st.columns(4)
    c[0].metric("Duels", f"{record.n_duels:,}")
    c[1].metric("Wins", f"{record.wins:,}")
    c[2].metric("Losses", f"{record.losses:,}")
    decided = record.wins + record.losses
    c[3].metric("Win rate", f"{record.wins / decided:.0%}" if decided else "—")
    if record.ties:
        st.caption(f"Record (wins-losses-ties): {record.wlt}; the win rate leaves ties out.")
    with st.expander("Opponents"):
        table = record.duels
        opponents = (
            table.assign(won=table["result"] == "won", lost=table["result"] == "lost")
            .groupby(["opponent_id", "opponent"], as_index=False)
            .agg(duels=("duel", "size"), wins=("won", "sum"), losses=("lost", "sum"))
            .sort_values(["duels", "opponent"], ascending=[False, True])
        )
        st.caption("Select an opponent to see only the duels against it.")
        picked = paginated(
            without_duplicate_names(opponents, "opponent", "opponent_id"),
            key=f"opponents:{record.item_id}", page_size=10, selectable=True,
        )  # fmt: skip
        if picked is not None:  # before the filter below is drawn: it shows this choice
            st.session_state[_opponent_key(loaded, record.item_id)] = str(
                opponents["opponent_id"].iloc[picked]
            )


def _pick_opponent(loaded: state.LoadedData, record: ItemRecord) -> str | None:
    table = record.duels
    counts = table.groupby("opponent_id")["duel"].size().sort_values(ascending=False)
    names = dict(zip(table["opponent_id"], table["opponent"], strict=False))
    choices = [None, *counts.index.astype(str).tolist()]
    return st.selectbox(
        "Against", choices, key=_opponent_key(loaded, record.item_id),
        format_func=lambda o: "all opponents" if o is None
        else f"{names[o]} ({counts[o]} duel{'s' if counts[o] != 1 else ''})",
    )  # fmt: skip


def render() -> None:
    st.title("Players")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    executor = cluster_executor()  # where explanations run (the environment, read once)
    data = loaded.data
    item_id = _pick_item(loaded)
    record = views_data.item_record(loaded, item_id)
    st.subheader(
        md(record.label) if record.label == item_id else f"{md(record.label)} ({md(item_id)})"
    )
    _record(loaded, record)
    if record.n_duels == 0:
        st.info("This item has no duels.")
        links.write(player=item_id)
        return

    c = st.columns([3, 2, 1], vertical_alignment="bottom")
    with c[2]:
        precision = precision_control("players")
    with c[0]:
        linked = links.take("view", list(VIEWS))
        if linked is not None:
            st.session_state[f"players:view:{loaded.fingerprint}"] = linked
        view = st.segmented_control(
            "Explain", list(VIEWS), format_func=VIEWS.get, default="all", required=True,
            key=f"players:view:{loaded.fingerprint}", persist_state=state.PERSIST,
        )  # fmt: skip
    with c[1]:
        opponent = _pick_opponent(loaded, record)
    links.write(player=item_id, view=view)
    duels = views_data.duels_of_item(loaded, item_id, view, opponent)
    opponent_names = dict(zip(record.duels["opponent_id"], record.duels["opponent"], strict=False))
    against = "" if opponent is None else f" against {opponent_names[opponent]}"
    st.caption(
        f"{VIEWS[view]}{md(against)} of {md(record.label)}, explained from its point of view: "
        f"right of zero, the feature pushed towards {md(record.label)}; red, {md(record.label)} "
        "had more of it."
    )
    if len(duels) == 0:
        st.info(f"{md(record.label)} has no {VIEWS[view].lower()}.")
    else:
        whats = ["items", "context"] if model.kind == "cgpm" else ["items"]
        tabs = st.tabs(["Item features", "Context features"][: len(whats)])
        for tab, what in zip(tabs, whats, strict=True):
            with tab:
                req = request(loaded, model, duels, what, precision=precision, executor=executor)
                sample_note(req, cap_hint=False)
                expl = fetch(req, page=pages.PLAYERS.url_path)
                if expl is None:
                    continue
                shown = {
                    "all": expl.from_point_of_view,
                    "losses": expl.losses_of,
                    "wins": expl.wins_of,
                }[view](item_id)

                def open_point(row: int, shown=shown) -> None:
                    hits = np.flatnonzero(data.duel_ids == shown.duel_ids[row])
                    if len(hits):
                        _open_duel(loaded, int(hits[0]), item_id)

                figures(
                    shown,
                    title=f"{record.label}: {VIEWS[view].lower()}{against} ({shown.n_duels:,})",
                    dataset=data.name,
                    selection=f"{record.label} {view}{against} {what}",
                    key=f"players:{what}",
                    provenance=provenance(loaded.title, model_description(model),
                                          shown.n_duels),
                    bar_kind="mean",
                    on_point=open_point,
                    imputed=imputed_shares(data),
                )  # fmt: skip
        if view == "losses":
            _own_vs_opponents(loaded, model, record, duels, precision, executor)
    _duel_table(loaded, record, view, opponent)


def _own_vs_opponents(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    record: ItemRecord,
    duels: np.ndarray,
    precision: state.Precision,
    executor: Executor | None,
) -> None:
    """Its losses with each side's features as separate players: its own vs its opponents'."""
    show = st.toggle(
        "Own features vs opponents' features",
        key=f"players:sides:{loaded.fingerprint}",
        persist_state=state.PERSIST,
        help=f"Did {md(record.label)} lose because of its own features or its opponents'? "
        "Each side's item features become separate players.",
    )
    if not show:
        return
    req = request(loaded, model, duels, "sides", precision=precision, executor=executor)
    sample_note(req, cap_hint=False)
    expl = fetch(req, page=pages.PLAYERS.url_path)
    if expl is None:
        return
    shown = expl.losses_of(record.item_id)
    own, theirs = (float(t.mean()) for t in side_totals(shown))
    st.caption(
        f"Over its {shown.n_duels:,} losses, {md(record.label)}'s own features moved the "
        f"preference by {own:+.3f} on average and its opponents' features by {theirs:+.3f} "
        f"(negative: towards the loss; mean preference {shown.outputs.mean():+.3f})."
    )
    fig = own_vs_opponents(shown, title=f"{record.label}: own vs opponents' features in losses")
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG, key="players:own-vs-opponents")
    stem = export_stem(loaded.data.name, "own vs opponents", f"{record.label} losses")
    figure_exports(fig, stem, expl=shown, key="players:own-vs-opponents")


def _duel_table(
    loaded: state.LoadedData, record: ItemRecord, view: str, opponent: str | None
) -> None:
    st.markdown(f"**{VIEWS[view]} of {md(record.label)}** — select a row to open the duel")
    table: pd.DataFrame = record.duels
    if view in RESULT_OF_VIEW:
        table = table[table["result"] == RESULT_OF_VIEW[view]]
    if opponent is not None:
        table = table[table["opponent_id"] == opponent]
    picked = paginated(
        without_duplicate_names(table, "opponent", "opponent_id"),
        key=f"duels:{loaded.fingerprint}:{record.item_id}:{view}",
        selectable=True,
        column_config={"duel": st.column_config.NumberColumn("row", format="%d")},
    )
    if picked is not None:
        _open_duel(loaded, int(table.iloc[picked]["duel"]), record.item_id)
    c = st.columns([2, 1], vertical_alignment="bottom")
    # Also reachable without a mouse: pick by duel id.
    duel_id = c[0].selectbox(
        "Or open a duel by its id",
        table["duel_id"].tolist(),
        index=None,
        placeholder="duel id",
        key=f"players:open:{record.item_id}:{view}",
    )
    with c[1]:
        cli_table = views_data.explain_input_table(loaded, table["duel"].to_numpy())
        table_download(
            to_csv_bytes(cli_table),
            export_name(loaded.data.name, "duels", f"{record.label} {view}", "csv"),
            label="Duels (CSV)",
            key=f"duels:{record.item_id}:{view}",
            help="In `prefshap explain --duels` format: left, right, winner (and the "
            "context columns), so the same duels can be explained from the command line.",
        )
    if duel_id is not None:
        duel = int(table.loc[table["duel_id"] == duel_id, "duel"].iloc[0])
        _open_duel(loaded, duel, record.item_id)


run_guarded(render)
