"""Showing explanations: fetch-or-compute with progress, then beehive + bar with exports.

Shared by the Explain, Players and Duel pages so that every figure looks, caches
and exports the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import streamlit as st

from dashboard import pages, state
from dashboard.components.export import export_stem, figure_exports, plot_config
from dashboard.components.progress import job_outcome, job_panel
from dashboard.components.text import md
from dashboard.jobs import Job
from dashboard.services.explain_jobs import explanation_or_job, forget_job, interactions_or_job
from dashboard.services.explain_requests import ExplainRequest
from prefshap_core.csv_safety import to_csv_bytes
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import InteractionExplanation
from prefshap_core.plots import bar, bar_table, beehive, dependence, interaction_partner

PLOT_CONFIG = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}}
WHAT_WORDS = {
    "items": "item features",
    "context": "context features",
    "sides": "item features of each side",
}
BAR_KINDS = {
    "mean_abs": "mean |value| (importance)",
    "direction": "direction (rank correlation)",
    "mean": "mean value",
}
BAR_VIEWS = {"mean_abs": "bar importance", "direction": "bar direction", "mean": "bar mean"}
BAR_HELP = (
    "Importance: mean |Pref-SHAP value|. Direction: Spearman's rank correlation of a "
    "feature's value with its difference (+1: more of it favours the side shown), and "
    "for a categorical feature the mean value per category of the side shown. Mean "
    "value: the signed mean, which in the winner view mixes both signs."
)


def require_model() -> tuple[state.LoadedData, state.TrainedModel] | None:
    """The active dataset and its model, or a pointer to the page that provides them."""
    loaded = state.active()
    if loaded is None:
        st.info("Choose or upload a dataset first.")
        st.page_link(pages.DATA.page(), label="Go to Data")
        return None
    model = state.model_for(loaded)
    if model is None:
        st.info(f"No model on **{md(loaded.title)}** yet: train one first.")
        st.page_link(pages.TRAIN.page(), label="Go to Train")
        return None
    return loaded, model


def fetch(req: ExplainRequest, *, page: str) -> Explanation | None:
    """The explanation if ready; else draws its progress (or why it stopped) and returns None."""
    what = WHAT_WORDS.get(req.what, req.what)
    count = "one duel" if req.n_duels == 1 else f"{req.n_duels:,} duels"
    label = f"Explaining the {what} of {count}"
    expl, job = explanation_or_job(req, label=label, page=page)
    if expl is not None:
        return expl
    assert job is not None
    _unfinished(job, "Explaining", "Explain again")
    return None


def fetch_interactions(
    req: ExplainRequest, *, page: str, groups: tuple[str, ...] | None = None
) -> InteractionExplanation | None:
    """Interaction values of an item request's duels if ready; else their progress
    (``groups``: a chosen subset of the item groups)."""
    inter, job = interactions_or_job(req, page=page, groups=groups)
    if inter is not None:
        return inter
    _unfinished(job, "Computing interaction values", "Compute again")
    return None


def _unfinished(job: Job, what: str, again: str) -> None:
    """A job's progress while it runs; how it ended, with a retry button, otherwise."""
    if not job.finished:
        job_panel(job)
        return
    job_outcome(job, what=what)
    if st.button(again, key=f"retry:{job.key}", icon=":material/refresh:"):
        forget_job(job.key)
        st.rerun()


def sample_note(req: ExplainRequest, cap_hint: bool = True) -> None:
    if req.sampled:
        st.caption(
            f"Explaining a random sample of {req.n_duels:,} of these {req.n_available:,} "
            "duels (seeded, so the same sample every time)"
            + (": raise “Explain at most” to include more (takes longer)." if cap_hint else ".")
        )


