"""The dashboard's calls into the engine, with caching decided once, here.

- Parsed data: ``st.cache_data`` (see :mod:`dashboard.sources`).
- Models and explanations: the disk cache (``prefshap_core.cache``, keyed by data and
  settings fingerprints) so a reload, a second visitor or a restarted server reuses
  them, plus a small in-process store of explanations (``st.cache_resource``) so
  switching between views does not even read the disk.
- Long work runs as a background :class:`~dashboard.jobs.Job`; its worker writes the
  caches itself, so a result is kept even if the user leaves the page meanwhile.

No maths here: everything numerical is a ``prefshap_core`` call. Pages call
``services.X``; each X lives in one module of this package:

- :mod:`.stores`: the disk cache and the in-process explanation store;
- :mod:`.training`: training (cached or as a job), model names, models by fingerprint;
- :mod:`.explainers`: the server's explainers, on a Dask cluster if one is named;
- :mod:`.explain_requests`: what to explain (capped duels, precision, cache key);
- :mod:`.explain_jobs`: explanations and interaction values, from the caches or as jobs;
- :mod:`.demo`: the first screen's demo (its timeout ``DEMO_TIMEOUT_S`` is read there);
- :mod:`.pair_explanations`: any pair (Head-to-head, what-if);
- :mod:`.analyses`: intransitivity, rankings, the utility and intransitive parts of g.
"""

from __future__ import annotations

from dashboard.services.analyses import (
    decision_parts,
    has_parts,
    intransitivity,
    model_rankings,
    scored_cycles,
)
from dashboard.services.demo import DEMO_SETTINGS, DEMO_SETTINGS_FP, ensure_demo
from dashboard.services.explain_jobs import (
    cached_explanation,
    duel_from_earlier,
    explain_job_key,
    explain_now,
    explanation_or_job,
    forget_job,
    interactions_or_job,
)
from dashboard.services.explain_requests import (
    DEFAULT_EXPLAIN_CAP,
    ExplainRequest,
    Precision,
    request,
    session_precision,
)
from dashboard.services.explainers import (
    CLUSTER_ENV,
    cluster_address,
    cluster_executor,
    explainer_for,
)
from dashboard.services.pair_explanations import explain_pair
from dashboard.services.stores import ExplanationStore, Owner, disk_cache, explanation_store
from dashboard.services.training import (
    MODEL_TITLES,
    cached_model,
    collect_finished_jobs,
    model_by_fingerprint,
    model_description,
    model_title,
    start_training,
    train_now,
    training_job_key,
)

# Not re-exported: DEMO_TIMEOUT_S, which a test patches, so that a patch of it here
# (which the demo would not see) cannot pass silently; patch dashboard.services.demo.
__all__ = [
    "CLUSTER_ENV",
    "DEFAULT_EXPLAIN_CAP",
    "DEMO_SETTINGS",
    "DEMO_SETTINGS_FP",
    "MODEL_TITLES",
    "ExplainRequest",
    "ExplanationStore",
    "Owner",
    "Precision",
    "cached_explanation",
    "cached_model",
    "cluster_address",
    "cluster_executor",
    "collect_finished_jobs",
    "decision_parts",
    "disk_cache",
    "duel_from_earlier",
    "ensure_demo",
    "explain_job_key",
    "explain_now",
    "explain_pair",
    "explainer_for",
    "explanation_or_job",
    "explanation_store",
    "forget_job",
    "has_parts",
    "interactions_or_job",
    "intransitivity",
    "model_by_fingerprint",
    "model_description",
    "model_rankings",
    "model_title",
    "request",
    "scored_cycles",
    "session_precision",
    "start_training",
    "train_now",
    "training_job_key",
]
