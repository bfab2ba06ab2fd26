"""Explanations of a request as background jobs: from the cache, or computed in a job.

The job's worker writes the cache itself, so an explanation is kept even if the user
leaves the page meanwhile. Interaction values run as a job of their own.
"""

from __future__ import annotations

from dashboard import state
from dashboard.jobs import ABANDON_AFTER_S, Job
from dashboard.services.explain_requests import ExplainRequest
from dashboard.services.explanation_cache import explanation_cache
from dashboard.services.job_estimates import explain_estimate_s
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import (
    InteractionExplanation,
    explain_interactions,
)
from prefshap_core.progress import Progress


def explanation_or_job(
    req: ExplainRequest, *, label: str, page: str
) -> tuple[Explanation | None, Job | None]:
    """The explanation when cached; otherwise the job computing it (started if new).

    A cancelled or failed job is returned as it is (not restarted): the page says so
    and offers to run it again (:func:`forget_job`).
    """
    cache = explanation_cache()
    expl = cache.get(req)
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
                lambda progress: cache.compute(req, progress),
                page=page,
                heavy=True,
                abandon_after_s=ABANDON_AFTER_S,
                estimate_s=explain_estimate_s(req),  # small ones: the small-job lane
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
    req: ExplainRequest, *, page: str, groups: tuple[str, ...] | None = None
) -> tuple[InteractionExplanation | None, Job]:
    """Exact interaction values of the item groups for an item request's duels, as a
    job (kept in the session; the item explainer's factorizations are shared).
    ``groups``: a chosen subset of at most 16 item groups (None: all)."""
    key = f"interactions:{req.key}" + ("" if groups is None else f":{'|'.join(groups)}")
    job = state.job(key)
    if job is None:
        assert req.duels is not None, "interaction values are of a dataset's duels"
        explainer = explanation_cache().explainer(req)
        data, duels = req.loaded.data, req.duels

        def work(progress: Progress) -> InteractionExplanation:
            return explain_interactions(
                req.model.function,
                data.item_ids[data.left[duels]],
                data.item_ids[data.right[duels]],
                winners=data.y[duels],
                duel_ids=data.duel_ids[duels],
                explainer=explainer,
                progress=progress,
                groups=groups,
            )

        count = "one duel" if len(duels) == 1 else f"{len(duels):,} duels"
        label = f"Interaction values of {count}"
        job = state.add_job(Job(key, label, work, page=page)).start()
    return (job.result if job.state == "done" else None), job
