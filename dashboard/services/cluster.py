"""Where explanations run: on the Dask cluster named by the environment, if any.

Pages read it once per run (:func:`cluster_executor`) and pass it in their requests;
the numbers, and so the cache keys, are the same either way.
"""

from __future__ import annotations

import os

import streamlit as st

from prefshap_core.explain.dask_executor import DaskExecutor

# A Dask scheduler (tcp://HOST:8786): when set, explanations run on its cluster.
CLUSTER_ENV = "PREFSHAP_DASK_SCHEDULER"


def cluster_address() -> str | None:
    """The Dask scheduler named by ``PREFSHAP_DASK_SCHEDULER``, or None (in-process)."""
    return os.environ.get(CLUSTER_ENV, "").strip() or None


@st.cache_resource(show_spinner=False)
def _cluster(address: str) -> DaskExecutor:
    return DaskExecutor(address)  # connects on first use, from the job's thread


def cluster_executor() -> DaskExecutor | None:
    """One executor per scheduler for the whole server (progress and cancel go through
    it as in-process), or None: in this process."""
    address = cluster_address()
    return None if address is None else _cluster(address)
