"""The model-space description of a table's columns: names, groups, standardisation.

A *raw column* of the model is a number per row: a numeric covariate in its own
units, or a 0/1 indicator of one category of a categorical covariate (one-hot).
The model works on standardised columns ``(raw - offset) / scale``. The one-hot
columns of one categorical covariate form a *feature group*: one Shapley player.
One-hot columns are named ``"<group>=<category>"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class FeatureSpace:
    feature_names: tuple[str, ...]
    group_names: tuple[str, ...]
    feature_group: np.ndarray  # (d,) int: group index of each column
    offset: np.ndarray  # (d,) raw units
    scale: np.ndarray  # (d,) raw units, > 0

    def __post_init__(self) -> None:
        d = len(self.feature_names)
        fg = np.asarray(self.feature_group, dtype=np.int64)
        object.__setattr__(self, "feature_group", fg)
        object.__setattr__(self, "offset", np.asarray(self.offset, dtype=np.float64))
        object.__setattr__(self, "scale", np.asarray(self.scale, dtype=np.float64))
        if fg.shape != (d,) or self.offset.shape != (d,) or self.scale.shape != (d,):
            raise ValueError("feature_group, offset and scale need one entry per feature")
        if d and (fg.min() < 0 or fg.max() >= len(self.group_names)):
            raise ValueError("feature_group indexes outside group_names")
        if d and set(np.unique(fg).tolist()) != set(range(len(self.group_names))):
            raise ValueError("every group needs at least one column")
        if not np.all(np.isfinite(self.scale)) or np.any(self.scale <= 0):
            raise ValueError("scale must be finite and positive")

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def n_groups(self) -> int:
        return len(self.group_names)

    def group_columns(self, group: int | str) -> np.ndarray:
        """Column indices of one group (by index or name)."""
        g = self.group_names.index(group) if isinstance(group, str) else int(group)
        return np.flatnonzero(self.feature_group == g)

    def standardise(self, raw: np.ndarray) -> np.ndarray:
        return (np.asarray(raw, dtype=np.float64) - self.offset) / self.scale

    def to_raw(self, model: np.ndarray) -> np.ndarray:
        return np.asarray(model, dtype=np.float64) * self.scale + self.offset
