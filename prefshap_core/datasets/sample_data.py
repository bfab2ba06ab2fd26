"""Writes sample_data/items.csv and duels.csv: a small upload-format example.

Run ``python -m prefshap_core.datasets.sample_data [OUT_DIR]`` (default: the
repository's ``sample_data/``). The mechanism is known, so the explanations of a
model trained on it can be checked by eye:

60 contestants with ``speed``, ``power``, ``stamina`` (about N(50, 10), whole
numbers) and a ``style`` in a rock-paper-scissors cycle (aggressive beats balanced,
balanced beats defensive, defensive beats aggressive). Each of 800 duels has a
``venue``, indoor or outdoor. With ``z`` the standardised stats, the left
contestant wins with probability ``sigmoid(2 g)``,

    g = 0.6 dz_power + w_speed dz_speed + w_stamina dz_stamina + 1.0 style_edge

where indoor ``(w_speed, w_stamina) = (1.2, 0.2)``, outdoor ``(0.2, 1.2)`` and
``style_edge`` is +1 / -1 / 0 for a style advantage / disadvantage / tie. A few
cells of the items file are left empty on purpose (imputation is reported).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from prefshap_core.csv_safety import write_csv
from prefshap_core.paths import repo_root

STYLES = ("aggressive", "balanced", "defensive")  # each beats the next, the last the first
VENUES = ("indoor", "outdoor")
_ADJECTIVES = ("Swift", "Iron", "Quiet", "Bold", "Lucky", "Clever", "Brave", "Grim", "Sly", "Wild")
_ANIMALS = ("Otter", "Falcon", "Badger", "Lynx", "Heron", "Moose")
_SAMPLE_STREAM = 3


@dataclass(frozen=True)
class Contest:
    """One draw of the mechanism: the items' stats and styles, the duels and who won."""

    stats: np.ndarray  # (items, 3) int: speed, power, stamina
    style: np.ndarray  # (items,) index into STYLES
    left: np.ndarray  # (duels,) item of each side
    right: np.ndarray
    venue: np.ndarray  # (duels,) index into VENUES
    left_wins: np.ndarray  # (duels,) bool


def draw_contest(rng: np.random.Generator, n_items: int, n_duels: int) -> Contest:
    """Items and duels drawn by the mechanism of the module docstring (any size).

    The sample data and the benchmarks' large upload (benchmarks/make_large_duels.py)
    both come from here, each with its own seed stream.
    """
    stats = np.rint(rng.normal(50.0, 10.0, size=(n_items, 3))).astype(int)
    style = rng.integers(len(STYLES), size=n_items)
    left = rng.integers(n_items, size=n_duels)
    right = (left + rng.integers(1, n_items, size=n_duels)) % n_items
    venue = rng.integers(len(VENUES), size=n_duels)

    z = (stats - stats.mean(0)) / stats.std(0)
    dz = z[left] - z[right]
    w_speed = np.where(venue == 0, 1.2, 0.2)
    w_stamina = np.where(venue == 0, 0.2, 1.2)
    # style s beats style (s + 1) % 3
    edge = np.select(
        [(style[left] + 1) % 3 == style[right], (style[right] + 1) % 3 == style[left]],
        [1.0, -1.0],
        0.0,
    )
    g = 0.6 * dz[:, 1] + w_speed * dz[:, 0] + w_stamina * dz[:, 2] + 1.0 * edge
    left_wins = rng.random(n_duels) < 1.0 / (1.0 + np.exp(-2.0 * g))
    return Contest(stats, style, left, right, venue, left_wins)


def sample_tables(
    n_items: int = 60, n_duels: int = 800, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sample items and duels tables (missing cells as None)."""
    rng = np.random.default_rng([seed, _SAMPLE_STREAM])
    contest = draw_contest(rng, n_items, n_duels)
    stats, style, left, right = contest.stats, contest.style, contest.left, contest.right
    venue, left_wins = contest.venue, contest.left_wins

    ids = np.array([f"c{i + 1:02d}" for i in range(n_items)])
    pool = len(_ADJECTIVES) * len(_ANIMALS)
    names = [
        f"{_ADJECTIVES[i // len(_ANIMALS) % len(_ADJECTIVES)]} {_ANIMALS[i % len(_ANIMALS)]}"
        + (f" {i // pool + 1}" if i >= pool else "")  # unique beyond the pool
        for i in range(n_items)
    ]
    items = pd.DataFrame(
        {
            "id": ids,
            "name": names,
            "speed": stats[:, 0].astype(object),
            "power": stats[:, 1].astype(object),
            "stamina": stats[:, 2].astype(object),
            "style": np.array(STYLES, dtype=object)[style],
        }
    )
    for column, count in (("speed", 3), ("stamina", 2), ("style", 2)):
        items.loc[rng.choice(n_items, size=count, replace=False), column] = None
    duels = pd.DataFrame(
        {
            "left": ids[left],
            "right": ids[right],
            "winner": ids[np.where(left_wins, left, right)],
            "venue": np.array(VENUES)[venue],
        }
    )
    return items, duels


def write_sample_data(out_dir: str | Path | None = None, seed: int = 0) -> tuple[Path, Path]:
    """Write items.csv and duels.csv into ``out_dir`` (default ``<repo>/sample_data``)."""
    folder = Path(out_dir) if out_dir is not None else repo_root() / "sample_data"
    folder.mkdir(parents=True, exist_ok=True)
    items, duels = sample_tables(seed=seed)
    paths = folder / "items.csv", folder / "duels.csv"
    write_csv(items, paths[0], lineterminator="\n")
    write_csv(duels, paths[1], lineterminator="\n")
    return paths


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    for path in write_sample_data(args[0] if args else None):
        print(f"wrote {path} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
