"""Context effects page (C-GPM): who prefers what under each context value.

For every context group and each of its observed values, how every item's mean win
probability against the pool and its rank change from the observed context mix: a
heatmap item x value of the change (the items moved most on top), a sentence for the
strongest shifts, and the whole table as CSV. Linked from the Explain page.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import streamlit as st

from dashboard import links, pages, state
from dashboard.components.explanations import PLOT_CONFIG, require_model
from dashboard.components.export import export_stem, figure_exports, provenance
from dashboard.components.formats import percent
from dashboard.components.guard import run_guarded
from dashboard.components.text import md
from dashboard.services.analyses import model_context_effects
from dashboard.services.training import model_description
from prefshap_core.analysis.context_effects import ContextEffects, strongest_shifts
from prefshap_core.csv_safety import to_csv_bytes
from prefshap_core.plots.context_effects import context_effects_heatmap

ALL_GROUPS = "all context groups"


def _only_group(effects: ContextEffects, group: str) -> ContextEffects:
    """The effects of one context group's values (the columns of that group)."""
    keep = [k for k, g in enumerate(effects.groups) if g == group]
    return replace(
        effects,
        groups=tuple(effects.groups[k] for k in keep),
        levels=tuple(effects.levels[k] for k in keep),
        shares=effects.shares[keep],
        p_level=effects.p_level[:, keep],
    )


def _table(effects: ContextEffects) -> pd.DataFrame:
    """Every item: the mix, then per value its mean P(win), change and rank."""
    table = pd.DataFrame(
        {
            "item_id": effects.item_ids,
            "item": effects.item_names,
            "p_mean": effects.p_mix,
            "rank": effects.rank_mix,
        }
    )
    ranks, change = effects.rank_level, effects.change
    for k, level in enumerate(effects.levels):
        table[f"p_mean[{level}]"] = effects.p_level[:, k]
        table[f"change[{level}]"] = change[:, k]
        table[f"rank[{level}]"] = ranks[:, k]
    return table.iloc[effects.item_order()].reset_index(drop=True)


def render() -> None:
    st.title("Context effects")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    if model.kind != "cgpm":
        st.info(
            "Context effects need a C-GPM (a model of duels with a context): train one on "
            "the Train page from data with context columns.",
            icon=":material/info:",
        )
        st.page_link(pages.TRAIN.page(), label="Train a C-GPM", icon=":material/model_training:")
        return
    with st.spinner("Mean win probabilities under every context value…"):
        effects = model_context_effects(loaded, model)
    if not effects.levels:
        st.info("This model's context columns have too many distinct values to compare.")
        return
    opponents = (
        f"a seeded sample of {effects.n_opponents:,} opponents"
        if effects.sampled
        else f"all {effects.n_opponents - 1:,} other items"
    )
    st.caption(
        f"C-GPM on **{md(loaded.title)}**. For each value of each context group: every "
        f"item's mean probability of beating {opponents} under that value (the other "
        "context columns keep their observed mix), minus the same under the observed "
        "context mix, in probability points; red: the value helps the item."
    )
    groups = list(dict.fromkeys(effects.groups))
    c = st.columns([2, 1])
    group = c[0].selectbox(
        "Context group", [ALL_GROUPS, *groups], key=f"context-effects:group:{loaded.fingerprint}",
        persist_state=state.PERSIST,
    )  # fmt: skip
    shown = effects if group == ALL_GROUPS else _only_group(effects, group)
    n_items = len(shown.item_ids)
    top = c[1].number_input(
        "Items shown (moved most)", min_value=1, max_value=n_items, value=min(20, n_items),
        step=5, key=f"context-effects:top:{loaded.fingerprint}", persist_state=state.PERSIST,
    )  # fmt: skip
    sentence = strongest_shifts(shown, k=3)
    if sentence:
        st.markdown(md(sentence))
    shares = " · ".join(
        f"{md(level)}: {percent(share)} of duels"
        for level, share in zip(shown.levels, shown.shares, strict=True)
    )
    st.caption(shares)
    title = "Change in mean win probability by context value"
    fig = context_effects_heatmap(shown, max_items=int(top), title=title)
    stem = export_stem(loaded.data.name, "context-effects", group)
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG, key="context-effects:heatmap")
    figure_exports(
        fig, stem, key="context-effects:heatmap",
        table=lambda: to_csv_bytes(_table(shown)),
        table_help="Every item: mean P(win) under the mix and under each value, change, rank.",
        provenance=provenance(loaded.title, model_description(model), loaded.data.n_duels),
    )  # fmt: skip
    st.page_link(
        pages.RANKINGS.page(), label="Rank the items under one context value (Rankings)",
        icon=":material/leaderboard:",
    )  # fmt: skip
    links.write()


run_guarded(render)
