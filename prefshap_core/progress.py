"""Progress reporting and cancellation for long work (training, explaining).

Long engine calls take a ``Progress`` and call ``progress.update(stage, fraction)``
between units of work. The dashboard passes one that draws a progress bar and whose
``should_cancel`` reads a button; the CLI passes one that prints; tests pass none.
``update`` raises :class:`CancelledError` as soon as cancellation is asked for, so
cancelling never leaves half-written state behind: callers only publish results
after the call returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from prefshap_core.errors import CancelledError, DeadlineExceeded

# An ETA from 2 % of the work on, or once the work has run this long at any progress:
# a 2^16-coalition interaction run reaches 2 % only after many minutes.
ETA_AFTER_S = 10.0


@dataclass(frozen=True)
class ProgressUpdate:
    stage: str
    fraction: float  # overall, in [0, 1]
    elapsed_s: float
    eta_s: float | None  # None until there is enough to extrapolate from


class Progress:
    """Reports overall progress with an ETA; raises CancelledError when asked to stop."""

    def __init__(
        self,
        callback: Callable[[ProgressUpdate], None] | None = None,
        should_cancel: Callable[[], bool] | None = None,
    ) -> None:
        self._callback = callback
        self._should_cancel = should_cancel
        self._start = time.perf_counter()

    def update(self, stage: str, fraction: float) -> None:
        if self._should_cancel is not None and self._should_cancel():
            raise CancelledError(f"cancelled during: {stage}")
        checkpoint()
        if self._callback is None:
            return
        fraction = min(max(float(fraction), 0.0), 1.0)
        elapsed = time.perf_counter() - self._start
        extrapolate = fraction > 0.02 or (fraction > 0 and elapsed >= ETA_AFTER_S)
        eta = elapsed * (1.0 - fraction) / fraction if extrapolate else None
        self._callback(ProgressUpdate(stage, fraction, elapsed, eta))

    def span(self, start: float, stop: float) -> Progress:
        """A child whose fractions 0..1 map onto start..stop of this one."""
        return _SubProgress(self, start, stop)


class _SubProgress(Progress):
    def __init__(self, parent: Progress, start: float, stop: float) -> None:
        self._parent = parent
        self._lo = start
        self._hi = stop

    def update(self, stage: str, fraction: float) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        self._parent.update(stage, self._lo + (self._hi - self._lo) * fraction)


class _Deadline(Progress):
    def __init__(self, parent: Progress, seconds: float, what: str) -> None:
        self._parent = parent
        self._deadline = time.monotonic() + seconds
        self._seconds = seconds
        self._what = what

    def update(self, stage: str, fraction: float) -> None:
        if time.monotonic() > self._deadline:
            raise DeadlineExceeded(f"{self._what} took more than {self._seconds:g} s ({stage})")
        self._parent.update(stage, fraction)


def with_deadline(progress: Progress | None, seconds: float, what: str) -> Progress:
    """``progress`` that raises :class:`DeadlineExceeded` at the first checkpoint after
    ``seconds`` (e.g. the demo preparation, which other visitors wait for)."""
    return _Deadline(ensure_progress(progress), seconds, what)


# The cancel request of the work running in this thread (a dashboard Job sets it), so
# that long loops deep in the engine can stop without a Progress passed down to them.
_CANCEL_REQUESTED: ContextVar[Callable[[], bool] | None] = ContextVar(
    "prefshap_cancel_requested", default=None
)


@contextmanager
def cancel_scope(should_cancel: Callable[[], bool]) -> Iterator[None]:
    """Within the block, :func:`checkpoint` raises CancelledError once ``should_cancel()``."""
    token = _CANCEL_REQUESTED.set(should_cancel)
    try:
        yield
    finally:
        _CANCEL_REQUESTED.reset(token)


def checkpoint() -> None:
    """Raise CancelledError if the work of this thread was asked to stop (cheap)."""
    should_cancel = _CANCEL_REQUESTED.get()
    if should_cancel is not None and should_cancel():
        raise CancelledError("cancelled")


def ensure_progress(progress: Progress | None) -> Progress:
    return progress if progress is not None else Progress()
