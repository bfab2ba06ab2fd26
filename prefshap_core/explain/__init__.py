"""Pref-SHAP explanations: Shapley values of item and context features of duels.

    from prefshap_core.explain import Explainer, ExplainOptions
    explanation = Explainer(fn, ExplainOptions(what="items"))(left, right)

Sub-packages by role (docs/method.md has the maths): ``games`` (value functions),
``cme`` (conditional mean embeddings and their backends), ``shapley`` (coalitions
and estimators); ``executor`` is where coalition batches run.
"""

from prefshap_core.explain.cme.base import EngineStats
from prefshap_core.explain.cme.regulariser import (
    LambdaSearch,
    choose_cme_lambda,
    cme_lambda_scores,
)
from prefshap_core.explain.coalition_table import CoalitionTable
from prefshap_core.explain.executor import Executor, LocalExecutor
from prefshap_core.explain.explainer import Explainer
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.options import (
    ENGINE_VERSION,
    AutoOptions,
    CGOptions,
    CholeskyOptions,
    CMEOptions,
    ExplainOptions,
    NystromOptions,
    Shapley,
    auto_exact_players,
    cme_options,
    default_samples,
)
from prefshap_core.explain.shapley.coalitions import CoalitionSet, all_coalitions
from prefshap_core.explain.shapley.stratified import SampledCoalitions, sample_stratified_coalitions
from prefshap_core.models.hyperparameters import DEFAULT_CME_LAMBDA, DEFAULT_CONTEXT_CME_LAMBDA

__all__ = [
    "DEFAULT_CME_LAMBDA",
    "DEFAULT_CONTEXT_CME_LAMBDA",
    "ENGINE_VERSION",
    "AutoOptions",
    "CGOptions",
    "CMEOptions",
    "CholeskyOptions",
    "CoalitionSet",
    "CoalitionTable",
    "EngineStats",
    "Executor",
    "ExplainOptions",
    "Explainer",
    "Explanation",
    "LambdaSearch",
    "LocalExecutor",
    "NystromOptions",
    "SampledCoalitions",
    "Shapley",
    "all_coalitions",
    "auto_exact_players",
    "choose_cme_lambda",
    "cme_lambda_scores",
    "cme_options",
    "default_samples",
    "sample_stratified_coalitions",
]
