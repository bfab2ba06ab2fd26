"""The dashboard's calls into the engine, with caching decided once, here.

- Parsed data: ``st.cache_data`` (see :mod:`dashboard.sources`).
- Models and explanations: the disk cache (``prefshap_core.cache``, keyed by data and
  settings fingerprints) so a reload, a second visitor or a restarted server reuses
  them, plus a small in-process store of explanations (``st.cache_resource``) so
  switching between views does not even read the disk.
- Long work runs as a background :class:`~dashboard.jobs.Job`; its worker writes the
  caches itself, so a result is kept even if the user leaves the page meanwhile.

No maths here: everything numerical is a ``prefshap_core`` call.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import streamlit as st

from dashboard import sources, state
from dashboard.jobs import ABANDON_AFTER_S, Job
from prefshap_core import workflow
from prefshap_core.analysis.explorer import DatasetIntransitivity, dataset_intransitivity
from prefshap_core.analysis.rankings import Rankings, rankings
from prefshap_core.analysis.utility_split import duel_parts, has_utility_split
from prefshap_core.cache import DiskCache, cache_dir, explanation_key
from prefshap_core.errors import PrefShapError
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.dask_executor import DaskExecutor
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import (
    InteractionExplanation,
    explain_interactions,
)
from prefshap_core.models.decision_parts import DecisionParts
from prefshap_core.progress import Progress, with_deadline

# The demo preparation gives up after this long (a planted or damaged cache entry, a
# stalled machine), discards what it found in the cache and computes it afresh.
DEMO_TIMEOUT_S = 60.0
# The first screen's model: small enough to train and explain in seconds on two cores.
DEMO_SETTINGS = workflow.TrainSettings(kind="gpm", seed=0, n_centres=300)
DEMO_SETTINGS_FP = workflow.settings_fingerprint(DEMO_SETTINGS)
# Explanations of large subsets are capped (sampled, seeded) unless the user raises it.
DEFAULT_EXPLAIN_CAP = 1000
# A Dask scheduler (tcp://HOST:8786): when set, explanations run on its cluster.
CLUSTER_ENV = "PREFSHAP_DASK_SCHEDULER"
MODEL_TITLES = {"gpm": "GPM", "cgpm": "C-GPM", "upm": "UPM"}


# -- caches ------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False)
def _disk_cache(root: str) -> DiskCache:
    return DiskCache(Path(root))


def disk_cache() -> DiskCache:
    """The disk cache at ``$PREFSHAP_CACHE_DIR`` (read at every call: tests change it)."""
    return _disk_cache(str(cache_dir()))


Owner = tuple[str, str, str]  # (data fingerprint, settings fingerprint, options key)


class ExplanationStore:
    """A small thread-safe LRU of explanations shared by all sessions of this process.

    Each entry remembers its owner (which model explained what), so one duel can be
    cut out of any explanation of the same model that already covers it. Bounded by
    count and by bytes, so many visitors' explanations cannot grow the process
    without end (the disk cache keeps everything).
    """

    def __init__(self, capacity: int = 48, max_bytes: int = 256 * 2**20) -> None:
        self._items: OrderedDict[str, tuple[Owner, Explanation, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._capacity = capacity
        self._max_bytes = max_bytes
        self._bytes = 0

    @property
    def n_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Explanation | None:
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return None
            self._items.move_to_end(key)
            return entry[1]

    def put(self, key: str, owner: Owner, expl: Explanation) -> None:
        size = _explanation_bytes(expl)
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._items[key] = (owner, expl, size)
            self._bytes += size
            while len(self._items) > 1 and (
                len(self._items) > self._capacity or self._bytes > self._max_bytes
            ):
                _, (_, _, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped

    def forget(self, key: str) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[2]

    def find_duel(self, owner: Owner, duel_id: str) -> Explanation | None:
        """The one-duel explanation of ``duel_id`` taken from a covering entry, if any."""
        with self._lock:
            entries = [expl for who, expl, _ in reversed(self._items.values()) if who == owner]
        for expl in entries:
            rows = np.flatnonzero(expl.duel_ids == duel_id)
            if len(rows):
                return expl.subset(rows[:1])
        return None


def _explanation_bytes(expl: Explanation) -> int:
    total = 0
    for value in vars(expl).values():
        if isinstance(value, np.ndarray):
            total += value.nbytes if value.dtype != object else 64 * value.size
    return total


@st.cache_resource(show_spinner=False)
def explanation_store() -> ExplanationStore:
    return ExplanationStore()


# -- training ------------------------------------------------------------------------------
def training_job_key(loaded: state.LoadedData) -> str:
    return f"train:{loaded.fingerprint}"


def cached_model(
    loaded: state.LoadedData, settings: workflow.TrainSettings
) -> state.TrainedModel | None:
    """A model with exactly these settings from the disk cache, or None."""
    settings_fp = workflow.settings_fingerprint(settings)
    result = disk_cache().load_training(loaded.fingerprint, settings_fp)
    if result is None:
        return None
    return state.TrainedModel(result, loaded.fingerprint, settings_fp, from_cache=True)


def train_now(
    loaded: state.LoadedData, settings: workflow.TrainSettings, progress: Progress | None = None
) -> state.TrainedModel:
    """Train in the calling thread (or load from the disk cache), and cache the result."""
    found = cached_model(loaded, settings)
    if found is not None:
        return found
    settings_fp = workflow.settings_fingerprint(settings)
    result = workflow.train(loaded.data, settings, progress)
    disk_cache().save_training(loaded.fingerprint, settings_fp, result)
    return state.TrainedModel(result, loaded.fingerprint, settings_fp)


def model_title(kind: str) -> str:
    return MODEL_TITLES.get(kind, kind)


def model_description(model: state.TrainedModel) -> str:
    """E.g. 'GPM (seed 0, 300 centres)': what exported figures name as their model."""
    settings = model.result.settings
    return f"{model_title(model.kind)} (seed {settings.seed}, {settings.n_centres:,} centres)"


def start_training(
    loaded: state.LoadedData, settings: workflow.TrainSettings, *, page: str = "train"
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


# -- explanations ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Precision:
    """How coalitions are chosen: the engine's default (exact up to its player limit,
    sampled beyond), always exact, or ``n_samples`` sampled coalitions."""

    mode: str = "auto"  # "auto" | "exact" | "sampled"
    n_samples: int = 512

    def options(self, what: str) -> ExplainOptions:
        """The engine's options for explaining ``what`` ("items" | "context") so."""
        if self.mode == "exact":
            return ExplainOptions(what=what, max_exact_players=10**9)  # type: ignore[arg-type]
        if self.mode == "sampled":
            return ExplainOptions(what=what, max_exact_players=0, n_samples=int(self.n_samples))  # type: ignore[arg-type]
        return ExplainOptions(what=what)  # type: ignore[arg-type]


