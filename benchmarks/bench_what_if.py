"""What-if latency on Pokémon: an edit of one side's covariates to a new probability
and a new waterfall, as the Head-to-head page does it.

    python benchmarks/bench_what_if.py [--model artifacts/bench_models/pokemon-gpm-seed0.npz]

One Explainer per model and options (what the dashboard keeps in st.cache_resource):
the first explanation of the pair factorizes every coalition's CME; each later edit
only evaluates the edited rows against the kept factorizations. Prints the seconds of
the first explanation and of each edit (probability: head_to_head.pair_preference;
waterfall: the item explanation of the edited pair). Target: < 1 s per edit.
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
import numpy as np
import torch

from prefshap_core.analysis.covariates import encode_covariates, raw_covariates
from prefshap_core.analysis.head_to_head import most_active_pair, pair_preference
from prefshap_core.datasets.registry import load_dataset
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.paths import repo_root
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

DEFAULT_MODEL = repo_root() / "artifacts" / "bench_models" / "pokemon-gpm-seed0.npz"


def model(path: Path, data):
    if not path.exists():
        start = time.perf_counter()
        result = train(data, TrainSettings(kind="gpm", baseline=False))
        path.parent.mkdir(parents=True, exist_ok=True)
        save_model(result.function, path)
        print(f"trained the Pokémon GPM in {time.perf_counter() - start:.1f} s")
    return load_model(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--verbose", action="store_true", help="print the factor cache")
    parser.add_argument("--edits", type=int, default=7, help="how many edits to time")
    args = parser.parse_args()
    data = load_dataset("pokemon", seed=0)
    fn = model(args.model, data)
    a, b = most_active_pair(data)
    labels = dict(zip(data.item_ids, data.labels, strict=True))
    x_b = data.items[[data.item_index(b)]]
    values = raw_covariates(data, a)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"load {os.getloadavg()[0]:.1f}; pair {labels[a]} vs {labels[b]}; "
          f"{fn.item_space.n_groups} feature groups, {len(fn.items)} items")  # fmt: skip
    explainer = Explainer(fn, ExplainOptions(what="items"))
    edits = [("original", values)] + [
        (f"Speed = {s}", {**values, "Speed": float(s)}) for s in (20, 60, 100, 140, 180)
    ] + [(f"Attack = {s}", {**values, "Attack": float(s)}) for s in (50, 150)]  # fmt: skip
    edits = edits[: args.edits + 1]
    print(f"{'edit':<16}{'P(A wins)':>10}{'prob s':>9}{'waterfall s':>13}{'total s':>9}")
    for name, edited in edits:
        start = time.perf_counter()
        x_a = encode_covariates(data, edited)
        p = pair_preference(fn, x_a, x_b).p_average
        mid = time.perf_counter()
        expl = explainer(x_a, x_b)
        end = time.perf_counter()
        assert abs(expl.outputs[0] - np.log(p / (1 - p))) < 1e-6
        print(f"{name:<16}{100 * p:>9.1f}%{mid - start:>9.3f}{end - mid:>13.3f}{end - start:>9.3f}")
        if args.verbose:
            report = explainer.cache_report
            print(f"    cache: {report.get('factor_cache', report)}")


if __name__ == "__main__":
    main()
