"""The Laplace posterior of a fit: the formula, the factor's rank, the model file."""

from __future__ import annotations

import re
from dataclasses import replace

import mpmath
import numpy as np
import pytest
import torch

from prefshap_core.compute import Compute
from prefshap_core.datasets.synthetic import gpm_generated
from prefshap_core.errors import ModelFileError, NotFittedError
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.models import data_term, posterior, posterior_calibration
from prefshap_core.models.estimators import CGPM, GPM, UPM
from prefshap_core.models.model_file import load_model, model_arrays, save_model
from prefshap_core.models.posterior import laplace_posterior
from prefshap_core.paths import repo_root
from prefshap_core.solvers.options import SolverOptions

CONTEXT_GROUPS = [("indoor", 1), ("surface", 3)]


def _data(kind: str):
    data = gpm_generated(n_items=40, n_duels=300, d=3, seed=3)
    if kind != "cgpm":
        return data
    rng = np.random.default_rng(0)
    contexts = rng.normal(size=(4, 2))
    return replace(
        data,
        contexts=contexts,
        context_index=rng.integers(0, 4, data.n_duels),
        context_space=random_preference_function(
            "cgpm", context_groups=[("u1", 1), ("u2", 1)], seed=1
        ).context_space,
    )


def _fit(kind: str, weight: float):
    model = {"gpm": GPM, "upm": UPM, "cgpm": CGPM}[kind]
    params = dict(n_centres=15, penalty=1e-3, lengthscale_scale=2.0, seed=0, selection="holdout")
    if kind != "upm":
        params["utility_weight"] = weight
    if kind == "cgpm":
        params["context_lengthscales"] = np.array([1.5, 1.5])
    data = _data(kind)
    return model(**params).fit(data), data


def _direct_sigma(model, data) -> tuple[np.ndarray, np.ndarray]:
    """``Sigma = (K_nM^T W K_nM + P)^-1`` from the training kernel, densely, and the
    prior precision ``P = n lam (K_MM + j I)``."""
    fn = model.function_
    info = fn.metadata["posterior"]
    train = model.train_duels_
    ctx = data.context_index[train] if fn.kind == "cgpm" else None
    duels = DuelIndex.from_arrays(data.left[train], data.right[train], ctx)
    kernel = PairKernel(
        fn.kind, data.items, fn.lengthscales,
        data.contexts if fn.kind == "cgpm" else None, fn.context_lengthscales, Compute(),
    )  # fmt: skip
    if fn.kind != "upm":
        kernel = kernel.with_utility_weight(fn.utility_weight)
    centres = np.sort(
        np.random.default_rng(model.seed).choice(len(train), fn.n_centres, replace=False)
    )
    k_nm = kernel.matrix(duels, duels.subset(torch.as_tensor(centres))).numpy()
    k_mm = k_nm[centres]
    np.testing.assert_allclose(k_nm @ fn.alpha, model.decision_function(data, train), atol=1e-10)
    p = 1.0 / (1.0 + np.exp(-(k_nm @ fn.alpha)))
    n, m = len(train), fn.n_centres
    assert info["n_duels"] == n and info["penalty"] == model.penalty_
    prior = n * info["penalty"] * (k_mm + info["jitter"] * np.eye(m))
    return np.linalg.inv(k_nm.T @ (k_nm * (p * (1 - p))[:, None]) + prior), prior


