"""Do the standard errors of sampled Shapley values cover? Old design against new.

    python benchmarks/bench_se_coverage.py [--players 14 15 16 17] [--seeds 5]

For each random GPM of make_shapley_fixtures.py (p features, each its own player,
12 duels) the full 2^p value table is computed once (cached in
.cache/shapley_tables/), so every design only picks rows of it. Designs:

* old: paired Shapley-kernel sampling without duplicates + kernel WLS with the CR3
  pair jackknife (explain/coalitions.py, explain/shapley.py);
* new: size-stratified pairs, whole outer strata, Horvitz-Thompson WLS and the
  stratified linearisation variance (explain/shapley/stratified.py, sampled.py).

Per p and sample count (400 and the default 2p + 2048), pooled over seeds, duels
and players: coverage = fraction of |phi - exact| <= 1.96 se (target [0.90, 0.99]),
the lowest coverage of one model over its seeds, median se, median |error|, RMSE.
"""

from __future__ import annotations

import argparse

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch
from legacy_kernel_shapley import KernelShapley, sample_paired_coalitions
from make_shapley_fixtures import exact_table

from prefshap_core.explain.options import default_samples
from prefshap_core.explain.shapley.coalitions import bits_from_masks
from prefshap_core.explain.shapley.exact import exact_shapley_matrix
from prefshap_core.explain.shapley.sampled import SampledShapley
from prefshap_core.explain.shapley.stratified import sample_stratified_coalitions


def old_design(table: np.ndarray, p: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    coalitions = sample_paired_coalitions(p, n, seed)
    rows = bits_from_masks(coalitions.masks)
    return KernelShapley(coalitions)(table[rows], table[0], table[-1])


def new_design(table: np.ndarray, p: int, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    coalitions = sample_stratified_coalitions(p, n, seed)
    rows = bits_from_masks(coalitions.masks)
    return SampledShapley(coalitions)(table[rows], table[0], table[-1])


DESIGNS = {"old": old_design, "new": new_design}


def summarise(errors: np.ndarray, se: np.ndarray) -> dict[str, float]:
    return {
        "coverage": float(np.mean(np.abs(errors) <= 1.96 * se)),
        "median_se": float(np.median(se)),
        "median_err": float(np.median(np.abs(errors))),
        "rmse": float(np.sqrt(np.mean(errors**2))),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, nargs="+", default=[14, 15, 16, 17])
    parser.add_argument("--seeds", type=int, default=5, help="sampling seeds per case")
    parser.add_argument("--models", type=int, default=1, help="random models per p")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # exact tables: thousands of tiny solves
    print(f"pooled over {args.models} model(s) x {args.seeds} seeds x 12 duels x p players")
    print("  p  samples  design  coverage  worst model  median se  median |err|     RMSE")
    for p in args.players:
        cases = []
        for model in range(args.models):
            table = exact_table(p, model)
            cases.append((table, (exact_shapley_matrix(p) @ table).T))
        for n in (400, default_samples(p)):
            for name, design in DESIGNS.items():
                errors, se, per_model = [], [], []
                for table, exact in cases:
                    runs = [design(table, p, n, seed) for seed in range(args.seeds)]
                    errors += [phi - exact for phi, _ in runs]
                    se += [s for _, s in runs]
                    hits = [np.abs(phi - exact) <= 1.96 * s for phi, s in runs]
                    per_model.append(float(np.mean(hits)))
                row = summarise(np.concatenate(errors), np.concatenate(se))
                print(
                    f"{p:3d} {n:8d}  {name:>6}  {row['coverage']:8.3f}  {min(per_model):11.3f}"
                    f"  {row['median_se']:9.5f}  {row['median_err']:12.5f}  {row['rmse']:.5f}"
                )


if __name__ == "__main__":
    main()
