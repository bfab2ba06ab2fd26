"""Duel page: one duel, the probability of each side winning, and its waterfall
(optionally split by side: each side's own features as separate players)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import links, pages, state
from dashboard.components.explanations import PLOT_CONFIG, fetch, require_model
from dashboard.components.export import (
    export_name,
    export_stem,
    figure_exports,
    provenance,
    table_download,
)
from dashboard.components.formats import percent
from dashboard.components.guard import run_guarded
from dashboard.components.precision import precision_control
from dashboard.components.text import md
from dashboard.components.utility_split import duel_caption
from dashboard.services import views_data
from dashboard.services.cluster import cluster_executor
from dashboard.services.explain_requests import request
from dashboard.services.explanation_cache import explanation_cache
from dashboard.services.intervals import duel_g_sd, interval_caption
from dashboard.services.training import model_description
from prefshap_core.explain import Executor
from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import explanation_to_csv, waterfall
from prefshap_core.plots.waterfall import error_bar_note, sigmoid


def _pick_duel(
    loaded: state.LoadedData, model: state.TrainedModel
) -> tuple[int, str | None, state.Precision]:
    """The duel, the side it is seen from, and the precision of its explanation."""
    data = loaded.data
    chosen = state.selected_duel(loaded)
    duel, seen_from = chosen if chosen else (int(model.split.test[0]), None)
    c = st.columns([2, 2, 1], vertical_alignment="bottom")
    with c[2]:
        precision = precision_control("duel")
    # The key carries the current duel, so a duel chosen on another page shows here.
    typed = (
        c[0]
        .text_input(
            "Duel id or “A vs B”",
            value=str(data.duel_ids[duel]),
            key=f"duel:id:{loaded.fingerprint}:{duel}",
            help="A duel id, or two items by name or id (e.g. “Pikachu vs Onix”); "
            "the Players and Explain pages open duels here too.",
        )
        .strip()
    )
    if typed and typed != str(data.duel_ids[duel]):
        hits = np.flatnonzero(data.duel_ids == typed)
        if len(hits):
            state.select_duel(loaded, int(hits[0]), None)
            st.rerun()
        _by_names(loaded, typed, c[0])
    return duel, seen_from, precision


def _by_names(loaded: state.LoadedData, typed: str, where) -> None:
    """Open the duel(s) of two items named "A vs B", or say why not."""
    try:
        pair = views_data.find_pair(loaded, typed)
    except KeyError as exc:
        where.error(f"{md(exc.args[0])}: type a duel id or “A vs B”.")
        return
    if pair is None:
        where.error(f"No duel has the id {md(repr(typed))}; for two items, type “A vs B”.")
        return
    a, b = pair
    met = views_data.pair_meetings(loaded, a, b)
    if met.n_duels == 0:
        where.warning(f"{md(typed)} never met in the data: the Head-to-head page shows them.")
        state.select_pair(loaded, a, b)
        where.page_link(pages.HEAD_TO_HEAD.page(), label="Open the head-to-head")
        return
    if met.n_duels > 1:
        st.session_state[f"duel:meetings:{loaded.fingerprint}"] = (a, b)
    state.select_duel(loaded, int(met.table["duel"].iloc[-1]), a)  # the latest meeting
    st.rerun()


def _other_meetings(loaded: state.LoadedData, duel: int) -> None:
    """After "A vs B" with several meetings: pick another of them."""
    pair = st.session_state.get(f"duel:meetings:{loaded.fingerprint}")
    if not pair:
        return
    met = views_data.pair_meetings(loaded, *pair)
    duels = met.table["duel"].tolist()
    if duel not in duels:
        return
    rows = {int(r.duel): f"{r.duel_id} · winner {r.winner}" + (
        f" · {r.context}" if "context" in met.table.columns else "")
        for r in met.table.itertuples()}  # fmt: skip
    picked = st.selectbox(
        f"Their {len(duels)} meetings", duels, index=duels.index(duel),
        format_func=rows.get, key=f"duel:meeting:{loaded.fingerprint}:{duel}",
    )  # fmt: skip
    if picked != duel:
        state.select_duel(loaded, int(picked), pair[0])
        st.rerun()


def _sides_table(loaded: state.LoadedData, left: int, right: int) -> pd.DataFrame | None:
    raw = loaded.data.raw_items
    if raw is None:
        return None
    table = raw.iloc[[left, right]].T
    table.columns = [str(loaded.data.labels[left]), str(loaded.data.labels[right])]
    return table.astype(str)


def _explained(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duel: int,
    what: str,
    precision: state.Precision,
    executor: Executor | None,
) -> Explanation | None:
    """The duel's explanation: cut from an earlier one if possible (e.g. a player's
    losses, so opening a duel from the Players page costs nothing), else computed."""
    req = request(
        loaded, model, np.array([duel]), what, cap=None, precision=precision, executor=executor,
        uncertainty=True,  # one duel: its error bars include the model's posterior sd
    )  # fmt: skip
    found = explanation_cache().find_duel(req)
    return found if found is not None else fetch(req, page=pages.DUEL.url_path)


def render() -> None:
    st.title("Duel")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    executor = cluster_executor()  # where explanations run (the environment, read once)
    data = loaded.data
    duel, seen_from, precision = _pick_duel(loaded, model)
    _other_meetings(loaded, duel)
    left, right = int(data.left[duel]), int(data.right[duel])
    ids = [str(data.item_ids[left]), str(data.item_ids[right])]
    labels = {ids[0]: str(data.labels[left]), ids[1]: str(data.labels[right])}
    # A tie has no winner: it is shown left vs right.
    winner = None if data.y[duel] == 0 else ids[0] if data.y[duel] > 0 else ids[1]
    if seen_from not in ids:
        seen_from = winner or ids[0]
    seen_from = st.radio(
        "Seen from",
        ids,
        index=ids.index(seen_from),
        format_func=lambda i: md(labels[i]) + (" (winner)" if i == winner else ""),
        horizontal=True,
        key=f"duel:pov:{loaded.fingerprint}:{duel}",
    )
    other = ids[1] if seen_from == ids[0] else ids[0]
    links.write(duel=str(data.duel_ids[duel]), player=seen_from)
    labels_by_context = views_data.context_labels(loaded)
    context = (
        str(labels_by_context[data.context_index[duel]])
        if labels_by_context is not None and data.context_index is not None
        else None
    )
    st.caption(
        f"Duel {md(data.duel_ids[duel])}: {md(labels[ids[0]])} vs {md(labels[ids[1]])}"
        + (f" · context: {md(context)}" if context else "")
        + (f" · winner: {md(labels[winner])}" if winner else " · a tie")
        + (" · held-out test duel" if np.any(model.split.test == duel) else "")
    )

    split = st.toggle(
        "Split by side",
        key=f"duel:split:{loaded.fingerprint}",
        persist_state=state.PERSIST,
        help="Each side's own features as separate players: how much of the preference "
        "comes from this side's features, and how much from the other side's.",
    )
    items = _explained(loaded, model, duel, "sides" if split else "items", precision, executor)
    ctx = (
        _explained(loaded, model, duel, "context", precision, executor)
        if model.kind == "cgpm"
        else None
    )
    if items is None or (model.kind == "cgpm" and ctx is None):
        return
    items_view = items.from_point_of_view(seen_from)
    ctx_view = ctx.from_point_of_view(seen_from) if ctx is not None else None
    g = float((ctx_view if ctx_view is not None else items_view).outputs[0])
    c = st.columns(3)
    c[0].metric(f"P({md(labels[seen_from])} wins)", percent(sigmoid(g)))
    c[1].metric(f"P({md(labels[other])} wins)", percent(1 - sigmoid(g)))
    c[2].metric("Preference g", f"{g:+.3f}", help="Positive favours the side it is seen from.")
    if note := interval_caption(f"{labels[seen_from]} wins", g, duel_g_sd(model, data, duel)):
        st.caption(md(note))
    duel_caption(
        loaded, model, duel, (labels[seen_from], labels[other]), swapped=seen_from != ids[0]
    )
    if ctx_view is not None:
        g_bar = float(items_view.outputs[0])
        st.caption(
            f"Averaged over all contexts the model gives {md(labels[seen_from])} "
            f"{percent(sigmoid(g_bar))}; this duel's context moves it to {percent(sigmoid(g))}."
        )
    fig = waterfall(items_view, ctx_view)
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG, key="duel:waterfall")
    stem = export_stem(
        data.name,
        "waterfall by side" if split else "waterfall",
        f"duel {data.duel_ids[duel]} {seen_from}",
    )
    figure_exports(
        fig, stem, expl=items_view, key="duel:waterfall",
        provenance=provenance(loaded.title, model_description(model), 1),
    )  # fmt: skip
    sampled = items.meta.get("shapley") == "sampled"
    if sampled or items.sd is not None:
        st.caption(md(error_bar_note(sampled, items.sd is not None,
                                     int(items.meta.get("n_coalitions", 0)))))  # fmt: skip
    if ctx_view is not None:
        table_download(
            explanation_to_csv(ctx_view),
            export_name(
                data.name, "waterfall context", f"duel {data.duel_ids[duel]} {seen_from}", "csv"
            ),
            label="Context values (CSV)",
            key="duel:context-csv",
        )
    sides = _sides_table(loaded, left, right)
    if sides is not None:
        with st.expander("The two sides' covariates"):
            st.dataframe(sides, width="stretch")


run_guarded(render)
