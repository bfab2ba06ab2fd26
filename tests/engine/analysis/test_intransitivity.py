"""Intransitivity: the model's preference matrix, its HodgeRank split, its cycles."""

import dataclasses
import itertools

import numpy as np
import pytest

from prefshap_core.analysis.context_condition import (
    categorical_context_groups,
    condition_on_context,
    parse_context_assignments,
)
from prefshap_core.analysis.explorer import most_active_items, net_wins
from prefshap_core.analysis.intransitivity import analyse, hodge_split, preference_matrix
from prefshap_core.analysis.triangles import count_cycles, top_cycles
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.models.preference_function import PreferenceFunction


def _function(kind: str, seed: int = 0, n: int = 40, m: int = 15) -> PreferenceFunction:
    rng = np.random.default_rng(seed)
    space = FeatureSpace(("h", "w", "hand=L", "hand=R"), ("h", "w", "hand"),
                         np.array([0, 1, 2, 2]), np.zeros(4), np.ones(4))  # fmt: skip
    items = rng.normal(size=(n, 4))
    extra = {}
    if kind == "cgpm":
        ctx = FeatureSpace(("surface=clay", "surface=hard", "temp"), ("surface", "temp"),
                           np.array([0, 0, 1]), np.array([0.0, 0.0, 20.0]),
                           np.array([1.0, 1.0, 5.0]))  # fmt: skip
        raw = np.array([[1, 0, 10.0], [0, 1, 25.0], [1, 0, 30.0], [0, 1, 10.0]])
        contexts = ctx.standardise(raw)
        extra = dict(
            context_space=ctx,
            contexts=contexts,
            context_weights=np.array([3.0, 5.0, 1.0, 2.0]),
            context_lengthscales=np.array([0.7, 1.3, 0.9]),
            centres_context=contexts[rng.integers(0, 4, m)],
            context_cme_lambda=0.01,
        )
    return PreferenceFunction(
        kind=kind,
        item_space=space,
        item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items,
        lengthscales=rng.uniform(0.5, 2.0, 4),
        centres_left=items[rng.integers(0, n, m)],
        centres_right=items[rng.integers(0, n, m)],
        alpha=rng.normal(size=m),
        cme_lambda=0.001,
        **extra,
    )


