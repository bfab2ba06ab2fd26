"""prefshap_core.analysis: head-to-head, rankings, Bradley-Terry, what-if rows, sides.

Every number is checked against a slow, obviously correct computation: the model's
own pair-by-pair ``decision_on_pool``, a brute-force average over contexts, the
stationarity of the Bradley-Terry likelihood, a loop over duels.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from prefshap_core.analysis.bradley_terry import bradley_terry, log_likelihood
from prefshap_core.analysis.contexts import context_slices
from prefshap_core.analysis.covariates import (
    editable_columns,
    encode_covariates,
    raw_covariates,
)
from prefshap_core.analysis.groups import (
    ItemCondition,
    duels_between,
    group_record,
    item_mask,
    orient_to_group,
)
from prefshap_core.analysis.head_to_head import meetings, most_active_pair, pair_preference
from prefshap_core.analysis.pairwise import preference_matrix, utility, win_probability
from prefshap_core.analysis.rankings import BT_SCORE, UPM_SCORE, rankings
from prefshap_core.data.build import build_duel_data
from prefshap_core.data.csv_io import read_table
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.paths import repo_root

CONTEXT_GROUPS = [("indoor", 1), ("surface", 3)]


def _sigmoid(g: float) -> float:
    return 1.0 / (1.0 + np.exp(-g))


@pytest.mark.parametrize("utility_weight", [0.0, 2.5])
@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_preference_matrix_matches_the_model_pair_by_pair(kind: str, utility_weight) -> None:
    fn = random_preference_function(kind, n_items=9, n_centres=11, seed=3)
    if kind != "upm":  # the sum kernel k_E + c k_UPM
        fn = replace(fn, utility_weight=utility_weight)
    rows, opponents = np.arange(9), np.array([0, 4, 8, 2])
    g = preference_matrix(fn, fn.items[rows], fn.items[opponents])
    i, j = np.meshgrid(rows, opponents, indexing="ij")
    direct = fn.decision_on_pool(fn.items, i.ravel(), j.ravel()).reshape(g.shape)
    np.testing.assert_allclose(g, direct, atol=1e-10)


def test_context_weights_give_the_model_under_those_contexts() -> None:
    fn = random_preference_function("cgpm", n_items=7, n_centres=9, context_groups=CONTEXT_GROUPS)
    n_ctx = len(fn.contexts)
    for u in range(n_ctx):
        one = np.zeros(n_ctx)
        one[u] = 1.0
        g = preference_matrix(fn, fn.items, fn.items, context_weights=one)
        i, j = np.meshgrid(np.arange(7), np.arange(7), indexing="ij")
        direct = fn.decision_on_pool(
            fn.items, i.ravel(), j.ravel(), fn.contexts, np.full(49, u)
        ).reshape(7, 7)
        np.testing.assert_allclose(g, direct, atol=1e-10)


def test_pair_preference_averages_each_slice_over_its_contexts() -> None:
    fn = random_preference_function(
        "cgpm", n_items=8, n_centres=10, context_groups=CONTEXT_GROUPS, n_contexts=7, seed=5
    )
    x_a, x_b = fn.items[1], fn.items[6]
    pref = pair_preference(fn, x_a, x_b)
    # Brute force: g under every observed context, expanded by its count.
    n_ctx = len(fn.contexts)
    g_u = np.array(
        [fn.decision_on_pool(fn.items, [1], [6], fn.contexts, [u])[0] for u in range(n_ctx)]
    )
    w = fn.context_weights
    np.testing.assert_allclose(pref.g_average, (w @ g_u) / w.sum(), atol=1e-10)  # g_bar
    raw = fn.context_space.to_raw(fn.contexts)
    indoor = raw[:, 0]
    for _, row in pref.by_context.iterrows():
        if row["group"] != "indoor":
            continue
        has = np.array([f"{v:g}" == row["value"] for v in indoor])
        expected = (w[has] @ g_u[has]) / w[has].sum()
        assert row["g"] == pytest.approx(expected, abs=1e-10)
        assert row["p_a"] == pytest.approx(_sigmoid(expected))
        assert row["share"] == pytest.approx(w[has].sum() / w.sum())
    # Every group's slices together are the whole observed mix.
    for _, part in pref.by_context.groupby("group"):
        assert part["share"].sum() == pytest.approx(1.0)
        assert (part["share"] * part["g"]).sum() == pytest.approx(pref.g_average, abs=1e-10)
    surfaces = pref.by_context[pref.by_context["group"] == "surface"]["value"].tolist()
    assert surfaces and all(not v[0].isdigit() for v in surfaces)  # category names
    # Seen from B it is the same numbers, negated.
    swapped = pair_preference(fn, x_b, x_a)
    np.testing.assert_allclose(swapped.by_context["g"], -pref.by_context["g"], atol=1e-12)


def test_pair_preference_without_context_and_for_hypothetical_rows() -> None:
    fn = random_preference_function("gpm", n_items=6, seed=2)
    x_new = fn.items[2] + 0.5  # an item that is not in the pool
    pref = pair_preference(fn, x_new, fn.items[3])
    expected = fn.decision(x_new[None], fn.items[3][None])[0]
    assert pref.g_average == pytest.approx(expected, abs=1e-12)
    assert pref.p_average == pytest.approx(_sigmoid(expected))
    assert pref.by_context.empty and pref.g_by_context is None


def test_win_probability_is_a_stable_sigmoid() -> None:
    g = np.array([-800.0, -3.0, 0.0, 2.5, 900.0])
    np.testing.assert_allclose(win_probability(g), [0.0, _sigmoid(-3), 0.5, _sigmoid(2.5), 1.0])


def test_context_slices_cover_numeric_and_categorical_groups() -> None:
    fn = random_preference_function("cgpm", context_groups=CONTEXT_GROUPS, n_contexts=6, seed=1)
    slices = context_slices(fn.context_space, fn.contexts, fn.context_weights)
    by_group: dict[str, np.ndarray] = {}
    for piece in slices:
        by_group.setdefault(piece.group, np.zeros(len(fn.contexts)))
        by_group[piece.group] += piece.weights
    for total in by_group.values():  # each context in exactly one slice of each group
        np.testing.assert_allclose(total, fn.context_weights)


def _sample_data():
    folder = repo_root() / "sample_data"
    items = read_table((folder / "items.csv").read_bytes(), file_name="items.csv")
    duels = read_table((folder / "duels.csv").read_bytes(), file_name="duels.csv")
    return build_duel_data(items, duels, name="sample", items_file="items.csv",
                           duels_file="duels.csv")  # fmt: skip


def test_meetings_and_the_most_active_pair() -> None:
    data = _sample_data()
    a, b = most_active_pair(data)
    activity = np.bincount(np.r_[data.left, data.right], minlength=data.n_items)
    assert activity[data.item_index(a)] == activity.max()
    assert activity[data.item_index(b)] == np.sort(activity)[-2]
    met = meetings(data, a, b)
    slow = [
        k
        for k in range(data.n_duels)
        if {str(data.item_ids[data.left[k]]), str(data.item_ids[data.right[k]])} == {a, b}
    ]
    assert met.table["duel"].tolist() == slow
    winners = [str(data.item_ids[data.winners()[k]]) for k in slow]
    assert (met.wins_a, met.wins_b) == (winners.count(a), winners.count(b))
    assert "context" in met.table.columns


def test_bradley_terry_maximises_its_likelihood() -> None:
    rng = np.random.default_rng(0)
    n, m = 12, 300
    strength = rng.normal(size=n)
    left, right = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = left != right
    left, right = left[keep], right[keep]
    left_won = rng.random(len(left)) < _sigmoid(strength[left] - strength[right])
    winners, losers = np.where(left_won, left, right), np.where(left_won, right, left)
    fit = bradley_terry(winners, losers, n)
    assert fit.converged
    assert abs(fit.scores.mean()) < 1e-12
    best = log_likelihood(fit.log_strengths, winners, losers)
    for k in range(n):  # no single coordinate step improves the objective
        for step in (1e-3, -1e-3):
            moved = fit.log_strengths.copy()
            moved[k] += step
            assert log_likelihood(moved, winners, losers) <= best + 1e-12
    # Stronger true items score higher on average.
    assert np.corrcoef(fit.scores, strength)[0, 1] > 0.7


def test_bradley_terry_stays_finite_for_unbeaten_items() -> None:
    fit = bradley_terry(np.array([0, 0, 1]), np.array([1, 2, 2]), 3)
    assert np.all(np.isfinite(fit.scores))
    assert fit.scores[0] > fit.scores[1] > fit.scores[2]


@pytest.mark.parametrize("kind", ["gpm", "cgpm", "upm"])
def test_rankings_against_a_loop_over_pairs(kind: str) -> None:
    data = _sample_data()
    fn = random_preference_function(
        kind, n_items=data.n_items, context_groups=[("venue", 2)], n_contexts=2, seed=4
    )
    fn = _with_ids(fn, data)
    ranked = rankings(fn, data, max_opponents=10_000)
    table = ranked.table.set_index("item_id")
    n = data.n_items
    g = np.array([[fn.decision_on_pool(fn.items, [i], [j])[0] for j in range(n)] for i in range(n)])
    p = np.array([[_sigmoid(g[i, j]) for j in range(n) if j != i] for i in range(n)]).mean(1)
    np.testing.assert_allclose(table.loc[fn.item_ids, "p_mean"], p, atol=1e-10)
    assert ranked.table["p_mean"].is_monotonic_decreasing
    assert ranked.table["rank"].tolist() == list(range(1, n + 1))
    wins = np.bincount(data.winners(), minlength=n)
    np.testing.assert_array_equal(table.loc[data.item_ids, "wins"], wins)
    assert (table["duels"] == table["wins"] + table["losses"]).all()
    assert ranked.score_name == (UPM_SCORE if kind == "upm" else BT_SCORE)
    if kind == "upm":
        f = utility(fn, fn.items)
        np.testing.assert_allclose(table.loc[fn.item_ids, "score"], f - f.mean(), atol=1e-10)
    assert (len(ranked.context_columns) > 0) == (kind == "cgpm")


def test_rankings_use_a_upm_baseline_and_sample_large_pools() -> None:
    data = _sample_data()
    fn = _with_ids(random_preference_function("gpm", n_items=data.n_items, seed=1), data)
    upm = _with_ids(random_preference_function("upm", n_items=data.n_items, seed=2), data)
    ranked = rankings(fn, data, upm=upm, max_opponents=5)
    assert ranked.score_name == UPM_SCORE and ranked.sampled and ranked.n_opponents == 5


def _with_ids(fn, data):
    from dataclasses import replace

    return replace(fn, item_ids=np.asarray(data.item_ids).astype(str))


def test_what_if_rows_round_trip_and_edits_move_the_row() -> None:
    data = _sample_data()
    columns = {c.name: c for c in editable_columns(data)}
    item = str(data.item_ids[3])
    values = raw_covariates(data, item)
    assert set(values) == set(columns)
    np.testing.assert_allclose(encode_covariates(data, values)[0], data.items[3], atol=1e-12)
    numeric = next(c for c in columns.values() if c.kind == "numeric")
    raw = data.item_space.to_raw(data.items)
    j = data.item_space.feature_names.index(numeric.group)
    assert (numeric.low, numeric.high) == (raw[:, j].min(), raw[:, j].max())
    edited = {**values, numeric.name: numeric.high}
    row = encode_covariates(data, edited)[0]
    assert data.item_space.to_raw(row[None])[0, j] == pytest.approx(numeric.high)
    changed = np.flatnonzero(~np.isclose(row, data.items[3]))
    assert set(data.item_space.feature_group[changed]) <= {data.item_space.group_names.index(
        numeric.group)}  # fmt: skip


def test_sides_orient_duels_to_group_a() -> None:
    data = _sample_data()
    table = data.raw_items
    column = next(c for c in table.columns if pd.to_numeric(table[c], errors="coerce").notna().all()
                  and c != "id")  # fmt: skip
    threshold = float(pd.to_numeric(table[column]).median())
    mask_a = item_mask(data, ItemCondition(column, ">", threshold))
    mask_b = ~mask_a
    duels, signs = duels_between(data, mask_a, mask_b)
    for k, s in zip(duels.tolist(), signs.tolist(), strict=True):
        a_side = data.left[k] if s > 0 else data.right[k]
        b_side = data.right[k] if s > 0 else data.left[k]
        assert mask_a[a_side] and mask_b[b_side]
    others = np.setdiff1d(np.arange(data.n_duels), duels)
    assert not np.any(mask_a[data.left[others]] != mask_a[data.right[others]])
    wins, losses = group_record(data, duels, signs)
    slow = sum(int(data.winners()[k] in np.flatnonzero(mask_a)) for k in duels.tolist())
    assert (wins, losses) == (slow, len(duels) - slow)
    from prefshap_core.explain.explanation import Explanation

    q = len(duels)
    expl = Explanation(
        values=np.ones((q, 1)), base_values=np.zeros(q), outputs=np.ones(q), data=np.zeros((q, 1)),
        player_names=("f",), duel_ids=data.duel_ids[duels],
        left_ids=data.item_ids[data.left[duels]], right_ids=data.item_ids[data.right[duels]],
        winners=data.y[duels],
    )  # fmt: skip
    seen = orient_to_group(expl, data, mask_a, mask_b, "big")
    np.testing.assert_array_equal(seen.values[:, 0], signs)
    assert seen.orientation == "side:big"
    assert int((seen.winners > 0).sum()) == wins
