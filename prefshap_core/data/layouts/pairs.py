"""Paired column names: the two alternatives' (or the two items') columns of one quantity.

``x1``/``x2``, ``x_1``/``x_2``, ``x.1``/``x.2``, ``x_left``/``x_right``, ``x_a``/``x_b``
(and ``home.x``/``away.x``, as BradleyTerry2's tables write them).
"""

from __future__ import annotations

from dataclasses import dataclass

# Longest first: ``x_1`` is the stem ``x`` with ``_1``, not ``x_`` with ``1``.
SUFFIXES = (
    ("_left", "_right"), (".left", ".right"),
    ("_1", "_2"), (".1", ".2"), ("_a", "_b"), (".a", ".b"), ("_A", "_B"),
    ("1", "2"),
)  # fmt: skip
PREFIXES = (("home.", "away."), ("home_", "away_"))


@dataclass(frozen=True)
class ColumnPair:
    stem: str  # the quantity, e.g. "price"
    first: str  # its column for the first alternative, e.g. "price1"
    second: str
    tokens: tuple[str, str]  # what tells the two apart, e.g. ("1", "2")


def paired_columns(columns: list[str]) -> list[ColumnPair]:
    """Every pair of columns that differ only in a first/second marker, in header order."""
    present, taken, pairs = set(columns), set(), []
    for column in columns:
        if column in taken:
            continue
        for first, second in SUFFIXES:
            stem = column[: -len(first)]
            if column.endswith(first) and stem and stem + second in present:
                tokens = (first.lstrip("_."), second.lstrip("_."))
                pairs.append(ColumnPair(stem, column, stem + second, tokens))
                taken.update((column, stem + second))
                break
        else:
            for first, second in PREFIXES:
                stem = column[len(first) :]
                if column.startswith(first) and stem and second + stem in present:
                    tokens = (first.strip("_."), second.strip("_."))
                    pairs.append(ColumnPair(stem, column, second + stem, tokens))
                    taken.update((column, second + stem))
                    break
    return pairs


def is_win_stem(stem: str) -> bool:
    """A count of wins (``win``, ``wins``, ``won``, ``win_``): the pair is a count pair."""
    return stem.lower().strip("_.").removesuffix("s") in ("win", "won", "n_win", "nwin")
