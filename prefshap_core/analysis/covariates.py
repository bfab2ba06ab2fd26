"""Raw item covariates <-> model-space rows: what the what-if editor needs.

Editing happens in raw units (numbers within the data's observed range, categories
from the column's own categories); the edited row is then encoded exactly like the
training table (``encoding.encode_rows``: same categories, offset and scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.duel_data import DuelData
from prefshap_core.data.encoding.spec import EncodingSpec
from prefshap_core.data.encoding.tables import encode_rows

RawValue = float | str | None


@dataclass(frozen=True)
class EditableColumn:
    """One raw item column as the editor offers it."""

    name: str  # the raw column (a source of a feature group)
    group: str  # its feature group (Shapley player)
    kind: str  # "numeric" | "categorical"
    low: float = 0.0  # numeric: observed range
    high: float = 0.0
    integer: bool = False  # numeric: every observed value is a whole number
    categories: tuple[str, ...] = ()  # categorical: the choices
    optional: bool = False  # may be empty (a later column of a multi-category group)


def item_spec(data: DuelData) -> EncodingSpec:
    return data.item_encoding or EncodingSpec.from_feature_space(data.item_space, "items")


def editable_columns(data: DuelData) -> list[EditableColumn]:
    """Every raw column the model reads, in the model's group order."""
    spec = item_spec(data)
    raw = data.item_space.to_raw(data.items)
    out = []
    for group in spec.groups:
        if group.kind == "numeric":
            j = int(spec.space.group_columns(group.name)[0])
            values = raw[:, j]
            out.append(
                EditableColumn(
                    group.sources[0], group.name, "numeric",
                    low=float(values.min()), high=float(values.max()),
                    integer=bool(np.all(np.isclose(values, np.round(values)))),
                )
            )  # fmt: skip
            continue
        for k, source in enumerate(group.sources):
            out.append(
                EditableColumn(
                    source, group.name, "categorical", categories=group.categories,
                    optional=k > 0,
                )
            )  # fmt: skip
    return out


def raw_covariates(data: DuelData, item_id: str) -> dict[str, RawValue]:
    """The item's raw value per editable column (imputed values where it had none)."""
    row = data.item_index(item_id)
    spec = item_spec(data)
    raw = data.item_space.to_raw(data.items[row : row + 1])[0]
    table = data.raw_items
    out: dict[str, RawValue] = {}
    for group in spec.groups:
        cols = spec.space.group_columns(group.name)
        if group.kind == "numeric":
            out[group.sources[0]] = float(raw[cols[0]])
            continue
        active = [c for c, on in zip(group.categories, raw[cols] >= 0.5, strict=True) if on]
        for k, source in enumerate(group.sources):
            cell = None
            if table is not None and source in table.columns:
                value = table[source].iloc[row]
                cell = None if pd.isna(value) else str(value).strip()
            if cell not in group.categories:  # missing or unreadable: what the model saw
                cell = active[k] if k < len(active) else None
            out[source] = cell
    return out


def encode_covariates(data: DuelData, values: dict[str, RawValue]) -> np.ndarray:
    """(1, d) model-space row of one item given by its raw values (errors name the column)."""
    frame = pd.DataFrame([{k: (np.nan if v is None else v) for k, v in values.items()}])
    return encode_rows(frame, item_spec(data), file_name="edited item").model