@pytest.mark.parametrize("kind, weight", [("gpm", 0.0), ("gpm", 2.0), ("upm", 0.0), ("cgpm", 1.0)])
def test_posterior_equals_the_dense_formula(kind, weight):
    model, data = _fit(kind, weight)
    fn = model.function_
    sigma, prior = _direct_sigma(model, data)
    train = model.train_duels_
    with_context = kind == "cgpm"
    post = laplace_posterior(
        fn, data.items, data.left[train], data.right[train], data.y[train], model.penalty_,
        SolverOptions().jitter_for(torch.float64),
        data.contexts if with_context else None,
        data.context_index[train] if with_context else None,
        trace_share=1.0,
    )  # fmt: skip
    full = post.factor
    assert full.shape == (fn.n_centres, fn.n_centres)
    error = np.linalg.norm(full @ full.T - sigma) / np.linalg.norm(sigma)
    assert error < 1e-8
    # The penalty's bias of alpha, u = F v = n lam Sigma K (alpha + u1), K = K_MM + j I,
    # with the plug-in u1 = n lam Sigma K alpha (prior = n lam K): de-shrunk once.
    plug_in = sigma @ prior @ fn.alpha
    bias = sigma @ prior @ (fn.alpha + plug_in)
    assert np.linalg.norm(plug_in) > 0
    assert np.linalg.norm(bias - plug_in) > 1e-6 * np.linalg.norm(plug_in)  # a real step
    u = full @ post.bias_coordinates
    assert np.linalg.norm(u - bias) < 1e-8 * np.linalg.norm(bias)
    # The stored factor keeps at least 99.9 % of trace(Sigma), widened by that bias.
    stored = fn.posterior_factor
    assert stored.shape[1] == fn.metadata["posterior"]["rank"] <= fn.n_centres
    assert np.trace(stored @ stored.T) >= 0.999 * np.trace(sigma)


def test_upm_data_term_over_items_equals_the_one_over_duels(monkeypatch):
    """The UPM's data term E^T C E (items and the comparison graph's Laplacian) is the
    whitened duel rows' Gram, which it replaces when there are fewer items than duels."""
    model, data = _fit("upm", 0.0)
    fn, train = model.function_, model.train_duels_
    args = (fn, data.items, data.left[train], data.right[train], data.y[train], 1e-3, 1e-13)
    used = []
    monkeypatch.setattr(data_term, "item_rows_pay", lambda op: used.append(True) or True)
    by_items = laplace_posterior(*args, trace_share=1.0)
    monkeypatch.setattr(data_term, "item_rows_pay", lambda op: False)
    by_duels = laplace_posterior(*args, trace_share=1.0)
    assert used
    sigma_items = by_items.factor @ by_items.factor.T
    sigma_duels = by_duels.factor @ by_duels.factor.T
    assert np.linalg.norm(sigma_items - sigma_duels) < 1e-10 * np.linalg.norm(sigma_duels)


def test_upm_held_out_sds_over_items_equal_the_ones_over_duels(monkeypatch):
    """The dispersion's held-out g and sd of a UPM, formed over the duels' distinct items
    ((D F)[l] - (D F)[r]), are the bracket rows' (D[l] - D[r]) F."""
    model, data = _fit("upm", 0.0)
    fn, duels = model.function_, np.arange(data.n_duels)
    args = (fn, data.items, data.left[duels], data.right[duels], None, None, Compute())
    used = []
    monkeypatch.setattr(data_term, "item_rows_pay", lambda op: used.append(True) or True)
    g_items, sd_items = data_term.decision_and_sd(*args)
    monkeypatch.setattr(data_term, "item_rows_pay", lambda op: False)
    g_rows, sd_rows = data_term.decision_and_sd(*args)
    assert used
    np.testing.assert_allclose(g_items, g_rows, rtol=0, atol=1e-10 * np.abs(g_rows).max())
    np.testing.assert_allclose(sd_items, sd_rows, rtol=1e-8)
    np.testing.assert_allclose(g_rows, model.decision_function(data, duels), rtol=1e-10)


def test_widening_by_the_penalty_bias_adds_u_u_t_in_the_same_shape():
    rng = np.random.default_rng(2)
    factor, v = rng.normal(size=(9, 6)), rng.normal(size=6)
    widened = posterior_calibration.widen_by_penalty_bias(factor, v)
    u = factor @ v
    assert widened.shape == factor.shape
    np.testing.assert_allclose(widened @ widened.T, factor @ factor.T + np.outer(u, u),
                               rtol=0, atol=1e-12)  # fmt: skip
    # No bias leaves the factor as it is.
    assert posterior_calibration.widen_by_penalty_bias(factor, 0 * v) is factor