def session_precision() -> Precision:
    """The session's choice (the precision control on the explaining pages)."""
    mode, n_samples = state.precision()
    return Precision(mode, n_samples)


@dataclass(frozen=True, eq=False)
class ExplainRequest:
    """Which duels to explain, after capping: what a page asks the engine for."""

    options: ExplainOptions  # what is explained and how
    duels: np.ndarray  # duel indices of the dataset (sorted)
    n_available: int  # how many the subset had before capping
    key: str

    @property
    def what(self) -> str:
        return self.options.what

    @property
    def sampled(self) -> bool:
        return len(self.duels) < self.n_available


def request(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duels: np.ndarray,
    what: str = "items",
    *,
    cap: int | None = DEFAULT_EXPLAIN_CAP,
    seed: int = 0,
    precision: Precision | None = None,
) -> ExplainRequest:
    """Cap ``duels`` to a seeded random sample of ``cap`` and key the explanation.

    ``precision``: default the session's choice (:func:`session_precision`)."""
    n_available = len(np.unique(duels))
    duels = workflow.sample_duels(duels, cap, seed)
    options = replace((precision or session_precision()).options(what), executor=cluster_executor())
    dtype = model.result.settings.dtype
    key = explanation_key(
        loaded.fingerprint, model.settings_fp, duels, options, dtype, cap_seed=seed
    )
    return ExplainRequest(options, duels, n_available, key)


def cluster_address() -> str | None:
    """The Dask scheduler named by ``PREFSHAP_DASK_SCHEDULER``, or None (in-process)."""
    return os.environ.get(CLUSTER_ENV, "").strip() or None


