"""The data-reading flags both ``prefshap train`` and ``prefshap explain`` take.

``--duels FILE`` in any layout (long, counts, wide, rankings) and the column-mapping
overrides; the reader's guesses stand for every flag not given.
"""

from __future__ import annotations

import argparse

from prefshap_core.data.layouts.mapping import ColumnMapping

# The argparse names of the mapping flags (each None when not given).
MAPPING_DESTS = ("id_column", "left_column", "right_column", "outcome_column", "context_key",
                 "count_columns", "event_column", "rank_column")  # fmt: skip


def add_mapping_flags(parser: argparse.ArgumentParser) -> None:
    """``--id-column`` ... ``--rank-column``: override the reader's column guesses."""
    group = parser.add_argument_group(
        "column mapping", "which column is which (default: the reader's guess)"
    )
    group.add_argument(
        "--id-column", help="the item table's id column (default: the one the duels reference)"
    )
    group.add_argument("--left-column", help="the first item's column (winner/loser: the winner)")
    group.add_argument("--right-column", help="the second item's column (winner/loser: the loser)")
    group.add_argument(
        "--outcome-column",
        help="the outcome: the winner (an id, left/right, draw/tie), y (1/-1/0), or a wide "
        "table's choice",
    )
    group.add_argument("--context-key", help="the duels column that joins the contexts table")
    group.add_argument(
        "--count-columns",
        metavar="A,B[,T]",
        help="a count table's wins of the first item, of the second, and optionally ties",
    )
    group.add_argument("--event-column", help="a rankings table's event (race, results page)")
    group.add_argument("--rank-column", help="a rankings table's rank (smaller is better)")


def mapping_from_flags(args: argparse.Namespace) -> ColumnMapping:
    counts = args.count_columns
    return ColumnMapping(
        id=args.id_column,
        left=args.left_column,
        right=args.right_column,
        outcome=args.outcome_column,
        context_key=args.context_key,
        counts=tuple(c.strip() for c in counts.split(",")) if counts else None,
        event=args.event_column,
        rank=args.rank_column,
    )
