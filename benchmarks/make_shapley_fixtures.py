"""Exact Shapley fixtures for the sampled-value coverage test
(tests/engine/explain/test_sampled_shapley.py).

    python benchmarks/make_shapley_fixtures.py [--players 16 17]

A "case" is a random GPM whose every feature is its own player (pool of 25 items,
20 centres, lengthscales around sqrt(p) so each feature matters), 12 distinct duels
between pool rows, and the exact item Shapley values of those duels from the full
``2^p`` coalition table (minutes for 17 players; tables are kept in
``.cache/shapley_tables/`` for bench_se_coverage.py). A fixture
``tests/engine/explain/fixtures/shapley_p<p>.npz`` holds the model file, the duels and
the exact phi, never the table: the test recomputes the values of the coalitions it samples.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch

from prefshap_core.explain.games.items import item_coalition_values
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.explain.shapley.coalitions import all_coalitions
from prefshap_core.explain.shapley.exact import exact_shapley_matrix
from prefshap_core.models.model_file import model_to_bytes
from prefshap_core.models.preference_function import PreferenceFunction

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "engine" / "explain" / "fixtures"
TABLES = ROOT / ".cache" / "shapley_tables"
N_ITEMS, N_CENTRES, N_DUELS = 25, 20, 12


def make_model(n_players: int, seed: int) -> PreferenceFunction:
    groups = [(f"f{j}", 1) for j in range(n_players)]
    fn = random_preference_function(
        "gpm", n_items=N_ITEMS, n_centres=N_CENTRES, groups=groups, seed=seed, levels=5
    )
    rng = np.random.default_rng(seed + 1000)
    lengthscales = np.sqrt(n_players) * rng.uniform(0.4, 1.5, n_players)
    return dataclasses.replace(fn, lengthscales=lengthscales)


def make_duels(fn: PreferenceFunction, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + 2000)
    pairs = [(a, b) for a in range(len(fn.items)) for b in range(len(fn.items)) if a != b]
    chosen = rng.choice(len(pairs), N_DUELS, replace=False)
    left, right = np.array([pairs[k] for k in chosen]).T
    return left, right


def coalition_values(
    fn: PreferenceFunction, left: np.ndarray, right: np.ndarray, masks: np.ndarray
) -> np.ndarray:
    """(K, D) item values v(S) of proper coalitions for duels between pool rows."""
    return item_coalition_values(fn, masks, left, right)


def boundary_values(
    fn: PreferenceFunction, left: np.ndarray, right: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """v(empty) = 0 and v(all players) = the model output (docs/method.md)."""
    v_full = np.asarray(fn.decision(fn.items[left], fn.items[right]), dtype=np.float64)
    return np.zeros_like(v_full), v_full


def exact_table(n_players: int, seed: int) -> np.ndarray:
    """(2^p, D) values in bit order, boundaries included; cached on disk."""
    path = TABLES / f"p{n_players}_seed{seed}.npy"
    if path.exists():
        return np.load(path)
    fn = make_model(n_players, seed)
    left, right = make_duels(fn, seed)
    masks = all_coalitions(n_players).masks
    table = np.empty((len(masks), len(left)))
    table[0], table[-1] = boundary_values(fn, left, right)
    table[1:-1] = coalition_values(fn, left, right, masks[1:-1])
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, table)
    return table


def write_fixture(n_players: int, seed: int) -> Path:
    fn = make_model(n_players, seed)
    left, right = make_duels(fn, seed)
    phi = (exact_shapley_matrix(n_players) @ exact_table(n_players, seed)).T
    path = FIXTURES / f"shapley_p{n_players}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path,
        model=np.frombuffer(model_to_bytes(fn), dtype=np.uint8),
        left=left,
        right=right,
        phi=phi,
    )
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--players", type=int, nargs="+", default=[16, 17])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # thousands of tiny solves: threads only add waits
    for p in args.players:
        start = time.perf_counter()
        path = write_fixture(p, args.seed)
        print(f"p={p}: {path.relative_to(ROOT)} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
