"""Shapley values from coalition values: which coalitions, and the estimators.

``coalitions`` enumerates or samples coalitions; ``exact`` maps the values of all
``2^p`` coalitions to Shapley values; ``sampled`` estimates them (with standard
errors) from sampled coalitions. Every estimator splits over batches of coalitions
(``partial`` per batch, ``finish`` on the ordered list), which is the executor seam.
"""

from prefshap_core.explain.shapley.coalitions import (
    CoalitionSet,
    all_coalitions,
    choose_coalitions,
    coalition_count,
    sample_paired_coalitions,
)
from prefshap_core.explain.shapley.exact import ExactShapley, exact_shapley_matrix
from prefshap_core.explain.shapley.sampled import KernelShapley

__all__ = [
    "CoalitionSet",
    "ExactShapley",
    "KernelShapley",
    "all_coalitions",
    "choose_coalitions",
    "coalition_count",
    "exact_shapley_matrix",
    "sample_paired_coalitions",
]
