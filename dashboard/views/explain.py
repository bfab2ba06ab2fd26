"""Explain page: global beehive + bar, for all test duels or a chosen subset, and the
interaction heatmap of the item groups (a clicked cell opens the pair's plot).

Subsets: duels between two groups of items (a category, or a numeric range such as
``Speed > 100``), seen from group A, optionally under one context; or all duels
under one context.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import streamlit as st

from dashboard import links, pages, sources, state
from dashboard.components.explanations import (
    PLOT_CONFIG,
    fetch,
    fetch_interactions,
    figures,
    require_model,
    sample_note,
)
from dashboard.components.export import (
    export_stem,
    figure_exports,
    plot_config,
    provenance,
    table_download,
)
from dashboard.components.guard import run_guarded
from dashboard.components.precision import precision_control
from dashboard.components.text import md
from dashboard.components.utility_split import selection_caption
from dashboard.services import views_data
from dashboard.services.cluster import cluster_executor
from dashboard.services.demo import DEMO_SETTINGS_FP
from dashboard.services.explain_requests import DEFAULT_EXPLAIN_CAP, ExplainRequest, request
from dashboard.services.training import model_description, model_title
from prefshap_core.analysis.groups import ItemCondition
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interactions import MAX_INTERACTION_PLAYERS
from prefshap_core.plots import interaction_heatmap, interaction_scatter
from prefshap_core.plots.export import interactions_to_csv
from prefshap_core.plots.labels import imputed_shares
from prefshap_core.workflow.training import SMALL_TEST

ALL, GROUPS, CONTEXT = "All test duels", "Between two groups", "Under one context"
DEFAULT_INTERACTION_GROUPS = 8
VIEW_PARAM = {ALL: "all", GROUPS: "groups", CONTEXT: "context"}  # ?view= of each subset
REST = "any other item"
RANGE_OPS = (">", ">=", "<", "<=")


@dataclass(frozen=True)
class Subset:
    duels: np.ndarray
    title: str
    cap: int
    orient: Callable[[Explanation], Explanation]  # how the figures see each duel
    note: str = ""  # e.g. group A's record in these duels


def _winner_view(expl: Explanation) -> Explanation:
    return expl.oriented_to_winner()


def _condition(
    loaded: state.LoadedData, column: str, side: str, container, *, allow_rest: bool
) -> ItemCondition | None:
    """One side's condition on ``column``: a category, or a range of a numeric column."""
    data, fp = loaded.data, loaded.fingerprint
    categories = views_data.selection_columns(loaded).groups.get(column)
    if categories is not None:
        choices = ([REST] if allow_rest else []) + categories
        default = min(1, len(categories) - 1) + (1 if allow_rest else 0) if side == "b" else 0
        value = container.selectbox(
            f"Group {side.upper()}", choices, index=min(default, len(choices) - 1),
            key=f"explain:g{side}:{fp}:{column}", persist_state=state.PERSIST,
        )  # fmt: skip
        return None if value == REST else ItemCondition(column, "==", value)
    numbers = np.asarray(data.raw_items[column], dtype=np.float64)
    ops = ([REST] if allow_rest else []) + list(RANGE_OPS)
    inner = container.columns([1, 2])
    op = inner[0].selectbox(
        f"Group {side.upper()}", ops, index=0, key=f"explain:gop{side}:{fp}:{column}",
        persist_state=state.PERSIST,
    )  # fmt: skip
    if op == REST:
        return None
    threshold = inner[1].number_input(
        f"{md(column)} threshold", value=float(np.median(numbers)),
        key=f"explain:gthr{side}:{fp}:{column}", persist_state=state.PERSIST,
        label_visibility="hidden", format="%g",
    )  # fmt: skip
    return ItemCondition(column, op, float(threshold))


def _context_filter(loaded: state.LoadedData, container) -> tuple[str, str] | None:
    contexts = views_data.selection_columns(loaded).contexts
    if not contexts:
        return None
    choices = [None] + [(c, v) for c, values in contexts.items() for v in values]
    return container.selectbox(
        "Under context", choices, key=f"explain:gctx:{loaded.fingerprint}",
        format_func=lambda cv: "any context" if cv is None else f"{cv[0]} = {cv[1]}",
        persist_state=state.PERSIST,
    )  # fmt: skip


