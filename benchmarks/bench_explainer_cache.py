"""Kept factorizations: a second explanation between the same pool (issue-8 target).

    python benchmarks/bench_explainer_cache.py [--repeats 5] [--retrain]

Pokémon GPM (seed 0, trained by the product's pipeline, kept in
artifacts/bench_models/), exact over its 8 groups (256 coalitions). One explainer:
a first call over 1,000 test duels, then (median of ``--repeats``) one new duel
between pool items that the first call did not query together, and one what-if
duel (an edited covariate row, outside the pool). The same new duel through a
fresh explainer (no kept factorizations) is the baseline of the same process.
Target: the second call < 0.5 s. Also prints how far kept and fresh numbers differ.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.paths import repo_root
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

MODELS = repo_root() / "artifacts" / "bench_models"


def trained(name: str, kind: str, retrain: bool):
    """The product's model of ``name`` (seed 0), trained once and kept on disk."""
    path = MODELS / f"{name}-{kind}-seed0.npz"
    if retrain or not path.exists():
        result = train(load_dataset(name, seed=0), TrainSettings(kind=kind, baseline=False))
        save_model(result.function, path)
    return load_model(Path(path))


def _seconds(call) -> tuple[float, object]:
    start = time.perf_counter()
    out = call()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--retrain", action="store_true")
    args = parser.parse_args()
    data = load_dataset("pokemon", seed=0)
    fn = trained("pokemon", "gpm", args.retrain)
    test = split_duels(data.n_duels, 0).test[:1000]
    left, right = data.left[test], data.right[test]
    explainer = Explainer(fn, ExplainOptions())
    first, _ = _seconds(lambda: explainer(left, right))
    cache = explainer.cache_report.get("factor_cache", {})
    seen = set(zip(left.tolist(), right.tolist(), strict=True))
    rng = np.random.default_rng(1)
    pairs = []
    while len(pairs) < args.repeats:
        a, b = (int(v) for v in rng.integers(0, data.n_items, 2))
        if a != b and (a, b) not in seen and (b, a) not in seen:
            pairs.append((a, b))
    kept, fresh, what_if = [], [], []
    worst = 0.0
    for a, b in pairs:
        t, e_kept = _seconds(lambda a=a, b=b: explainer(np.array([a]), np.array([b])))
        kept.append(t)
        t, e_fresh = _seconds(lambda a=a, b=b: Explainer(fn)(np.array([a]), np.array([b])))
        fresh.append(t)
        worst = max(worst, float(np.abs(e_kept.values - e_fresh.values).max()))
        x = fn.items[[a]].copy()
        x[0, 0] += 0.5  # an edited covariate (model space): a hypothetical item
        t, _ = _seconds(lambda x=x, b=b: explainer(x, fn.items[[b]]))
        what_if.append(t)
    print(f"Pokémon GPM, {len(fn.item_ids)} items, {fn.n_centres} centres, 256 coalitions")
    print(f"factor cache after the first call: {cache}")
    print("| call | seconds (median) | vs fresh explainer |")
    print("|---|---|---|")
    base = statistics.median(fresh)
    print(f"| first call, 1,000 duels | {first:.2f} | |")
    print(f"| fresh explainer, 1 new duel | {base:.3f} | 1.00x |")
    for name, times in (("kept, 1 new duel", kept), ("kept, 1 what-if duel", what_if)):
        med = statistics.median(times)
        print(f"| {name} | {med:.3f} | {base / med:.1f}x faster |")
    print(f"largest |kept - fresh| value difference: {worst:.1e}")


if __name__ == "__main__":
    main()
