"""Speed of the Pref-SHAP explainer engine on random problems of the real data's sizes.

    python benchmarks/bench_explain_engine.py            # both problems, float64 + float32
    python benchmarks/bench_explain_engine.py --quick    # smaller problems, a smoke run
    python benchmarks/bench_explain_engine.py --threads 1

Problems (random alpha, centres drawn from the items, random lengthscales: what a
model file gives; no training):

* pokemon: 800 items, 8 players (6 integer stats with about 100 levels each, an
  18-column multi-hot "Type" group, binary Legendary), M = 2000 centres, 1000 random
  duels, exact over all 256 coalitions (GPM).
* tennis: 3483 items with the ATP table's cardinalities and missing-value rate
  (birth year, turned-pro year, weight, height: 47 / 43 / 52 / 22 levels, 3-62 %
  missing and imputed, so about 2000 distinct rows; handedness and backhand as
  one-hot groups), 6 players, M = 2000 centres, C-GPM with 2 context groups (indoor,
  surface) over 8 unique contexts; one item's 154 duels, items exact (64
  coalitions) + context exact (4 coalitions).

Prints seconds per problem and precision, then per part of the engine: seconds and
achieved GFLOP/s of the Cholesky, the triangular solves and the GEMM (flops counted
by the engine), next to this machine's GEMM rate measured here. Seconds depend on
what else runs on the machine: the load average is printed with them. OpenMP
threads wait as the package sets them (``prefshap_core.OPENMP_DEFAULTS``: passive after
a short spin); long spins while another process holds the other core made every small
tensor operation many times slower (97 s instead of 24 s at load 5).

The trained Pokémon model against the hardware limit (frozen flop count / GEMM rate),
before and after a change, CLI and dashboard modes: ``bench_explain_limit.py``.
"""

from __future__ import annotations

import argparse
import os
import time

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain import EngineStats, Explainer, ExplainOptions
from prefshap_core.kernels.rbf import median_heuristic
from prefshap_core.models.preference_function import PreferenceFunction


def _space(blocks: list[tuple[str, np.ndarray, bool]]) -> tuple[FeatureSpace, np.ndarray]:
    """(group name, raw columns, one-hot?) blocks -> feature space and model-space rows."""
    names, groups, cols = [], [], []
    for g, (name, raw, onehot) in enumerate(blocks):
        raw = raw.reshape(len(raw), -1)
        cols.append(raw)
        groups += [g] * raw.shape[1]
        names += [f"{name}={k}" for k in range(raw.shape[1])] if onehot else [name]
    raw = np.hstack(cols).astype(float)
    scale = np.where(raw.std(0) > 0, raw.std(0), 1.0)
    space = FeatureSpace(
        tuple(names), tuple(b[0] for b in blocks), np.array(groups), raw.mean(0), scale
    )
    return space, space.standardise(raw)


def _onehot(codes: np.ndarray, width: int) -> np.ndarray:
    return np.eye(width)[codes]


def _model(kind, space, items, n_centres, rng, **context) -> PreferenceFunction:
    n = len(items)
    cl, cr = rng.integers(0, n, n_centres), rng.integers(0, n, n_centres)
    return PreferenceFunction(
        kind=kind,
        item_space=space,
        item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items,
        lengthscales=median_heuristic(items) * rng.uniform(0.8, 1.5, items.shape[1]),
        centres_left=items[cl],
        centres_right=items[cr],
        alpha=rng.normal(size=n_centres),
        cme_lambda=1e-2,
        **context,
    )


def pokemon_like(n: int = 800, n_centres: int = 2000, n_duels: int = 1000, seed: int = 0):
    rng = np.random.default_rng(seed)
    stats = [(name, rng.integers(20, 130, n)) for name in ("HP", "Atk", "Def", "SpA", "SpD", "Spe")]
    types = _onehot(rng.integers(0, 18, n), 18)
    second = rng.random(n) < 0.5
    types[np.flatnonzero(second), rng.integers(0, 18, second.sum())] = 1.0
    blocks = [(name, v, False) for name, v in stats]
    blocks += [("Type", types, True), ("Legendary", (rng.random(n) < 0.08).astype(float), False)]
    space, items = _space(blocks)
    fn = _model("gpm", space, items, n_centres, rng)
    return fn, rng.integers(0, n, n_duels), rng.integers(0, n, n_duels)


