"""CSV files a spreadsheet can open safely: no cell or header is run as a formula.

A user-supplied id, name or header such as ``=HYPERLINK(...)`` or ``@SUM(...)``
written raw into a CSV is executed by Excel, LibreOffice or Google Sheets when the
file is opened (CSV injection). As OWASP recommends, a text cell or header that
begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is prefixed with
a single quote, unless it reads as a finite number (so ``-5`` and ``+1e3`` stay
numbers and negative numeric ids round-trip). Every CSV the product writes goes
through :func:`to_csv_bytes` or :func:`write_csv`; download file names go through
:func:`safe_file_name`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: Any) -> Any:
    """``value`` with a leading ``'`` if it is text a spreadsheet would run as a formula."""
    if not isinstance(value, str) or not value.startswith(FORMULA_STARTS):
        return value
    try:
        if math.isfinite(float(value)):
            return value
    except ValueError:
        pass
    return "'" + value


def _is_formula(value: Any) -> bool:
    return neutralise(value) is not value


def safe_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A copy whose text cells and headers are neutralised (numbers untouched).

    Only the cells that need a quote change: every other cell keeps its value and its
    column its dtype (a ``map`` over the column would turn integers beside a missing
    cell into floats, ``47`` into ``47.0``).
    """
    out = frame.copy()
    for column in out.columns:
        series = out[column]
        if series.dtype == object or pd.api.types.is_string_dtype(series):
            hostile = series.map(_is_formula, na_action="ignore").fillna(False).astype(bool)
            if hostile.any():
                out[column] = series.where(~hostile, series[hostile].map(neutralise))
    out.columns = [neutralise(str(c)) for c in out.columns]
    return out


def to_csv_bytes(frame: pd.DataFrame, **options: Any) -> bytes:
    """UTF-8 CSV of ``frame`` (``index=False`` unless given), neutralised.

    The one place the product calls ``DataFrame.to_csv`` (a test walks the source).
    """
    options.setdefault("index", False)
    return safe_frame(frame).to_csv(**options).encode("utf-8")


def write_csv(frame: pd.DataFrame, path: str | Path, **options: Any) -> Path:
    """Write ``frame`` as a neutralised CSV (:func:`to_csv_bytes`); returns the path."""
    path = Path(path)
    path.write_bytes(to_csv_bytes(frame, **options))
    return path


def safe_file_name(name: str, default: str = "download") -> str:
    """``name`` reduced to ``[A-Za-z0-9._-]`` (runs of others become ``-``), without a
    leading dot or dash, at most 120 characters; ``default`` if nothing is left."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name)).lstrip(".-")
    text = re.sub(r"\.{2,}", ".", text)[:120]
    return text or default
