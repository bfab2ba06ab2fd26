"""The first screen: the demo data, a small model and its explanation, ready to view."""

from __future__ import annotations

import threading

from dashboard import sources, state
from dashboard.services.explain_requests import ExplainRequest, request
from dashboard.services.explanation_cache import explanation_cache
from dashboard.services.stores import disk_cache
from dashboard.services.training import train_now
from prefshap_core.cache import cache_dir
from prefshap_core.errors import PrefShapError
from prefshap_core.explain import Executor
from prefshap_core.progress import Progress, with_deadline
from prefshap_core.workflow.fingerprints import settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings

# The demo preparation gives up after this long (a planted or damaged cache entry, a
# stalled machine), discards what it found in the cache and computes it afresh.
DEMO_TIMEOUT_S = 60.0
# The first screen's model: small enough to train and explain in seconds on two cores.
DEMO_SETTINGS = TrainSettings(kind="gpm", seed=0, n_centres=300)
DEMO_SETTINGS_FP = settings_fingerprint(DEMO_SETTINGS)


# The demo per cache folder, built once per process. Not st.cache_resource: the build
# draws a progress bar, and Streamlit refuses to replay elements drawn into a block
# created outside a cached function. A lock makes sessions that arrive during the
# build wait for it instead of training the same model again.
_DEMO_LOCK = threading.Lock()
_DEMOS: dict[str, tuple[state.LoadedData, state.TrainedModel]] = {}


def _demo(
    root: str, progress: Progress | None, executor: Executor | None = None
) -> tuple[state.LoadedData, state.TrainedModel]:
    with _DEMO_LOCK:
        if root not in _DEMOS:
            try:
                # Bounded: every other visitor waits behind this lock.
                timed = with_deadline(progress, DEMO_TIMEOUT_S, "Preparing the demo")
                _DEMOS[root] = _prepare_demo(timed, executor, from_cache=True)
            except PrefShapError:  # DeadlineExceeded is one
                # A planted, broken or too slow cache entry: discard it, recompute.
                _DEMOS[root] = _prepare_demo(progress, executor, from_cache=False)
        return _DEMOS[root]


def demo_request(
    loaded: state.LoadedData, model: state.TrainedModel, executor: Executor | None = None
) -> ExplainRequest:
    """The demo's explanation: exactly the Explain page's default request (all test
    duels, default cap and precision), so that page opens on it."""
    return request(loaded, model, model.split.test, precision=state.Precision(), executor=executor)


def _prepare_demo(
    progress: Progress | None, executor: Executor | None, *, from_cache: bool
) -> tuple[state.LoadedData, state.TrainedModel]:
    loaded = sources.load_builtin(sources.builtin_choices()[0])
    settings_fp = settings_fingerprint(DEMO_SETTINGS)
    if not from_cache:
        disk_cache().forget_training(loaded.fingerprint, settings_fp)
    train_part = progress.span(0.0, 0.5) if progress is not None else None
    model = train_now(loaded, DEMO_SETTINGS, train_part)
    req = demo_request(loaded, model, executor)
    cache = explanation_cache()
    if not from_cache:
        cache.forget(req)
    explain_part = progress.span(0.5, 1.0) if progress is not None else None
    cache.compute(req, explain_part)
    return loaded, model


def ensure_demo(progress: Progress | None = None, executor: Executor | None = None) -> None:
    """Once per session: the demo data, a small model and its explanation, ready to view.

    The first launch trains and explains in a few seconds; afterwards everything
    comes from the process (a reload, a second visitor) or the disk cache (a
    restarted server). The explanation is :func:`demo_request`, on ``executor``.
    """
    if state.demo_ready():
        return
    state.mark_demo_ready()  # even if it fails below: never retry on every rerun
    if state.active() is not None:
        return
    loaded, model = _demo(str(cache_dir()), progress, executor)
    state.add_dataset(loaded)
    state.set_model(model)
