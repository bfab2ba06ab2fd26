"""The held-out dispersion of the posterior: the calibration slope and the factor c."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.models.posterior_calibration import (
    MAX_CALIBRATION_DUELS,
    MIN_CALIBRATION_DUELS,
    calibration_slope,
    dispersion,
    with_holdout_dispersion,
)


def _outcomes(g: np.ndarray, slope: float, seed: int = 0) -> np.ndarray:
    p = 1.0 / (1.0 + np.exp(-slope * g))
    return np.where(np.random.default_rng(seed).random(len(g)) < p, 1, -1)


def test_calibration_slope_recovers_a_known_shrinkage():
    g = np.random.default_rng(1).normal(0.0, 2.0, 40_000)
    for slope in (0.7, 1.0, 1.5):
        assert abs(calibration_slope(g, np.zeros_like(g), _outcomes(g, slope)) - slope) < 0.05


def test_calibration_slope_folds_in_the_posterior_spread():
    # Outcomes drawn from sigmoid(g + e), e ~ N(0, sd^2): on average sigmoid(g / k), so
    # with the spread folded in the slope is 1, without it below 1.
    rng = np.random.default_rng(2)
    g, sd = rng.normal(0.0, 2.0, 40_000), np.full(40_000, 1.5)
    y = _outcomes(g + sd * rng.standard_normal(len(g)), 1.0, seed=3)
    assert abs(calibration_slope(g, sd, y) - 1.0) < 0.05
    assert calibration_slope(g, np.zeros_like(g), y) < 0.85


def test_dispersion_matches_the_mean_square_error_and_never_narrows():
    g = np.random.default_rng(4).normal(0.0, 2.0, 20_000)
    sd = np.full_like(g, 0.5)
    c, a = dispersion(g, sd, _outcomes(g, 1.4))
    expected = np.sqrt(np.mean(sd**2 + (a - 1) ** 2 * g**2) / np.mean(sd**2))
    # sd is folded in: sigmoid(1.4 g) reads as slope 1.4 k on g / k.
    assert abs(a - 1.4 * np.sqrt(1 + np.pi * 0.25 / 8)) < 0.06
    assert abs(c - expected) < 1e-12 and c > 1.5
    assert dispersion(g, sd, _outcomes(g, 1.0))[0] < 1.05
    assert dispersion(g, sd, _outcomes(g, 0.6))[0] > 1.0  # overconfident: wider too


def _fn_and_data(n_duels: int):
    fn = random_preference_function("gpm", n_items=12, n_centres=10, seed=5)
    fn = replace(fn, posterior_factor=np.random.default_rng(5).standard_normal((10, 4)) * 0.1)
    rng = np.random.default_rng(6)
    left, right = rng.integers(0, 12, n_duels), rng.integers(0, 12, n_duels)
    g = fn.decision_on_pool(fn.items, left, right)
    y = _outcomes(g, 2.0, seed=7)
    data = DuelData(name="t", item_ids=fn.item_ids, items=fn.items, item_space=fn.item_space,
                    left=left, right=right, y=y.astype(np.int8),
                    duel_ids=np.arange(n_duels).astype(str))  # fmt: skip
    return fn, data


def test_holdout_dispersion_scales_the_factor_and_records_it():
    fn, data = _fn_and_data(3000)
    holdout = np.arange(3000)
    out = with_holdout_dispersion(fn, data, holdout, Compute())
    info = out.metadata["posterior"]
    # At most MAX_CALIBRATION_DUELS of the 3,000, seeded: the same answer twice.
    assert info["calibration_duels"] == MAX_CALIBRATION_DUELS and info["calibration_slope"] > 1.5
    again = with_holdout_dispersion(fn, data, holdout, Compute()).metadata["posterior"]
    assert again["dispersion"] == info["dispersion"]
    np.testing.assert_allclose(out.posterior_factor, fn.posterior_factor * info["dispersion"])
    np.testing.assert_array_equal(out.alpha, fn.alpha)  # the point estimate is unchanged
    few = with_holdout_dispersion(fn, data, holdout[: MIN_CALIBRATION_DUELS - 1], Compute())
    assert few is fn


def test_holdout_rows_at_hand_give_the_dispersion_of_rows_formed_again():
    """The fit's own validation rows (TrainingSystem.validation_rows) in place of the
    kernel's: the same slope, c and factor, with the seeded subsample above the cap."""
    fn, data = _fn_and_data(3000)
    holdout = np.random.default_rng(8).permutation(3000)  # any order: rows follow it
    rows = fn.centre_brackets_on_pool(data.items, data.left[holdout], data.right[holdout])
    formed = with_holdout_dispersion(fn, data, holdout, Compute())
    given = with_holdout_dispersion(fn, data, holdout, Compute(), rows.to(torch.float64))
    a, b = formed.metadata["posterior"], given.metadata["posterior"]
    assert a["calibration_duels"] == b["calibration_duels"] == MAX_CALIBRATION_DUELS
    # A golden-section minimum of a flat loss moves by ~sqrt(eps) with the summing order.
    assert abs(a["calibration_slope"] - b["calibration_slope"]) < 1e-7
    np.testing.assert_allclose(given.posterior_factor, formed.posterior_factor, rtol=1e-7)