def test_a_trained_model_stores_the_widened_factor_scaled_by_its_dispersion():
    model, data = _fit("gpm", 1.0)
    fn, train = model.function_, model.train_duels_
    post = laplace_posterior(
        fn, data.items, data.left[train], data.right[train], data.y[train], model.penalty_,
        SolverOptions().jitter_for(torch.float64),
    )  # fmt: skip
    info = fn.metadata["posterior"]
    c = info.get("dispersion", 1.0)
    expected = c * posterior_calibration.widen_by_penalty_bias(post.factor, post.bias_coordinates)
    np.testing.assert_allclose(fn.posterior_factor, expected, rtol=1e-12, atol=1e-15)
    assert info["penalty_bias_norm"] == pytest.approx(np.linalg.norm(post.bias_coordinates))


def test_squared_loss_models_have_no_posterior():
    data = _data("gpm")
    model = GPM(n_centres=15, penalty=1e-3, lengthscale_scale=2.0, loss="squared").fit(data)
    assert model.function_.posterior_factor is None
    assert "posterior" not in model.function_.metadata
    with pytest.raises(NotFittedError, match="retrain"):
        model.function_.decision_sd(data.items[:2], data.items[2:4])


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_large_data_use_a_seeded_subsample_of_the_duels(kind):
    model, data = _fit(kind, 1.0)
    fn, train = model.function_, model.train_duels_
    ctx = (data.contexts, data.context_index[train]) if kind == "cgpm" else (None, None)
    args = (fn, data.items, data.left[train], data.right[train], data.y[train], 1e-3, 1e-13,
            *ctx)  # fmt: skip
    small = laplace_posterior(*args, max_duels=100, seed=4)
    again = laplace_posterior(*args, max_duels=100, seed=4)
    whole = laplace_posterior(*args)
    assert whole.info["n_duels_used"] == len(train)  # below the cap: every duel
    if kind == "upm":  # over its items, the data term costs the same for every duel
        assert small.info["n_duels_used"] == len(train)
        np.testing.assert_array_equal(small.factor, whole.factor)
        return
    assert small.info["n_duels_used"] == 100 and small.info["n_duels"] == len(train)
    np.testing.assert_array_equal(small.factor, again.factor)
    ratio = np.trace(small.factor @ small.factor.T) / np.trace(whole.factor @ whole.factor.T)
    assert 0.5 < ratio < 2.0  # the same size: the data term is reweighted, not shrunk


def test_curvature_sample_draws_each_duel_with_its_probability():
    rng = np.random.default_rng(1)
    w = rng.random(40) * 0.25
    w[:3] = [5.0, 0.0, 1e-6]  # one capped at pi = 1, one never drawn, one almost never
    draws, counts = 4000, np.zeros(40)
    pi = np.full(40, np.nan)
    for seed in range(draws):
        rows, weights = data_term.curvature_sample(w, 8, seed)
        assert len(rows) == 8 and len(np.unique(rows)) == 8 and np.all(np.diff(rows) > 0)
        counts[rows] += 1
        pi[rows] = w[rows] / weights
    assert counts[0] == draws and counts[1] == 0
    np.testing.assert_allclose(pi[3:] / w[3:], pi[3] / w[3], rtol=1e-12)  # pi = c w below 1
    pi[1:3] = w[1:3] * (pi[3] / w[3])  # rows 1-2 (almost) never drawn: their pi by c
    np.testing.assert_allclose(pi.sum(), 8.0, rtol=1e-12)  # sum pi = sample size
    se = np.sqrt(pi * (1 - pi) / draws)
    assert np.all(np.abs(counts / draws - pi)[3:] <= 4.5 * se[3:] + 1e-12)


