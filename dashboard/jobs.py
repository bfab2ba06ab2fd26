"""Long work (training, explaining) in a background thread, pollable and cancellable.

Streamlit reruns the page script on every interaction, so long work cannot live in
the script run: it would block the page and be killed by the next rerun. A ``Job``
runs the work in a daemon thread and is kept in ``st.session_state``; pages poll it
(``st.fragment(run_every=...)``) to draw progress, and a Cancel button calls
``cancel()``, which the engine's ``Progress.update`` turns into ``CancelledError`` at
its next checkpoint. Nothing here imports Streamlit: the worker never touches the
UI, it only writes this object's fields (each a single assignment, so a reader in
the script thread sees either the old or the new value).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any, Literal

from prefshap_core.budget import limit_malloc_arenas, return_freed_memory
from prefshap_core.errors import CancelledError, PrefShapError
from prefshap_core.progress import Progress, ProgressUpdate, cancel_scope

JobState = Literal["running", "done", "failed", "cancelled"]
# Every job not yet garbage-collected, so that interpreter exit can stop them first.
_LIVE: weakref.WeakSet[Job] = weakref.WeakSet()
MAX_HEAVY_JOBS_ENV = "PREFSHAP_MAX_HEAVY_JOBS"
# The job threads' name in the OS (``/proc/PID/task/*/comm``, at most 15 bytes): the
# BLAS/OpenMP workers a job thread starts inherit it, so the server's own CPU can be
# told apart from the jobs' (benchmarks/bench_dashboard.py).
JOB_THREAD_NAME = "prefshap-job"
# A job nobody has looked at for this long belongs to a closed tab: it is cancelled.
# Pages poll running jobs every 1-3 s (components/progress), so 30 s is generous.
ABANDON_AFTER_S = 30.0


class HeavyJobGate:
    """At most ``capacity`` heavy jobs of this server compute at once; the others wait
    in arrival order (and can be cancelled while waiting), so pages stay responsive
    and every visitor sees their place in the queue."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self._cond = threading.Condition()
        self._running: set[int] = set()
        self._waiting: list[int] = []  # job ids, first come first served

    def position(self, job_id: int) -> int:
        """1 for the next job to run; 0 when not waiting."""
        with self._cond:
            return self._waiting.index(job_id) + 1 if job_id in self._waiting else 0

    def acquire(
        self, job_id: int, cancelled: Callable[[], bool], on_wait: Callable[[int], None]
    ) -> bool:
        """Wait for a slot; False if cancelled while waiting."""
        with self._cond:
            self._waiting.append(job_id)
            try:
                while True:
                    first_free = len(self._running) < self.capacity
                    if first_free and self._waiting[0] == job_id:
                        self._running.add(job_id)
                        return True
                    if cancelled():
                        return False
                    on_wait(self._waiting.index(job_id) + 1)
                    self._cond.wait(timeout=0.2)
            finally:
                self._waiting.remove(job_id)
                self._cond.notify_all()

    def release(self, job_id: int) -> None:
        with self._cond:
            self._running.discard(job_id)
            self._cond.notify_all()

    @property
    def n_running(self) -> int:
        with self._cond:
            return len(self._running)


