"""Analyses of a fitted preference function and its data (no Streamlit, no plotting).

Of the model as a whole: :mod:`intransitivity`, :mod:`triangles`, :mod:`explorer`,
:mod:`context_condition`. The analyst's questions:

- :mod:`contexts`: which observed contexts share a category of a context group.
- :mod:`head_to_head`: P(A beats B) under each observed context value and averaged,
  for pool items or hypothetical covariate rows, and the pair's past meetings.
- :mod:`pairwise`: model preferences of many items against an opponent pool at once.
- :mod:`rankings`: items by model-implied mean win probability, with their record and
  a utility score (a UPM's f(x), or a Bradley-Terry fit of the record).
- :mod:`bradley_terry`: maximum-likelihood Bradley-Terry scores of a win/loss record.
- :mod:`covariates`: raw item covariates <-> model-space rows (the what-if editor).
- :mod:`groups`: duels between two groups of items, oriented to one of them.
- :mod:`utility_split`: how much of g on a dataset's duels is the sum kernel's utility
  part and how much its intransitive part.
"""