def test_sampled_data_term_is_unbiased():
    """E[sum_S weight_i h_i] = sum_i w_i h_i over the two-stage sample, for any h."""
    model, data = _fit("gpm", 1.0)
    fn, train = model.function_, model.train_duels_
    left, right = data.left[train], data.right[train]
    compute = Compute(dtype="float64")
    p = 1.0 / (1.0 + np.exp(-model.decision_function(data, train)))
    w = p * (1.0 - p)
    h = np.random.default_rng(2).standard_normal(len(train)) ** 2
    sums = []
    for seed in range(600):
        rows, weights = data_term.sampled_rows(
            fn, data.items, left, right, None, None, compute, 30, seed
        )
        sums.append(weights @ h[rows])
    sums = np.asarray(sums)
    assert abs(sums.mean() - w @ h) <= 4.5 * sums.std() / np.sqrt(len(sums))
    assert sums.std() > 0  # a sample, not every duel


def _with_factor(kind: str, seed: int = 0):
    groups = [("a", 1), ("type", 3)]
    extra = dict(context_groups=CONTEXT_GROUPS, n_contexts=5) if kind == "cgpm" else {}
    fn = random_preference_function(kind, n_items=9, n_centres=8, groups=groups, seed=seed,
                                    **extra)  # fmt: skip
    if kind != "upm":
        fn = replace(fn, utility_weight=0.5)
    factor = np.random.default_rng(seed).standard_normal((fn.n_centres, 3))
    return replace(fn, posterior_factor=factor)


def test_model_file_round_trip_and_validation(tmp_path):
    fn = _with_factor("gpm")
    back = load_model(save_model(fn, tmp_path / "m.npz"))
    np.testing.assert_array_equal(back.posterior_factor, fn.posterior_factor)
    assert back.posterior_factor.dtype == np.float64
    without = load_model(save_model(replace(fn, posterior_factor=None), tmp_path / "plain.npz"))
    assert without.posterior_factor is None
    assert int(np.load(tmp_path / "m.npz")["format_version"]) == 2  # optional: same version
    arrays = model_arrays(fn)
    bad = {
        "wrong rows": np.ones((fn.n_centres + 1, 2)),
        "no columns": np.ones((fn.n_centres, 0)),
        "not finite": np.where(np.eye(fn.n_centres, 2) > 0, np.nan, 1.0),
        "one-d": np.ones(fn.n_centres),
        "strings": np.full((fn.n_centres, 2), "x"),
    }
    for name, value in bad.items():
        np.savez(tmp_path / "bad.npz", **{**arrays, "posterior_factor": value})
        with pytest.raises(ModelFileError, match="posterior_factor"):
            load_model(tmp_path / "bad.npz")
        assert name


def _uncertainty_snippet() -> str:
    text = (repo_root() / "docs" / "model-format.md").read_text(encoding="utf-8")
    reader = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    snippet = re.findall(r"```py\n(.*?)```", text, flags=re.S)
    assert len(reader) == 1 and len(snippet) == 1
    return reader[0] + snippet[0]


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_documented_output_sd_reader_matches_decision_sd(tmp_path, monkeypatch, kind):
    fn = _with_factor(kind, seed=2)
    save_model(fn, tmp_path / "model.npz")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(_uncertainty_snippet(), namespace)
    x_l, x_r = fn.items[:5], fn.items[[3, 4, 5, 6, 0]]
    want = fn.decision_sd(x_l, x_r)
    assert want.min() > 0
    np.testing.assert_allclose(namespace["output_sd"](x_l, x_r), want, rtol=1e-10)
    if kind == "cgpm":
        u = fn.contexts[np.arange(5) % len(fn.contexts)]
        np.testing.assert_allclose(
            namespace["output_sd"](x_l, x_r, u), fn.decision_sd(x_l, x_r, u), rtol=1e-10
        )