@st.cache_resource(show_spinner=False)
def _cluster(address: str) -> DaskExecutor:
    return DaskExecutor(address)  # connects on first use, from the job's thread


def cluster_executor() -> DaskExecutor | None:
    """One executor per scheduler for the whole server (progress and cancel go through
    it as in-process); the numbers, and so the cache keys, are the same either way."""
    address = cluster_address()
    return None if address is None else _cluster(address)


# Each explainer keeps up to ExplainOptions.factor_cache_bytes (1 GB) of factorizations.
@st.cache_resource(show_spinner=False, max_entries=4)
def _explainer(
    model_key: tuple[str, str], options_key: str, where: str | None, _fn, _options
) -> Explainer:
    return Explainer(_fn, _options)


def explainer_for(model: state.TrainedModel, options: ExplainOptions) -> Explainer:
    """One explainer per model and options for the whole server: it keeps each
    coalition's factorization, so later explanations between the same pool are cheap."""
    key = (model.data_fp, model.settings_fp)
    where = None if options.executor is None else repr(options.executor)
    return _explainer(key, options.key(), where, model.result.function, options)


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
    expl = workflow.explain_duels(
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


# -- the first screen -----------------------------------------------------------------------
# The demo per cache folder, built once per process. Not st.cache_resource: the build
# draws a progress bar, and Streamlit refuses to replay elements drawn into a block
# created outside a cached function. A lock makes sessions that arrive during the
# build wait for it instead of training the same model again.
_DEMO_LOCK = threading.Lock()
_DEMOS: dict[str, tuple[state.LoadedData, state.TrainedModel]] = {}


def _demo(root: str, progress: Progress | None) -> tuple[state.LoadedData, state.TrainedModel]:
    with _DEMO_LOCK:
        if root not in _DEMOS:
            try:
                # Bounded: every other visitor waits behind this lock.
                timed = with_deadline(progress, DEMO_TIMEOUT_S, "Preparing the demo")
                _DEMOS[root] = _prepare_demo(timed, from_cache=True)
            except PrefShapError:  # DeadlineExceeded is one
                # A planted, broken or too slow cache entry: discard it, recompute.
                _DEMOS[root] = _prepare_demo(progress, from_cache=False)
        return _DEMOS[root]


def _prepare_demo(
    progress: Progress | None, *, from_cache: bool
) -> tuple[state.LoadedData, state.TrainedModel]:
    loaded = sources.load_builtin(sources.builtin_choices()[0])
    settings_fp = workflow.settings_fingerprint(DEMO_SETTINGS)
    if not from_cache:
        disk_cache().forget_training(loaded.fingerprint, settings_fp)
    train_part = progress.span(0.0, 0.5) if progress is not None else None
    model = train_now(loaded, DEMO_SETTINGS, train_part)
    req = request(loaded, model, model.result.split.test)
    if not from_cache:
        disk_cache().forget_explanation(req.key)
        explanation_store().forget(req.key)
    explain_part = progress.span(0.5, 1.0) if progress is not None else None
    explain_now(loaded, model, req, explain_part)
    return loaded, model


def ensure_demo(progress: Progress | None = None) -> None:
    """Once per session: the demo data, a small model and its explanation, ready to view.

    The first launch trains and explains in a few seconds; afterwards everything
    comes from the process (a reload, a second visitor) or the disk cache (a
    restarted server). The explanation is exactly the Explain page's default
    request (all test duels, default cap), so that page opens on it.
    """
    if state.demo_ready():
        return
    state.mark_demo_ready()  # even if it fails below: never retry on every rerun
    if state.active() is not None:
        return
    loaded, model = _demo(str(cache_dir()), progress)
    state.add_dataset(loaded)
    state.set_model(model)


# -- intransitivity ----------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _intransitivity(
    data_fp: str,
    settings_fp: str,
    n_items: int,
    context: tuple[tuple[str, str], ...],
    top: int,
    _loaded: state.LoadedData,
    _model: state.TrainedModel,
) -> DatasetIntransitivity:
    return dataset_intransitivity(
        _model.result.function, _loaded.data, n_items, context=dict(context), top=top
    )