def tennis_like(n: int = 3483, n_centres: int = 2000, n_duels: int = 154, seed: int = 0):
    rng = np.random.default_rng(seed)
    obscure = rng.random(n) < 0.4  # players with no recorded body data

    def column(levels: int, start: int, missing: float) -> np.ndarray:
        v = (start + rng.integers(0, levels, n)).astype(float)
        gone = obscure | (rng.random(n) < missing)
        v[gone] = np.median(v[~gone])  # imputed, as the loader does
        return v

    blocks = [
        ("birth_year", column(47, 1950, 0.03), False),
        ("turned_pro", column(43, 1968, 0.4), False),
        ("weight_kg", column(52, 60, 0.05), False),
        ("height_cm", column(22, 170, 0.05), False),
        ("handedness", _onehot(np.where(obscure, 0, rng.integers(0, 3, n)), 3), True),
        ("backhand", _onehot(np.where(obscure, 0, rng.integers(0, 2, n)), 2), True),
    ]
    space, items = _space(blocks)
    combos = [(1, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2), (0, 3), (1, 3)]  # indoor, surface
    counts = np.array([5679, 213, 12119, 47, 31439, 10532, 36450, 300], dtype=float)
    raw = np.array([[i, *np.eye(4)[s]] for i, s in combos], dtype=float)
    cspace = FeatureSpace(
        ("indoor", *(f"surface={s}" for s in ("carpet", "clay", "hard", "grass"))),
        ("indoor", "surface"),
        np.array([0, 1, 1, 1, 1]),
        raw.mean(0),
        raw.std(0),
    )
    contexts = cspace.standardise(raw)
    probability = counts / counts.sum()
    fn = _model(
        "cgpm",
        space,
        items,
        n_centres,
        rng,
        context_space=cspace,
        contexts=contexts,
        context_weights=counts,
        context_lengthscales=np.ones(5),
        centres_context=contexts[rng.choice(8, n_centres, p=probability)],
        context_cme_lambda=1e-2,
    )
    opponents = rng.choice(np.arange(1, n), n_duels, replace=False)
    duel_contexts = contexts[rng.choice(8, n_duels, p=probability)]
    return fn, np.zeros(n_duels, dtype=np.int64), opponents, duel_contexts


def gemm_rate(dtype: torch.dtype, n: int = 2000, repeats: int = 5) -> float:
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return 2.0 * n**3 / best / 1e9


def _seconds(f) -> float:
    start = time.perf_counter()
    f()
    return time.perf_counter() - start


def _timed(what, fn, left, right, compute, contexts=None) -> tuple[float, EngineStats]:
    """Seconds of one explanation by a fresh explainer (no factorizations kept)."""
    stats = EngineStats(device=compute.device)
    explainer = Explainer(fn, ExplainOptions(what=what), compute=compute, stats=stats)
    seconds = _seconds(lambda: explainer(left, right, contexts=contexts))
    return seconds, stats


def _parts(stats: EngineStats) -> str:
    cells = []
    for part in ("cholesky", "solve", "gemm"):
        s, f = stats.seconds.get(part, 0.0), stats.flops.get(part, 0.0)
        cells.append(f"{s:6.2f}s {f / max(s, 1e-9) / 1e9:5.1f}")
    for part in ("kernels", "gather", "contraction", "classes"):
        cells.append(f"{stats.seconds.get(part, 0.0):6.2f}s")
    return " | ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small problems (smoke run)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--dtype", choices=["float64", "float32"], action="append")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtypes = args.dtype or ["float64", "float32"]
    scale = 4 if args.quick else 1
    pokemon = pokemon_like(800 // scale, 2000 // scale, 1000 // scale)
    tennis = tennis_like(3483 // scale, 2000 // scale, 154 // (scale // 2 or 1))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, load {os.getloadavg()}")
    rates = {dt: gemm_rate(Compute(dtype=dt).torch_dtype) for dt in dtypes}
    print("measured GEMM GFLOP/s: " + ", ".join(f"{dt} {r:.1f}" for dt, r in rates.items()))
    head = (
        "cholesky s GF/s | solve s GF/s   | gemm s GF/s    | kernels | gather  | contract| classes"
    )
    print(f"{'problem':<22}{'dtype':<9}{'seconds':>8}  {head}")
    for dt in dtypes:
        compute = Compute(dtype=dt)
        t, stats = _timed("items", *pokemon, compute)
        print(f"{'pokemon items':<22}{dt:<9}{t:8.2f}  {_parts(stats)}")
        fn, left, right, contexts = tennis
        t_items, stats = _timed("items", fn, left, right, compute)
        print(f"{'tennis items':<22}{dt:<9}{t_items:8.2f}  {_parts(stats)}")
        t_ctx, stats = _timed("context", fn, left, right, compute, contexts)
        print(f"{'tennis context':<22}{dt:<9}{t_ctx:8.2f}  {_parts(stats)}")
        print(f"{'tennis items+context':<22}{dt:<9}{t_items + t_ctx:8.2f}")
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