def test_ill_conditioned_posterior_matches_a_40_digit_reference():
    """A smooth kernel (lengthscale scale 8) makes K_MM + j I nearly singular; whitening
    the summed data term from both sides then lost ~1e-3 of g's sd (and its Cholesky
    failed). Whitening the rows keeps the sd to ~1e-9 of the formula evaluated with
    40 digits on the same float64 kernel values."""
    data = gpm_generated(n_items=40, n_duels=300, d=3, seed=3)
    m = 60
    model = GPM(n_centres=m, penalty=1e-6, lengthscale_scale=8.0, seed=0, selection="holdout")
    model.fit(data, posterior=False)
    fn, train = model.function_, model.train_duels_
    compute = Compute(dtype="float64")
    kernel, _, centres = data_term.bracket_kernel(fn, data.items, [], [], None, None, compute)
    k_mm = kernel.centre_gram(centres).numpy()
    eigenvalues = np.linalg.eigvalsh(k_mm)
    assert eigenvalues[-1] / max(eigenvalues[0], 1e-300) > 1e12 or eigenvalues[0] <= 0
    jitter = SolverOptions().jitter_for(torch.float64)
    post = laplace_posterior(
        fn, data.items, data.left[train], data.right[train], data.y[train], model.penalty_,
        jitter, trace_share=1.0,
    )  # fmt: skip
    b = fn.centre_brackets_on_pool(
        data.items, data.left[train], data.right[train], None, None, compute
    ).numpy()
    p = 1.0 / (1.0 + np.exp(-(b @ fn.alpha)))
    n = len(train)
    probe = b[:20]
    with mpmath.workdps(40):
        big_b = mpmath.matrix(b.tolist())
        weights = p * (1.0 - p)
        weighted = mpmath.matrix(n, m)  # the products in 40 digits, not rounded to float64
        for i in range(n):
            for k in range(m):
                weighted[i, k] = big_b[i, k] * weights[i]
        h = big_b.T * weighted + n * model.penalty_ * (
            mpmath.matrix(k_mm.tolist()) + post.info["jitter"] * mpmath.eye(m)
        )
        sigma = h**-1
        rows = [mpmath.matrix(row.tolist()) for row in probe]
        reference = np.array([float(mpmath.sqrt((row.T * sigma * row)[0])) for row in rows])
    sd = np.linalg.norm(probe @ post.factor, axis=1)
    np.testing.assert_allclose(sd, reference, rtol=1e-8)


@pytest.mark.parametrize("spoiled", [False, True])
def test_full_factor_is_upper_triangular_with_the_posterior_covariance(spoiled):
    """``F F^T = L^-T H^-1 L^-1`` and F upper triangular (the guard's product relies on
    it), with ``L^-1`` given or not; an ``H`` that round-off left indefinite is clipped
    at the floor along its eigenvectors, and F is still upper triangular."""
    rng = np.random.default_rng(9)
    m, floor = 12, 0.5
    a = rng.standard_normal((m, m))
    lower = np.linalg.cholesky(a @ a.T / m + np.eye(m))
    values = rng.uniform(1.0, 3.0, m)
    if spoiled:
        values[:2] = [-1e-3, 0.2]  # below the floor: the Cholesky fails on the first
    vectors = np.linalg.qr(rng.standard_normal((m, m)))[0]
    h = (vectors * values) @ vectors.T
    expected_h = (vectors * np.maximum(values, floor)) @ vectors.T
    expected = np.linalg.inv(lower.T) @ np.linalg.inv(expected_h) @ np.linalg.inv(lower)
    lower_t, h_t = torch.as_tensor(lower), torch.as_tensor(np.tril(h))  # lower triangle read
    for inverse in (None, torch.as_tensor(np.linalg.inv(lower))):
        full = posterior._full_factor(lower_t, h_t.clone(), floor, inverse=inverse).numpy()
        assert np.array_equal(np.tril(full, -1), np.zeros((m, m)))
        np.testing.assert_allclose(full @ full.T, expected, rtol=0,
                                   atol=1e-12 * np.abs(expected).max())  # fmt: skip


def test_centre_positions_match_items_order_and_context():
    centres = DuelIndex.from_arrays([0, 1, 2, 0], [1, 2, 0, 1], [0, 0, 1, 0])
    duels = DuelIndex.from_arrays([0, 1, 2, 2, 1, 0], [1, 0, 0, 0, 2, 1], [0, 0, 1, 0, 0, 1])
    position = data_term.centre_positions(duels, centres)
    # (0, 1, ctx 0) is centres 0 and 3 (equal rows: either); flipped, or another
    # context, is no centre.
    assert position[0] in (0, 3)
    assert position[1:].tolist() == [-1, 2, -1, 1, -1]
    no_context = data_term.centre_positions(
        DuelIndex.from_arrays([2, 1], [0, 1]), DuelIndex.from_arrays([0, 2], [1, 0])
    )
    assert no_context.tolist() == [1, -1]


