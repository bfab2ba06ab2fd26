"""Writes a large seeded upload (items.csv + duels.csv) for the memory/time benchmark.

    python benchmarks/make_large_duels.py OUT_DIR [--duels 1700000] [--items 2000] [--seed 0]

The mechanism is the sample data's (``prefshap_core.datasets.sample_data``): items
with ``speed``, ``power``, ``stamina`` and a rock-paper-scissors ``style``; each duel
has a ``venue`` (indoor/outdoor) that changes which stats matter. At the default size
``duels.csv`` is about 50 MB, the size of the upload that motivated issue 10.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

STYLES = ("aggressive", "balanced", "defensive")
VENUES = ("indoor", "outdoor")


def write_large_upload(out: Path, n_duels: int, n_items: int, seed: int) -> tuple[Path, Path]:
    """Write ``items.csv`` and ``duels.csv`` into ``out``; returns their paths."""
    rng = np.random.default_rng([seed, 10])
    stats = np.rint(rng.normal(50.0, 10.0, size=(n_items, 3))).astype(int)
    style = rng.integers(len(STYLES), size=n_items)
    ids = np.array([f"p{k:05d}" for k in range(n_items)])
    left = rng.integers(n_items, size=n_duels)
    right = (left + rng.integers(1, n_items, size=n_duels)) % n_items
    venue = rng.integers(len(VENUES), size=n_duels)
    z = (stats - stats.mean(0)) / stats.std(0)
    dz = z[left] - z[right]
    w_speed = np.where(venue == 0, 1.2, 0.2)
    w_stamina = np.where(venue == 0, 0.2, 1.2)
    edge = np.select(
        [(style[left] + 1) % 3 == style[right], (style[right] + 1) % 3 == style[left]],
        [1.0, -1.0],
        0.0,
    )
    g = 0.6 * dz[:, 1] + w_speed * dz[:, 0] + w_stamina * dz[:, 2] + edge
    left_wins = rng.random(n_duels) < 1.0 / (1.0 + np.exp(-2.0 * g))
    out.mkdir(parents=True, exist_ok=True)
    items = pd.DataFrame(
        {
            "id": ids,
            "speed": stats[:, 0],
            "power": stats[:, 1],
            "stamina": stats[:, 2],
            "style": np.array(STYLES)[style],
        }
    )
    duels = pd.DataFrame(
        {
            "left": ids[left],
            "right": ids[right],
            "winner": np.where(left_wins, ids[left], ids[right]),
            "venue": np.array(VENUES)[venue],
        }
    )
    items.to_csv(out / "items.csv", index=False)
    duels.to_csv(out / "duels.csv", index=False)
    return out / "items.csv", out / "duels.csv"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--duels", type=int, default=1_700_000)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    items, duels = write_large_upload(args.out, args.duels, args.items, args.seed)
    print(f"{items} ({items.stat().st_size:,} bytes), {duels} ({duels.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