def intransitivity(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    n_items: int,
    context: dict[str, str],
    top: int = 20,
) -> DatasetIntransitivity:
    """The model's cyclic share and cycles on the most active items, and the data's
    own cycles (seconds at most: computed here, kept per model in this process)."""
    key = tuple(sorted(context.items()))
    return _intransitivity(loaded.fingerprint, model.settings_fp, n_items, key, top, loaded, model)


# -- deep links ------------------------------------------------------------------------------
def model_by_fingerprint(loaded: state.LoadedData, settings_fp: str) -> state.TrainedModel | None:
    """A model of ``loaded`` by its settings fingerprint, from the disk cache (or None)."""
    result = disk_cache().load_training(loaded.fingerprint, settings_fp)
    if result is None:
        return None
    return state.TrainedModel(result, loaded.fingerprint, settings_fp, from_cache=True)


# -- explaining any pair (head-to-head, what-if) ------------------------------------------------
def explain_pair(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    left: np.ndarray,
    right: np.ndarray,
    labels: tuple[str, str],
    *,
    ids: tuple[str, str] | None = None,
    what: str = "items",
    contexts: np.ndarray | None = None,
    precision: Precision | None = None,
) -> Explanation:
    """The explanation of one duel ``left`` vs ``right``: item ids, or model-space rows
    (what-if edits), ``labels`` their display names, ``ids`` the ids shown for them.
    Through the server's explainer of this model and options, whose kept
    factorizations make each edit fast; the same duel again (a rerun of the page)
    comes from a small in-process store."""
    options = (precision or session_precision()).options(what)
    parts = [np.asarray(left), np.asarray(right)] + ([] if contexts is None else [contexts])
    duel_key = "|".join(f"{p.dtype}:{p.shape}:{p.tobytes().hex()}" for p in parts)
    expl = _pair_explanation(
        (model.data_fp, model.settings_fp), options.key(), duel_key, model, options, left,
        right, contexts,
    )  # fmt: skip
    shown_ids = ids or (str(expl.left_ids[0]), str(expl.right_ids[0]))
    return replace(
        expl,
        duel_ids=np.array(["head-to-head"]),
        left_ids=np.array([shown_ids[0]]),
        right_ids=np.array([shown_ids[1]]),
        left_labels=np.array([labels[0]]),
        right_labels=np.array([labels[1]]),
        meta={**expl.meta, "dataset": loaded.title},
    )


@st.cache_resource(show_spinner=False, max_entries=64)
def _pair_explanation(
    model_key: tuple[str, str], options_key: str, duel_key: str,
    _model: state.TrainedModel, _options: ExplainOptions, _left, _right, _contexts,
) -> Explanation:  # fmt: skip
    return explainer_for(_model, _options)(_left, _right, contexts=_contexts)


# -- rankings -----------------------------------------------------------------------------------
@st.cache_resource(show_spinner=False, max_entries=8)
def _rankings(data_fp: str, settings_fp: str, _result: workflow.TrainingResult, _data) -> Rankings:
    return rankings(_result.function, _data, upm=_result.baseline_function)


def model_rankings(loaded: state.LoadedData, model: state.TrainedModel) -> Rankings:
    """The Rankings page's table, computed once per model and process (the UPM
    baseline's f(x) as its score when one was fitted, else Bradley-Terry)."""
    return _rankings(loaded.fingerprint, model.settings_fp, model.result, loaded.data)


# -- utility and intransitive parts of g ----------------------------------------------------
def has_parts(model: state.TrainedModel) -> bool:
    """Whether the model's g has a utility and an intransitive part (GPM / C-GPM, w > 0)."""
    return has_utility_split(model.result.function)


def decision_parts(
    loaded: state.LoadedData,
    model: state.TrainedModel,
    duels: np.ndarray,
    *,
    averaged: bool = False,
    swapped: bool = False,
) -> DecisionParts:
    """g's utility and intransitive parts on ``duels``, left vs right (``swapped``: right
    vs left); a C-GPM under each duel's context, or context-averaged (``averaged``,
    what its item explanations explain). Milliseconds for a page's duels."""
    parts = duel_parts(model.result.function, loaded.data, duels, averaged=averaged)
    return parts.swapped() if swapped else parts