def _default_capacity() -> int:
    configured = os.environ.get(MAX_HEAVY_JOBS_ENV, "").strip()
    if configured.isdigit() and int(configured) > 0:
        return int(configured)
    return max(1, (os.cpu_count() or 2) // 2)


HEAVY_JOBS = HeavyJobGate(_default_capacity())
# Small jobs (estimated under SMALL_JOB_S, e.g. a few duels' explanation) have a lane
# of their own, so they never wait behind a heavy training; they run next to it.
SMALL_JOB_S = 5.0
SMALL_JOBS = HeavyJobGate(_default_capacity())
# Each job runs in a fresh thread: share malloc arenas so their memory is reused.
limit_malloc_arenas(HEAVY_JOBS.capacity + SMALL_JOBS.capacity + 1)


def lane_for(estimate_s: float | None) -> HeavyJobGate:
    """The gate a queued job waits at: the small lane below ``SMALL_JOB_S``, else heavy."""
    if estimate_s is not None and estimate_s < SMALL_JOB_S:
        return SMALL_JOBS
    return HEAVY_JOBS


def _name_this_thread(name: str) -> None:
    """Set the calling thread's OS name (Linux ``prctl(PR_SET_NAME)``; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)  # 15: PR_SET_NAME
    except (OSError, AttributeError):
        pass


class Job:
    """One unit of long work: ``work(progress)`` in a thread, its outcome kept here."""

    def __init__(
        self,
        key: str,
        label: str,
        work: Callable[[Progress], Any],
        *,
        page: str = "",
        heavy: bool = False,
        abandon_after_s: float | None = None,
        gate: HeavyJobGate | None = None,
        estimate_s: float | None = None,
    ) -> None:
        self.key = key
        self.label = label  # shown next to the progress bar, e.g. "Training GPM"
        self.page = page  # the page that owns it (others show it in the sidebar)
        self._work = work
        self._cancel = threading.Event()
        self.state: JobState = "running"
        self.update: ProgressUpdate | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.error_details: str = ""
        self.started_at = time.time()
        self.finished_at: float | None = None
        self.collected = False  # the script has published the outcome
        self.token: str | None = None  # the session token it belongs to (SessionJobs)
        # Heavy jobs wait for a slot of a server-wide gate (the small lane when
        # estimated under SMALL_JOB_S); queue_position > 0 while waiting. A job with
        # abandon_after_s is cancelled when no page has touched it (seen it) for that
        # long: its session has gone.
        self.heavy = heavy
        self.estimate_s = estimate_s
        self._gate = gate if gate is not None else lane_for(estimate_s)
        self.queue_position = 0
        self.abandon_after_s = abandon_after_s
        self.last_seen = time.monotonic()
        self.abandoned = False
        self._thread = threading.Thread(target=self._run, name=f"prefshap-job-{key}", daemon=True)

    # -- control ---------------------------------------------------------------------
    def start(self) -> Job:
        _LIVE.add(self)
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancel.set()

    def touch(self) -> None:
        """A page of the owning session has seen this job: it is not abandoned."""
        self.last_seen = time.monotonic()

    def _should_stop(self) -> bool:
        if self._cancel.is_set():
            return True
        idle = time.monotonic() - self.last_seen
        if self.abandon_after_s is not None and idle > self.abandon_after_s:
            self.abandoned = True
            self._cancel.set()
            return True
        return False

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    @property
    def finished(self) -> bool:
        return self.state != "running"

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the job ends (tests and scripts); True when it has."""
        self._thread.join(timeout)
        return self.finished

    @property
    def elapsed_s(self) -> float:
        end = self.finished_at if self.finished_at is not None else time.time()
        return end - self.started_at

    @property
    def user_error(self) -> bool:
        """The failure is the engine's deliberate message (bad data or option), not a bug."""
        return isinstance(self.error, PrefShapError)

    # -- the thread ----------------------------------------------------------------------
    def _on_update(self, update: ProgressUpdate) -> None:
        self.update = update

    def _on_wait(self, position: int) -> None:
        self.queue_position = position
        ahead = "next in line" if position == 1 else f"{position - 1} ahead"
        self.update = ProgressUpdate(f"queued, {ahead} (position {position})", 0.0, 0.0, None)

    def _run(self) -> None:
        _name_this_thread(JOB_THREAD_NAME)
        progress = Progress(callback=self._on_update, should_cancel=self._should_stop)
        acquired = False
        try:
            if self.heavy:
                acquired = self._gate.acquire(id(self), self._should_stop, self._on_wait)
                self.queue_position = 0
                if not acquired:
                    raise CancelledError("cancelled while queued")
                self.update = None
            with cancel_scope(self._should_stop):  # engine loops check it (checkpoint)
                result = self._work(progress)
        except CancelledError:
            self.state = "cancelled"
        except BaseException as exc:  # the UI reports it; the thread must not die silently
            self.error = exc
            self.error_details = "".join(traceback.format_exception(exc))
            self.state = "failed"
        else:
            self.result = result
            # A cancel that arrived after the last checkpoint still counts as done:
            # the result is complete and already cached, so keeping it costs nothing.
            self.state = "done"
        finally:
            if acquired:
                self._gate.release(id(self))
            self._work = None  # its closure holds data and models: let them go
            return_freed_memory()  # what the work freed, back to the system
            self.finished_at = time.time()


class SessionJobs:
    """Each session token's jobs, so that a reload of the same session finds them.

    A reload is a new Streamlit session: its ``st.session_state`` starts empty. Once
    it has adopted the token of the session it reloads (:mod:`dashboard.sessions`),
    :meth:`bind` hands it that token's job dict: the running job shows its progress
    again, and a finished one its result. A token not bound for ``keep_s`` (the
    abandon window) whose jobs have all ended is forgotten; a running job is not
    kept alive by this: it is cancelled when nobody touches it (``ABANDON_AFTER_S``).
    """

    def __init__(self, keep_s: float = ABANDON_AFTER_S) -> None:
        self.keep_s = keep_s
        self._lock = threading.Lock()
        self._by_token: dict[str, tuple[dict[str, Job], float]] = {}

    def bind(self, token: str, jobs: dict[str, Job]) -> dict[str, Job]:
        """The job dict of ``token`` from now on: the one bound before (``jobs``'
        entries added to it), or ``jobs`` itself for a token seen first."""
        now = time.monotonic()
        with self._lock:
            self._forget_old(now)
            entry = self._by_token.get(token)
            shared = jobs if entry is None else entry[0]
            if shared is not jobs:
                for key, job in list(jobs.items()):
                    shared.setdefault(key, job)
            self._by_token[token] = (shared, now)
            return shared

    def _forget_old(self, now: float) -> None:
        for token, (jobs, bound_at) in list(self._by_token.items()):
            if now - bound_at > self.keep_s and all(j.finished for j in list(jobs.values())):
                del self._by_token[token]

    def __len__(self) -> int:
        return len(self._by_token)


SESSION_JOBS = SessionJobs()


@atexit.register
def _stop_all(timeout_s: float = 10.0) -> None:
    """Cancel running jobs and wait for them briefly at interpreter exit.

    A daemon thread still inside torch when the interpreter tears down aborts the
    whole process ("terminate called without an active exception"); cancelled jobs
    leave at their next progress checkpoint instead.
    """
    running = [job for job in list(_LIVE) if not job.finished]
    for job in running:
        job.cancel()
    deadline = time.monotonic() + timeout_s
    for job in running:
        job.wait(max(0.0, deadline - time.monotonic()))
