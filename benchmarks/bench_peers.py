"""The product's models side by side with gradient boosting (LightGBM) on the same splits.

    pip install -r requirements-bench.txt   # LightGBM: the benchmark only, not the product
    python benchmarks/bench_peers.py [--seeds 5] [--datasets pokemon,tennis,...]

Per dataset and seed: the test ROC AUC of g of the product as it ships (``--model
auto``: ``auto`` is the candidate it chose, ``auto:<kind>`` each candidate of that one
run, so the UPM is ``auto:upm``), of LightGBM, and each one's training seconds (a
candidate's own, the choice's the whole run), then the means over the seeds. Every
model sees the product's own split (``load_dataset(name, seed=s)`` +
``split_duels``): trained on the train duels, early-stopped or tuned on the
validation duels, scored on the test duels. Chameleons' 10 test duels rank
nothing: there the headline is the 5-fold CV AUC of ``bench_training.cv_folds``
(each fold's model, its own hyperparameter choice included, predicts the fold).

LightGBM, as an analyst would use it: the features of duel (a, b) are the product's
model-space item columns ``[x_a, x_b]`` (and the duel's context columns for tennis),
no categorical features; trained on both orientations ((a, b) labelled "a won", and
(b, a) with the opposite label), ``g(a, b) = raw(a, b) - raw(b, a)`` (antisymmetric by
construction); ``num_leaves=63, learning_rate=0.06``, at most 1500 rounds with early
stopping after 100 rounds without a better validation log loss (both orientations of
the validation duels), ``min_child_samples=20``, row subsample 0.8 every round,
column subsample 0.8, one thread, ``deterministic=True``, seed = the split seed.

On the CV data set (chameleons) the product's rows are its GPM and UPM, each K-fold
cross-validated with its own hyperparameter choice in every fold. ``--product-variants
before,after`` also fits the product as it was before the gradient-learned column
lengthscales (``models.ard``): both in the same run, so their seconds compare under
the same load (printed with every line).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections import defaultdict

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import lightgbm as lgb
import numpy as np
import torch
from bench_training import CV_DATASETS, MAIN_MODEL, cv_auc, cv_folds

from prefshap_core.data.duel_data import DuelData, split_duels
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.metrics import roc_auc
from prefshap_core.models import ard
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

LIGHTGBM_PARAMS = {
    "objective": "binary",
    "metric": "binary_logloss",
    "num_leaves": 63,
    "learning_rate": 0.06,
    "min_child_samples": 20,
    "subsample": 0.8,
    "subsample_freq": 1,
    "colsample_bytree": 0.8,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,  # with deterministic: the same trees on every run
    "verbose": -1,
}
LIGHTGBM_ROUNDS = 1500
LIGHTGBM_PATIENCE = 100


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def duel_features(data: DuelData, duels: np.ndarray, swap: bool = False) -> np.ndarray:
    """``[x_left, x_right]`` (and the context row) of each duel; ``swap``: ``[x_right, x_left]``."""
    left, right = data.left[duels], data.right[duels]
    if swap:
        left, right = right, left
    parts = [data.items[left], data.items[right]]
    if data.contexts is not None:
        parts.append(data.contexts[data.context_index[duels]])
    return np.hstack(parts)


def both_orientations(data: DuelData, duels: np.ndarray) -> lgb.Dataset:
    """The duels as (a, b) with label "a won" and as (b, a) with the opposite; ties left out."""
    decided = duels[data.y[duels] != 0]
    x = np.vstack([duel_features(data, decided), duel_features(data, decided, swap=True)])
    won = (data.y[decided] > 0).astype(np.float64)
    return lgb.Dataset(x, label=np.concatenate([won, 1.0 - won]), free_raw_data=False)


def lightgbm_g(
    data: DuelData, train: np.ndarray, validation: np.ndarray, seed: int
) -> tuple[lgb.Booster, float]:
    """LightGBM fitted as the module docstring says; returns the booster and its seconds."""
    start = time.perf_counter()
    train_set = both_orientations(data, train)
    val_set = both_orientations(data, validation)
    booster = lgb.train(
        {**LIGHTGBM_PARAMS, "seed": seed},
        train_set,
        num_boost_round=LIGHTGBM_ROUNDS,
        valid_sets=[val_set],
        callbacks=[lgb.early_stopping(LIGHTGBM_PATIENCE, verbose=False)],
    )
    return booster, time.perf_counter() - start


def booster_g(booster: lgb.Booster, data: DuelData, duels: np.ndarray) -> np.ndarray:
    """``g(a, b) = raw(a, b) - raw(b, a)`` at the early-stopped round."""
    best = booster.best_iteration or None
    forward = booster.predict(duel_features(data, duels), raw_score=True, num_iteration=best)
    back = booster.predict(
        duel_features(data, duels, swap=True), raw_score=True, num_iteration=best
    )
    return forward - back


def lightgbm_run(data: DuelData, seed: int, cv: bool) -> dict[str, float]:
    split = split_duels(data.n_duels, seed, groups=data.duel_groups)
    booster, seconds = lightgbm_g(data, split.train, split.validation, seed)
    y_test = data.y[split.test].astype(np.float64)
    run = {"auc": roc_auc(y_test, booster_g(booster, data, split.test)), "seconds": seconds}
    if cv:
        g = np.zeros(data.n_duels)
        for train, validation, fold in cv_folds(data.n_duels, seed):
            g[fold] = booster_g(lightgbm_g(data, train, validation, seed)[0], data, fold)
        run["cv_auc"] = roc_auc(data.y.astype(np.float64), g)
    return run


def product_run(data: DuelData, kind: str, seed: int, cv: bool) -> dict[str, float]:
    """The product's model as ``prefshap train`` fits it (workflow ``train``), scored on test."""
    settings = TrainSettings(kind=kind, seed=seed, baseline=False)
    start = time.perf_counter()
    result = train(data, settings)
    run = {"auc": result.metrics["test"]["roc_auc"], "seconds": time.perf_counter() - start}
    if cv:
        run["cv_auc"] = cv_auc(data, settings)
    return run