@pytest.mark.parametrize("kind, weight", [("gpm", 2.0), ("cgpm", 1.0)])
@pytest.mark.parametrize("sampled", [False, True])
def test_centre_rows_whitened_from_the_inverse_equal_the_solved_ones(monkeypatch, kind, weight,
                                                                     sampled):  # fmt: skip
    """Training duels equal to a centre are whitened as ``L - j L^-T`` rows (no solve);
    the posterior is the one from solving every row, with centres repeated among the
    duels (their weights summed) and in a weighted sample."""
    model, data = _fit(kind, weight)
    fn = model.function_
    train = model.train_duels_
    centre_duels = train[posterior_centre_positions(model)]
    train = np.concatenate([train, centre_duels[:5], centre_duels[:2]])  # repeats
    with_context = kind == "cgpm"
    args = (
        fn, data.items, data.left[train], data.right[train], data.y[train], model.penalty_,
        SolverOptions().jitter_for(torch.float64),
        data.contexts if with_context else None,
        data.context_index[train] if with_context else None,
    )  # fmt: skip
    # Sampled: a cap just below the duels draws by curvature, most centres among them.
    size = len(train) - (20 if sampled else 0)
    options = dict(trace_share=1.0, max_duels=size)
    used = []
    original = data_term.add_centre_rows

    def spy(*a):
        rest = original(*a)
        used.append(len(a[5]) - len(rest[0]))  # the duels whitened without a solve
        return rest

    monkeypatch.setattr(data_term, "add_centre_rows", spy)
    by_inverse = laplace_posterior(*args, **options)
    monkeypatch.setattr(data_term, "add_centre_rows", lambda *a: (np.arange(len(a[5])), a[6], None))
    by_solves = laplace_posterior(*args, **options)
    assert used and used[0] >= fn.n_centres // 2  # the centre rows were taken apart
    sigma = by_solves.factor @ by_solves.factor.T
    other = by_inverse.factor @ by_inverse.factor.T
    assert np.linalg.norm(other - sigma) < 1e-10 * np.linalg.norm(sigma)


def posterior_centre_positions(model) -> np.ndarray:
    """The positions of a fit's centres among its training duels (as the fit drew them)."""
    rng = np.random.default_rng(model.seed)
    return np.sort(rng.choice(len(model.train_duels_), model.function_.n_centres, replace=False))


@pytest.mark.parametrize("kind, weight", [("gpm", 0.0), ("gpm", 2.0), ("upm", 0.0), ("cgpm", 1.0)])
def test_a_fit_s_own_training_system_gives_the_recomputed_posterior(kind, weight):
    """A fit keeps its K_nM, K_MM and preconditioner factor (TrainingSystem) for its
    posterior; the stored factor is the one formed again from the kernel."""
    model, data = _fit(kind, weight)
    fn = model.function_
    assert fn.metadata["posterior"]["n_duels_used"] == len(model.train_duels_)
    again = _posterior_formed_again(model, data)
    stored, formed = fn.posterior_factor, again.posterior_factor
    assert stored.shape == formed.shape
    sigma = formed @ formed.T
    assert np.linalg.norm(stored @ stored.T - sigma) < 1e-10 * np.linalg.norm(sigma)


