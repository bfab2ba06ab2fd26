"""Printing helpers shared by the subcommands."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

from prefshap_core.csv_safety import write_csv
from prefshap_core.progress import Progress, ProgressUpdate


def write_rejected(rejected: pd.DataFrame | None, target: str | Path, command: str) -> int:
    """Write the rejected rows (with reasons) to ``target``; print how many, and where."""
    table = rejected if rejected is not None else pd.DataFrame(columns=["file", "row", "reason"])
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    write_csv(table, target)  # ids and names from the user's files: formula-safe
    print(
        f"{command}: {len(table):,} rows rejected or skipped; reasons in {target}",
        file=sys.stderr,
        flush=True,
    )
    return len(table)


def stderr_progress(quiet: bool, every_s: float = 30.0) -> Progress:
    """Stage changes, every 10% and every ``every_s`` seconds on stderr, with an ETA.

    The time-based line keeps the ETA moving through a long step (a Newton step on
    a million duels takes minutes between deciles). Nothing when quiet.
    """
    if quiet:
        return Progress()
    last: dict[str, object] = {"stage": None, "decile": -1, "at": time.monotonic()}

    def show(update: ProgressUpdate) -> None:
        decile = int(update.fraction * 10)
        now = time.monotonic()
        same = update.stage == last["stage"] and decile == last["decile"]
        if same and now - float(last["at"]) < every_s:  # type: ignore[arg-type]
            return
        last.update(stage=update.stage, decile=decile, at=now)
        eta = f", about {update.eta_s:.0f} s left" if update.eta_s is not None else ""
        print(f"[{update.fraction:4.0%}] {update.stage}{eta}", file=sys.stderr, flush=True)

    return Progress(show)
