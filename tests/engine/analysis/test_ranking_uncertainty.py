"""Rankings' posterior columns: rank intervals from draws, the UPM score's exact sd."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from prefshap_core.analysis.pairwise import utility
from prefshap_core.analysis.ranking_uncertainty import ranks_of, utility_sd
from prefshap_core.analysis.rankings import rankings
from prefshap_core.data.duel_data import DuelData
from prefshap_core.explain.reference import random_preference_function


def _data(fn, n_duels: int = 60) -> DuelData:
    rng = np.random.default_rng(3)
    left = rng.integers(0, len(fn.items), n_duels)
    right = (left + rng.integers(1, len(fn.items), n_duels)) % len(fn.items)
    return DuelData(name="t", item_ids=np.asarray(fn.item_ids), items=fn.items,
                    item_space=fn.item_space, left=left, right=right,
                    y=np.where(rng.random(n_duels) < 0.5, 1, -1).astype(np.int8),
                    duel_ids=np.arange(n_duels).astype(str))  # fmt: skip


def _fn(kind: str, scale: float):
    fn = random_preference_function(kind, n_items=9, n_centres=8, seed=2)
    factor = np.random.default_rng(4).standard_normal((fn.n_centres, 5)) * scale
    return replace(fn, posterior_factor=factor)


def test_ranks_of_orders_by_strength():
    np.testing.assert_array_equal(ranks_of(np.array([[0.2, 0.9, 0.5]])), [[3, 1, 2]])


def test_without_spread_the_interval_is_the_point_rank():
    fn = _fn("gpm", 0.0)
    table = rankings(fn, _data(fn)).table
    np.testing.assert_array_equal(table["rank_low"], table["rank"])
    np.testing.assert_array_equal(table["rank_high"], table["rank"])
    np.testing.assert_allclose(table["p_mean_sd"], 0.0, atol=1e-12)


def test_spread_widens_the_intervals_around_the_point_rank():
    fn = _fn("gpm", 0.3 * np.abs(random_preference_function("gpm", seed=2).alpha).max())
    table = rankings(fn, _data(fn)).table
    assert (table["rank_low"] <= table["rank_high"]).all()
    assert (table["rank_high"] - table["rank_low"]).max() >= 2
    assert (table["p_mean_sd"] > 0).all()
    no = rankings(fn, _data(fn), uncertainty=False).table
    assert "rank_low" not in no.columns


def test_upm_score_sd_equals_the_per_centre_reference():
    fn = _fn("upm", 1.0)
    m = fn.n_centres
    per_centre = []
    for j in range(m):
        unit = np.zeros(m)
        unit[j] = 1.0
        f = utility(replace(fn, alpha=unit), fn.items)
        per_centre.append(f - f.mean())
    d = np.stack(per_centre, 1)  # (n, M)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    expected = np.sqrt(np.einsum("nj,jk,nk->n", d, sigma, d))
    np.testing.assert_allclose(utility_sd(fn, fn.items), expected, rtol=1e-10)
    table = rankings(fn, _data(fn)).table
    by_id = dict(zip(np.asarray(fn.item_ids).astype(str), expected, strict=True))
    np.testing.assert_allclose(table["score_sd"], [by_id[i] for i in table["item_id"]])