def test_the_final_fit_hands_its_training_system_to_the_posterior(monkeypatch):
    """The posterior of a fit is given that fit's own system (rows, centres, factor,
    validation rows; a UPM's item operator)."""
    seen = _systems_given_to_the_posterior(monkeypatch)
    model, data = _fit("gpm", 2.0)
    (system,) = seen
    assert system is not None
    m = model.function_.n_centres
    assert system.rows.shape == (len(model.train_duels_), m)
    assert np.array_equal(system.centre_positions.numpy(), posterior_centre_positions(model))
    g = model.decision_function(data, model.train_duels_)
    np.testing.assert_allclose(system.rows.numpy() @ model.function_.alpha, g, atol=1e-10)
    g_val = model.decision_function(data, model.calibration_duels_)
    np.testing.assert_allclose(system.validation_rows.numpy() @ model.function_.alpha, g_val,
                               atol=1e-10)  # fmt: skip
    lower = system.lower.numpy()
    k_mm = system.centre_gram.numpy() + system.jitter * np.eye(m)
    np.testing.assert_allclose(lower @ lower.T, k_mm, atol=1e-12)
    seen.clear()
    upm, upm_data = _fit("upm", 0.0)
    (system,) = seen
    assert system is not None and system.rows is None
    operator = system.item_operator
    assert operator is not None and operator.shape == (len(upm.train_duels_), m)
    g = upm.decision_function(upm_data, upm.train_duels_)
    np.testing.assert_allclose(operator.mm(torch.as_tensor(upm.function_.alpha)).numpy(), g,
                               atol=1e-10)  # fmt: skip


def test_a_upm_s_training_operator_is_taken_over_its_distinct_feature_rows(monkeypatch):
    """Items that share their features (tennis: 3,245 players, 1,985 distinct rows) are
    one row of the posterior's item operator; the posterior is the one formed again."""
    data = gpm_generated(n_items=40, n_duels=300, d=3, seed=3)
    items = data.items.copy()
    items[20:30] = items[:10]  # ten items with another's features
    data = replace(data, items=items)
    compacted = []
    original = data_term.on_distinct_items

    def spy(operator, *args):
        out = original(operator, *args)
        compacted.append((operator.factor.shape[0], out.factor.shape[0]))
        return out

    monkeypatch.setattr(data_term, "on_distinct_items", spy)
    params = dict(n_centres=15, penalty=1e-3, lengthscale_scale=2.0, seed=0, selection="holdout")
    model = UPM(**params).fit(data)
    ((before, after),) = compacted
    assert after < before
    fn = model.function_
    again = _posterior_formed_again(model, data)
    # Equal features make K_MM singular: Sigma's part along its null space (~1 / (n lam
    # j)) differs in rounding between two factorisations; the predictions' sd do not.
    duels = (data.items, data.left, data.right, None, None, Compute())
    _, sd_stored = data_term.decision_and_sd(fn, *duels)
    _, sd_formed = data_term.decision_and_sd(again, *duels)
    np.testing.assert_allclose(sd_stored, sd_formed, rtol=1e-8)


def test_a_large_upm_item_factor_is_not_kept_for_the_posterior(monkeypatch):
    """Above the size cap the training operator is released (the posterior forms its own
    over the distinct items) and the posterior is the same."""
    seen = _systems_given_to_the_posterior(monkeypatch)
    kept, _ = _fit("upm", 0.0)
    monkeypatch.setattr(posterior, "_KEEP_ITEM_FACTOR_BYTES", 1000)
    released, _ = _fit("upm", 0.0)
    assert seen[0] is not None and seen[1] is None
    a, b = kept.function_.posterior_factor, released.function_.posterior_factor
    assert np.linalg.norm(a @ a.T - b @ b.T) < 1e-10 * np.linalg.norm(b @ b.T)


def _systems_given_to_the_posterior(monkeypatch) -> list:
    """The ``system`` argument of every ``laplace_posterior`` call from now on."""
    seen = []
    original = posterior.laplace_posterior

    def spy(*args, **kwargs):
        seen.append(kwargs.get("system"))
        return original(*args, **kwargs)

    monkeypatch.setattr(posterior, "laplace_posterior", spy)
    return seen


def _posterior_formed_again(model, data):
    """The fitted function with its posterior formed again from the kernel (no
    TrainingSystem), widened and scaled as the fit does."""
    fn = model.function_
    again = posterior.with_training_posterior(
        replace(fn, posterior_factor=None), data, model.train_duels_, model.penalty_,
        model.solver_, model.compute_, model.seed,
    )  # fmt: skip
    return posterior_calibration.with_holdout_dispersion(again, data, model.calibration_duels_,
                                             model.compute_)  # fmt: skip
