"""Per-group lengthscales: a coordinate search on a subsample, after the grid search.

One lengthscale scale multiplies every column's median-heuristic lengthscale, so the
grid search cannot tell a deciding feature from noise: on the paper's clusters game
the cluster indicators want short lengthscales and the continuous features long ones
(test ROC AUC 0.9971 with one scale, 0.9996 refined); on Pokémon, Speed wants a
quarter of its heuristic lengthscale (0.967 -> 0.984). The search below doubles or
halves one feature group's lengthscales at a time (item groups, then for a C-GPM
the context groups, whose heuristic lengthscales the grid does not search at all)
and keeps a change when it lowers the validation loss of a small seeded fit (a few
thousand duels, a few hundred centres: about 0.1 s per candidate on two cores).
Groups, not columns, because a group is what the explanations call one player, and
a one-hot categorical's columns are one thing. The model file needs nothing new: its
``lengthscales`` are per column (ARD) already (docs/method.md, "Hyperparameters").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.metrics import log_losses
from prefshap_core.models.hyperparameters import SearchPoint
from prefshap_core.progress import Progress

if TYPE_CHECKING:  # search calls this module: a runtime import would be a cycle
    from prefshap_core.models.search import PathFitter

# The subsample every candidate is fitted on (seeded, drawn from train / validation).
REFINE_TRAIN_DUELS = 5000
REFINE_VALIDATION_DUELS = 2500
REFINE_CENTRES = 300
# Below this many validation duels the loss differences are mostly noise: no search.
REFINE_MIN_VALIDATION_DUELS = 500
REFINE_FACTORS = (2.0, 0.5)  # tried in this order; the first that helps is kept
REFINE_SWEEPS = 3  # passes over the groups; a pass that changes nothing ends the search
REFINE_MIN_GAIN = 1e-4  # validation log loss a change must save
REFINE_LIMIT = 16.0  # a group's factor stays within [1/16, 16] of where it started


@dataclass(frozen=True)
class GroupFactors:
    """Multipliers of each feature group's lengthscales (1: as the grid chose)."""

    items: dict[str, float]
    contexts: dict[str, float]

    @classmethod
    def ones(cls, item_space: FeatureSpace, context_space: FeatureSpace | None) -> GroupFactors:
        contexts = {} if context_space is None else dict.fromkeys(context_space.group_names, 1.0)
        return cls(dict.fromkeys(item_space.group_names, 1.0), contexts)

    def is_identity(self) -> bool:
        return all(f == 1.0 for f in (*self.items.values(), *self.contexts.values()))

    def changed(self, table: str, group: str, factor: float) -> GroupFactors:
        items, contexts = dict(self.items), dict(self.contexts)
        target = items if table == "item" else contexts
        target[group] *= factor
        return GroupFactors(items, contexts)


@dataclass(frozen=True)
class GroupRefinement:
    """What the group search found: the factors, every scored candidate (the first is
    the start), and the per-duel validation losses of the kept factors' fit (the
    column search's start is judged against these, not fitted again)."""

    factors: GroupFactors
    points: list[SearchPoint]
    validation_losses: np.ndarray


def clearly_better(losses: np.ndarray, best: np.ndarray) -> bool:
    """Lower mean loss by more than REFINE_MIN_GAIN and one paired standard error.

    The standard error keeps the search from following noise (on tennis, changes
    worth 0.001 validation log loss on the subsample did not carry over to the
    full fit); large gains (Pokémon's Speed: 0.05) pass easily.
    """
    diff = losses - best
    bar = REFINE_MIN_GAIN
    if len(diff) > 1:
        bar = max(bar, float(diff.std(ddof=1)) / np.sqrt(len(diff)))
    return float(diff.mean()) < -bar


def with_factors(fitter: PathFitter, factors: GroupFactors) -> PathFitter:
    """``fitter`` with each group's lengthscales (per column) times its factor."""
    data = fitter.data
    items = fitter.base_lengthscales * column_factors(data.item_space, factors.items)
    contexts = fitter.context_lengthscales
    if fitter.kind == "cgpm" and contexts is not None:
        assert data.context_space is not None
        contexts = contexts * column_factors(data.context_space, factors.contexts)
    return replace(fitter, base_lengthscales=items, context_lengthscales=contexts)


def column_factors(space: FeatureSpace, factors: dict[str, float]) -> np.ndarray:
    """Per-column multipliers from per-group ones (groups missing from ``factors``: 1)."""
    by_group = np.array([factors.get(name, 1.0) for name in space.group_names])
    return by_group[np.asarray(space.feature_group)]


def refine_group_lengthscales(
    fitter: PathFitter,
    train: np.ndarray,
    validation: np.ndarray,
    scale: float,
    utility_weight: float,
    penalties: list[float],
    progress: Progress,
) -> GroupRefinement:
    """Coordinate search over group factors at a fixed scale and utility weight.

    Every scored candidate is a point of stage ``"refine"`` (the change in ``note``;
    the first point is the start). Each candidate is scored by the best point of its
    penalty path, as the grid's points are.
    """
    data = fitter.data
    context_space = data.context_space if fitter.kind == "cgpm" else None
    sub_train, sub_val = fitter.subsample(
        train, validation, REFINE_TRAIN_DUELS, REFINE_VALIDATION_DUELS, stream=3
    )
    blocks = [("item", name) for name in data.item_space.group_names]
    if context_space is not None:
        blocks += [("context", name) for name in context_space.group_names]
    n_candidates = 1 + REFINE_SWEEPS * len(blocks) * len(REFINE_FACTORS)
    points: list[SearchPoint] = []

    y_val = data.y[sub_val].astype(np.float64)

    def score(factors: GroupFactors, note: str) -> np.ndarray:
        """Per-duel validation losses of the candidate's best penalty step."""
        trial = with_factors(fitter, factors)
        step = progress.span(len(points) / n_candidates, (len(points) + 1) / n_candidates)
        step.update(f"Refining group lengthscales: {note}", 0.0)
        results = trial.fit(
            sub_train, sub_val, [scale], penalties, step,
            n_centres=REFINE_CENTRES, utility_weights=[utility_weight],
        )  # fmt: skip
        best = min(results, key=lambda r: fitter.loss_of(r.point))
        seconds = sum(r.point.seconds for r in results)  # the candidate's whole path
        points.append(replace(best.point, stage="refine", note=note, seconds=seconds))
        if fitter.loss != "logistic":  # ranked by AUC: no per-duel loss
            return np.array([fitter.loss_of(best.point)])
        return log_losses(y_val, best.validation_g)

    factors = GroupFactors.ones(data.item_space, context_space)
    best_losses = score(factors, "start")
    for _ in range(REFINE_SWEEPS):
        improved = False
        for table, group in blocks:
            current = (factors.items if table == "item" else factors.contexts)[group]
            for factor in REFINE_FACTORS:
                if not 1 / REFINE_LIMIT <= current * factor <= REFINE_LIMIT:
                    continue
                candidate = factors.changed(table, group, factor)
                losses = score(candidate, f"{group} x{factor:g}")
                if clearly_better(losses, best_losses):
                    factors, best_losses, improved = candidate, losses, True
                    break
        if not improved:
            break
    progress.update("Group lengthscales refined", 1.0)
    return GroupRefinement(factors, points, best_losses)
