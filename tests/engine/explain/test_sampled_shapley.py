"""Stratified coalition sampling and its Shapley estimator (shapley/stratified.py, sampled.py).

Exactness is checked against the exact Shapley matrix (itself checked against subset
sums in test_shapley.py) and Shapley's formula; calibration against exact values of
real model games precomputed by benchmarks/make_shapley_fixtures.py.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from prefshap_core.explain.games.items import item_coalition_values
from prefshap_core.explain.reference import shapley_by_subsets
from prefshap_core.explain.shapley.coalitions import (
    all_coalitions,
    bits_from_masks,
    masks_from_bits,
)
from prefshap_core.explain.shapley.exact import exact_shapley_matrix
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import sample_stratified_coalitions
from prefshap_core.models.model_file import load_model

FIXTURES = Path(__file__).parent / "fixtures"


def random_table(p: int, n_duels: int, seed: int) -> np.ndarray:
    """(2^p, D) values in bit order: an additive part plus noise on every coalition
    (pairwise interactions alone would not do: paired WLS gets them exactly)."""
    rng = np.random.default_rng(seed)
    z = all_coalitions(p).masks.astype(float)
    return z @ rng.normal(size=(p, n_duels)) + 0.3 * rng.normal(size=(2**p, n_duels))


def estimate(coalitions, table):
    rows = bits_from_masks(coalitions.masks)
    return SampledShapley(coalitions)(table[rows], table[0], table[-1])


@pytest.mark.parametrize("p", [2, 3, 5, 8])
def test_all_coalitions_give_the_exact_values(p):
    table = random_table(p, 3, seed=p)
    coalitions = sample_stratified_coalitions(p, 2**p - 2, seed=0)
    assert coalitions.exact and coalitions.n_coalitions == 2**p - 2
    assert set(bits_from_masks(coalitions.masks).tolist()) == set(range(1, 2**p - 1))
    phi, se = estimate(coalitions, table)
    np.testing.assert_allclose(phi, (exact_shapley_matrix(p) @ table).T, atol=1e-10)
    np.testing.assert_array_equal(se, 0.0)
    if p == 5:
        index = {
            frozenset(np.flatnonzero(m).tolist()): k for k, m in enumerate(all_coalitions(p).masks)
        }
        by_formula = shapley_by_subsets(lambda s: table[index[s], 1], p)
        np.testing.assert_allclose(phi[1], by_formula, atol=1e-10)


def test_design_is_paired_stratified_and_weighted_by_the_kernel():
    p = 12
    coalitions = sample_stratified_coalitions(p, 600, seed=4)
    masks, sizes = coalitions.masks, coalitions.masks.sum(1)
    assert not coalitions.exact and coalitions.n_coalitions == 600
    assert ((sizes > 0) & (sizes < p)).all()
    np.testing.assert_array_equal(masks[0::2], ~masks[1::2])
    assert len(np.unique(bits_from_masks(masks))) == len(masks)  # no repeats
    np.testing.assert_array_equal(coalitions.pair_ids, np.repeat(np.arange(300), 2))
    smaller = np.minimum(sizes, p - sizes)
    for h in range(len(coalitions.stratum_samples)):
        rows = coalitions.stratum_ids == h
        lo, hi = coalitions.stratum_min_size[h], coalitions.stratum_max_size[h]
        assert ((smaller[rows] >= lo) & (smaller[rows] <= hi)).all()
        assert rows.sum() == 2 * coalitions.stratum_samples[h]
        # Horvitz-Thompson: the weights of a stratum add up to its kernel weight.
        total = sum((p - 1) / (s * (p - s)) * (1 if 2 * s == p else 2) for s in range(lo, hi + 1))
        assert coalitions.weights[rows].sum() == pytest.approx(total, rel=1e-12)
        n, big_n = coalitions.stratum_samples[h], coalitions.stratum_population[h]
        assert coalitions.stratum_fpc[h] == pytest.approx(1 - n / big_n)
    # The outer strata are whole (12 singletons, 66 doubles), the middle sampled.
    assert coalitions.stratum_fpc[0] == 0 and coalitions.stratum_fpc[1] == 0
    assert (smaller == 1).sum() == 2 * p and (smaller == 2).sum() == 2 * math.comb(p, 2)
    assert (coalitions.stratum_fpc[2:] > 0).all()


def test_same_seed_same_design():
    a = sample_stratified_coalitions(15, 700, seed=3)
    b = sample_stratified_coalitions(15, 700, seed=3)
    c = sample_stratified_coalitions(15, 700, seed=4)
    np.testing.assert_array_equal(a.masks, b.masks)
    np.testing.assert_array_equal(a.weights, b.weights)
    assert not np.array_equal(a.masks, c.masks)


@pytest.mark.parametrize(("p", "n"), [(9, 60), (17, 400), (17, 2082)])
def test_efficiency_holds_exactly(p, n):
    table = 100 * random_table(p, 4, seed=1)
    phi, se = estimate(sample_stratified_coalitions(p, n, seed=2), table)
    np.testing.assert_allclose(phi.sum(1), table[-1] - table[0], rtol=0, atol=1e-10)
    assert (se > 0).all()


@pytest.mark.parametrize(("p", "n"), [(10, 100), (300, 2648)])
def test_linear_game_is_recovered_with_zero_error(p, n):
    rng = np.random.default_rng(p)
    beta = rng.normal(size=(p, 3))
    coalitions = sample_stratified_coalitions(p, n, seed=0)
    values = coalitions.masks.astype(float) @ beta
    phi, se = SampledShapley(coalitions)(values, np.zeros(3), beta.sum(0))
    np.testing.assert_allclose(phi, beta.T, atol=1e-10)
    assert se.max() < 1e-10


def test_partial_statistics_add_up_to_the_direct_call():
    p = 11
    table = random_table(p, 5, seed=7)
    coalitions = sample_stratified_coalitions(p, 300, seed=1)
    estimator = SampledShapley(coalitions)
    values = table[bits_from_masks(coalitions.masks)]
    v_empty, v_full = table[0], table[-1]
    direct = estimator(values, v_empty, v_full)
    rng = np.random.default_rng(0)
    # First pass: any partition of the rows. Second: a partition of whole pairs.
    rows_1 = np.array_split(rng.permutation(coalitions.n_coalitions), 7)
    pairs = np.array_split(rng.permutation(coalitions.n_coalitions // 2), 5)
    rows_2 = [np.concatenate([2 * g, 2 * g + 1]) for g in pairs]
    first = sum(estimator.partial_statistics(values[r], r, v_empty, v_full) for r in rows_1)
    phi = estimator.solve(first, v_empty, v_full)
    second = sum(
        estimator.partial_statistics(values[r], r, v_empty, v_full, phi=phi) for r in rows_2
    )
    phi, se = estimator.finish_totals(second, phi)
    np.testing.assert_allclose(phi, direct[0], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(se, direct[1], rtol=1e-10, atol=1e-14)
    split = np.arange(1, 20)  # row 0 without its partner
    with pytest.raises(ValueError, match="whole pairs"):
        estimator.partial_statistics(values[split], split, v_empty, v_full, phi=phi)


def test_thousands_of_players():
    p = 1100
    coalitions = sample_stratified_coalitions(p, 2 * p + 2048, seed=0)
    masks, sizes = coalitions.masks, coalitions.masks.sum(1)
    assert masks.shape == (2 * p + 2048, p)
    assert ((sizes > 0) & (sizes < p)).all()
    np.testing.assert_array_equal(masks[0::2], ~masks[1::2])
    assert np.isfinite(coalitions.weights).all() and (coalitions.weights > 0).all()
    assert len(coalitions.stratum_samples) <= 1 + 32 and coalitions.stratum_samples.min() >= 2
    assert coalitions.stratum_population[-1] == math.inf  # C(1100, 550) is beyond floats
    assert coalitions.stratum_max_size[-1] == p // 2


# -- calibration ---------------------------------------------------------------------
def unanimity_games(p, n_games, seed, n_terms=30):
    """Sums of unanimity games c_T [T subset of S] (|T| <= 5): any p, and the exact
    Shapley value is known in closed form (c_T / |T| to each member of T)."""
    rng = np.random.default_rng(seed)
    terms = [rng.choice(p, size=rng.integers(1, 6), replace=False) for _ in range(n_terms)]
    coef = rng.normal(size=(n_terms, n_games))
    phi = np.zeros((n_games, p))
    for members, c in zip(terms, coef, strict=True):
        phi[:, members] += c[:, None] / len(members)

    def values(masks):
        return np.stack([masks[:, t].all(1) for t in terms], 1).astype(float) @ coef

    return values, phi


@pytest.mark.parametrize(("p", "n"), [(30, 400), (30, 2 * 30 + 2048)])
def test_standard_errors_cover_on_unanimity_games(p, n):
    # p = 30 at 400 samples merges the two middle strata into a with-replacement one.
    values, exact = unanimity_games(p, 6, seed=p)
    hits = []
    for seed in range(12):
        coalitions = sample_stratified_coalitions(p, n, seed)
        v_full = values(np.ones((1, p), dtype=bool))[0]
        phi, se = SampledShapley(coalitions)(values(coalitions.masks), np.zeros(6), v_full)
        hits.append(np.abs(phi - exact) <= 1.96 * se)
    assert 0.90 <= np.mean(hits) <= 0.99


def test_too_few_pairs_for_the_players_give_no_standard_error():
    values, _ = unanimity_games(50, 2, seed=0)
    coalitions = sample_stratified_coalitions(50, 40, seed=0)
    phi, se = SampledShapley(coalitions)(values(coalitions.masks), np.zeros(2), np.ones(2))
    assert np.isnan(se).all()
    np.testing.assert_allclose(phi.sum(1), 1.0, atol=1e-10)


# -- calibration on real model games ----------------------------------------------
def fixture_game(p):
    data = np.load(FIXTURES / f"shapley_p{p}.npz")
    fn = load_model(data["model"].tobytes())
    left, right = data["left"], data["right"]
    v_full = np.asarray(fn.decision(fn.items[left], fn.items[right]), dtype=np.float64)

    def values(masks):
        return item_coalition_values(fn, masks, left, right)

    return values, np.zeros_like(v_full), v_full, data["phi"]


@pytest.fixture
def one_thread():
    # Thousands of tiny solves: threads only add synchronisation on a shared host.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.slow
@pytest.mark.parametrize("p", [16, 17])
def test_standard_errors_cover_on_model_games(p, one_thread):
    values_of, v_empty, v_full, exact = fixture_game(p)
    np.testing.assert_allclose(exact.sum(1), v_full - v_empty, atol=1e-8)  # same model
    designs = [
        sample_stratified_coalitions(p, n, seed) for n in (400, 2 * p + 2048) for seed in range(3)
    ]
    # Evaluate each distinct coalition once; the designs share their whole strata.
    codes = np.unique(np.concatenate([bits_from_masks(c.masks) for c in designs]))
    table = values_of(masks_from_bits(codes, p))
    for n_designs in (designs[:3], designs[3:]):
        hits = []
        for coalitions in n_designs:
            values = table[np.searchsorted(codes, bits_from_masks(coalitions.masks))]
            phi, se = SampledShapley(coalitions)(values, v_empty, v_full)
            np.testing.assert_allclose(phi.sum(1), v_full - v_empty, atol=1e-10)
            hits.append(np.abs(phi - exact) <= 1.96 * se)
        assert 0.90 <= np.mean(hits) <= 0.99
