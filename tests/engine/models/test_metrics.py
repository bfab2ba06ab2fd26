import numpy as np
import pytest

from prefshap_core.metrics import (
    accuracy,
    balanced_accuracy,
    dominance_matrix,
    duel_rankability,
    log_loss,
    log_losses,
    rankability_in_background,
    roc_auc,
    spectral_rankability,
)


def _auc_by_pairs(y, s):
    pos, neg = s[y > 0], s[y < 0]
    wins = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return wins.mean()


def test_roc_auc_equals_pair_count_with_ties():
    rng = np.random.default_rng(0)
    y = rng.choice([-1, 1], 300)
    s = np.round(rng.normal(size=300) + 0.5 * y, 1)  # rounding makes many ties
    assert roc_auc(y, s) == pytest.approx(_auc_by_pairs(y, s), abs=1e-12)


def test_roc_auc_extremes_and_invariance():
    y = np.array([1, 1, -1, -1])
    assert roc_auc(y, np.array([2.0, 3.0, 0.0, 1.0])) == 1.0
    assert roc_auc(y, np.array([0.0, 1.0, 2.0, 3.0])) == 0.0
    s = np.array([0.2, -0.4, 0.1, 0.9])
    assert roc_auc(y, s) == roc_auc(y, 10 * s + 3)  # rank based


def test_accuracy_balanced_accuracy_log_loss():
    y = np.array([1, 1, 1, -1])
    g = np.array([2.0, -1.0, 0.0, -3.0])
    assert accuracy(y, g) == pytest.approx((1 + 0 + 0.5 + 1) / 4)
    # recall of +1: one of three predicted +1 (g > 0), recall of -1: 1
    assert balanced_accuracy(y, g) == pytest.approx((1 / 3 + 1) / 2)
    direct = np.mean(-np.log(1 / (1 + np.exp(-y * g))))
    assert log_loss(y, g) == pytest.approx(direct, rel=1e-12)
    assert np.isfinite(log_loss(np.array([1]), np.array([-1e4])))


def test_complete_dominance_graph_scores_one():
    n = 12
    winners, losers = np.triu_indices(n, k=1)  # i beats every j > i: a strict total order
    a = dominance_matrix(winners, losers, n)
    assert spectral_rankability(a) == pytest.approx(1.0, abs=1e-9)


def test_rankability_drops_for_cycles_and_empty_graph():
    cycle = np.roll(np.eye(6), 1, axis=1)  # 0>1>2>...>5>0
    assert spectral_rankability(cycle) < 0.5
    assert spectral_rankability(np.zeros((6, 6))) == pytest.approx(0.0)


def test_duel_rankability_limits_items_and_reports_count():
    rng = np.random.default_rng(1)
    w = rng.integers(0, 50, 2000)
    l_ = (w + rng.integers(1, 50, 2000)) % 50
    value, used = duel_rankability(w, l_, 50, max_items=20)
    assert used == 20 and 0.0 <= value <= 1.0


def test_background_rankability_equals_the_direct_one_and_restores_blas_threads():
    from threadpoolctl import threadpool_info

    before = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    rng = np.random.default_rng(2)
    w = rng.integers(0, 80, 3000)
    l_ = (w + rng.integers(1, 80, 3000)) % 80
    futures = [rankability_in_background(w, l_, 80) for _ in range(3)]  # overlapping limits
    direct = duel_rankability(w, l_, 80)
    for future in futures:
        assert future.result(timeout=60) == direct
    after = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert after == before


def test_background_rankability_raises_what_the_measure_raises(monkeypatch):
    def broken(winners, losers, n_items):
        raise FloatingPointError("eigenvalues did not converge")

    monkeypatch.setattr("prefshap_core.metrics.duel_rankability", broken)
    future = rankability_in_background(np.array([0]), np.array([1]), 2)
    with pytest.raises(FloatingPointError, match="did not converge"):
        future.result(timeout=60)


def test_log_losses_match_the_direct_formula_and_halve_ties():
    y = np.array([1.0, -1.0, 0.0, 1.0])
    g = np.array([0.3, 2.0, -1.5, -40.0])
    direct = np.log1p(np.exp(-y * g))
    direct[2] = 0.5 * np.log1p(np.exp(1.5)) + 0.5 * np.log1p(np.exp(-1.5))
    np.testing.assert_allclose(log_losses(y, g), direct, rtol=1e-14)
    assert log_loss(y, g) == np.mean(log_losses(y, g))
