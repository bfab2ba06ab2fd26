"""The ranking fits' float32 K_nM cache (``PathFitter.for_ranking``): close to float64."""

import numpy as np
import pytest
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import gpm_generated
from prefshap_core.kernels.operator import dense_operator
from prefshap_core.kernels.pair import PairKernel
from prefshap_core.models.hyperparameters import CG_ITERATIONS, PENALTY_PATH, median_lengthscales
from prefshap_core.models.search import PathFitter
from prefshap_core.solvers.options import SolverOptions


def _fitter(data, dtype: str = "float64", backend: str = "torch") -> PathFitter:
    return PathFitter(
        kind="gpm", loss="logistic", data=data,
        base_lengthscales=median_lengthscales(data.items), context_lengthscales=None,
        compute=Compute(dtype=dtype), solver=SolverOptions(), seed=0, n_centres=80,
        iterations=dict(zip(PENALTY_PATH, CG_ITERATIONS, strict=True)), backend=backend,
    )  # fmt: skip


def test_only_float64_torch_rankings_get_a_float32_cache():
    data = gpm_generated(n_items=30, n_duels=100, d=3, seed=0)
    assert _fitter(data).for_ranking().solver.cache_dtype == "float32"
    assert _fitter(data, dtype="float32").for_ranking().solver.cache_dtype is None
    assert _fitter(data, backend="falkon").for_ranking().solver.cache_dtype is None


def test_dense_float32_matrix_under_float64_vectors():
    rng = np.random.default_rng(0)
    matrix = torch.as_tensor(rng.normal(size=(40, 6)))
    positions = torch.arange(0, 40, 7)[:6]
    op = dense_operator(matrix.to(torch.float32), positions, as_cache=True, dtype=torch.float64)
    assert op.cache.dtype == torch.float32 and op.dtype == torch.float64
    v, w = torch.as_tensor(rng.normal(size=6)), torch.as_tensor(rng.uniform(0, 1, 40))
    out = op.gram_mv(v, w)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, matrix.T @ (w * (matrix @ v)), rtol=1e-5, atol=1e-5)
    k_mm = op.centre_gram()
    assert k_mm.dtype == torch.float64
    torch.testing.assert_close(k_mm, 0.5 * (matrix[positions] + matrix[positions].T),
                               rtol=0, atol=1e-6)  # fmt: skip


@pytest.mark.parametrize("weights", [[0.0], [0.0, 1.0, 10.0]])
def test_float32_ranking_operators_equal_float64_products(weights):
    """Every weight's K_nM (the summed one of several weights included) and its
    validation block: the float64 products to float32 rounding."""
    data = gpm_generated(n_items=60, n_duels=800, d=3, n_relevant=2, seed=3)
    split = split_duels(data.n_duels, 0)
    operators = {}
    for name, fitter in (("exact", _fitter(data)), ("ranked", _fitter(data).for_ranking())):
        kernel = PairKernel("gpm", data.items, fitter.base_lengthscales, compute=fitter.compute)
        train_index = fitter.duel_index(split.train)
        val_index = fitter.duel_index(split.validation)
        centres = fitter.centres(len(split.train))
        centre_index = train_index.subset(torch.as_tensor(centres))
        terms = fitter._terms(kernel, weights, train_index, centres, val_index, centre_index)
        operators[name] = [terms(w) for w in weights]
    rng = np.random.default_rng(1)
    v = torch.as_tensor(rng.normal(size=len(operators["exact"][0][0].centre_gram())))
    w = torch.as_tensor(rng.uniform(0, 0.25, len(split.train)))
    for (op, val), (op32, val32) in zip(operators["exact"], operators["ranked"], strict=True):
        assert op32.cache_dtype == torch.float32  # one float32 matrix, not a sum of two
        for got, want in ((op32.gram_mv(v, w), op.gram_mv(v, w)), (val32.mm(v), val.mm(v))):
            assert got.dtype == torch.float64
            scale = float(want.abs().max())
            torch.testing.assert_close(got, want, rtol=0, atol=1e-5 * scale)
        k_mm = op.centre_gram()
        atol = 1e-6 * float(k_mm.abs().max())
        torch.testing.assert_close(op32.centre_gram(), k_mm, rtol=0, atol=atol)