def _groups(loaded: state.LoadedData, model: state.TrainedModel, cap: int) -> Subset:
    fp = loaded.fingerprint
    selectable = views_data.selection_columns(loaded)
    columns = list(selectable.groups) + selectable.numeric
    c = st.columns([2, 2, 2, 2])
    column = c[0].selectbox(
        "Item column", columns, key=f"explain:gcol:{fp}", persist_state=state.PERSIST,
        help="A category, or a numeric column's range (e.g. Speed > 100).",
    )  # fmt: skip
    cond_a = _condition(loaded, column, "a", c[1], allow_rest=False)
    cond_b = _condition(loaded, column, "b", c[2], allow_rest=True)
    held_out = c[3].toggle(
        "Test duels only", value=True, key=f"explain:gtest:{fp}", persist_state=state.PERSIST,
        help="Off: all duels of the dataset, including those the model was trained on.",
    )  # fmt: skip
    context = _context_filter(loaded, c[3])
    between = views_data.group_duels(
        loaded, model, cond_a, cond_b, held_out=held_out, context=context
    )
    label_a = cond_a.label.replace(f"{column} = ", "") if cond_a.op == "==" else cond_a.label
    if cond_b is None:
        label_b = "the rest"
    else:
        label_b = cond_b.label.replace(f"{column} = ", "") if cond_b.op == "==" else cond_b.label
    title = f"{column} {label_a} vs {label_b}" if cond_a.op == "==" else f"{label_a} vs {label_b}"
    if context is not None:
        title += f" · {context[0]} = {context[1]}"
    side = cond_a.label

    def orient(expl: Explanation) -> Explanation:
        return views_data.oriented_to_group(loaded, between, expl, side)

    note = (
        f"Seen from group A ({md(side)}): right of zero, the feature pushed towards the A item. "
        f"Group A won {between.wins:,} and lost {between.losses:,} of these "
        f"{len(between.duels):,} duels."
    )
    return Subset(between.duels, title, cap, orient, note)


def _subset(loaded: state.LoadedData, model: state.TrainedModel, top: list) -> Subset:
    """The chosen duels, a title for them, the cap on how many to explain, the view
    (the choice and the cap in the first two of the ``top`` columns)."""
    data, fp = loaded.data, loaded.fingerprint
    test = model.split.test
    selectable = views_data.selection_columns(loaded)
    has_groups = bool(selectable.groups or selectable.numeric)
    contexts = selectable.contexts
    options = [ALL] + ([GROUPS] if has_groups else []) + ([CONTEXT] if contexts else [])
    linked = links.take("view", [VIEW_PARAM[o] for o in options])
    if linked is not None:  # a link just opened: its view wins over the widget's own
        st.session_state[f"explain:subset:{fp}"] = next(
            o for o in options if VIEW_PARAM[o] == linked
        )
    choice = top[0].segmented_control(
        "Duels to explain", options, default=ALL, required=True,
        key=f"explain:subset:{fp}", persist_state=state.PERSIST,
    )  # fmt: skip
    cap = top[1].number_input(
        "Explain at most (duels)", min_value=10, max_value=1_000_000,
        value=DEFAULT_EXPLAIN_CAP, step=500, key="explain:cap",
        persist_state=state.PERSIST,
        help="Larger subsets are sampled (seeded). Exact explanations cost time per duel.",
    )  # fmt: skip
    if choice == ALL:
        links.write(view="all")
        if len(test) < SMALL_TEST:  # a handful of test duels explains little
            st.caption(
                f"The test split has only {len(test)} duels, so all {data.n_duels:,} duels "
                "are explained (the model was trained on most of them)."
            )
            return Subset(np.arange(data.n_duels), "All duels (small data)", int(cap), _winner_view)
        return Subset(test, "All test duels", int(cap), _winner_view)
    if choice == GROUPS:
        links.write(view="groups")
        return _groups(loaded, model, int(cap))
    c = st.columns([2, 2, 2, 2])
    linked_column, _, linked_value = (links.take("context") or "").partition(" = ")
    if linked_column in contexts and linked_value in contexts[linked_column]:
        st.session_state[f"explain:ccol:{fp}"] = linked_column
        st.session_state[f"explain:cval:{fp}:{linked_column}"] = linked_value
    column = c[0].selectbox(
        "Context column", list(contexts), key=f"explain:ccol:{fp}", persist_state=state.PERSIST
    )
    value = c[1].selectbox(
        "Value", contexts[column], key=f"explain:cval:{fp}:{column}", persist_state=state.PERSIST,
        format_func=lambda v: f"{column} = {v}",  # a bare "good" does not say of what
    )  # fmt: skip
    links.write(view="context", context=f"{column} = {value}")
    held_out = c[3].toggle(
        "Test duels only", value=True, key=f"explain:ctest:{fp}", persist_state=state.PERSIST,
        help="Off: all duels of the dataset, including those the model was trained on.",
    )  # fmt: skip
    duels = views_data.context_duels(loaded, model, column, value, held_out=held_out)
    return Subset(duels, f"{column} = {value}", int(cap), _winner_view)


