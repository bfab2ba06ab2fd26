"""Reading numbers from cells (``TRUE``/``FALSE`` as 1/0), and the errors for bad ones."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from prefshap_core.data.csv_io import is_number_text, text_codes
from prefshap_core.errors import DataValidationError

MAX_ABS_VALUE = 1e100  # beyond this, squares and sums in the kernels overflow
_BOOLEANS = {"true": 1.0, "false": 0.0}


def parse_numbers(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Values (NaN where missing or not a number) and where a present cell is not a number."""
    if pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64), np.zeros(len(series), dtype=bool)
    if pd.api.types.is_numeric_dtype(series.dtype):
        values = series.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)
        bad = np.isinf(values)
        values[bad] = np.nan
        return values, bad
    codes, texts = text_codes(series)
    parsed = np.array([math.nan if t is None else _number(t) for t in texts.tolist()] + [math.nan])
    values = parsed[codes]  # code -1 picks the trailing NaN: missing
    texts_bad = np.array([t is not None for t in texts.tolist()] + [False]) & np.isnan(parsed)
    return values, texts_bad[codes]


def _number(text: str) -> float:
    if text.lower() in _BOOLEANS:
        return _BOOLEANS[text.lower()]
    return float(text) if is_number_text(text) and math.isfinite(float(text)) else math.nan


def raise_bad_numbers(
    bad: np.ndarray, series: pd.Series, rows: np.ndarray, file_name: str, column: str, why: str
) -> None:
    """Raise the error naming the first cell flagged in ``bad`` (``why``: why a number was
    expected there), counting the others; nothing when no cell is flagged."""
    if not bad.any():
        return
    first = int(np.flatnonzero(bad)[0])
    more = int(bad.sum()) - 1
    raise DataValidationError(
        f"{series.iloc[first]!r} is not a number, but {why}"
        + (f" ({more} more cells in this column are not numbers)" if more else ""),
        file=file_name,
        row=int(rows[first]),
        column=column,
    )


def check_magnitude(values: np.ndarray, rows: np.ndarray, file_name: str, column: str) -> None:
    """Raise the error naming the first value beyond ``MAX_ABS_VALUE`` in magnitude."""
    huge = np.abs(np.nan_to_num(values)) > MAX_ABS_VALUE
    if huge.any():
        first = int(np.flatnonzero(huge)[0])
        raise DataValidationError(
            f"the value {values[first]:g} is too large to use (limit {MAX_ABS_VALUE:g})",
            file=file_name,
            row=int(rows[first]),
            column=column,
        )
