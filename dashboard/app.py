"""Pref-SHAP Studio: the Streamlit entry point (``streamlit run dashboard/app.py``).

It sets up the session, prepares the first-screen demo, and hands over to the page
the user picked. The pages are listed in ``dashboard/pages.py``; their scripts
(dashboard/views/*.py) are thin: they call ``services`` (cached engine calls) and
``components`` (widgets shared between pages).

Why ``views/`` and not ``pages/``: Streamlit treats a ``pages/`` folder next to the
entry point as a legacy (v1) multipage app until ``st.navigation`` has run once in
the process, so on a fresh server a first request for ``/data`` would run the page
file alone, without this script (no session set-up, no import path).
"""

from __future__ import annotations

import sys
from pathlib import Path

# `streamlit run dashboard/app.py` puts dashboard/ on sys.path, not the repository
# root; the root is needed to import `dashboard.*` and an uninstalled `prefshap_core`.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``). Training and explaining run in background threads
# next to the server, often two at once; threads that spin for long made the demo's
# training take 10-40 s instead of 1.5-2 s on a busy 2-core host.
import prefshap_core  # noqa: E402, F401

# isort: split

import streamlit as st  # noqa: E402

from dashboard import links, pages, sources, state  # noqa: E402
from dashboard.components.guard import run_guarded  # noqa: E402
from dashboard.components.progress import job_panel  # noqa: E402
from dashboard.components.text import md  # noqa: E402
from dashboard.network_guard import refuse_unless_local  # noqa: E402
from dashboard.services.cluster import cluster_executor  # noqa: E402
from dashboard.services.demo import ensure_demo  # noqa: E402
from dashboard.services.training import collect_finished_jobs, model_title  # noqa: E402
from prefshap_core.progress import Progress  # noqa: E402


def _prepare_demo() -> None:
    if state.demo_ready():
        return
    bar = st.progress(0.0, text="Preparing the demo (first visit only)…")

    def show(update) -> None:  # called in this thread, between engine steps
        bar.progress(update.fraction, text=f"Preparing the demo: {update.stage}")

    ensure_demo(Progress(callback=show), executor=cluster_executor())
    bar.empty()


def _sidebar(current: str) -> None:
    loaded = state.active()
    with st.sidebar:
        if loaded is not None:
            st.caption("Dataset")
            st.markdown(
                f"**{md(loaded.title)}**  \n{loaded.data.n_items:,} items · "
                f"{loaded.data.n_duels:,} duels"
            )
            model = state.model_for(loaded)
            if model is not None:
                auc = model.result.metrics["test"]["roc_auc"]
                st.caption(f"Model: {model_title(model.kind)} · test ROC AUC {auc:.3f}")
            else:
                st.caption("No model trained on it yet.")
        # Work started on another page keeps running; show it wherever the user is.
        for job in state.running_jobs():
            if job.page != current:
                job_panel(job, compact=True)


def main() -> None:
    # Before anything is served: listening on every interface by accident (started
    # from another folder, so without .streamlit/config.toml) serves only a message.
    refuse_unless_local()
    st.set_page_config(
        page_title="Pref-SHAP Studio",
        page_icon="⚖️",  # drawn in the browser; a :material: favicon is fetched from Google
        layout="wide",
    )
    state.init()
    run_guarded(sources.restore_from_url)  # a reload: this session's dataset and model
    state.bind_jobs()  # a reload within jobs.ABANDON_AFTER_S: this session's jobs again
    for job in state.running_jobs():  # this session is still here: keep its jobs
        job.touch()
    collect_finished_jobs()
    built = {view: view.page() for view in pages.ALL}  # this run's own st.Page objects
    page = st.navigation(list(built.values()))
    current = next(view for view, made in built.items() if made is page)
    run_guarded(_prepare_demo)
    run_guarded(links.apply)  # a new URL opens the view it describes
    run_guarded(lambda: _sidebar(current.url_path))
    page.run()
    run_guarded(sources.remember_session)  # what a reload restores; the URL's token
    state.bind_jobs()  # the token may be new (a first record, another dataset)


main()