def auto_runs(data: DuelData, seed: int) -> dict[str, dict[str, float]]:
    """``--model auto`` once: ``auto`` (the chosen candidate's test AUC, the whole run's
    seconds) and ``auto:<kind>`` for every candidate (its test AUC and own seconds)."""
    start = time.perf_counter()
    report = train(data, TrainSettings(kind="auto", seed=seed, baseline=False)).to_json()
    runs: dict[str, dict] = {
        "auto": {
            "auc": report["test"]["roc_auc"],
            "seconds": time.perf_counter() - start,
            "chosen": report["chosen_model"],
        }
    }
    for candidate in report["candidates"]:
        runs[f"auto:{candidate['model']}"] = {
            "auc": candidate["test_roc_auc"],
            "seconds": candidate["seconds"],
        }
    return runs


def _fmt(run: dict) -> str:
    cv = f" cv {run['cv_auc']:.4f}" if "cv_auc" in run else ""
    chosen = f" = {run['chosen']}" if "chosen" in run else ""
    return f"{run['auc']:.4f}{chosen}{cv} ({run['seconds']:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..seeds-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--datasets", default="synthetic,chameleons,pokemon,tennis")
    parser.add_argument(
        "--product-variants", default="after",
        help="'after' (the product as it is), 'before' (without the gradient-learned "
        "column lengthscales) or both, comma-separated",
    )  # fmt: skip
    args = parser.parse_args()
    variants = args.product_variants.split(",")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"lightgbm {lgb.__version__} (1 thread), {_load()}", flush=True)  # fmt: skip
    runs: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name in args.datasets.split(","):
            data = load_dataset(name, seed=seed)
            cv = name in CV_DATASETS
            line = {}
            for variant in variants:
                steps = ard.GRADIENT_STEPS
                if variant == "before":
                    ard.GRADIENT_STEPS = 0
                try:
                    if not cv:
                        for label, run in auto_runs(data, seed).items():
                            line[label if variant == "after" else f"{label}-{variant}"] = run
                        continue
                    for kind in (MAIN_MODEL.get(name, "gpm"), "upm"):
                        label = kind if variant == "after" else f"{kind}-{variant}"
                        line[label] = product_run(data, kind, seed, cv)
                finally:
                    ard.GRADIENT_STEPS = steps
            line["lightgbm"] = lightgbm_run(data, seed, cv)
            for label, run in line.items():
                runs[(name, label)].append(run)
            cells = "  ".join(f"{label} {_fmt(run)}" for label, run in line.items())
            print(f"seed {seed} {name:<11} {cells}  ({_load()})", flush=True)
    print(f"\nmeans over {args.seeds} seed(s) ({_load()})")
    header = (
        f"{'dataset':<11} {'model':<12} {'test ROC AUC':>16} {'5-fold CV AUC':>16} {'train s':>8}"
    )
    print(header)
    print("-" * len(header))
    for (name, label), rs in runs.items():

        def mean_sd(key: str, rs=rs) -> str:
            values = [r[key] for r in rs if key in r]
            if not values:
                return "-"
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            return f"{statistics.mean(values):.4f} +- {sd:.4f}"

        seconds = statistics.mean(r["seconds"] for r in rs)
        print(
            f"{name:<11} {label:<12} {mean_sd('auc'):>16} {mean_sd('cv_auc'):>16} {seconds:>8.1f}"
        )


if __name__ == "__main__":
    main()
