"""The dashboard's calls into the engine, with caching decided once, here.

- Parsed data: ``st.cache_data`` (see :mod:`dashboard.sources`).
- Models: the disk cache (:mod:`.stores`, ``prefshap_core.cache``, keyed by data and
  settings fingerprints), so a reload, a second visitor or a restarted server reuses
  them.
- Explanations: one cache (:mod:`.explanation_cache`) keyed by an explicit request
  (:mod:`.explain_requests`): an in-process store in front of the disk cache, and the
  explainers that keep their factorizations.
- Long work runs as a background :class:`~dashboard.jobs.Job`; its worker writes the
  caches itself, so a result is kept even if the user leaves the page meanwhile.

No maths here: everything numerical is a ``prefshap_core`` call. Pages import what
they use from its module:

- :mod:`.stores`: the disk cache;
- :mod:`.training`: training (cached or as a job), model names, cached models;
- :mod:`.cluster`: the Dask cluster named by the environment, if any;
- :mod:`.explain_requests`: what to explain (capped or inline duels, precision, key);
- :mod:`.explanation_cache`: the explanation cache;
- :mod:`.explain_jobs`: explanations and interaction values as jobs;
- :mod:`.demo`: the first screen's demo;
- :mod:`.pair_explanations`: any pair (Head-to-head, what-if);
- :mod:`.analyses`: intransitivity, rankings, the utility and intransitive parts of g.
"""
