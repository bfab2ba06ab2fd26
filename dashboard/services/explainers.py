"""The server's explainers: one per model and options, on a Dask cluster if one is named.

Each explainer keeps its coalitions' factorizations, so later explanations between the
same pool are cheap; sharing it across sessions is what makes that pay.
"""

from __future__ import annotations

import os

import streamlit as st

from dashboard import state
from prefshap_core.explain import Explainer, ExplainOptions
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
