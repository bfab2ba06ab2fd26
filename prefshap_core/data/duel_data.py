"""DuelData: everything a model needs about items and duels, nothing about the UI.

Item ids map to rows once, at construction; after that everything is integer
indices. Duels keep the orientation chosen when the data was built (randomised,
seeded, so that neither side carries information); ``y = +1`` means the left item won.
Contexts (C-GPM) are stored once per *unique* context row with an index per duel,
because contexts repeat (a tournament's surface is the same for all its matches).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from prefshap_core.data.feature_space import FeatureSpace

if TYPE_CHECKING:
    from prefshap_core.data.encoding.spec import EncodingSpec
    from prefshap_core.data.id_columns import IgnoredColumn
    from prefshap_core.data.layouts.mapping import ColumnMapping


@dataclass(frozen=True)
class ImputationNote:
    """One column whose missing values were filled in (reported, never silent)."""

    table: str  # "items" or "context"
    column: str
    n_missing: int
    filled_with: str  # human-readable value, e.g. "median 185.0" or "mode 'R'"


@dataclass(frozen=True)
class DataReport:
    """What building the data changed or dropped, for the user to see."""

    imputed: tuple[ImputationNote, ...] = ()
    dropped_duels: int = 0
    dropped_reasons: tuple[str, ...] = ()
    orientation_flipped: int = 0
    notes: tuple[str, ...] = ()
    skipped_duels: int = 0  # rows with no outcome (never fatal)
    ties: int = 0  # duels kept with y = 0
    ignored_columns: tuple[IgnoredColumn, ...] = ()  # id-like columns not used
    # Every row not used (dropped or skipped): file, row, line, column, reason, its cells.
    rejected: pd.DataFrame | None = field(default=None, compare=False, repr=False)
    layout: str = "long"  # as read: "long", "counts", "wide" or "rankings"
    read_as: str = ""  # one line saying what the reader detected (empty: not from files)
    mapping: ColumnMapping | None = None  # the columns used, when read from files
    doubt: str = ""  # why the reader's guesses are worth checking (empty: sure)


@dataclass(frozen=True, eq=False)
class DuelData:
    name: str
    item_ids: np.ndarray  # (n,) str
    items: np.ndarray  # (n, d) float64, model space (standardised)
    item_space: FeatureSpace
    left: np.ndarray  # (m,) int64 item rows
    right: np.ndarray  # (m,) int64 item rows
    y: np.ndarray  # (m,) int8, +1 if left won, -1 if right won, 0 a tie
    duel_ids: np.ndarray  # (m,) str, the source's row id / match id
    item_labels: np.ndarray | None = None  # (n,) display names; ids when None
    raw_items: pd.DataFrame | None = None  # the item table as given (display, filters)
    context_space: FeatureSpace | None = None
    contexts: np.ndarray | None = None  # (p, d') float64, unique contexts, model space
    context_index: np.ndarray | None = None  # (m,) int64 row of `contexts`
    context_labels: np.ndarray | None = None  # (p,) str, e.g. "Outdoor / Clay"
    raw_duels: pd.DataFrame | None = None  # (m rows) the duel table after orientation
    report: DataReport = field(default_factory=DataReport)
    # How raw columns became `items` / `contexts` (categories, fills, offset, scale):
    # encoding.encode_rows needs it to encode new rows, e.g. contexts given to the CLI.
    item_encoding: EncodingSpec | None = None
    context_encoding: EncodingSpec | None = None
    # (m,) int64 source row of each duel when rows hold several duels (count tables):
    # a split keeps a row's duels together. None: every duel is its own row.
    duel_groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        n, m = len(self.item_ids), len(self.left)
        if self.items.shape != (n, self.item_space.n_features):
            raise ValueError("items must be (n_items, n_features)")
        for name in ("right", "y", "duel_ids"):
            if len(getattr(self, name)) != m:
                raise ValueError(f"{name} must have one entry per duel")
        if self.contexts is not None:
            if self.context_space is None or self.context_index is None:
                raise ValueError("contexts need context_space and context_index")
            if len(self.context_index) != m:
                raise ValueError("context_index must have one entry per duel")
        if self.duel_groups is not None and len(self.duel_groups) != m:
            raise ValueError("duel_groups must have one entry per duel")

    # -- sizes -------------------------------------------------------------------
    @property
    def n_items(self) -> int:
        return len(self.item_ids)

    @property
    def n_duels(self) -> int:
        return len(self.left)

    @property
    def has_context(self) -> bool:
        return self.contexts is not None

    @property
    def labels(self) -> np.ndarray:
        return self.item_labels if self.item_labels is not None else self.item_ids

    # -- lookups -----------------------------------------------------------------
    def item_index(self, item_id: str) -> int:
        hits = np.flatnonzero(self.item_ids == str(item_id))
        if len(hits) == 0:
            raise KeyError(f"unknown item id {item_id!r}")
        return int(hits[0])

    @property
    def n_ties(self) -> int:
        return int(np.sum(self.y == 0))

    def decided(self, duels: np.ndarray | None = None) -> np.ndarray:
        """Indices of the given duels (default all) that have a winner (not ties)."""
        idx = np.arange(self.n_duels) if duels is None else np.asarray(duels, dtype=np.int64)
        return idx[self.y[idx] != 0]

    def winners(self) -> np.ndarray:
        """(m,) item row of each duel's winner (for a tie: the left item; see decided())."""
        return np.where(self.y >= 0, self.left, self.right)

    def losers(self) -> np.ndarray:
        return np.where(self.y >= 0, self.right, self.left)

    def context_weights(self, duels: np.ndarray | None = None) -> np.ndarray:
        """(p,) how many of the given duels (default all) have each unique context."""
        if self.context_index is None or self.contexts is None:
            raise ValueError("this data has no context")
        idx = self.context_index if duels is None else self.context_index[duels]
        return np.bincount(idx, minlength=len(self.contexts)).astype(np.float64)

    def subset(self, duels: np.ndarray) -> DuelData:
        """The same items and contexts, only the given duels (in the given order)."""
        duels = np.asarray(duels)
        return replace(
            self,
            left=self.left[duels],
            right=self.right[duels],
            y=self.y[duels],
            duel_ids=self.duel_ids[duels],
            context_index=None if self.context_index is None else self.context_index[duels],
            raw_duels=None if self.raw_duels is None else self.raw_duels.iloc[duels],
            duel_groups=None if self.duel_groups is None else self.duel_groups[duels],
        )


