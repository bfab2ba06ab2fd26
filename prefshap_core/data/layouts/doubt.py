"""Whether the reader is sure of its reading: the Data page opens its column-mapping
panel (pre-filled with the guesses) when it is not.

Not sure: another layout than one row per duel was detected (counts, wide, rankings),
an R row-name column was taken as a key, or several item columns hold every id the
duels reference (the guess took one of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prefshap_core.data.csv_io import ROW_NAMES
from prefshap_core.data.layouts.mapping import ColumnMapping, is_key_of, referenced_keys

if TYPE_CHECKING:
    from prefshap_core.data.layouts.reader import LayoutRead

LAYOUT_NAMES = {"counts": "a count table", "wide": "a wide choice table", "rankings": "rankings"}


def reading_doubt(read: LayoutRead, given: ColumnMapping, *, row_named_contexts: bool) -> str:
    """Why the guesses are worth checking, in one sentence ("" when the reader is sure)."""
    if read.layout in LAYOUT_NAMES:
        return f"read as {LAYOUT_NAMES[read.layout]}: check the columns it took"
    if read.mapping.id == ROW_NAMES or row_named_contexts:
        return "an unnamed first column (R row names) was taken as a key"
    if given.id is None:
        references = ["winner", "loser"] if read.mapping.outcome is None else ["left", "right"]
        wanted = referenced_keys(read.duels, [c for c in references if c in read.duels.columns])
        holding = [str(c) for c in read.items.columns if is_key_of(read.items[c], wanted)]
        if wanted and len(holding) > 1:
            names = ", ".join(f"`{c}`" for c in holding)
            return f"several item columns hold every id ({names}): `{read.mapping.id}` was taken"
    return ""
