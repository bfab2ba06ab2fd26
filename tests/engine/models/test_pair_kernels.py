"""Pair kernels: gathers equal the per-duel formulas; operators equal dense products."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import prefshap_core.kernels.operator as operator_module
import prefshap_core.kernels.pair as pair_module
from prefshap_core.compute import Compute
from prefshap_core.kernels.bilinear import BilinearOperator
from prefshap_core.kernels.operator import BlockedKernelOperator, SumOperator, signed_incidence_sum
from prefshap_core.kernels.pair import DuelIndex, PairKernel

N_ITEMS, D, P, D_CTX = 12, 3, 5, 2


def rbf(a: np.ndarray, b: np.ndarray, lengthscales: np.ndarray) -> float:
    z = (a - b) / lengthscales
    return float(np.exp(-0.5 * np.dot(z, z)))


def direct_pair_kernel(kind, items, ls, contexts, ctx_ls, row, col) -> float:
    """One entry by the textbook formula, from raw feature rows (no Grams, no gathers)."""
    (a, b, u), (c, d, v) = row, col
    xa, xb, xc, xd = items[a], items[b], items[c], items[d]
    if kind == "upm":
        return rbf(xa, xc, ls) + rbf(xb, xd, ls) - rbf(xa, xd, ls) - rbf(xb, xc, ls)
    value = rbf(xa, xc, ls) * rbf(xb, xd, ls) - rbf(xa, xd, ls) * rbf(xb, xc, ls)
    if kind == "cgpm":
        value *= rbf(contexts[u], contexts[v], ctx_ls)
    return value


@pytest.fixture(scope="module")
def pools():
    rng = np.random.default_rng(0)
    return (
        rng.normal(size=(N_ITEMS, D)),
        rng.uniform(0.5, 2.0, D),
        rng.normal(size=(P, D_CTX)),
        rng.uniform(0.5, 2.0, D_CTX),
    )


def random_duels(n: int, seed: int) -> DuelIndex:
    rng = np.random.default_rng(seed)
    left = rng.integers(0, N_ITEMS, n)
    right = (left + rng.integers(1, N_ITEMS, n)) % N_ITEMS
    return DuelIndex.from_arrays(left, right, rng.integers(0, P, n))


def make_kernel(kind: str, pools, dtype: str = "float64") -> PairKernel:
    items, ls, contexts, ctx_ls = pools
    return PairKernel(kind, items, ls, contexts, ctx_ls, compute=Compute("cpu", dtype))


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_matrix_equals_direct_per_duel_formula(kind, pools):
    rows, cols = random_duels(17, seed=1), random_duels(9, seed=2)
    got = make_kernel(kind, pools).matrix(rows, cols).numpy()
    expected = np.array(
        [
            [
                direct_pair_kernel(kind, *pools, r, c)
                for c in zip(cols.left, cols.right, cols.context, strict=True)
            ]
            for r in zip(rows.left, rows.right, rows.context, strict=True)
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    assert np.abs(expected).max() > 0.1  # the comparison is not between zeros


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_swapping_a_duel_negates_its_row_and_column_exactly(kind, pools):
    kernel = make_kernel(kind, pools)
    rows, cols = random_duels(15, seed=3), random_duels(8, seed=4)
    k = kernel.matrix(rows, cols)
    assert torch.equal(kernel.matrix(rows.swapped(), cols), -k)
    assert torch.equal(kernel.matrix(rows, cols.swapped()), -k)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("block_rows", [1, 4, 17, 100])
def test_row_blocks_are_the_matrix_in_one_reused_buffer(kind, block_rows, pools):
    kernel = make_kernel(kind, pools)
    rows, cols = random_duels(17, seed=5), random_duels(9, seed=6)
    whole = kernel.matrix(rows, cols)
    seen, buffers = 0, set()
    for lo, hi, block in kernel.row_blocks(rows, cols, block_rows):
        assert lo == seen and hi == min(lo + block_rows, 17)
        assert torch.equal(block, whole[lo:hi])
        buffers.add(block.untyped_storage().data_ptr())
        block.mul_(0.0)  # the caller may overwrite it: the next block is gathered afresh
        seen = hi
    assert seen == 17 and len(buffers) == 1


def test_rbf_runs_on_unique_items_only(pools, monkeypatch):
    calls = []
    original = pair_module.rbf_gram

    def counting_rbf(a, b, lengthscales):
        calls.append((len(a), len(b)))
        return original(a, b, lengthscales)

    monkeypatch.setattr(pair_module, "rbf_gram", counting_rbf)
    kernel = make_kernel("cgpm", pools)
    rows = random_duels(500, seed=5)
    kernel.operator(rows, np.arange(40)).mm(torch.ones(40, dtype=torch.float64))
    assert calls, "the kernel never evaluated an RBF"
    assert all(a <= max(N_ITEMS, P) and b <= max(N_ITEMS, P) for a, b in calls)


def dense_and_operator(kind, pools, **operator_kwargs):
    kernel = make_kernel(kind, pools)
    rows = random_duels(50, seed=6)
    centres = np.arange(0, 50, 4)
    dense = kernel.matrix(rows, rows.subset(centres))
    return dense, kernel.operator(rows, centres, **operator_kwargs)


OPERATOR_VARIANTS = [
    {},  # cached
    {"cache_budget_bytes": 0},  # recomputed blocks
    {"cache_budget_bytes": 0, "block_rows": 1},
    {"cache_budget_bytes": 0, "block_rows": 7},
]


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
@pytest.mark.parametrize("variant", OPERATOR_VARIANTS)
def test_operator_products_equal_dense_products(kind, variant, pools):
    dense, op = dense_and_operator(kind, pools, **variant)
    rng = np.random.default_rng(7)
    v = torch.as_tensor(rng.normal(size=op.n_centres))
    v3 = torch.as_tensor(rng.normal(size=(op.n_centres, 3)))
    w = torch.as_tensor(rng.normal(size=op.n_rows))
    w3 = torch.as_tensor(rng.normal(size=(op.n_rows, 3)))
    weights = torch.as_tensor(rng.uniform(0, 1, op.n_rows))
    torch.testing.assert_close(op.mm(v), dense @ v, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.mm(v3), dense @ v3, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.tmm(w), dense.T @ w, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.tmm(w3), dense.T @ w3, rtol=0, atol=1e-12)
    torch.testing.assert_close(op.gram_mv(v), dense.T @ (dense @ v), rtol=0, atol=1e-12)
    expected = dense.T @ (weights * (dense @ v))
    torch.testing.assert_close(op.gram_mv(v, weights), expected, rtol=0, atol=1e-12)
    if kind == "gpm" and variant != {}:  # too large to cache: the item-by-item form
        assert isinstance(op, BilinearOperator)
    elif kind != "upm":
        assert isinstance(op, BlockedKernelOperator)
        assert op.cached == (variant == {})


@pytest.mark.parametrize("unblocked_max_bytes", [0, 2**30])
def test_cached_gram_products_in_blocks_or_whole_equal_dense(
    unblocked_max_bytes, monkeypatch: pytest.MonkeyPatch
):
    """A cached matrix above the unblocked size is read in fused row blocks (here 64
    rows of 40 centres, four blocks and a partial one), below it in one piece."""
    monkeypatch.setattr(operator_module, "_UNBLOCKED_MAX_BYTES", unblocked_max_bytes)
    monkeypatch.setattr(operator_module, "_FUSED_BLOCK_BYTES", 64 * 40 * 8)
    rng = np.random.default_rng(21)
    matrix = torch.as_tensor(rng.normal(size=(300, 40)))
    op = operator_module.dense_operator(matrix, torch.arange(40), as_cache=True)
    assert op._fused_rows == (300 if unblocked_max_bytes else 64)
    v = torch.as_tensor(rng.normal(size=(40, 2)))
    weights = torch.as_tensor(rng.uniform(0, 1, 300))
    expected = matrix.T @ (weights[:, None] * (matrix @ v))
    torch.testing.assert_close(op.gram_mv(v, weights), expected, rtol=0, atol=1e-11)
    torch.testing.assert_close(op.gram_mv(v[:, 0]), matrix.T @ (matrix @ v[:, 0]),
                               rtol=0, atol=1e-11)  # fmt: skip


@pytest.mark.parametrize("variant", OPERATOR_VARIANTS[1:])
def test_gpm_blocks_are_recomputed_where_the_item_form_does_not_pay(
    variant, pools, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(pair_module, "bilinear_pays", lambda n_rows, n_items: False)
    dense, op = dense_and_operator("gpm", pools, **variant)
    assert isinstance(op, BlockedKernelOperator) and not op.cached
    rng = np.random.default_rng(17)
    v = torch.as_tensor(rng.normal(size=(op.n_centres, 2)))
    weights = torch.as_tensor(rng.uniform(0, 1, op.n_rows))
    torch.testing.assert_close(op.mm(v), dense @ v, rtol=0, atol=1e-12)
    expected = dense.T @ (weights[:, None] * (dense @ v))
    torch.testing.assert_close(op.gram_mv(v, weights), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("weight", [0.0, 3.0])
def test_item_form_negates_a_swapped_duels_products_exactly(weight, pools):
    kernel = make_kernel("gpm", pools).with_utility_weight(weight)
    rows = random_duels(60, seed=18)
    centres = rows.subset(np.arange(0, 60, 5))
    forward = kernel.operator(rows, centres, cache_budget_bytes=0)
    backward = kernel.operator(rows.swapped(), centres, cache_budget_bytes=0)
    assert isinstance(forward if weight == 0 else forward.first, BilinearOperator)
    v = torch.as_tensor(np.random.default_rng(19).normal(size=len(centres)))
    assert torch.equal(forward.mm(v), -backward.mm(v))
    w = torch.as_tensor(np.random.default_rng(20).normal(size=len(rows)))
    torch.testing.assert_close(forward.tmm(w), -backward.tmm(w), rtol=0, atol=1e-13)


@pytest.mark.parametrize("kind", ["gpm", "upm", "cgpm"])
def test_centre_gram_is_the_centre_rows_of_k_nm(kind, pools):
    kernel = make_kernel(kind, pools)
    rows = random_duels(40, seed=8)
    centres = np.array([3, 9, 10, 22, 31, 39])
    op = kernel.operator(rows, centres)
    k_mm = op.centre_gram()
    k_nm_rows = op.mm(torch.eye(len(centres), dtype=torch.float64))[centres]
    torch.testing.assert_close(k_mm, k_nm_rows, rtol=0, atol=1e-14)
    assert torch.equal(k_mm, k_mm.T)
    by_index = kernel.operator(rows, rows.subset(centres)).centre_gram()
    torch.testing.assert_close(by_index, k_mm, rtol=0, atol=1e-14)


def test_float32_cache_is_close_to_float64(pools):
    dense, op = dense_and_operator("gpm", pools, cache_dtype="float32")
    assert op.cache.dtype == torch.float32
    v = torch.linspace(-1, 1, op.n_centres, dtype=torch.float64)
    out = op.mm(v)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, dense @ v, rtol=0, atol=1e-6)


def test_float32_kernel_matches_float64(pools):
    rows, cols = random_duels(20, seed=9), random_duels(6, seed=10)
    k64 = make_kernel("cgpm", pools).matrix(rows, cols)
    k32 = make_kernel("cgpm", pools, "float32").matrix(rows, cols)
    assert k32.dtype == torch.float32
    torch.testing.assert_close(k32.double(), k64, rtol=0, atol=1e-6)


@pytest.mark.parametrize("segments", [False, True])
def test_signed_incidence_sum_both_paths_match_a_loop(segments):
    rng = np.random.default_rng(11)
    left = torch.as_tensor(rng.integers(0, 6, 30))
    right = torch.as_tensor(rng.integers(0, 6, 30))
    w = torch.as_tensor(rng.normal(size=(30, 2)))
    expected = torch.zeros(7, 2, dtype=torch.float64)
    for i in range(30):
        expected[left[i]] += w[i]
        expected[right[i]] -= w[i]
    got = signed_incidence_sum(w, left, right, 7, deterministic_segments=segments)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-13)


def test_bad_inputs_raise(pools):
    items, ls, _, _ = pools
    with pytest.raises(ValueError, match="kind"):
        PairKernel("bt", items, ls)
    with pytest.raises(ValueError, match="contexts"):
        PairKernel("cgpm", items, ls)
    with pytest.raises(ValueError, match="positive"):
        PairKernel("gpm", items, -ls)
    kernel = make_kernel("gpm", pools)
    bad = DuelIndex.from_arrays([0, N_ITEMS], [1, 2])
    with pytest.raises(IndexError, match="item rows"):
        kernel.matrix(bad, bad)
    with pytest.raises(IndexError, match="centre positions"):
        kernel.operator(random_duels(5, seed=0), [0, 5])
    no_context = DuelIndex.from_arrays([0, 1], [1, 2])
    with pytest.raises(ValueError, match="context"):
        make_kernel("cgpm", pools).matrix(no_context, no_context)
    with pytest.raises(ValueError, match="equal length"):
        DuelIndex.from_arrays([0, 1], [1])


# -- the sum kernel k_E + w k_UPM (GPM and C-GPM) -------------------------------------
SUM_KINDS = [("gpm", 2.5), ("cgpm", 2.5), ("gpm", 100.0)]


def direct_sum_kernel(kind, weight, items, ls, contexts, ctx_ls, row, col) -> float:
    """[k_E + w k_UPM] (times k_U for cgpm), entry by entry from the textbook formulas."""
    u, v = row[2], col[2]
    e = direct_pair_kernel("gpm", items, ls, contexts, ctx_ls, row, col)
    utility = direct_pair_kernel("upm", items, ls, contexts, ctx_ls, row, col)
    context = rbf(contexts[u], contexts[v], ctx_ls) if kind == "cgpm" else 1.0
    return context * (e + weight * utility)


def sum_kernel(kind: str, weight: float, pools) -> PairKernel:
    items, ls, contexts, ctx_ls = pools
    return PairKernel(kind, items, ls, contexts, ctx_ls, Compute("cpu", "float64"), weight)


@pytest.mark.parametrize(("kind", "weight"), SUM_KINDS)
def test_sum_kernel_matrix_equals_direct_formula(kind, weight, pools):
    rows, cols = random_duels(13, seed=21), random_duels(7, seed=22)
    got = sum_kernel(kind, weight, pools).matrix(rows, cols).numpy()
    expected = np.array(
        [
            [
                direct_sum_kernel(kind, weight, *pools, r, c)
                for c in zip(cols.left, cols.right, cols.context, strict=True)
            ]
            for r in zip(rows.left, rows.right, rows.context, strict=True)
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-12)


@pytest.mark.parametrize(("kind", "weight"), SUM_KINDS)
def test_sum_kernel_is_exactly_antisymmetric(kind, weight, pools):
    """g(a, b) = -g(b, a) bit for bit: swapping a duel negates its row and column."""
    kernel = sum_kernel(kind, weight, pools)
    rows, cols = random_duels(15, seed=23), random_duels(8, seed=24)
    k = kernel.matrix(rows, cols)
    assert torch.equal(kernel.matrix(rows.swapped(), cols), -k)
    assert torch.equal(kernel.matrix(rows, cols.swapped()), -k)
    alpha = torch.as_tensor(np.random.default_rng(25).normal(size=len(cols)))
    g = kernel.matrix(rows, cols) @ alpha
    assert torch.equal(kernel.matrix(rows.swapped(), cols) @ alpha, -g)


@pytest.mark.parametrize("kind", ["gpm", "cgpm"])
def test_utility_weight_0_is_the_plain_kernel_bitwise(kind, pools):
    rows, cols = random_duels(20, seed=26), random_duels(9, seed=27)
    plain, zero = make_kernel(kind, pools), sum_kernel(kind, 0.0, pools)
    assert torch.equal(plain.matrix(rows, cols), zero.matrix(rows, cols))
    centres = np.arange(0, 20, 3)
    v = torch.linspace(-1, 1, len(centres), dtype=torch.float64)
    assert torch.equal(plain.operator(rows, centres).mm(v), zero.operator(rows, centres).mm(v))
    first, _ = sum_kernel(kind, 5.0, pools).parts()
    assert torch.equal(first.matrix(rows, cols), plain.matrix(rows, cols))


@pytest.mark.parametrize(("kind", "weight"), SUM_KINDS)
@pytest.mark.parametrize("variant", OPERATOR_VARIANTS[:2])
def test_sum_kernel_operators_equal_dense_products(kind, weight, variant, pools):
    """The sum kernel's own operator, and the parts summed by SumOperator, equal K @ v."""
    kernel = sum_kernel(kind, weight, pools)
    rows = random_duels(50, seed=28)
    centres = np.arange(0, 50, 4)
    dense = kernel.matrix(rows, rows.subset(centres))
    first, second = kernel.parts()
    parts = SumOperator(
        first.operator(rows, centres, **variant), second.operator(rows, centres, **variant), weight
    )
    rng = np.random.default_rng(29)
    v = torch.as_tensor(rng.normal(size=len(centres)))
    w = torch.as_tensor(rng.normal(size=50))
    weights = torch.as_tensor(rng.uniform(0, 1, 50))
    scale = float(dense.abs().max())
    for op in (kernel.operator(rows, centres, **variant), parts):
        torch.testing.assert_close(op.mm(v), dense @ v, rtol=0, atol=1e-12 * scale)
        torch.testing.assert_close(op.tmm(w), dense.T @ w, rtol=0, atol=1e-12 * scale)
        expected = dense.T @ (weights * (dense @ v))
        torch.testing.assert_close(op.gram_mv(v, weights), expected, rtol=0, atol=1e-11 * scale**2)
        torch.testing.assert_close(op.centre_gram(), dense[centres], rtol=0, atol=1e-12 * scale)