def _open_duel(loaded: state.LoadedData, shown: Explanation, row: int) -> None:
    """A clicked point: open its duel on the Duel page, seen from the same side."""
    hits = np.flatnonzero(loaded.data.duel_ids == shown.duel_ids[row])
    if len(hits):
        state.select_duel(loaded, int(hits[0]), str(shown.left_ids[row]))
        st.switch_page(pages.DUEL.page())


def render() -> None:
    st.title("Explain")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    executor = cluster_executor()  # where explanations run (the environment, read once)
    st.caption(
        f"{model_title(model.kind)} on **{md(loaded.title)}**. Each point is a duel seen "
        "from its winner: right of zero, the feature helped the winner; red, the winner had "
        "more of it. Click a point to open its duel."
    )
    if executor is not None:
        st.caption(f"Explanations run on the Dask cluster at `{executor.address}`.")
    if loaded.key == sources.DEMO_KEY and model.settings_fp == DEMO_SETTINGS_FP:
        st.info(
            "This is the demo: a small GPM trained on synthetic duels where, between "
            "clusters X and Y, the higher x_XY wins, and within a cluster the higher x0. "
            "Load Pokémon, tennis or your own CSV files on the **Data** page.",
            icon=":material/info:",
        )
    if model.kind == "cgpm":  # "who prefers what" per context value, in one view
        st.page_link(
            pages.CONTEXT_EFFECTS.page(), icon=":material/tune:",
            label="Context effects: how each context value moves every item's win probability",
        )  # fmt: skip
    top = st.columns([3, 1, 1], vertical_alignment="bottom")
    with top[2]:
        precision = precision_control("explain")
    subset = _subset(loaded, model, top)
    if len(subset.duels) == 0:
        st.warning("No duels match this choice.")
        return
    if subset.note:
        st.caption(subset.note)
    uncertainty = _uncertainty_toggle(loaded, model)
    whats = ["items", "context"] if model.kind == "cgpm" else ["items"]
    tabs = st.tabs(["Item features", "Context features"][: len(whats)])
    for tab, what in zip(tabs, whats, strict=True):
        with tab:
            req = request(
                loaded, model, subset.duels, what, cap=subset.cap, precision=precision,
                executor=executor, uncertainty=uncertainty,
            )  # fmt: skip
            sample_note(req)
            # The g this tab explains: a C-GPM's item tab explains the context average.
            selection_caption(loaded, model, req.duels, averaged=what == "items")
            expl = fetch(req, page=pages.EXPLAIN.url_path)
            if expl is None:
                continue
            shown = subset.orient(expl)
            figures(
                shown,
                title=f"{subset.title} ({len(req.duels):,} duels)",
                dataset=loaded.data.name,
                selection=f"{subset.title} {what}",
                key=f"explain:{what}",
                provenance=provenance(loaded.title, model_description(model), shown.n_duels),
                on_point=lambda row, shown=shown: _open_duel(loaded, shown, row),
                imputed=imputed_shares(loaded.data),
            )
            if what == "items":
                _interactions(loaded, model, req, expl, subset.title)


