"""Posterior sds of g and of exact Pref-SHAP values against a brute-force reference.

The reference: g and every value are linear in alpha, so explaining with
``alpha = e_j`` for each centre ``j`` gives the per-centre values ``Phi`` (and the
brackets ``b``); then ``sd = sqrt(diag(Phi F F^T Phi^T))`` with ``F`` as stored.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from prefshap_core.compute import Compute
from prefshap_core.errors import NotFittedError
from prefshap_core.explain import Explainer, ExplainOptions, uncertainty
from prefshap_core.explain.interaction_explanation import explain_interactions
from prefshap_core.explain.options import CGOptions
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.explain.uncertainty import combined_sd, interaction_sd

ITEM_GROUPS = [("a", 1), ("type", 3), ("b", 1)]
CONTEXT_GROUPS = [("indoor", 1), ("surface", 3), ("altitude", 1)]
CASES = [("gpm", 0.0, "items"), ("gpm", 0.7, "items"), ("upm", 0.0, "items"),
         ("cgpm", 0.5, "items"), ("cgpm", 0.5, "context"), ("cgpm", 0.0, "context")]  # fmt: skip


def make(kind: str, weight: float, seed: int = 1, rank: int = 5):
    extra = dict(context_groups=CONTEXT_GROUPS, n_contexts=9) if kind == "cgpm" else {}
    fn = random_preference_function(kind, n_items=10, n_centres=12, groups=ITEM_GROUPS,
                                    seed=seed, **extra)  # fmt: skip
    if kind != "upm":
        fn = replace(fn, utility_weight=weight)
    rng = np.random.default_rng(seed)
    fn = replace(fn, posterior_factor=rng.standard_normal((fn.n_centres, rank)))
    left, right = rng.integers(0, 10, 7), rng.integers(0, 10, 7)
    left[0] = right[0]  # a duel of an item with itself: every sd is 0
    contexts = fn.contexts[rng.integers(0, len(fn.contexts), 7)] if kind == "cgpm" else None
    return fn, left, right, contexts


def brute_force(fn, what, left, right, contexts):
    """(Phi (D, p, M), brackets of the output (D, M), of the base value (D, M))."""
    m = fn.n_centres
    parts = []
    for j in range(m):
        unit = np.zeros(m)
        unit[j] = 1.0
        e = Explainer(replace(fn, alpha=unit, posterior_factor=None),
                      ExplainOptions(what=what))(left, right, contexts=contexts)  # fmt: skip
        parts.append((e.values, e.outputs, e.base_values))
    phi = np.stack([p[0] for p in parts], axis=2)
    return phi, np.stack([p[1] for p in parts], 1), np.stack([p[2] for p in parts], 1)


def quadratic_sd(rows: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    return np.sqrt(np.maximum(np.einsum("...j,jk,...k->...", rows, sigma, rows), 0.0))


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))


@pytest.mark.parametrize("kind, weight, what", CASES)
def test_sds_equal_the_brute_force_reference(kind, weight, what):
    fn, left, right, contexts = make(kind, weight)
    e = Explainer(fn, ExplainOptions(what=what, uncertainty=True))(left, right, contexts=contexts)
    phi, outputs, bases = brute_force(fn, what, left, right, contexts)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    assert e.sd.shape == e.values.shape
    assert relative(e.sd, quadratic_sd(phi, sigma)) < 1e-8
    assert relative(e.output_sd, quadratic_sd(outputs, sigma)) < 1e-8
    assert e.sd[0].max() == 0.0 and e.output_sd[0] == 0.0  # an item against itself
    if what == "context":
        assert relative(e.base_value_sd, quadratic_sd(bases, sigma)) < 1e-8
        assert e.base_value_sd.max() > 0
    else:
        np.testing.assert_array_equal(e.base_value_sd, 0.0)
    # The values themselves are the plain explanation's, bitwise.
    plain = Explainer(fn, ExplainOptions(what=what))(left, right, contexts=contexts)
    np.testing.assert_array_equal(e.values, plain.values)
    assert plain.sd is None and plain.output_sd is None


@pytest.mark.parametrize("kind, weight", [("gpm", 0.0), ("gpm", 0.7), ("upm", 0.0), ("cgpm", 0.5)])
def test_brackets_in_blocks_of_two_centres_give_the_same_sds(kind, weight, monkeypatch):
    fn, left, right, contexts = make(kind, weight)
    options = ExplainOptions(uncertainty=True)
    whole = Explainer(fn, options)(left, right, contexts=contexts)
    monkeypatch.setattr(uncertainty, "_BRACKET_BLOCK_ELEMENTS", 1)
    monkeypatch.setattr(uncertainty, "_MIN_BRACKET_BLOCK_ROWS", 2)  # 12 centres: 6 blocks
    blocked = Explainer(fn, options)(left, right, contexts=contexts)
    np.testing.assert_array_equal(blocked.sd, whole.sd)
    np.testing.assert_array_equal(blocked.output_sd, whole.output_sd)
    phi, _, _ = brute_force(fn, "items", left, right, contexts)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    assert relative(blocked.sd, quadratic_sd(phi, sigma)) < 1e-8


@pytest.mark.parametrize("kind, weight", [("gpm", 0.0), ("gpm", 0.7), ("upm", 0.0), ("cgpm", 0.5)])
def test_decision_sd_equals_the_brackets_quadratic_form(kind, weight):
    fn, left, right, contexts = make(kind, weight, seed=4, rank=12)
    x_l, x_r = fn.items[left], fn.items[right]
    m = fn.n_centres
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    for u in [None] if kind != "cgpm" else [None, contexts]:
        brackets = np.stack(
            [replace(fn, alpha=np.eye(m)[j]).decision(x_l, x_r, u) for j in range(m)], 1
        )
        assert relative(fn.decision_sd(x_l, x_r, u), quadratic_sd(brackets, sigma)) < 1e-8
        swapped = fn.decision_sd(x_r, x_l, u)
        np.testing.assert_array_equal(swapped, fn.decision_sd(x_l, x_r, u))


def test_views_keep_the_sds_with_their_duels():
    fn, left, right, _ = make("gpm", 0.7)
    e = Explainer(fn, ExplainOptions(uncertainty=True))(left, right, winners=np.ones(7))
    sub = e.subset(np.array([3, 1]))
    np.testing.assert_array_equal(sub.sd, e.sd[[3, 1]])
    np.testing.assert_array_equal(sub.output_sd, e.output_sd[[3, 1]])
    flipped = e.reoriented(-np.ones(7), "winner")  # sds do not change sign
    np.testing.assert_array_equal(flipped.sd, e.sd)
    np.testing.assert_array_equal(flipped.values, -e.values)


def test_without_a_posterior_asking_for_uncertainty_says_retrain():
    fn, left, right, _ = make("gpm", 0.0)
    plain = replace(fn, posterior_factor=None)
    with pytest.raises(NotFittedError, match="retrain"):
        Explainer(plain, ExplainOptions(uncertainty=True))(left, right)
    assert Explainer(plain)(left, right).sd is None  # explains as before


@pytest.mark.parametrize("what, samples", [("items", 4), ("sides", 20)])
def test_sampled_value_sds_equal_the_brute_force_reference(what, samples):
    """A sampled value is linear in alpha too (the design is fixed by the seed): its
    posterior sd is that of the sampled estimate, not of the exact value."""
    fn, left, right, _ = make("gpm", 0.7, seed=4)
    options = ExplainOptions(what=what, shapley=f"sampled:{samples}", uncertainty=True,
                             seed=2)  # fmt: skip
    e = Explainer(fn, options)(left, right)
    assert e.meta["shapley"] != "exact" and np.isfinite(e.standard_errors).all()
    m = fn.n_centres
    parts = []
    for j in range(m):
        unit = np.zeros(m)
        unit[j] = 1.0
        plain = replace(options, uncertainty=False)
        parts.append(Explainer(replace(fn, alpha=unit, posterior_factor=None), plain)(left, right))
    phi = np.stack([p.values for p in parts], axis=2)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    assert relative(e.sd, quadratic_sd(phi, sigma)) < 1e-8
    exact = Explainer(fn, ExplainOptions(what=what, uncertainty=True))(left, right)
    assert relative(e.sd, exact.sd) > 1e-3  # the sampled estimate's own sd
    np.testing.assert_allclose(e.output_sd, exact.output_sd, rtol=1e-10)


def test_combined_sd_adds_the_variances():
    se, sd = np.array([[0.3, 0.0, np.nan]]), np.array([[0.4, 0.2, 0.1]])
    np.testing.assert_allclose(combined_sd(se, sd)[0, :2], [0.5, 0.2])
    assert np.isnan(combined_sd(se, sd)[0, 2])
    np.testing.assert_array_equal(combined_sd(None, sd), sd)


@pytest.mark.parametrize("kind, weight", [("gpm", 0.0), ("gpm", 0.7), ("upm", 0.0), ("cgpm", 0.5)])
def test_side_sds_equal_the_brute_force_reference(kind, weight):
    fn, left, right, _ = make(kind, weight, seed=3)
    e = Explainer(fn, ExplainOptions(what="sides", uncertainty=True))(left, right)
    phi, outputs, _ = brute_force(fn, "sides", left, right, None)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    assert e.sd.shape == e.values.shape == (7, 6)
    assert relative(e.sd, quadratic_sd(phi, sigma)) < 1e-8
    assert relative(e.output_sd, quadratic_sd(outputs, sigma)) < 1e-8
    swapped = Explainer(fn, ExplainOptions(what="sides", uncertainty=True))(right, left)
    np.testing.assert_allclose(swapped.sd, e.sd[:, [3, 4, 5, 0, 1, 2]], rtol=1e-12)


# key() strings computed before the uncertainty field existed: unchanged by it.
KEYS_BEFORE = {
    "default": '{"cme": {"cg": {"landmarks": "rpcholesky", "max_gram_bytes": null, "max_iter": 100, "preconditioner_rank": 256, "seed": 0, "tol": null}, "cholesky": {"batch_equal_sizes": null}, "exact_seconds_budget": 120.0, "method": "auto", "nystrom": {"correction": "diagonal", "landmarks": "rpcholesky", "n_landmarks": 512, "seed": 0}, "nystrom_min_saving": 4.0}, "cme_lambda": null, "coalition_batch": null, "max_exact_players": null, "n_samples": null, "seed": 0, "task_coalitions": null, "what": "items"}',  # noqa: E501
    "context": '{"cme": {"cg": {"landmarks": "rpcholesky", "max_gram_bytes": null, "max_iter": 100, "preconditioner_rank": 256, "seed": 0, "tol": null}, "cholesky": {"batch_equal_sizes": null}, "exact_seconds_budget": 120.0, "method": "auto", "nystrom": {"correction": "diagonal", "landmarks": "rpcholesky", "n_landmarks": 512, "seed": 0}, "nystrom_min_saving": 4.0}, "cme_lambda": null, "coalition_batch": null, "max_exact_players": null, "n_samples": 100, "seed": 3, "task_coalitions": null, "what": "context"}',  # noqa: E501
    "sides": '{"cme": {"landmarks": "rpcholesky", "max_gram_bytes": null, "max_iter": 100, "method": "cg", "preconditioner_rank": 256, "seed": 0, "tol": 1e-06}, "cme_lambda": null, "coalition_batch": null, "max_exact_players": 1000000000, "n_samples": null, "seed": 0, "task_coalitions": null, "what": "sides"}',  # noqa: E501
}


def test_key_unchanged_without_uncertainty_and_changed_with_it():
    options = {
        "default": ExplainOptions(),
        "context": ExplainOptions(what="context", shapley="auto:100", seed=3),
        "sides": ExplainOptions(what="sides", cme=CGOptions(tol=1e-6), shapley="exact"),
    }
    for name, option in options.items():
        assert option.key() == KEYS_BEFORE[name]
        with_sd = replace(option, uncertainty=True)
        assert with_sd.key() != option.key() and '"uncertainty": true' in with_sd.key()


@pytest.mark.parametrize("kind, weight", [("gpm", 0.7), ("upm", 0.0), ("cgpm", 0.5)])
def test_interaction_sds_equal_the_brute_force_reference(kind, weight):
    fn, left, right, _ = make(kind, weight, seed=2)
    sd = interaction_sd(Explainer(fn), left, right)
    m = fn.n_centres
    parts = [explain_interactions(replace(fn, alpha=np.eye(m)[j], posterior_factor=None),
                                  left, right) for j in range(m)]  # fmt: skip
    phi = np.stack([p.values for p in parts], axis=2)
    outputs = np.stack([p.outputs for p in parts], axis=1)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    assert sd.values.shape == parts[0].values.shape
    assert relative(sd.values, quadratic_sd(phi, sigma)) < 1e-8
    assert relative(sd.outputs, quadratic_sd(outputs, sigma)) < 1e-8


def test_one_player_and_many_duel_groups_give_the_same_sds(monkeypatch):
    """The watched pass against the separate one (exact_value_sd), and across duel groups."""
    from prefshap_core.explain import duel_groups
    from prefshap_core.explain.uncertainty import exact_value_sd

    fn, left, right, contexts = make("cgpm", 0.5, seed=5)
    for what in ("items", "context"):
        e = Explainer(fn, ExplainOptions(what=what, uncertainty=True))(
            left, right, contexts=contexts
        )
        monkeypatch.setattr(duel_groups, "_MAX_VALUES_IN_MEMORY", 40)  # groups of a few duels
        split = Explainer(fn, ExplainOptions(what=what, uncertainty=True))(
            left, right, contexts=contexts
        )
        monkeypatch.undo()
        np.testing.assert_allclose(split.sd, e.sd, rtol=1e-10, atol=1e-14)
        explainer = Explainer(fn, ExplainOptions(what=what))
        explainer(left, right, contexts=contexts)
        from prefshap_core.explain.duels import canonical_duels
        from prefshap_core.explain.shapley.coalitions import all_coalitions

        ctx = contexts if what == "context" else None
        canon = canonical_duels(fn.items[left], fn.items[right], ctx)
        sd = exact_value_sd(explainer._game, canon.batch, all_coalitions(3).masks, Compute())
        np.testing.assert_allclose(sd.values[canon.inverse], e.sd, rtol=1e-10, atol=1e-14)
    one = random_preference_function(
        "cgpm", n_items=8, n_centres=6, groups=ITEM_GROUPS, context_groups=[("indoor", 1)],
        n_contexts=2, seed=1,
    )  # fmt: skip
    one = replace(one, posterior_factor=np.ones((6, 2)))
    ctx = one.contexts[[0, 1, 1]]
    e = Explainer(one, ExplainOptions(what="context", uncertainty=True))(
        [0, 1, 2], [3, 4, 5], contexts=ctx
    )
    phi, *_ = brute_force(one, "context", [0, 1, 2], [3, 4, 5], ctx)
    sigma = one.posterior_factor @ one.posterior_factor.T
    assert relative(e.sd, quadratic_sd(phi, sigma)) < 1e-8


def test_bar_posterior_sd_bounds_the_exact_sd_of_the_bars_mean():
    """The bar's ``posterior_sd_bound`` (mean of per-duel sds) is >= the exact sd of
    the bar's mean, ``||mean_d Phi(d) F||``, and equals it when every duel is the same."""
    from prefshap_core.plots.bar import bar_table

    fn, left, right, _ = make("gpm", 0.7, seed=3, rank=6)
    left, right = left[1:], right[1:]
    e = Explainer(fn, ExplainOptions(uncertainty=True))(left, right)
    phi, _, _ = brute_force(fn, "items", left, right, None)
    sigma = fn.posterior_factor @ fn.posterior_factor.T
    table = bar_table(e, kind="mean", max_display=e.n_players).set_index("feature")
    exact = quadratic_sd(phi.mean(axis=0), sigma)  # (p,): sd of each player's mean
    for j, name in enumerate(e.player_names):
        bound = table.loc[name, "posterior_sd_bound"]
        assert np.isclose(bound, e.sd[:, j].mean())
        assert bound >= exact[j] * (1 - 1e-12) and exact[j] > 0
    same = Explainer(fn, ExplainOptions(uncertainty=True))(left[[0, 0, 0]], right[[0, 0, 0]])
    phi_same, _, _ = brute_force(fn, "items", left[[0]], right[[0]], None)
    table_same = bar_table(same, kind="mean", max_display=same.n_players)
    np.testing.assert_allclose(
        table_same.set_index("feature").loc[list(same.player_names), "posterior_sd_bound"],
        quadratic_sd(phi_same[0], sigma), rtol=1e-8,
    )  # fmt: skip
    assert "posterior_sd_bound" not in bar_table(Explainer(fn)(left, right), kind="mean")
