"""Explain page: global beehive + bar, for all test duels or a chosen subset, and the
interaction heatmap of the item groups (a clicked cell opens the pair's plot)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import services, sources, state
from dashboard.components.explanations import (
    PLOT_CONFIG,
    fetch,
    fetch_interactions,
    figures,
    require_model,
    sample_note,
)
from dashboard.components.export import figure_exports, file_stem, table_download
from dashboard.components.guard import run_guarded
from dashboard.components.text import md
from prefshap_core import workflow
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interactions import MAX_INTERACTION_PLAYERS
from prefshap_core.plots import interaction_heatmap, interaction_scatter
from prefshap_core.plots.export import interactions_to_csv

ALL, GROUPS, CONTEXT = "All test duels", "Between two groups", "Under one context"


def _subset(loaded: state.LoadedData, model: state.TrainedModel) -> tuple[np.ndarray, str, int]:
    """The chosen duels (indices), a title for them, and the cap on how many to explain."""
    data, fp = loaded.data, loaded.fingerprint
    test = model.result.split.test
    groups = workflow.group_columns(data)
    contexts = workflow.context_columns(data)
    options = [ALL] + ([GROUPS] if groups else []) + ([CONTEXT] if contexts else [])
    top = st.columns([3, 1], vertical_alignment="bottom")
    choice = top[0].segmented_control(
        "Duels to explain", options, default=ALL, required=True,
        key=f"explain:subset:{fp}", persist_state=state.PERSIST,
    )  # fmt: skip
    cap = top[1].number_input(
        "Explain at most (duels)", min_value=10, max_value=1_000_000,
        value=services.DEFAULT_EXPLAIN_CAP, step=500, key="explain:cap",
        persist_state=state.PERSIST,
        help="Larger subsets are sampled (seeded). Exact explanations cost time per duel.",
    )  # fmt: skip
    if choice == ALL:
        return test, "All test duels", int(cap)
    c = st.columns([2, 2, 2, 2])
    if choice == GROUPS:
        column = c[0].selectbox(
            "Item column", list(groups), key=f"explain:gcol:{fp}", persist_state=state.PERSIST
        )
        values = groups[column]
        a = c[1].selectbox(
            "Group A", values, index=0, key=f"explain:ga:{fp}:{column}",
            persist_state=state.PERSIST,
        )  # fmt: skip
        b = c[2].selectbox(
            "Group B", values, index=min(1, len(values) - 1), key=f"explain:gb:{fp}:{column}",
            persist_state=state.PERSIST,
        )  # fmt: skip
        held_out = c[3].toggle(
            "Test duels only", value=True, key=f"explain:gtest:{fp}", persist_state=state.PERSIST,
            help="Off: all duels of the dataset, including those the model was trained on.",
        )  # fmt: skip
        duels = workflow.duels_between_groups(data, column, a, b, within=test if held_out else None)
        return duels, f"{column} {a} vs {b}", int(cap)
    column = c[0].selectbox(
        "Context column", list(contexts), key=f"explain:ccol:{fp}", persist_state=state.PERSIST
    )
    value = c[1].selectbox(
        "Value", contexts[column], key=f"explain:cval:{fp}:{column}", persist_state=state.PERSIST
    )
    held_out = c[3].toggle(
        "Test duels only", value=True, key=f"explain:ctest:{fp}", persist_state=state.PERSIST,
        help="Off: all duels of the dataset, including those the model was trained on.",
    )  # fmt: skip
    duels = workflow.duels_in_context(data, column, value, within=test if held_out else None)
    return duels, f"{column} = {value}", int(cap)


def render() -> None:
    st.title("Explain")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    st.caption(
        f"{services.model_title(model.kind)} on **{md(loaded.title)}**. Each point is a duel seen "
        "from its winner: right of zero, the feature helped the winner; red, the winner had "
        "more of it."
    )
    if loaded.key == sources.DEMO_KEY and model.settings_fp == services.DEMO_SETTINGS_FP:
        st.info(
            "This is the demo: a small GPM trained on synthetic duels where, between "
            "clusters X and Y, the higher x_XY wins, and within a cluster the higher x0. "
            "Load Pokémon, tennis or your own CSV files on the **Data** page.",
            icon=":material/info:",
        )
    duels, title, cap = _subset(loaded, model)
    if len(duels) == 0:
        st.warning("No duels match this choice.")
        return
    whats = ["items", "context"] if model.kind == "cgpm" else ["items"]
    tabs = st.tabs(["Item features", "Context features"][: len(whats)])
    for tab, what in zip(tabs, whats, strict=True):
        with tab:
            req = services.request(loaded, model, duels, what, cap=cap)
            sample_note(req)
            expl = fetch(loaded, model, req, page="explain")
            if expl is None:
                continue
            figures(
                expl.oriented_to_winner(),
                title=f"{title} ({len(req.duels):,} duels)",
                stem=f"{loaded.data.name}_{title}_{what}",
                key=f"explain:{what}",
            )
            if what == "items":
                _interactions(loaded, model, req, expl, title)


def _interactions(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    req: services.ExplainRequest,
    expl: Explanation,
    title: str,
) -> None:
    """Mean |interaction| of every pair of item groups; a clicked cell opens its pair."""
    p = model.result.function.item_space.n_groups
    show = st.toggle(
        "Interactions between features",
        key=f"explain:interactions:{loaded.fingerprint}",
        persist_state=state.PERSIST,
        help="Exact pairwise Shapley interaction values of the item groups over these "
        "duels (seen from the winner): which features act together.",
    )
    if not show:
        return
    if not 2 <= p <= MAX_INTERACTION_PLAYERS:
        st.info(
            f"Interactions need 2 to {MAX_INTERACTION_PLAYERS} item groups; this model has {p}."
        )
        return
    inter = fetch_interactions(loaded, model, req, page="explain")
    if inter is None:
        return
    inter = inter.oriented_to_winner()
    left, right = st.columns([3, 2])
    with left:
        fig = interaction_heatmap(inter, title=f"{title}: interactions")
        event = st.plotly_chart(
            fig, width="stretch", config=PLOT_CONFIG, key="explain:interactions",
            on_select="rerun", selection_mode="points",
        )  # fmt: skip
        stem = file_stem("interactions", loaded.data.name, title)
        figure_exports(fig, stem, key="explain:interactions")
        table_download(
            interactions_to_csv(inter), f"{stem}.csv", label="Values (CSV)",
            key="explain:interactions-csv",
        )  # fmt: skip
    # The event is a dict (attribute access too, in a live app; a plain dict in tests).
    selection = (event or {}).get("selection") or {}
    picked = [p.get("customdata") for p in selection.get("points", []) if p.get("customdata")]
    with right:
        if not picked:
            st.caption("Click a cell to see that pair's interaction in every duel.")
            return
        i, j = int(picked[0][0]), int(picked[0][1])
        pair_fig = interaction_scatter(inter, expl.oriented_to_winner(), i, j)
        st.plotly_chart(pair_fig, width="stretch", config=PLOT_CONFIG, key="explain:pair")


run_guarded(render)
