"""Coalitions and the maps from coalition values to Shapley values.

Checked against Shapley's formula by explicit subset sums (reference.shapley_by_subsets)
on random games, where nothing about the game is known to the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from prefshap_core.explain.reference import shapley_by_subsets
from prefshap_core.explain.shapley.coalitions import (
    all_coalitions,
    bits_from_masks,
    kernel_weights,
    masks_from_bits,
)
from prefshap_core.explain.shapley.exact import ExactShapley, exact_shapley_matrix
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import sample_stratified_coalitions


def random_game(p: int, n_duels: int, seed: int, additive: bool = False) -> np.ndarray:
    """Values (2^p, D) in bit order; additive games are sum of per-player effects."""
    rng = np.random.default_rng(seed)
    masks = all_coalitions(p).masks
    if additive:
        effects = rng.normal(size=(p, n_duels))
        return masks.astype(float) @ effects + rng.normal(size=n_duels)
    return rng.normal(size=(2**p, n_duels))


def by_formula(values: np.ndarray, p: int) -> np.ndarray:
    index = {
        frozenset(np.flatnonzero(m).tolist()): k for k, m in enumerate(all_coalitions(p).masks)
    }
    return np.array(
        [shapley_by_subsets(lambda s, d=d: values[index[s], d], p) for d in range(values.shape[1])]
    )


def test_bit_order_and_round_trip():
    coalitions = all_coalitions(4)
    assert coalitions.masks.shape == (16, 4)
    assert not coalitions.masks[0].any() and coalitions.masks[-1].all()
    assert coalitions.masks[5].tolist() == [True, False, True, False]
    np.testing.assert_array_equal(bits_from_masks(coalitions.masks), np.arange(16))
    np.testing.assert_array_equal(masks_from_bits(np.arange(16), 4), coalitions.masks)


def test_kernel_weights_formula():
    p = 7
    for s in range(1, p):
        assert kernel_weights(np.array([s]), p)[0] == pytest.approx(
            (p - 1) / (math.comb(p, s) * s * (p - s))
        )
    assert np.isinf(kernel_weights(np.array([0, p]), p)).all()


@pytest.mark.parametrize("p", [1, 2, 3, 5])
def test_exact_matrix_matches_subset_sums(p):
    values = random_game(p, 3, seed=p)
    phi, se = ExactShapley(all_coalitions(p))(values)
    np.testing.assert_allclose(phi, by_formula(values, p), atol=1e-12)
    np.testing.assert_array_equal(se, 0.0)


def test_exact_efficiency():
    values = random_game(8, 5, seed=1)
    phi, _ = ExactShapley(all_coalitions(8))(values)
    np.testing.assert_allclose(phi.sum(1), values[-1] - values[0], atol=1e-12)
    assert exact_shapley_matrix(8).sum(0)[1:-1] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("p", [2, 5, 9])
def test_paired_samples_are_distinct_complementary_pairs(p):
    coalitions = sample_stratified_coalitions(p, 40, seed=3)
    masks = coalitions.masks
    sizes = masks.sum(1)
    assert (sizes > 0).all() and (sizes < p).all()
    np.testing.assert_array_equal(masks[0::2], ~masks[1::2])
    np.testing.assert_array_equal(coalitions.pair_ids, np.repeat(np.arange(len(masks) // 2), 2))
    again = sample_stratified_coalitions(p, 40, seed=3)
    np.testing.assert_array_equal(again.masks, masks)


def test_sampling_everything_gives_all_proper_coalitions():
    coalitions = sample_stratified_coalitions(5, 1000, seed=0)
    assert coalitions.n_coalitions == 30 and coalitions.exact
    assert set(bits_from_masks(coalitions.masks).tolist()) == set(range(1, 31))


def test_rejection_sampler_for_many_players():
    coalitions = sample_stratified_coalitions(30, 200, seed=1)
    masks = coalitions.masks
    assert masks.shape == (200, 30)
    np.testing.assert_array_equal(masks[0::2], ~masks[1::2])
    assert ((masks.sum(1) > 0) & (masks.sum(1) < 30)).all()


def test_sampling_follows_the_kernel():
    # Per coalition, w(|S| = 1) is 250 times w(|S| = 6) for p = 12: the design takes
    # the singleton stratum whole, and only a few middle pairs.
    sizes = sample_stratified_coalitions(12, 200, seed=0).masks.sum(1)
    assert (sizes == 1).sum() == 12 and (sizes == 11).sum() == 12
    assert (sizes == 6).sum() / math.comb(12, 6) < 0.05


def test_wls_on_all_coalitions_is_exact():
    p = 6
    values = random_game(p, 4, seed=2)
    exact, _ = ExactShapley(all_coalitions(p))(values)
    coalitions = sample_stratified_coalitions(p, 10**6, seed=0)
    rows = bits_from_masks(coalitions.masks)
    phi, se = SampledShapley(coalitions)(values[rows], values[0], values[-1])
    np.testing.assert_allclose(phi, exact, atol=1e-10)
    np.testing.assert_array_equal(se, 0.0)


def test_wls_efficiency_is_exact_with_few_samples():
    p = 10
    values = random_game(p, 6, seed=4)
    coalitions = sample_stratified_coalitions(p, 12, seed=5)
    phi, _ = SampledShapley(coalitions)(
        values[bits_from_masks(coalitions.masks)], values[0], values[-1]
    )
    np.testing.assert_allclose(phi.sum(1), values[-1] - values[0], atol=1e-12)


def test_wls_recovers_additive_games_from_few_samples():
    p = 9
    values = random_game(p, 3, seed=6, additive=True)
    exact, _ = ExactShapley(all_coalitions(p))(values)
    coalitions = sample_stratified_coalitions(p, 30, seed=7)
    phi, se = SampledShapley(coalitions)(
        values[bits_from_masks(coalitions.masks)], values[0], values[-1]
    )
    np.testing.assert_allclose(phi, exact, atol=1e-10)
    np.testing.assert_allclose(se, 0.0, atol=1e-10)


def test_wls_converges_and_standard_errors_shrink():
    p = 10
    rng = np.random.default_rng(8)
    # Additive plus interactions of every order (pairwise ones alone would be
    # recovered exactly by paired sampling).
    masks = all_coalitions(p).masks.astype(float)
    values = (masks @ rng.normal(size=p) + 0.3 * rng.normal(size=2**p))[:, None]
    exact, _ = ExactShapley(all_coalitions(p))(values)
    errors, ses = [], []
    for n in (40, 160, 640):
        err, se = [], []
        for seed in range(8):
            coalitions = sample_stratified_coalitions(p, n, seed=seed)
            phi, s = SampledShapley(coalitions)(
                values[bits_from_masks(coalitions.masks)], values[0], values[-1]
            )
            err.append(np.abs(phi - exact).mean())
            se.append(s.mean())
        errors.append(np.mean(err))
        ses.append(np.mean(se))
    assert errors[0] > errors[1] > errors[2]
    assert ses[0] > ses[1] > ses[2] > 0
    # The standard error is of the size of the actual error (calibrated: mean |error|
    # is about 0.8 standard errors).
    for e, s in zip(errors, ses, strict=True):
        assert 0.1 < e / s < 1.5
