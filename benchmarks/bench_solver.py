"""Speed of the pair-kernel operator and the FALKON solvers on random duel data.

    python benchmarks/bench_solver.py            # GPM n in {10k, 40k} x M in {1000, 2000},
                                                 # and a tennis-sized C-GPM (76k, M 2000)
    python benchmarks/bench_solver.py --quick    # one small case

One row per case and precision: seconds to build K_nM (gathers), one mm + tmm pair, one
fused K^T W K v; a squared-loss fit (seconds, CG iterations, final relative residual); a
logistic fit along a 5-penalty path with a few CG iterations per Newton step as
LogisticFalkon ("path"), and one converged at the last penalty ("conv": Newton steps
until the predicted decrease is below 1e-10); the GFLOP/s of mm + tmm next to this
machine's measured GEMV and GEMM rates (the products are matrix-vector, so memory
bandwidth, not GEMM speed, is their ceiling); and the relative difference of the
converged logistic predictions from float64's ("f_err").
Precisions: f64; f64 with a float32 K_nM cache; f32 throughout (whose default jitter,
1e-7 * M of the mean diagonal, also regularises slightly more than float64's 1e-13).
Fit times are the best of two runs (other work on a shared machine only adds time).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.kernels.pair import DuelIndex, PairKernel
from prefshap_core.kernels.rbf import median_heuristic
from prefshap_core.solvers.falkon import fit_squared
from prefshap_core.solvers.logistic import fit_logistic
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.result import SolveResult

PENALTIES = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]
CG_PER_STEP = [4, 6, 8, 12, 16]
SQUARED_PENALTY = 1e-6
PRECISIONS = {"f64": ("float64", None), "f64+f32": ("float64", "float32"), "f32": ("float32", None)}


@dataclass(frozen=True)
class Case:
    kind: str
    n: int
    m: int
    n_items: int = 800
    n_contexts: int = 0


def median_seconds(fn: Callable[[], object], repeats: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def best_of_two(fit: Callable[[], SolveResult]) -> SolveResult:
    """The faster of two identical (deterministic) fits."""
    return min((fit(), fit()), key=lambda result: result.seconds)


def machine_rates(dtype: torch.dtype) -> tuple[float, float]:
    """(GEMM GFLOP/s at 2000^3, GEMV GFLOP/s on a 40k x 2000 matrix) for this dtype."""
    a = torch.randn(2000, 2000, dtype=dtype)
    gemm = 2 * 2000**3 / median_seconds(lambda: a @ a) / 1e9
    k = torch.randn(40_000, 2000, dtype=dtype)
    v = torch.randn(2000, dtype=dtype)
    gemv = 2 * k.numel() / median_seconds(lambda: k @ v) / 1e9
    return gemm, gemv


def random_duels(case: Case, seed: int = 0):
    """Items (and contexts) with a planted preference: feature 0 wins, 1 and 2 interact."""
    rng = np.random.default_rng(seed)
    items = rng.normal(size=(case.n_items, 6))
    left = rng.integers(0, case.n_items, case.n)
    right = (left + rng.integers(1, case.n_items, case.n)) % case.n_items
    margin = items[left, 0] - items[right, 0] + items[left, 1] * items[right, 2]
    contexts = context = None
    if case.n_contexts:
        contexts = rng.normal(size=(case.n_contexts, 3))
        context = rng.integers(0, case.n_contexts, case.n)
        margin = margin + contexts[context, 0] * (items[left, 3] - items[right, 3])
    y = np.where(margin + 0.5 * rng.normal(size=case.n) > 0, 1.0, -1.0)
    return items, contexts, DuelIndex.from_arrays(left, right, context), y


def run_case(case: Case, precision: str, rates: dict[str, tuple[float, float]]) -> dict:
    dtype, cache = PRECISIONS[precision]
    items, contexts, rows, y = random_duels(case)
    kernel = PairKernel(
        case.kind,
        items,
        median_heuristic(items),
        contexts,
        None if contexts is None else median_heuristic(contexts),
        compute=Compute("cpu", dtype),
    )
    centres = np.linspace(0, case.n - 1, case.m).astype(np.int64)
    options = SolverOptions(cg_tolerance=1e-6, max_cg_iterations=200, cache_dtype=cache)
    converged = SolverOptions(cg_tolerance=1e-7, max_cg_iterations=300, refine_steps=10)

    build = float("inf")
    for _ in range(2):  # best of two, like the fits
        op = None  # free the first before building the second
        start = time.perf_counter()
        op = kernel.operator(rows, centres, **options.operator_kwargs())
        build = min(build, time.perf_counter() - start)
    v = torch.randn(case.m, dtype=op.dtype)
    w = torch.randn(case.n, dtype=op.dtype)
    pair = median_seconds(lambda: (op.mm(v), op.tmm(w)))
    fused = median_seconds(lambda: op.gram_mv(v, w))

    squared = best_of_two(lambda: fit_squared(op, y, SQUARED_PENALTY, options))
    path = best_of_two(lambda: fit_logistic(op, y, PENALTIES, options, cg_iterations=CG_PER_STEP))
    conv = best_of_two(lambda: fit_logistic(op, y, PENALTIES, converged))
    gemm, gemv = rates[cache or dtype]
    return {
        "kind": case.kind,
        "n": case.n,
        "M": case.m,
        "prec": precision,
        "build_s": build,
        "mm+tmm_s": pair,
        "gram_mv_s": fused,
        "sq_fit_s": squared.seconds,
        "sq_cg": squared.iterations,
        "sq_res": squared.final_residual,
        "path_s": path.seconds,
        "path_cg": path.iterations,
        "conv_s": conv.seconds,
        "conv_cg": conv.iterations,
        "newton": len(conv.steps),
        "GF/s": 4 * case.n * case.m / pair / 1e9,
        "GEMV": gemv,
        "GEMM": gemm,
        "_f": op.mm(conv.alpha).double(),
    }


COLUMNS = ["kind", "n", "M", "prec", "build_s", "mm+tmm_s", "gram_mv_s", "sq_fit_s", "sq_cg"]
COLUMNS += ["sq_res", "path_s", "path_cg", "conv_s", "conv_cg", "newton", "GF/s", "GEMV"]
COLUMNS += ["GEMM", "f_err"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one small case")
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.quick:
        cases = [Case("gpm", 5_000, 500)]
    else:
        cases = [Case("gpm", n, m) for n in (10_000, 40_000) for m in (1000, 2000)]
        cases.append(Case("cgpm", 76_000, 2000, n_items=3483, n_contexts=4114))
    rates = {"float64": machine_rates(torch.float64), "float32": machine_rates(torch.float32)}
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for name, (gemm, gemv) in rates.items():
        print(f"{name}: GEMM {gemm:.1f} GFLOP/s, GEMV {gemv:.1f} GFLOP/s")
    print(f"logistic path: penalties {PENALTIES}, CG iterations per step {CG_PER_STEP}")
    print(" | ".join(f"{c:>9}" for c in COLUMNS))
    for case in cases:
        reference = None
        for precision in PRECISIONS:
            row = run_case(case, precision, rates)
            f = row.pop("_f")
            reference = f if reference is None else reference
            row["f_err"] = float((f - reference).norm() / reference.norm())
            cells = [f"{v:>9.3g}" if isinstance(v, float) else f"{v!s:>9}" for v in row.values()]
            print(" | ".join(cells), flush=True)


if __name__ == "__main__":
    main()