def _uncertainty_toggle(loaded: state.LoadedData, model: state.TrainedModel) -> bool:
    """Whether the bars add the model's posterior sd (a model without a posterior: no)."""
    if model.function.posterior_factor is None:
        return False
    return st.toggle(
        "Model uncertainty on the bars",
        key=f"explain:uncertainty:{loaded.fingerprint}",
        persist_state=state.PERSIST,
        help="Each bar's error bar adds the model's posterior sd (a bound: the mean of "
        "the duels' sds) to its standard error, sqrt(se² + sd²); hover a bar for each. "
        "Takes up to about twice as long.",
    )


def _interactions(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    req: ExplainRequest,
    expl: Explanation,
    title: str,
) -> None:
    """Mean |interaction| of every pair of item groups; a clicked cell opens its pair."""
    p = model.function.item_space.n_groups
    show = st.toggle(
        "Interactions between features",
        key=f"explain:interactions:{loaded.fingerprint}",
        persist_state=state.PERSIST,
        help="Exact pairwise Shapley interaction values of the item groups over these "
        "duels (seen from the winner): which features act together.",
    )
    if not show:
        return
    if p < 2:
        st.info(f"Interactions need at least 2 item groups; this model has {p}.")
        return
    groups = _interaction_groups(loaded, expl) if p > MAX_INTERACTION_PLAYERS else None
    if groups is not None and len(groups) < 2:
        return
    inter = fetch_interactions(req, page=pages.EXPLAIN.url_path, groups=groups)
    if inter is None:
        return
    inter = inter.oriented_to_winner()
    if groups is not None:  # the explanation's columns of the chosen groups, for the pairs
        keep = [expl.player_names.index(g) for g in inter.player_names]
        expl = _players(expl, keep)
    left, right = st.columns([3, 2])
    with left:
        fig = interaction_heatmap(inter, title=f"{title}: interactions")
        stem = export_stem(loaded.data.name, "interactions", title)
        event = st.plotly_chart(
            fig, width="stretch", config=plot_config(stem), key="explain:interactions",
            on_select="rerun", selection_mode="points",
        )  # fmt: skip
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


def _interaction_groups(loaded: state.LoadedData, expl: Explanation) -> tuple[str, ...]:
    """A model with more than 16 item groups: the user picks at most 16 (default: the
    most important), the others staying at each duel's own values."""
    names = list(expl.player_names)
    # Default: the 8 strongest (2^9 coalitions per duel: seconds); up to 16 on request.
    strongest = np.argsort(-expl.mean_abs(), kind="stable")[:DEFAULT_INTERACTION_GROUPS]
    default = [names[k] for k in sorted(strongest.tolist())]
    chosen = st.multiselect(
        f"Item groups for interactions (2 to {MAX_INTERACTION_PLAYERS} of {len(names)})",
        names, default=default, max_selections=MAX_INTERACTION_PLAYERS,
        key=f"explain:interaction-groups:{loaded.fingerprint}", persist_state=state.PERSIST,
        help="Exact interactions enumerate 2^p coalitions per duel, so at most "
        f"{MAX_INTERACTION_PLAYERS} groups: the others stay at each duel's own values.",
    )  # fmt: skip
    if len(chosen) < 2:
        st.info("Pick at least 2 item groups.")
    return tuple(g for g in names if g in chosen)


def _players(expl: Explanation, keep: list[int]) -> Explanation:
    """The explanation with only these players' columns (same duels)."""

    def cut(a):
        return None if a is None else a[:, keep]

    return replace(
        expl, values=expl.values[:, keep], data=expl.data[:, keep],
        player_names=tuple(expl.player_names[k] for k in keep),
        standard_errors=cut(expl.standard_errors), data_labels=cut(expl.data_labels),
        context_values=cut(expl.context_values), sd=cut(expl.sd),
    )  # fmt: skip


run_guarded(render)
