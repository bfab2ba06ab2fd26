"""Early stopping of a penalty path on validation (``PathFitter.patience``)."""

from dataclasses import replace

import numpy as np

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import gpm_generated
from prefshap_core.models.hyperparameters import (
    CG_ITERATIONS,
    FINAL_PATH_PATIENCE,
    PENALTY_PATH,
    median_lengthscales,
)
from prefshap_core.models.search import PathFitter, select_on_holdout
from prefshap_core.progress import ensure_progress
from prefshap_core.solvers.options import SolverOptions


def _fitter(data) -> PathFitter:
    return PathFitter(
        kind="gpm", loss="logistic", data=data,
        base_lengthscales=median_lengthscales(data.items), context_lengthscales=None,
        compute=Compute(), solver=SolverOptions(), seed=0, n_centres=150,
        iterations=dict(zip(PENALTY_PATH, CG_ITERATIONS, strict=True)),
    )  # fmt: skip


def test_a_path_stops_after_patience_worse_steps_and_keeps_its_best_point():
    # Few duels for many centres: the fit overfits as the penalty falls, so the
    # validation loss has a minimum inside the path.
    data = gpm_generated(n_items=60, n_duels=700, d=3, n_relevant=2, seed=3)
    split = split_duels(data.n_duels, 0)
    full_fitter = _fitter(data)
    full = full_fitter.fit(
        split.train, split.validation, [2.0], list(PENALTY_PATH), ensure_progress(None)
    )
    losses = [r.point.validation_log_loss for r in full]
    best = int(np.argmin(losses))
    assert best < len(losses) - 2, losses  # the case: worse steps after the best
    stopped = replace(full_fitter, patience=2).fit(
        split.train, split.validation, [2.0], list(PENALTY_PATH), ensure_progress(None)
    )
    # The same steps up to two past the best (then two worse in a row): the same alphas.
    assert len(stopped) == best + 3
    for a, b in zip(stopped, full, strict=False):
        assert a.point.penalty == b.point.penalty
        assert a.point.validation_log_loss == b.point.validation_log_loss
        assert np.array_equal(a.alpha.numpy(), b.alpha.numpy())
    chosen = min(stopped, key=lambda r: r.point.validation_log_loss).point
    assert chosen.penalty == full[best].point.penalty


def test_patience_never_stops_a_path_that_keeps_improving():
    fitter = replace(_fitter(gpm_generated(n_items=60, n_duels=200, seed=0)), patience=2)

    def results(losses):
        return [
            type("R", (), {"point": type("P", (), {"validation_log_loss": v})()})() for v in losses
        ]

    assert not fitter._past_patience(results([0.7, 0.6, 0.5, 0.45]))
    assert not fitter._past_patience(results([0.7, 0.6, 0.65, 0.55]))  # a new best
    assert fitter._past_patience(results([0.7, 0.6, 0.65, 0.61]))
    assert not fitter._past_patience(results([0.7, float("nan"), float("nan")]))
    assert not replace(fitter, patience=None)._past_patience(results([0.5, 0.6, 0.7, 0.8]))


def test_the_final_path_ends_at_its_first_step_worse_than_its_best():
    """select_on_holdout's final fit (one scale and weight) stops one step past its
    best (FINAL_PATH_PATIENCE), and chooses what the whole path would have."""
    data = gpm_generated(n_items=60, n_duels=700, d=3, n_relevant=2, seed=3)
    split = split_duels(data.n_duels, 0)
    fitter = _fitter(data)
    whole = fitter.fit(
        split.train, split.validation, [2.0], list(PENALTY_PATH), ensure_progress(None)
    )
    best = int(np.argmin([r.point.validation_log_loss for r in whole]))
    assert best < len(whole) - 2  # the case: worse steps after the best
    record, chosen, _ = select_on_holdout(
        fitter, split.train, split.validation, [2.0], list(PENALTY_PATH), ensure_progress(None)
    )
    assert FINAL_PATH_PATIENCE == 1 and len(record.points) == best + 2
    assert record.chosen.penalty == whole[best].point.penalty
    assert np.array_equal(chosen.alpha.numpy(), whole[best].alpha.numpy())
