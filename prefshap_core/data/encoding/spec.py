"""What an encoding is: how each feature group is read from raw columns, and the result.

An ``EncodingSpec`` is everything needed to encode new rows exactly like the fitted
table; it can also be rebuilt from a model file's feature names alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.data.duel_data import ImputationNote
from prefshap_core.data.feature_space import FeatureSpace

MISSING_SUFFIX = " (missing)"


@dataclass(frozen=True)
class GroupEncoding:
    """How one feature group (one Shapley player) is read from raw columns."""

    name: str
    kind: str  # "numeric" | "categorical" | "multi_categorical"
    sources: tuple[str, ...]  # raw table columns
    categories: tuple[str, ...] = ()  # one-hot order, for the categorical kinds
    fill: float | str | None = None  # replaces a missing cell; None: missing is an error
    missing_indicator: bool = False  # a last 0/1 column "<name> (missing)"

    @property
    def feature_names(self) -> tuple[str, ...]:
        if self.kind == "numeric":
            names: tuple[str, ...] = (self.name,)
        else:
            names = tuple(f"{self.name}={category}" for category in self.categories)
        return names + ((self.name + MISSING_SUFFIX,) if self.missing_indicator else ())

    @property
    def fills_missing(self) -> bool:
        """Whether a missing cell can be encoded (a fill, or no category + indicator)."""
        return self.fill is not None or (self.missing_indicator and self.kind != "numeric")


@dataclass(frozen=True, eq=False)
class EncodingSpec:
    """Everything needed to encode new rows exactly like the table that was fitted."""

    table: str  # "items" or "context": the name used in notes
    groups: tuple[GroupEncoding, ...]
    space: FeatureSpace

    @classmethod
    def from_feature_space(cls, space: FeatureSpace, table: str) -> EncodingSpec:
        """Rebuild a spec from names alone (e.g. a model file), without fill values.

        A one-column group named like its column is numeric; a group of
        ``"<group>=<category>"`` columns is categorical and reads a column named
        ``<group>``; either may end with a ``"<group> (missing)"`` indicator column.
        Missing cells are then errors, as the fills are unknown, except in groups
        with an indicator (numeric: the column's mean, categorical: no category).
        """
        groups = []
        for index, group in enumerate(space.group_names):
            columns = list(space.group_columns(index))
            names = [space.feature_names[j] for j in columns]
            indicator = len(names) > 1 and names[-1] == group + MISSING_SUFFIX
            if indicator:
                names, columns = names[:-1], columns[:-1]
            prefix = f"{group}="
            if names == [group]:
                fill = float(space.offset[columns[0]]) if indicator else None
                groups.append(GroupEncoding(group, "numeric", (group,), (), fill, indicator))
            elif names and all(name.startswith(prefix) for name in names):
                categories = tuple(name[len(prefix) :] for name in names)
                groups.append(
                    GroupEncoding(group, "categorical", (group,), categories, None, indicator)
                )
            else:
                raise ValueError(
                    f"feature group {group!r} has columns {names}: neither one numeric "
                    f"column named {group!r} nor one-hot columns named '{group}=<category>'"
                )
        return cls(table=table, groups=tuple(groups), space=space)


@dataclass(frozen=True, eq=False)
class EncodedTable:
    spec: EncodingSpec
    model: np.ndarray  # (rows, d) standardised
    raw: np.ndarray  # (rows, d) raw units (imputed, one-hot)
    notes: tuple[ImputationNote, ...]

    @property
    def space(self) -> FeatureSpace:
        return self.spec.space
