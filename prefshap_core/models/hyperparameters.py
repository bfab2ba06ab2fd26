"""Automatic hyperparameters: median-heuristic lengthscales, then a validation search.

Lengthscales start from the per-column median heuristic; one *lengthscale scale*
multiplies all of them (an ARD product over d columns at their medians gives
exp(-d/2), so the useful scale grows like the square root of the number of feature
groups). The utility weight of the GPM's sum kernel is searched with it. Then each
feature group's lengthscales are refined by a cheap coordinate search
(``models.refine``). The penalty is chosen along the solver's decreasing penalty
path at no extra cost: each Newton step (or warm-started squared-loss fit) is scored
on the validation duels. Every value can be fixed by the user instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from prefshap_core.kernels.rbf import median_heuristic

# CME regularisers of explanations (docs/method.md, "Regularisers"): the model file's
# default until the workflow chooses one by held-out CME error.
DEFAULT_CME_LAMBDA = 1e-2
DEFAULT_CONTEXT_CME_LAMBDA = 1e-3
# Multipliers of sqrt(number of feature groups) tried for the lengthscale scale. The
# small ones matter for nearly rankable games (tennis: the UPM gains 0.01 AUC at 0.5).
SCALE_FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
# Utility weights w of the GPM / C-GPM sum kernel k_E + w k_UPM tried by the search:
# 0 is the plain GPM; large w lets the utility part fit with little penalty, so the
# model can be as good as the UPM on a rankable game.
UTILITY_WEIGHTS = (0.0, 1.0, 10.0, 100.0, 1000.0)
# Decreasing penalties of the path, with CG iterations per step (LogisticFalkon style:
# few iterations while the penalty is large, more as it shrinks).
PENALTY_PATH = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
CG_ITERATIONS = (5, 5, 10, 10, 15, 20, 25)
# The UPM's path goes two steps further. The GPM's sum kernel k_E + w k_UPM penalises
# its utility part by lam / w, down to 1e-7 / 1000 over the searched weights; the UPM
# has no weight, and its validation log loss still fell past 1e-7 (tennis seed 1:
# 0.6236 at 1e-7, 0.6224 at 1e-8, test ROC AUC 0.7129 -> 0.7154; seed 3 chose 1e-9,
# 0.7189 -> 0.7207; 1e-10 and 1e-11 gained at most 4e-5 more). The GPM's own path stays:
# on the deterministic clusters game its log loss keeps falling past 1e-7 while its
# ROC AUC falls too (0.9995 at 1e-7, 0.9987 at 1e-9).
UPM_PENALTY_PATH = (*PENALTY_PATH, 1e-8, 1e-9)
UPM_CG_ITERATIONS = (*CG_ITERATIONS, 30, 35)
SEARCH_SMALLEST_PENALTY = 1e-7


def search_penalties(penalties: list[float]) -> list[float]:
    """The path of a search stage: ``penalties`` down to ``SEARCH_SMALLEST_PENALTY`` (all
    of them when none is that large)."""
    kept = [p for p in penalties if p >= SEARCH_SMALLEST_PENALTY]
    return kept or list(penalties)


# Hold-out selection ends a penalty path once this many steps in a row scored worse
# on validation than the path's best (``PathFitter.patience``).
PATH_PATIENCE = 2
# ... except the final fit's own path (one scale and weight, every training duel),
# which ends at its first step worse than its best. Its steps past the best are the
# dearest of the training (tennis C-GPM: 1.1-1.3 s of a 4.2 s path), and on none of
# 25 final paths traced to their end (tennis UPM, GPM and C-GPM seeds 0-2; Pokémon GPM
# and UPM seeds 0-4; the 10,000-duel set's GPM and UPM seeds 0-1) did a later step
# beat the best after a worse one. (The cheap subsample paths keep 2: with 1, five of
# those traced would have stopped short of their best, three of them not with 2.)
FINAL_PATH_PATIENCE = 1
# Up to this many train + validation duels, hyperparameters are chosen by K-fold
# cross-validation instead of on the (then tiny) validation split.
CV_MAX_DUELS = 2000
CV_FOLDS = 5
# At every size the grid of lengthscale scales and utility weights is ranked with
# few centres, on a seeded subsample of at most this many duels (all of them on
# small data); only the winner is fitted at full size (hold-out selection). The
# refinement's sizes (5,000 / 2,500 duels, 300 centres) cost 9x less per point and
# chose the same on Pokémon, but another utility weight on tennis (test ROC AUC
# 0.670 instead of 0.704).
SUBSAMPLE_TRAIN_DUELS = 10000
SUBSAMPLE_VALIDATION_DUELS = 5000
SUBSAMPLE_CENTRES = 500
# At most this share of the training duels are Nyström centres: beyond it the
# centres cost an O(M^3) factorisation per Newton step and fit nothing new (on
# small data M = n_train made a 3,000-duel set train slower than 50,000 duels).
MAX_CENTRE_SHARE = 0.5
# ... except that up to this many centres are always allowed (at most every duel): their
# factorisation is cheap (500^3 flops), and on tiny data the share cost capacity
# (chameleons, 5-fold CV AUC 0.872 with half the duels as centres, 0.902 with all).
UNCAPPED_CENTRES = 500


def median_lengthscales(x: np.ndarray, seed: int = 0) -> np.ndarray:
    """Per-column median heuristic on model-space rows (items or unique contexts)."""
    return median_heuristic(x, seed=seed)


def centre_count(n_centres: int, n_train: int) -> int:
    """The number of Nyström centres of a fit on ``n_train`` duels: the asked
    ``n_centres``, at most ``MAX_CENTRE_SHARE`` of the duels or ``UNCAPPED_CENTRES``,
    whichever is larger, and never more than the duels (at least one)."""
    cap = max(int(n_train * MAX_CENTRE_SHARE), min(n_train, UNCAPPED_CENTRES))
    return max(1, min(n_centres, cap))


def scale_candidates(n_groups: int, factors: tuple[float, ...] = SCALE_FACTORS) -> list[float]:
    base = float(np.sqrt(max(n_groups, 1)))
    return [base * f for f in factors]


@dataclass(frozen=True)
class SearchPoint:
    """One scored point of the search: a lengthscale scale, a penalty, a utility weight."""

    lengthscale_scale: float
    penalty: float
    validation_log_loss: float
    validation_auc: float
    seconds: float
    stage: str = "full"  # "subsample": a cheap ranking of scales before the full fit;
    # "refine": a candidate of the group lengthscale search (models.refine)
    utility_weight: float = 0.0
    note: str = ""  # refine: which group's lengthscales changed ("Speed x0.5")


@dataclass
class SearchRecord:
    """Everything scored during fit, for the user to inspect (and the model metadata)."""

    points: list[SearchPoint] = field(default_factory=list)
    chosen: SearchPoint | None = None
    criterion: str = "validation_log_loss"
    selection: str = "holdout"  # or "<K>-fold cv"
    # Multipliers of each group's lengthscales found by models.refine (empty: none run).
    item_group_factors: dict[str, float] = field(default_factory=dict)
    context_group_factors: dict[str, float] = field(default_factory=dict)

    def as_rows(self) -> list[dict[str, float | str]]:
        return [vars(p).copy() for p in self.points]
