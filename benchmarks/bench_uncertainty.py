"""Calibration and cost of the Laplace posterior (docs/method.md, "Uncertainty").

    python benchmarks/bench_uncertainty.py                 # 5 seeds per generator
    python benchmarks/bench_uncertainty.py --seeds 2 --centres 500   # faster
    python benchmarks/bench_uncertainty.py --pokemon       # + explain cost on Pokémon
    python benchmarks/bench_uncertainty.py --skip-calibration --sampling   # sample vs all

Calibration: a GPM is trained on duels drawn from ``sigmoid(g_true)`` and the 90 %
interval ``g_hat +- 1.645 sd`` is checked against ``g_true`` on the held-out test
duels (target coverage 80-97 %); ``coverage_laplace`` is the posterior's before the
held-out dispersion ``c`` (the Laplace covariance widened by the penalty's bias;
docs/method.md, "Calibration"), ``calibration_slope``
the validation duels' estimate of the shrinkage ``a`` and ``true_slope`` the test duels'
regression of ``g_true`` on ``g_hat`` it estimates. Generators: the paper's App. B
game (a random GPM, ``datasets.synthetic.gpm_generated``) and a noisy utility game
(``g = f(a) - f(b)``, ``f(x) = 2 sin(x1) + x2^2 - x3``). Every seed is printed.

Cost: training seconds with the posterior and without it (``fit_seconds`` minus the
posterior's own seconds, ``metadata["posterior"]["seconds"]``; target <= 15 %), and
with ``--pokemon`` an exact explanation with and without uncertainty on 1,000
Pokémon test duels, one-shot as ``prefshap explain`` (target <= 2x; see
:func:`pokemon_cost`).

Sampling (``--sampling``): above ``POSTERIOR_MAX_DUELS`` training duels the data term
is estimated from a sample drawn by curvature (docs/method.md, "Cost"); printed per
real data set and model (seed 0), the test duels' Laplace sd (before the dispersion)
with the product's sample against the posterior from every training duel: median,
10 % and 90 % quantiles of their ratio, and both posteriors' seconds.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd

from prefshap_core.data.build import build_duel_data
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import gpm_generated_tables
from prefshap_core.models.estimators import GPM

Z90 = 1.6448536269514722


def app_b(seed: int):
    items, duels, truth = gpm_generated_tables(n_items=300, n_duels=6000, d=10, seed=seed)
    x = items[[c for c in items.columns if c != "id"]].to_numpy()
    relevant = x[:, :2] / np.sqrt(0.1)

    def g_true(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        k = np.exp(-0.5 * ((relevant[:, None] - relevant[None]) ** 2).sum(-1))
        cl, cr = truth.centre_left, truth.centre_right
        pair = k[cl][:, left] * k[cr][:, right] - k[cl][:, right] * k[cr][:, left]
        return truth.alpha @ pair

    return items, duels, g_true


def utility_game(seed: int):
    rng = np.random.default_rng([seed, 77])
    x = rng.normal(size=(300, 4))
    f = 2 * np.sin(x[:, 0]) + x[:, 1] ** 2 - x[:, 2]
    left, right = rng.integers(0, 300, 6000), rng.integers(0, 300, 6000)
    keep = left != right
    left, right = left[keep], right[keep]
    y = np.where(rng.random(len(left)) < 1 / (1 + np.exp(-(f[left] - f[right]))), 1, -1)
    ids = np.array([f"u{i:03d}" for i in range(300)])
    items = pd.DataFrame(x, columns=["x1", "x2", "x3", "x4"])
    items.insert(0, "id", ids)
    duels = pd.DataFrame({"left": ids[left], "right": ids[right], "y": y})
    return items, duels, lambda a, b: f[a] - f[b]


def calibration_row(name: str, generator, seed: int, centres: int) -> dict:
    items, duels, g_true = generator(seed)
    numeric = [c for c in items.columns if c != "id"]
    data = build_duel_data(items, duels, name=name, numeric=numeric, context_columns=[],
                           seed=seed)  # fmt: skip
    model = GPM(n_centres=centres, seed=seed).fit(data)
    test = split_duels(data.n_duels, seed).test
    fn = model.function_
    row_of = {str(i): k for k, i in enumerate(items["id"])}
    pool_rows = np.array([row_of[str(i)] for i in data.item_ids])
    truth = g_true(pool_rows[data.left[test]], pool_rows[data.right[test]])
    g = model.decision_function(data, test)
    sd = fn.decision_sd_on_pool(data.items, data.left[test], data.right[test])
    post = fn.metadata["posterior"]
    c = post.get("dispersion", 1.0)
    covered = np.abs(g - truth) <= Z90 * sd
    fit = model.fit_seconds_
    return {
        "generator": name,
        "seed": seed,
        "test_duels": len(test),
        "coverage_90": float(covered.mean()),
        # The Laplace posterior alone (before the held-out dispersion c).
        "coverage_laplace": float((np.abs(g - truth) <= Z90 * sd / c).mean()),
        "dispersion_c": c,
        "calibration_slope": post.get("calibration_slope", np.nan),
        "true_slope": float(np.polyfit(g, truth, 1)[0]),
        "mean_sd": float(sd.mean()),
        "rmse_g": float(np.sqrt(np.mean((g - truth) ** 2))),
        "rank": post["rank"],
        "centres": fn.n_centres,
        "fit_s": fit,
        "posterior_s": post["seconds"],
        "posterior_extra": post["seconds"] / max(fit - post["seconds"], 1e-9),
    }


def pokemon_cost(centres: int, n_duels: int = 1000) -> list[dict]:
    """Explain with and without uncertainty on Pokémon test duels, exact, one-shot (as
    ``prefshap explain``). The cost does not depend on the coefficients, so the model
    is a GPM with ``centres`` random training-duel centres, random alpha and a full-rank
    factor (r = M, the worst case), on the real items and groups: no training needed."""
    from prefshap_core.datasets.registry import load_dataset
    from prefshap_core.explain import Explainer, ExplainOptions
    from prefshap_core.models.hyperparameters import median_lengthscales
    from prefshap_core.models.preference_function import PreferenceFunction

    data = load_dataset("pokemon")
    split = split_duels(data.n_duels, 0)
    rng = np.random.default_rng(0)
    c = np.sort(rng.choice(split.train, centres, replace=False))
    scale = np.sqrt(data.item_space.n_groups)
    fn = PreferenceFunction(
        kind="gpm", item_space=data.item_space, item_ids=np.asarray(data.item_ids).astype(str),
        items=data.items, lengthscales=median_lengthscales(data.items, seed=0) * scale,
        centres_left=data.items[data.left[c]], centres_right=data.items[data.right[c]],
        alpha=rng.normal(size=centres) / centres, cme_lambda=1e-2, utility_weight=1.0,
        posterior_factor=rng.normal(size=(centres, centres)) / centres,
    )  # fmt: skip
    test = split.test[:n_duels]
    rows = []
    for uncertainty in (False, True, False, True):
        options = ExplainOptions(shapley="exact", factor_cache_bytes=0,
                                 uncertainty=uncertainty)  # fmt: skip
        start = time.perf_counter()
        Explainer(fn, options)(data.left[test], data.right[test])
        rows.append({"explain": "uncertainty" if uncertainty else "plain",
                     "seconds": time.perf_counter() - start})  # fmt: skip
    plain = min(r["seconds"] for r in rows if r["explain"] == "plain")
    for r in rows:
        r["vs_best_plain"] = r["seconds"] / plain
    return rows


def sampling_row(name: str, kind: str) -> dict:
    """The product's sampled posterior against the all-duel one, on a real data set."""
    from dataclasses import replace

    from prefshap_core.datasets.registry import load_dataset
    from prefshap_core.models.estimators import CGPM, UPM
    from prefshap_core.models.posterior import laplace_posterior

    data = load_dataset(name, seed=0)
    model = {"gpm": GPM, "upm": UPM, "cgpm": CGPM}[kind](seed=0).fit(data, posterior=False)
    fn, train, test = model.function_, model.train_duels_, split_duels(data.n_duels, 0).test
    contexts = kind == "cgpm"
    args = (
        fn, data.items, data.left[train], data.right[train], data.y[train], model.penalty_,
        model.solver_.jitter_for(model.compute_.torch_dtype),
        data.contexts if contexts else None, data.context_index[train] if contexts else None,
    )  # fmt: skip
    test_ctx = (data.contexts, data.context_index[test]) if contexts else ()
    sds, seconds, used = {}, {}, 0
    for label, max_duels in (("all", len(train)), ("sampled", None)):
        start = time.perf_counter()
        cap = {} if max_duels is None else {"max_duels": max_duels}
        post = laplace_posterior(*args, seed=0, trace_share=1.0, **cap)
        seconds[label] = time.perf_counter() - start
        used = post.info["n_duels_used"]
        sds[label] = replace(fn, posterior_factor=post.factor).decision_sd_on_pool(
            data.items, data.left[test], data.right[test], *test_ctx
        )
    # (a duel between identical rows has sd 0 under every posterior: left out)
    positive = sds["all"] > 0
    ratio = sds["sampled"][positive] / sds["all"][positive]
    return {
        "data": name, "model": kind, "train_duels": len(train), "duels_used": used,
        "test_duels_sd0": int((~positive).sum()),
        "median_sd_ratio": float(np.median(ratio)), "p10": float(np.quantile(ratio, 0.1)),
        "p90": float(np.quantile(ratio, 0.9)), "sampled_s": seconds["sampled"],
        "all_s": seconds["all"],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--centres", type=int, default=GPM().n_centres, help="the product's")
    parser.add_argument("--pokemon", action="store_true")
    parser.add_argument("--pokemon-centres", type=int, default=2000)
    parser.add_argument("--skip-calibration", action="store_true")
    parser.add_argument("--sampling", action="store_true")
    parser.add_argument(
        "--data-dir", default=os.environ.get("PREFSHAP_DATA_DIR", "/work/shared/data")
    )
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    rows = []
    generators = (
        () if args.skip_calibration else (("app_b_gpm", app_b), ("noisy_utility", utility_game))
    )
    for name, generator in generators:
        for seed in range(args.seeds):
            rows.append(calibration_row(name, generator, seed, args.centres))
            print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1), flush=True)
    if rows:
        table = pd.DataFrame(rows)
        print(table.to_string(index=False))
        columns = ["coverage_90", "coverage_laplace", "posterior_extra"]
        print(table.groupby("generator")[columns].agg(["min", "max"]))
    if args.sampling:
        os.environ.setdefault("PREFSHAP_DATA_DIR", args.data_dir)
        cases = (("pokemon", "gpm"), ("tennis", "cgpm"), ("tennis", "upm"))
        print(pd.DataFrame([sampling_row(*case) for case in cases]).to_string(index=False))
    if args.pokemon:
        os.environ.setdefault("PREFSHAP_DATA_DIR", args.data_dir)
        print(pd.DataFrame(pokemon_cost(args.pokemon_centres)).to_string(index=False))
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