def figures(
    expl: Explanation,
    *,
    title: str,
    dataset: str,
    selection: str,
    key: str,
    provenance: str,
    bar_kind: str = "mean_abs",
    on_point: Callable[[int], None] | None = None,
    imputed: Mapping[str, float] | None = None,
) -> None:
    """Beehive, bar and dependence plot of one explanation (already oriented), each
    with its exports (named ``<dataset>-<view>-<selection>``).

    ``on_point``: called with the explanation row of a clicked beehive or dependence
    point (e.g. to open that duel). ``provenance``: what exported figures say they
    show (dataset, model, duel count). ``imputed``: each feature's share of filled-in
    rows (``labels.imputed_shares``), noted on its labels from 5 %.
    """
    left, right = st.columns([3, 2])
    with left:
        fig = beehive(expl, title=f"{title}: Pref-SHAP values", imputed=imputed)
        stem = export_stem(dataset, "beehive", selection)
        event = st.plotly_chart(
            fig,
            width="stretch",
            config=plot_config(stem),
            key=f"beehive:{key}",
            on_select="rerun" if on_point is not None else "ignore",
            selection_mode="points",
        )
        figure_exports(fig, stem, expl=expl, key=f"beehive:{key}", provenance=provenance)
        if on_point is not None:
            _clicked(event, fig, on_point)
    with right:
        kind = st.radio(
            "Bars show",
            list(BAR_KINDS),
            index=list(BAR_KINDS).index(bar_kind),
            format_func=BAR_KINDS.get,
            horizontal=True,
            key=f"barkind:{key}",
            help=BAR_HELP,
        )
        fig_bar = bar(expl, kind=kind, title=title, imputed=imputed)
        if expl.sd is not None and kind != "direction":
            st.caption(
                "Error bars: the standard error combined with the model's posterior sd "
                "(at most the mean of the duels' sds), sqrt(se² + sd²); hover for each."
            )
        bar_stem = export_stem(dataset, BAR_VIEWS[kind], selection)
        st.plotly_chart(fig_bar, width="stretch", config=plot_config(bar_stem), key=f"bar:{key}")
        figure_exports(
            fig_bar, bar_stem, key=f"bar:{key}", provenance=provenance,
            table=lambda: to_csv_bytes(bar_table(expl, kind=kind)),
            table_help=(
                "The bars' numbers: feature, level, statistic, value, duels."
                if kind == "direction"
                else "The bars' numbers: feature, value, standard error, "
                + ("posterior sd bound, " if expl.sd is not None else "") + "duels."
            ),
        )  # fmt: skip
    dependence_plot(expl, title=title, dataset=dataset, selection=selection, key=key,
                    provenance=provenance, on_point=on_point, imputed=imputed)  # fmt: skip


def dependence_plot(
    expl: Explanation,
    *,
    title: str,
    dataset: str,
    selection: str,
    key: str,
    provenance: str,
    on_point: Callable[[int], None] | None = None,
    imputed: Mapping[str, float] | None = None,
) -> None:
    """One feature's Pref-SHAP value against its value difference (shap's scatter)."""
    if expl.n_duels < 2:
        return
    order = np.argsort(-expl.mean_abs(), kind="stable")
    names = [expl.player_names[j] for j in order.tolist()]
    with st.expander("Dependence plot: one feature's value against its difference",
                     icon=":material/scatter_plot:"):  # fmt: skip
        c = st.columns([2, 2])
        feature = c[0].selectbox("Feature", names, key=f"dep:feature:{key}")
        j = expl.player_names.index(feature)
        partner = interaction_partner(expl, j)
        colours = ["auto", None, *[n for n in names if n != feature]]
        colour = c[1].selectbox(
            "Colour by", colours, key=f"dep:colour:{key}:{feature}",
            format_func=lambda n: (
                f"most interacting ({expl.player_names[partner]})"
                if n == "auto" and partner is not None
                else "none" if n is None or n == "auto" else n
            ),
        )  # fmt: skip
        colour_by = colour if colour in ("auto", None) else expl.player_names.index(colour)
        fig = dependence(expl, j, colour_by=colour_by, title=f"{title}: dependence of {feature}",
                         imputed=imputed)  # fmt: skip
        stem = export_stem(dataset, "dependence", f"{selection} {feature}")
        event = st.plotly_chart(
            fig, width="stretch", config=plot_config(stem), key=f"dependence:{key}",
            on_select="rerun" if on_point is not None else "ignore", selection_mode="points",
        )  # fmt: skip
        figure_exports(fig, stem, expl=expl, key=f"dependence:{key}", provenance=provenance)
        if on_point is not None:
            _clicked(event, fig, on_point)


def _clicked(event, fig, on_point: Callable[[int], None]) -> None:
    """Hand the first selected point's explanation row to ``on_point``.

    The row is the point's ``customdata[0]`` in the figure drawn here, found by the
    selection's trace and point index (the browser's copy of customdata may arrive
    in plotly's packed form)."""
    if event is None or not event.selection:
        return
    for point in event.selection.get("points", []):
        curve, index = point.get("curve_number"), point.get("point_index")
        if curve is None or index is None or not 0 <= curve < len(fig.data):
            continue
        customdata = fig.data[curve].customdata
        if customdata is None or not 0 <= index < len(customdata):
            continue
        on_point(int(float(customdata[index][0])))
        return
