"""Pref-SHAP on the real data, with trained models: the issue-3 speed targets.

    python benchmarks/bench_explain.py [--dtype float64 --dtype float32] [--retrain]

* Pokémon: a GPM (trained by the product's pipeline, seed 0), 1,000 test duels,
  exact over its 8 feature groups (256 coalitions).
* Tennis: a C-GPM (seed 0), Novak Djokovic's (d643) 154 losses, items exact (6
  groups) + context exact (2 groups).

Prints seconds per case next to the targets (< 15 s and < 60 s on a 2-core CPU),
and per part of the engine the seconds and achieved GFLOP/s of the Cholesky, the
triangular solves and the GEMMs, next to this machine's GEMM rate measured in the
same run. Models are trained once and kept in artifacts/bench_models/.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import torch
from bench_explain_engine import _parts, gemm_rate

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.explain import EngineStats, Explainer, ExplainOptions
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.paths import repo_root
from prefshap_core.workflow.explaining import explain_duels
from prefshap_core.workflow.selections import duels_of_item
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

MODELS = repo_root() / "artifacts" / "bench_models"


def trained(name: str, kind: str, retrain: bool):
    path = MODELS / f"{name}-{kind}-seed0.npz"
    if retrain or not path.exists():
        start = time.perf_counter()
        result = train(load_dataset(name, seed=0), TrainSettings(kind=kind, baseline=False))
        save_model(result.function, path)
        print(f"trained {name} {kind} in {time.perf_counter() - start:.1f} s "
              f"(test ROC AUC {result.metrics['test']['roc_auc']:.3f})")  # fmt: skip
    return load_model(Path(path))


def timed(fn, data, duels, what, compute) -> tuple[float, EngineStats]:
    stats = EngineStats(device=compute.device)
    start = time.perf_counter()
    explainer = Explainer(fn, ExplainOptions(what=what), compute=compute, stats=stats)
    explain_duels(fn, data, duels, explainer=explainer)
    return time.perf_counter() - start, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", choices=["float64", "float32"], action="append")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--retrain", action="store_true")
    args = parser.parse_args()
    dtypes = args.dtype or ["float64", "float32"]
    pokemon = load_dataset("pokemon", seed=0)
    tennis = load_dataset("tennis", seed=0)
    poke_fn = trained("pokemon", "gpm", args.retrain)
    tennis_fn = trained("tennis", "cgpm", args.retrain)
    poke_duels = split_duels(pokemon.n_duels, 0).test[:1000]
    losses = duels_of_item(tennis, "d643", "losses")

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    rates = {dt: gemm_rate(Compute(dtype=dt).torch_dtype) for dt in dtypes}
    print("measured GEMM GFLOP/s: " + ", ".join(f"{dt} {r:.1f}" for dt, r in rates.items()))
    head = (
        "cholesky s GF/s | solve s GF/s   | gemm s GF/s    | kernels | gather  | contract| classes"
    )
    print(f"{'case':<34}{'dtype':<9}{'seconds':>8} {'target':>7}  {head}")
    for dt in dtypes:
        compute = Compute(device=args.device, dtype=dt)
        t, stats = timed(poke_fn, pokemon, poke_duels, "items", compute)
        print(f"{'pokemon 1000 test duels, exact':<34}{dt:<9}{t:8.2f} {'< 15':>7}  {_parts(stats)}")
        t_items, stats = timed(tennis_fn, tennis, losses, "items", compute)
        print(
            f"{'tennis d643 154 losses, items':<34}{dt:<9}{t_items:8.2f} {'':>7}  {_parts(stats)}"
        )
        t_ctx, stats = timed(tennis_fn, tennis, losses, "context", compute)
        print(
            f"{'tennis d643 154 losses, context':<34}{dt:<9}{t_ctx:8.2f} {'':>7}  {_parts(stats)}"
        )
        print(f"{'tennis d643 items + context':<34}{dt:<9}{t_items + t_ctx:8.2f} {'< 60':>7}")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
