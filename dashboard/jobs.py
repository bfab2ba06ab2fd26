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
import threading
import time
import traceback
import weakref
from collections.abc import Callable
from typing import Any, Literal

from prefshap_core.errors import CancelledError, PrefShapError
from prefshap_core.progress import Progress, ProgressUpdate

JobState = Literal["running", "done", "failed", "cancelled"]
# Every job not yet garbage-collected, so that interpreter exit can stop them first.
_LIVE: weakref.WeakSet[Job] = weakref.WeakSet()


class Job:
    """One unit of long work: ``work(progress)`` in a thread, its outcome kept here."""

    def __init__(
        self,
        key: str,
        label: str,
        work: Callable[[Progress], Any],
        *,
        page: str = "",
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
        self._thread = threading.Thread(target=self._run, name=f"prefshap-job-{key}", daemon=True)

    # -- control ---------------------------------------------------------------------
    def start(self) -> Job:
        _LIVE.add(self)
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancel.set()

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

    def _run(self) -> None:
        progress = Progress(callback=self._on_update, should_cancel=self._cancel.is_set)
        try:
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
            self.finished_at = time.time()


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