@dataclass(frozen=True)
class Split:
    """Duel indices of a seeded train / validation / test split."""

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray


def split_duels(
    n_duels: int,
    seed: int,
    fractions: tuple[float, float, float] = (0.8, 0.1, 0.1),
    groups: np.ndarray | None = None,
) -> Split:
    """Seeded random split by duel. Every part gets at least one duel.

    ``groups`` (``DuelData.duel_groups``): duels of one group stay in one part.
    """
    from prefshap_core.errors import DataValidationError

    if groups is not None:
        return _split_groups(np.asarray(groups), seed, fractions)

    if n_duels < 3:
        raise DataValidationError(
            f"too few duels to split into train/validation/test: {n_duels} (need at least 3)"
        )
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError("fractions must be positive and sum to 1")
    order = np.random.default_rng(seed).permutation(n_duels)
    n_val = max(1, round(fractions[1] * n_duels))
    n_test = max(1, round(fractions[2] * n_duels))
    n_train = n_duels - n_val - n_test
    if n_train < 1:
        raise DataValidationError(f"too few duels to split: {n_duels}")
    return Split(
        train=np.sort(order[:n_train]),
        validation=np.sort(order[n_train : n_train + n_val]),
        test=np.sort(order[n_train + n_val :]),
    )


def _split_groups(groups: np.ndarray, seed: int, fractions: tuple[float, float, float]) -> Split:
    """Whole groups, in a seeded order, to validation and test until each has its share."""
    from prefshap_core.errors import DataValidationError

    names, codes = np.unique(groups, return_inverse=True)
    if len(names) < 3:
        raise DataValidationError(
            f"too few rows to split into train/validation/test: {len(names)} rows of counts "
            "(need at least 3; a row's duels stay together)"
        )
    if abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError("fractions must be positive and sum to 1")
    order = np.random.default_rng(seed).permutation(len(names))
    sizes = np.bincount(codes, minlength=len(names))[order]
    n = len(groups)
    filled = np.cumsum(sizes)
    n_val = max(1, round(fractions[1] * n))
    n_test = max(1, round(fractions[2] * n))
    end_val = max(1, int(np.searchsorted(filled, n_val) + 1))
    end_test = max(end_val + 1, int(np.searchsorted(filled, filled[end_val - 1] + n_test) + 1))
    if end_test >= len(names):
        raise DataValidationError(f"too few rows of counts to split: {len(names)}")
    part = np.empty(len(names), dtype=np.int64)
    part[order[:end_val]], part[order[end_val:end_test]], part[order[end_test:]] = 1, 2, 0
    of_duel = part[codes]
    return Split(
        train=np.flatnonzero(of_duel == 0),
        validation=np.flatnonzero(of_duel == 1),
        test=np.flatnonzero(of_duel == 2),
    )


def group_folds(groups: np.ndarray, seed: object, n_folds: int) -> list[np.ndarray]:
    """Seeded folds of duel indices, whole groups each (``DuelData.duel_groups``)."""
    names, codes = np.unique(groups, return_inverse=True)
    order = np.random.default_rng(seed).permutation(len(names))  # type: ignore[arg-type]
    parts = np.array_split(order, min(n_folds, len(names)))
    return [np.flatnonzero(np.isin(codes, part)) for part in parts]


def group_holdout(
    groups: np.ndarray, duels: np.ndarray, seed: object
) -> tuple[np.ndarray, np.ndarray]:
    """``duels`` split into training and about a ninth held out, whole groups each."""
    names, codes = np.unique(groups[duels], return_inverse=True)
    order = np.random.default_rng(seed).permutation(len(names))  # type: ignore[arg-type]
    held = np.isin(codes, order[: max(1, len(names) // 9)])
    return np.sort(duels[~held]), np.sort(duels[held])