def test_utility_weight_must_be_non_negative_and_upm_has_none(pools):
    with pytest.raises(ValueError, match="utility_weight"):
        sum_kernel("gpm", -1.0, pools)
    with pytest.raises(ValueError, match="no utility weight"):
        sum_kernel("upm", 1.0, pools)
    with pytest.raises(ValueError, match="single term"):
        make_kernel("upm", pools).parts()


@pytest.mark.parametrize("counted_max_values", [512, 0])
@pytest.mark.parametrize("n", [7, 8, 30, 301])
def test_median_heuristic_is_the_median_over_distinct_pairs(n, counted_max_values, monkeypatch):
    """Against a loop over the pairs i < j (integer columns: many equal pairs, dropped;
    n = 7 and 8 give odd and even counts of pairs; values 1e-13 apart count as equal),
    bit for bit, whether the pairs are counted per pair of values or listed."""
    from prefshap_core.kernels import rbf
    from prefshap_core.kernels.rbf import median_heuristic

    monkeypatch.setattr(rbf, "_COUNTED_MAX_VALUES", counted_max_values)
    rng = np.random.default_rng(n)
    near = rng.integers(0, 4, n) + 1e-13 * rng.integers(0, 2, n)
    x = np.column_stack(
        [rng.normal(size=n), rng.integers(0, 3, n), np.full(n, 2.0), near, rng.integers(0, 9, n)]
    )
    expected = []
    for col in x.T:
        pairs = [abs(col[i] - col[j]) for i in range(n) for j in range(i + 1, n)]
        pairs = [d for d in pairs if d > 1e-12]
        expected.append(float(np.median(pairs)) if pairs else 1.0)
    assert np.array_equal(median_heuristic(x), np.array(expected))
