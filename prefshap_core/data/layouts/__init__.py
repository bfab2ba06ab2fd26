"""Reading data as it is published: the column mapping and the four layouts.

long (one row per duel), counts (wins per pair), wide (a choice between two
alternatives described on the row), rankings (items ranked within events).
"""

from prefshap_core.data.layouts.loading import build_from_tables, load_files
from prefshap_core.data.layouts.mapping import LAYOUTS, ColumnMapping
from prefshap_core.data.layouts.reader import LayoutRead, read_layout
from prefshap_core.data.layouts.wide import is_wide_table

__all__ = [
    "LAYOUTS",
    "ColumnMapping",
    "LayoutRead",
    "build_from_tables",
    "is_wide_table",
    "load_files",
    "read_layout",
]
