"""Pref-SHAP explanations: Shapley values of item and context features of duels."""

from prefshap_core.explain.cme import (
    DEFAULT_CME_LAMBDA,
    DEFAULT_CONTEXT_CME_LAMBDA,
    CholeskySolver,
    CMESolver,
    CMESystem,
    EngineStats,
)
from prefshap_core.explain.cme_lambda import choose_cme_lambda, cme_lambda_scores
from prefshap_core.explain.coalitions import (
    CoalitionSet,
    all_coalitions,
    sample_paired_coalitions,
)
from prefshap_core.explain.explainer import (
    DEFAULT_MAX_EXACT_PLAYERS,
    explain_context,
    explain_items,
)
from prefshap_core.explain.explanation import Explanation

__all__ = [
    "DEFAULT_CME_LAMBDA",
    "DEFAULT_CONTEXT_CME_LAMBDA",
    "DEFAULT_MAX_EXACT_PLAYERS",
    "CMESolver",
    "CMESystem",
    "CholeskySolver",
    "CoalitionSet",
    "EngineStats",
    "Explanation",
    "all_coalitions",
    "choose_cme_lambda",
    "cme_lambda_scores",
    "explain_context",
    "explain_items",
    "sample_paired_coalitions",
]
