"""Rankings page: items by model-implied mean win probability against the pool."""

from __future__ import annotations

import streamlit as st

from dashboard import links, pages, state
from dashboard.components.explanations import require_model
from dashboard.components.export import export_name, table_download
from dashboard.components.formats import percent
from dashboard.components.guard import run_guarded
from dashboard.components.tables import without_duplicate_names
from dashboard.components.text import md
from dashboard.services.analyses import model_rankings
from dashboard.services.training import model_title
from prefshap_core.analysis.rankings import BT_SCORE
from prefshap_core.csv_safety import to_csv_bytes

MIX = "the observed context mix"


RANK_INTERVAL = "90 % rank interval"


def _with_intervals(display, shown, column: str, score_name: str):
    """The posterior columns beside their numbers: the strength's sd and 90 % rank
    interval (posterior draws; the observed mix only), the score's sd (exact)."""
    at = list(display.columns).index("mean P(win) vs pool") + 1
    if "p_mean_sd" in shown.columns and column == "p_mean":
        interval = shown["rank_low"].astype(str) + "–" + shown["rank_high"].astype(str)
        display.insert(at, RANK_INTERVAL, interval.to_numpy())
        display.insert(at, "± sd", (100 * shown["p_mean_sd"]).map("{:.1f} pp".format).to_numpy())
    if "score_sd" in shown.columns:
        where = list(display.columns).index(score_name) + 1
        display.insert(where, f"{score_name} ± sd", shown["score_sd"].to_numpy())
    return display


def render() -> None:
    st.title("Rankings")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    with st.spinner("Ranking every item against the pool…"):
        ranked = model_rankings(loaded, model)
    opponents = (
        f"a seeded random sample of {ranked.n_opponents:,} opponents (the same for every item)"
        if ranked.sampled
        else f"all {ranked.n_opponents - 1:,} other items"
    )
    score_words = (
        "a Bradley-Terry maximum-likelihood score of the record (no model trained for it)"
        if ranked.score_name == BT_SCORE
        else "the model's utility f(x), centred"
        if model.kind == "upm"
        else "the utility f(x) of the UPM baseline trained beside it, centred"
    )
    st.caption(
        f"{model_title(model.kind)} on **{md(loaded.title)}**. Strength = the model's "
        f"mean probability of beating {opponents}. Score: {score_words}."
    )
    table = ranked.table
    choices = [MIX, *ranked.context_columns]
    sort_by = MIX
    if ranked.context_columns:
        chosen = state.selected_context(loaded)
        wanted = f"p_mean[{chosen}]"
        sort_by = st.selectbox(
            "Rank under", choices, index=choices.index(wanted) if wanted in choices else 0,
            format_func=lambda c: c if c == MIX else c.removeprefix("p_mean[").removesuffix("]"),
            key=f"rankings:context:{loaded.fingerprint}",
        )  # fmt: skip
        state.select_context(loaded, None if sort_by == MIX else sort_by[7:-1])
    column = "p_mean" if sort_by == MIX else sort_by
    shown = table.sort_values([column, "item_id"], ascending=[False, True], kind="stable")
    shown = shown.assign(rank=range(1, len(shown) + 1))
    display = without_duplicate_names(
        shown[["rank", "item", "item_id", column, "duels", "wins", "losses", "score"]],
        "item", "item_id",
    )  # fmt: skip
    display = display.assign(**{column: display[column].map(percent)}).rename(
        columns={column: "mean P(win) vs pool", "score": ranked.score_name}
    )
    display = _with_intervals(display, shown, column, ranked.score_name)
    event = st.dataframe(
        display, hide_index=True, width="stretch", on_select="rerun",
        selection_mode="single-row", key=f"rankings:table:{loaded.fingerprint}:{column}",
        column_config={ranked.score_name: st.column_config.NumberColumn(format="%.3f"),
                       f"{ranked.score_name} ± sd": st.column_config.NumberColumn(
                           format="%.3f")},
    )  # fmt: skip
    if "p_mean_sd" in table.columns:
        st.caption(
            f"± sd and the {RANK_INTERVAL} (5 % to 95 % of the ranks over "
            "posterior draws of the model) say how far the duels pin each item's place "
            "down; they are for the observed context mix."
        )
    table_download(
        to_csv_bytes(shown),
        export_name(loaded.data.name, "rankings", f"{model.kind} {column}", "csv"),
        label="Rankings (CSV)",
        key="rankings:csv",
    )
    links.write(context=state.selected_context(loaded))
    rows = event.selection.rows if event is not None else []
    if rows:
        state.select_item(loaded, str(shown["item_id"].iloc[rows[0]]))
        st.switch_page(pages.PLAYERS.page())


run_guarded(render)
