"""Writes a large seeded upload (items.csv + duels.csv) for the memory/time benchmark.

    python benchmarks/make_large_duels.py OUT_DIR [--duels 1700000] [--items 2000] [--seed 0]

The generator is the sample data's (``prefshap_core.datasets.sample_data``): items
with ``speed``, ``power``, ``stamina`` and a rock-paper-scissors ``style``; each duel
has a ``venue`` (indoor/outdoor) that changes which stats matter. At the default size
``duels.csv`` is about 50 MB, the size of the upload that motivated issue 10.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from prefshap_core.datasets.sample_data import STYLES, VENUES, draw_contest

# Its own seed stream: the sample data's generator, another draw of any size.
_LARGE_STREAM = 10


def write_large_upload(out: Path, n_duels: int, n_items: int, seed: int) -> tuple[Path, Path]:
    """Write ``items.csv`` and ``duels.csv`` into ``out``; returns their paths."""
    contest = draw_contest(np.random.default_rng([seed, _LARGE_STREAM]), n_items, n_duels)
    stats, style, left, right = contest.stats, contest.style, contest.left, contest.right
    venue, left_wins = contest.venue, contest.left_wins
    ids = np.array([f"p{k:05d}" for k in range(n_items)])
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
