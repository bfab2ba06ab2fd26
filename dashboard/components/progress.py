"""Progress of a background job: bar, stage, elapsed time, ETA and a Cancel button.

The panel is an ``st.fragment(run_every=...)``: it redraws itself every second while
the job is young and every 3 s after (see POLL_SECONDS) without rerunning the page,
and when the job ends it reruns the whole app so the page shows the result. Pages
draw it only for running jobs, so a finished job never triggers a rerun loop.
"""

from __future__ import annotations

import streamlit as st

from dashboard import state
from dashboard.components.guard import run_guarded, show_error
from dashboard.components.text import md
from dashboard.jobs import Job

# Each poll is a fragment rerun, and reruns slow the job's thread far beyond their
# own CPU (~1 % of a core): on a loaded 2-core host (load ~21) a sample-data training
# took 287 s polled every 0.5 s and 14 s polled every 3 s (the CLI: 6-14 s). So a job
# is polled often only while it is young (a short job's result shows at once), then
# every SLOW_POLL_SECONDS. A Cancel click reruns at once, whatever the interval.
POLL_SECONDS = 1.0
FAST_FOR_S = 4.0
SLOW_POLL_SECONDS = 3.0


def describe(job: Job) -> str:
    """E.g. 'Training GPM: fitting (penalty 1e-3), 40% · 12 s elapsed · about 18 s left'."""
    update = job.update
    parts = [md(job.label) + (f": {md(update.stage)}" if update is not None else ": starting")]
    percent = 0 if update is None else round(100 * update.fraction)
    timing = f"{percent}% · {job.elapsed_s:.0f} s elapsed"
    if update is not None and update.eta_s is not None:
        timing += f" · about {_duration(update.eta_s)} left"
    if job.cancel_requested and not job.finished:
        timing += " · cancelling at the next checkpoint…"
    return f"{parts[0]} — {timing}"


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 1):.0f} s"
    return f"{seconds / 60:.1f} min"


def _poll(job_key: str, compact: bool, *, young: bool) -> None:
    job = state.job(job_key)
    if job is None:
        return
    job.touch()  # polled every few seconds while the tab is open (jobs.ABANDON_AFTER_S)
    if job.finished or (young and job.elapsed_s >= FAST_FOR_S):
        st.rerun()  # the whole app: the result (or the failure), or the slow panel
    # A fragment rerun does not pass through the page's guard: guard it here.
    run_guarded(lambda: _draw(job, compact))


@st.fragment(run_every=POLL_SECONDS)
def _young_panel(job_key: str, compact: bool) -> None:
    _poll(job_key, compact, young=True)


@st.fragment(run_every=SLOW_POLL_SECONDS)
def _panel(job_key: str, compact: bool) -> None:
    _poll(job_key, compact, young=False)


def _draw(job: Job, compact: bool) -> None:
    job_key = job.key
    fraction = 0.0 if job.update is None else job.update.fraction
    st.progress(min(max(fraction, 0.0), 1.0), text=describe(job))
    st.button(
        "Cancel",
        key=f"cancel:{job_key}:{'sidebar' if compact else 'main'}",
        on_click=job.cancel,
        disabled=job.cancel_requested,
        icon=":material/cancel:",
        help="Stops at the engine's next checkpoint; nothing half-done is kept.",
    )


def job_panel(job: Job, *, compact: bool = False) -> None:
    """Live progress of a running job (call only while ``not job.finished``)."""
    if job.elapsed_s < FAST_FOR_S:
        _young_panel(job.key, compact)
    else:
        _panel(job.key, compact)


def job_outcome(job: Job, *, what: str) -> bool:
    """Say how a finished job ended when it did not succeed; True when it succeeded.

    ``what`` names the work for the message, e.g. "Training".
    """
    if job.state == "done":
        return True
    if job.state == "cancelled":
        st.info(f"{md(what)} was cancelled after {job.elapsed_s:.0f} s.", icon=":material/cancel:")
    elif job.state == "failed" and job.error is not None:
        show_error(job.error, job.error_details)
    return False
