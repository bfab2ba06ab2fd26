"""Explanations of a request: from the caches, in the calling thread, or as a job.

The job's worker writes both caches itself, so an explanation is kept even if the
user leaves the page meanwhile. Interaction values run as a job of their own.
"""

from __future__ import annotations

from dataclasses import replace

from dashboard import state
from dashboard.jobs import ABANDON_AFTER_S, Job
from dashboard.services.explain_requests import ExplainRequest, session_precision
from dashboard.services.explainers import explainer_for
from dashboard.services.stores import Owner, disk_cache, explanation_store
from prefshap_core.explain import ExplainOptions
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import (
    InteractionExplanation,
    explain_interactions,
)
from prefshap_core.progress import Progress
from prefshap_core.workflow.explaining import explain_duels


def _owner(loaded: state.LoadedData, model: state.TrainedModel, options: ExplainOptions) -> Owner:
    # Precision is part of the owner: a duel is never cut from an explanation made
    # with other options.
    return (loaded.fingerprint, model.settings_fp, options.key())


def cached_explanation(
    loaded: state.LoadedData, model: state.TrainedModel, req: ExplainRequest
) -> Explanation | None:
    store = explanation_store()
    expl = store.get(req.key)
    if expl is None:
        expl = disk_cache().load_explanation(req.key)
        if expl is not None:
            store.put(req.key, _owner(loaded, model, req.options), expl)
    return expl


def duel_from_earlier(
    loaded: state.LoadedData, model: state.TrainedModel, duel: int, what: str
) -> Explanation | None:
    """One duel's explanation cut from an explanation already made (e.g. a player's
    losses), so opening a duel from the Players page costs nothing."""
    owner = _owner(loaded, model, session_precision().options(what))
    return explanation_store().find_duel(owner, str(loaded.data.duel_ids[duel]))


def explain_now(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    req: ExplainRequest,
    progress: Progress | None = None,
) -> Explanation:
    """Explain in the calling thread (or fetch from the caches), and cache the result."""
    found = cached_explanation(loaded, model, req)
    if found is not None:
        return found
    expl = explain_duels(
        model.result.function,
        loaded.data,
        req.duels,
        explainer=explainer_for(model, req.options),
        progress=progress,
    )
    expl = replace(expl, meta={**expl.meta, "dataset": loaded.title})
    disk_cache().save_explanation(req.key, expl)
    explanation_store().put(req.key, _owner(loaded, model, req.options), expl)
    return expl


def explanation_or_job(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    req: ExplainRequest,
    *,
    label: str,
    page: str,
) -> tuple[Explanation | None, Job | None]:
    """The explanation when cached; otherwise the job computing it (started if new).

    A cancelled or failed job is returned as it is (not restarted): the page says so
    and offers to run it again (:func:`forget_job`).
    """
    expl = cached_explanation(loaded, model, req)
    if expl is not None:
        return expl, None
    key = explain_job_key(req)
    job = state.job(key)
    if job is not None and job.state == "done":
        return job.result, None
    if job is None:
        job = state.add_job(
            Job(
                key,
                label,
                lambda progress: explain_now(loaded, model, req, progress),
                page=page,
                heavy=True,
                abandon_after_s=ABANDON_AFTER_S,
            )
        ).start()
    return None, job


def explain_job_key(req: ExplainRequest) -> str:
    return f"explain:{req.key}"


def forget_job(key: str) -> None:
    """Drop a finished job, so the same work can be asked for again."""
    state.drop_job(key)


# -- interaction values ---------------------------------------------------------------------
def interactions_or_job(
    loaded: state.LoadedData, model: state.TrainedModel, req: ExplainRequest, *, page: str
) -> tuple[InteractionExplanation | None, Job]:
    """Exact interaction values of the item groups for an item request's duels, as a
    job (kept in the session; the item explainer's factorizations are shared)."""
    key = f"interactions:{req.key}"
    job = state.job(key)
    if job is None:
        data = loaded.data
        duels = req.duels

        def work(progress: Progress) -> InteractionExplanation:
            return explain_interactions(
                model.result.function,
                data.item_ids[data.left[duels]],
                data.item_ids[data.right[duels]],
                winners=data.y[duels],
                duel_ids=data.duel_ids[duels],
                explainer=explainer_for(model, req.options),
                progress=progress,
            )

        count = "one duel" if len(duels) == 1 else f"{len(duels):,} duels"
        label = f"Interaction values of {count}"
        job = state.add_job(Job(key, label, work, page=page)).start()
    return (job.result if job.state == "done" else None), job
