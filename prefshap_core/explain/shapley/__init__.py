"""Shapley values from coalition values: which coalitions, and the estimators.

``coalitions`` enumerates or samples coalitions; ``exact`` maps the values of all
``2^p`` coalitions to Shapley values; ``stratified`` samples coalitions in
complementary pairs, stratified by size, and ``sampled`` estimates the values (with
standard errors) from them. Every estimator splits over batches of coalitions
(``partial`` per batch, ``finish`` on the ordered list), which is the executor seam.
"""

from prefshap_core.explain.shapley.coalitions import (
    CoalitionSet,
    all_coalitions,
    choose_coalitions,
    coalition_count,
)
from prefshap_core.explain.shapley.exact import ExactShapley, exact_shapley_matrix
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import (
    SampledCoalitions,
    sample_stratified_coalitions,
)

__all__ = [
    "CoalitionSet",
    "ExactShapley",
    "SampledCoalitions",
    "SampledShapley",
    "all_coalitions",
    "choose_coalitions",
    "coalition_count",
    "exact_shapley_matrix",
    "sample_stratified_coalitions",
]