# -- the preference matrix ---------------------------------------------------------
@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("utility_weight", [0.0, 3.0])
def test_preference_matrix_is_the_models_g_exactly_skew(kind, utility_weight):
    fn = _function(kind)
    if kind != "upm":  # the sum kernel k_E + w k_UPM (a UPM has no weight)
        fn = dataclasses.replace(fn, utility_weight=utility_weight)
    rows = np.array([5, 0, 17, 3, 39, 22])
    g = preference_matrix(fn, rows)
    a, b = np.meshgrid(np.arange(6), np.arange(6), indexing="ij")
    expected = fn.decision_on_pool(fn.items[rows], a.ravel(), b.ravel()).reshape(6, 6)
    np.testing.assert_allclose(g, expected, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(g, -g.T)
    np.testing.assert_array_equal(np.diag(g), 0.0)


def test_upm_cyclic_share_is_zero():
    for seed in range(3):
        report = analyse(_function("upm", seed, n=300, m=60), np.arange(300), top=5)
        assert report.cyclic_share <= 1e-12
        assert report.n_cyclic_triangles == 0 and report.triangles() == []
        g = report.preference
        np.testing.assert_allclose(report.potential[:, None] - report.potential[None, :], g,
                                   atol=1e-12 * np.abs(g).max())  # fmt: skip


def _rock_paper_scissors(per_class: int = 12, seed: int = 0) -> PreferenceFunction:
    """Items around three points R, P, S of a circle; a GPM with R > S, S > P, P > R.

    The game is invariant under the rotation R -> P -> S (up to jitter), so no
    item can rank above another on average: almost everything is cyclic."""
    rng = np.random.default_rng(seed)
    angles = np.array([0.0, 2 * np.pi / 3, 4 * np.pi / 3])  # R, P, S
    anchors = np.stack([np.cos(angles), np.sin(angles)], 1)
    items = np.repeat(anchors, per_class, axis=0) + rng.normal(0, 0.05, (3 * per_class, 2))
    r, p, s = anchors
    space = FeatureSpace(("x", "y"), ("x", "y"), np.array([0, 1]), np.zeros(2), np.ones(2))
    return PreferenceFunction(
        kind="gpm", item_space=space,
        item_ids=np.array([f"{c}{k}" for c in "RPS" for k in range(per_class)]),
        items=items, lengthscales=np.array([0.6, 0.6]),
        centres_left=np.stack([r, s, p]), centres_right=np.stack([s, p, r]),
        alpha=np.ones(3), cme_lambda=0.001,
    )  # fmt: skip


def test_rock_paper_scissors_is_almost_all_cycle():
    fn = _rock_paper_scissors()
    report = analyse(fn, np.arange(len(fn.items)), top=3)
    assert report.cyclic_share > 0.9
    for triangle in report.triangles():
        classes = [item[0] for item in triangle["items"]]
        assert classes == ["R", "S", "P"]  # R (smallest rows) first, along R > S > P > R
        assert min(triangle["p"]) > 0.5


def test_hodge_split_of_a_known_matrix():
    s_true = np.array([1.0, -0.5, 2.0, 0.0, -2.5])  # mean 0: the potential itself
    grad = s_true[:, None] - s_true[None, :]
    curl = np.array([[0, 1, -1, 0, 0], [-1, 0, 1, 0, 0], [1, -1, 0, 0, 0],
                     [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=float)  # fmt: skip
    s, share, per_item = hodge_split(grad + curl)
    np.testing.assert_allclose(s, s_true, atol=1e-14)  # the 3-cycle has zero row sums
    assert share == pytest.approx(6 / (np.sum(grad**2) + 6), abs=1e-14)
    assert per_item[3] == 0 and per_item[0] > 0
    assert hodge_split(np.zeros((4, 4)))[1] == 0.0


# -- triangles ---------------------------------------------------------------------
def _brute_cycles(m: np.ndarray):
    found = []
    for a, b, c in itertools.permutations(range(len(m)), 3):
        if a < b and a < c and m[a, b] > 0 and m[b, c] > 0 and m[c, a] > 0:
            found.append((-(m[a, b] + m[b, c] + m[c, a]), a, b, c))
    return sorted(found)


def _random_skew(n: int, seed: int, integers: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (n, n)).astype(float) if integers else rng.normal(size=(n, n))
    return np.triu(x, 1) - np.triu(x, 1).T


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("k", [1, 7, 10_000])
def test_top_cycles_equal_a_brute_force_triple_loop(seed, k):
    m = _random_skew(14, seed, integers=seed % 2 == 1)  # integers: ties and zero edges
    brute = _brute_cycles(m)[:k]
    got = top_cycles(m, k)
    assert got.items.tolist() == [[a, b, c] for _, a, b, c in brute]
    np.testing.assert_allclose(got.strength, [-w for w, *_ in brute], atol=1e-12)
    assert count_cycles(m) == len(_brute_cycles(m))


def test_top_cycles_edge_cases():
    assert top_cycles(_random_skew(6, 0), 0).items.shape == (0, 3)
    assert top_cycles(np.zeros((5, 5)), 3).items.shape == (0, 3)
    transitive = np.subtract.outer(np.arange(6.0), np.arange(6.0))
    assert count_cycles(transitive) == 0 and len(top_cycles(transitive, 5).items) == 0
    with pytest.raises(ValueError, match="non-negative"):
        top_cycles(transitive, -1)


def test_report_triangles_follow_the_contract():
    fn = _function("gpm", 3, n=60)
    rows = np.arange(10, 60)
    report = analyse(fn, rows, top=6)
    assert report.n_items == 50
    assert len(report.triangles()) == 6
    g = report.preference
    for triangle, (a, b, c) in zip(report.triangles(), report.cycles.items, strict=True):
        assert triangle["items"] == [f"i{10 + x}" for x in (a, b, c)]
        assert a < b and a < c
        expected = 1 / (1 + np.exp(-np.array([g[a, b], g[b, c], g[c, a]])))
        np.testing.assert_allclose(triangle["p"], expected, rtol=1e-12)
        assert min(triangle["p"]) > 0.5
    with pytest.raises(ValueError, match="at least 3"):
        analyse(fn, np.array([0, 1]))
    with pytest.raises(ValueError, match="twice"):
        analyse(fn, np.array([0, 1, 1]))


# -- the data's own cycles ------------------------------------------------------------
def test_net_wins_and_most_active(tmp_path):
    from prefshap_core.data.duel_data import DuelData

    rng = np.random.default_rng(0)
    n, m = 8, 200
    left, right = rng.integers(0, n, m), rng.integers(0, n, m)
    y = rng.choice([-1, 1], m).astype(np.int8)
    space = FeatureSpace(("h",), ("h",), np.array([0]), np.zeros(1), np.ones(1))
    data = DuelData(name="unit", item_ids=np.array([f"i{k}" for k in range(n)]),
                    items=rng.normal(size=(n, 1)), item_space=space, left=left, right=right,
                    y=y, duel_ids=np.array([str(k) for k in range(m)]))  # fmt: skip
    rows = np.array([6, 1, 3, 0])
    slow = np.zeros((4, 4))
    for li, ri, yy in zip(left, right, y, strict=True):
        if li in rows and ri in rows and li != ri:
            a, b = int(np.flatnonzero(rows == li)[0]), int(np.flatnonzero(rows == ri)[0])
            winner, loser = (a, b) if yy > 0 else (b, a)
            slow[winner, loser] += 1
    np.testing.assert_array_equal(net_wins(data, rows), slow - slow.T)
    activity = np.bincount(left, minlength=n) + np.bincount(right, minlength=n)
    top3 = most_active_items(data, 3)
    assert sorted(activity[top3].tolist()) == sorted(activity)[-3:] and list(top3) == sorted(top3)


# -- contexts --------------------------------------------------------------------------
def test_context_conditioning_fixes_groups_and_averages_the_rest():
    fn = _function("cgpm", 1)
    rows = np.arange(12)
    a, b = np.triu_indices(12, 1)
    space = fn.context_space
    raw = space.to_raw(fn.contexts)
    w = fn.context_weights

    def under(raw_context):  # g under one context, through the model's own evaluation
        u = space.standardise(np.asarray(raw_context, float))[None, :]
        return fn.decision_on_pool(fn.items[rows], a, b, u, np.zeros(len(a), int))

    clay = preference_matrix(condition_on_context(fn, {"surface": "clay"}), rows)[a, b]
    expected = sum(wk * under([1, 0, t]) for wk, t in zip(w, raw[:, 2], strict=True)) / w.sum()
    np.testing.assert_allclose(clay, expected, atol=1e-12)
    one = preference_matrix(condition_on_context(fn, {"surface": "hard", "temp": "25"}), rows)
    np.testing.assert_allclose(one[a, b], under([0, 1, 25.0]), atol=1e-12)
    averaged = preference_matrix(condition_on_context(fn, {}), rows)
    np.testing.assert_allclose(averaged, preference_matrix(fn, rows), atol=0)
    assert categorical_context_groups(fn) == {"surface": ["clay", "hard"]}


@pytest.mark.parametrize(
    "texts, message",
    [
        (["surface"], "expected k=v"),
        (["surface=clay", "surface=hard"], "given twice"),
        (["venue=x"], "not a context group or column"),
        (["surface=grass"], "unknown category .*known: clay, hard"),
        (["temp=warm"], "numeric, 'warm' is not a number"),
    ],
)
def test_bad_contexts_are_named(texts, message):
    with pytest.raises(ValueError, match=message):
        condition_on_context(_function("cgpm"), parse_context_assignments(texts))


def test_context_on_a_model_without_context_is_refused():
    with pytest.raises(ValueError, match="needs a C-GPM"):
        condition_on_context(_function("gpm"), {"surface": "clay"})


def test_dataset_view_maps_items_by_id_and_finds_the_datas_cycles():
    from prefshap_core.analysis.explorer import dataset_intransitivity
    from prefshap_core.datasets.registry import load_dataset
    from prefshap_core.paths import repo_root

    data = load_dataset(repo_root() / "sample_data")
    fn = _function("gpm", 2, n=data.n_items)
    # The model's pool in another order than the data's: items must be matched by id.
    order = np.random.default_rng(0).permutation(data.n_items)
    fn = dataclasses.replace(fn, item_ids=data.item_ids[order].astype(str))
    result = dataset_intransitivity(fn, data, 25, top=5)
    assert result.n_items == 25
    np.testing.assert_array_equal(result.model.item_ids, data.item_ids[result.data_rows])
    wins = result.net_wins
    assert result.n_observed_cycles == len(_brute_cycles(wins)) > 0
    brute = _brute_cycles(wins)[:5]
    assert result.observed.items.tolist() == [[a, b, c] for _, a, b, c in brute]
