"""Errors the engine raises on purpose.

Every problem a user can cause (a bad upload, a foreign model file, an impossible
option) is one of these, with a message a person can act on. Anything else escaping
the engine is a bug.
"""

from __future__ import annotations


class PrefShapError(Exception):
    """Base class of every error the engine raises deliberately."""


class DataValidationError(PrefShapError, ValueError):
    """Bad input data, located as precisely as we can: file, row, column.

    ``row`` is the 1-based data row (the header is not counted), so a user who
    opens the file in a spreadsheet finds it on line ``row + 1``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        row: int | None = None,
        column: str | None = None,
    ) -> None:
        self.reason = message
        self.file = file
        self.row = row
        self.column = column
        super().__init__(self._format())

    def _format(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.row is not None:
            where.append(f"row {self.row} (line {self.row + 1})")
        if self.column is not None:
            where.append(f"column '{self.column}'")
        return f"{', '.join(where)}: {self.reason}" if where else self.reason


class ModelFileError(PrefShapError, ValueError):
    """A model file that does not follow docs/model-format.md."""


class NotFittedError(PrefShapError, RuntimeError):
    """A model used before ``fit`` (or ``load``)."""


class DatasetUnavailableError(PrefShapError, FileNotFoundError):
    """A built-in real dataset whose files are not in the data directory."""


class CancelledError(PrefShapError):
    """Long work stopped because the caller asked it to."""


class StaticExportUnavailable(PrefShapError, RuntimeError):
    """PNG/SVG export cannot run here (no Chromium, kaleido missing, browser failed):
    offer the interactive HTML export instead."""


class NumericalError(PrefShapError, ValueError):
    """A computation whose inputs make it meaningless (NaN or infinite intermediate
    values, a system no jitter can make positive definite): the message says which
    input to check instead of spinning or returning NaN."""


class MemoryBudgetError(PrefShapError, MemoryError):
    """A job that would need more memory than its budget (``PREFSHAP_MEMORY_BUDGET``):
    refused before allocating, with what to reduce."""


class DeadlineExceeded(CancelledError):
    """Long work stopped because it ran past the time it was given."""
