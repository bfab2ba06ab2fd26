"""Training: from the disk cache or in a background job, and the models' names.

The worker writes the disk cache itself, so a model is kept even if the user leaves
the page meanwhile; :func:`collect_finished_jobs` publishes it into the session.
"""

from __future__ import annotations

from dashboard import state
from dashboard.jobs import ABANDON_AFTER_S, Job
from dashboard.services.stores import disk_cache
from prefshap_core.progress import Progress
from prefshap_core.workflow.fingerprints import settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

MODEL_TITLES = {"gpm": "GPM", "cgpm": "C-GPM", "upm": "UPM", "auto": "the best model"}


def training_job_key(loaded: state.LoadedData) -> str:
    return f"train:{loaded.fingerprint}"


def cached_model(loaded: state.LoadedData, settings_fp: str) -> state.TrainedModel | None:
    """The model of ``loaded`` with these settings (their fingerprint,
    ``settings_fingerprint``; a ``model=`` link holds it) from the disk cache,
    or None."""
    result = disk_cache().load_training(loaded.fingerprint, settings_fp)
    if result is None:
        return None
    return state.TrainedModel(result, loaded.fingerprint, settings_fp, from_cache=True)


def train_now(
    loaded: state.LoadedData, settings: TrainSettings, progress: Progress | None = None
) -> state.TrainedModel:
    """Train in the calling thread (or load from the disk cache), and cache the result."""
    settings_fp = settings_fingerprint(settings)
    found = cached_model(loaded, settings_fp)
    if found is not None:
        return found
    result = train(loaded.data, settings, progress)
    disk_cache().save_training(loaded.fingerprint, settings_fp, result)
    return state.TrainedModel(result, loaded.fingerprint, settings_fp)


def model_title(kind: str) -> str:
    return MODEL_TITLES.get(kind, kind)


def model_description(model: state.TrainedModel) -> str:
    """E.g. 'GPM (seed 0, 300 centres)': what exported figures name as their model."""
    settings = model.settings
    return f"{model_title(model.kind)} (seed {settings.seed}, {settings.n_centres:,} centres)"


def start_training(
    loaded: state.LoadedData, settings: TrainSettings, *, page: str = "train"
) -> Job:
    """Train in the background (one training per dataset at a time)."""
    title = model_title(settings.kind)
    job = Job(
        training_job_key(loaded),
        f"Training {title} on {loaded.title}",
        lambda progress: train_now(loaded, settings, progress),
        page=page,
        heavy=True,
        abandon_after_s=ABANDON_AFTER_S,
    )
    return state.add_job(job.start())


def collect_finished_jobs() -> None:
    """Publish finished trainings into the session (the worker cannot: it has no session)."""
    for job in list(state.jobs().values()):
        if job.finished and not job.collected and job.key.startswith("train:"):
            if job.state == "done":
                state.set_model(job.result)
            job.collected = True
