"""Checking the declared column kinds (numeric=, categorical=, multi_categorical=).

Also the short name lists the encoding's error messages show.
"""

from __future__ import annotations

from collections.abc import Iterable

from prefshap_core.errors import DataValidationError


def check_overrides(
    columns: list[str],
    numeric: set[str],
    categorical: set[str],
    multi: dict[str, list[str]],
    file_name: str,
) -> None:
    """Raise for declarations that contradict each other or name no covariate column."""
    for name in sorted(numeric & categorical):
        raise ValueError(f"column {name!r} is declared both numeric and categorical")
    for name in sorted((numeric | categorical) - set(columns)):
        raise DataValidationError(
            f"declared numeric or categorical, but there is no such covariate column "
            f"(covariate columns: {name_list(columns)})",
            file=file_name,
            column=name,
        )
    claimed: set[str] = set()
    for group, sources in multi.items():
        if not sources:
            raise ValueError(f"multi_categorical group {group!r} needs at least one column")
        for source in sources:
            if source not in columns:
                raise DataValidationError(
                    f"named in multi_categorical group {group!r}, but there is no such "
                    f"covariate column (covariate columns: {name_list(columns)})",
                    file=file_name,
                    column=source,
                )
            if source in claimed or source in numeric | categorical:
                raise ValueError(f"column {source!r} is claimed by more than one declaration")
            claimed.add(source)
        if group in columns and group not in sources:
            raise DataValidationError(
                f"multi_categorical group {group!r} has the name of another column",
                file=file_name,
                column=group,
            )


def name_list(names: Iterable[object], limit: int = 12) -> str:
    """``names`` for an error message: comma-separated, the first ``limit`` only."""
    names = [str(name) for name in names]
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")
