"""Posterior draws of the preference matrix: the quadratic forms against the matrices."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from prefshap_core.analysis.context_condition import condition_on_context
from prefshap_core.analysis.cycle_uncertainty import posterior_cycle_draws, sure_cycles
from prefshap_core.analysis.intransitivity import analyse, hodge_split
from prefshap_core.compute import Compute
from prefshap_core.explain.reference import random_preference_function

GROUPS = [("a", 1), ("type", 3), ("b", 1)]


def make(kind: str, weight: float):
    extra = dict(context_groups=[("u", 1), ("v", 1)], n_contexts=4) if kind == "cgpm" else {}
    fn = random_preference_function(kind, n_items=14, n_centres=9, groups=GROUPS, seed=3,
                                    **extra)  # fmt: skip
    if kind != "upm":
        fn = replace(fn, utility_weight=weight)
    factor = 0.5 * np.random.default_rng(1).standard_normal((fn.n_centres, 4))
    return replace(fn, posterior_factor=factor)


def by_matrices(fn, rows, triangles, n_draws, seed):
    """Each draw's n x n matrix and its HodgeRank split: the slow direct reference."""
    c = Compute()
    z = np.random.default_rng(seed).standard_normal((n_draws, fn.posterior_factor.shape[1]))
    kernels = fn.centre_kernels(fn.items[rows], c)
    shares, kept = [], np.zeros(len(triangles))
    for t in range(n_draws):
        draw = replace(fn, alpha=fn.alpha + fn.posterior_factor @ z[t])
        g = fn.pair_block(draw.averaged_alpha(c), kernels).numpy()
        shares.append(hodge_split(g)[1])
        a, b, cc = triangles.T
        kept += (g[a, b] > 0) & (g[b, cc] > 0) & (g[cc, a] > 0)
    return np.array(shares), kept / n_draws


@pytest.mark.parametrize("kind, weight", [("gpm", 0.0), ("gpm", 1.5), ("upm", 0.0), ("cgpm", 0.7)])
def test_draws_equal_the_direct_matrices(kind, weight):
    fn = make(kind, weight)
    rows = np.arange(12)
    report = analyse(fn, rows, top=30)
    # The point estimate's cycles, and triples in both orientations (any triple works).
    fixed = np.array([[0, 1, 2], [0, 2, 1], [3, 7, 9], [3, 9, 7]])
    triangles = np.concatenate([report.cycles.items, fixed])
    draws = posterior_cycle_draws(fn, rows, triangles, n_draws=150, seed=2)
    shares, p_cycle = by_matrices(fn, rows, triangles, 150, 2)
    np.testing.assert_allclose(draws.shares, shares, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(draws.p_cycle, p_cycle)
    if kind == "upm":  # a utility model: no draw has a cycle
        assert draws.shares.max() < 1e-9 and len(report.cycles.items) == 0
        np.testing.assert_array_equal(draws.p_cycle, 0.0)
    else:
        assert draws.shares.min() > 0 and draws.p_cycle.max() > 0


def test_sure_cycles_filters_scores_and_cuts():
    fn = condition_on_context(make("gpm", 0.0), {})
    report = analyse(fn, np.arange(14), top=5)
    everything = sure_cycles(fn, report, min_p_cycle=0.0, top=1000, n_draws=200)
    assert len(everything.triangles) == everything.n_candidates > 5
    cut = sorted(t["p_cycle"] for t in everything.triangles)[everything.n_candidates // 2]
    sure = sure_cycles(fn, report, min_p_cycle=cut, top=3, n_draws=200)
    assert sure.triangles == everything.filtered(cut, 3)
    assert all(t["p_cycle"] >= cut for t in sure.triangles) and len(sure.triangles) <= 3
    lo, hi = sure.share_interval
    assert 0 <= lo <= hi <= 1
