"""Explain page: global beehive + bar, for all test duels or a chosen subset."""

from __future__ import annotations

import numpy as np
import streamlit as st

from dashboard import services, sources, state
from dashboard.components.explanations import fetch, figures, require_model, sample_note
from dashboard.components.guard import run_guarded
from dashboard.components.text import md
from prefshap_core import workflow

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
        if len(test) < workflow.SMALL_TEST:  # a handful of test duels explains little
            st.caption(
                f"The test split has only {len(test)} duels, so all {data.n_duels:,} duels "
                "are explained (the model was trained on most of them)."
            )
            return np.arange(data.n_duels), "All duels (small data)", int(cap)
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
    if services.cluster_address() is not None:
        st.caption(f"Explanations run on the Dask cluster at `{services.cluster_address()}`.")
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


run_guarded(render)
