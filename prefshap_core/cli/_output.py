"""Printing helpers shared by the subcommands."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from prefshap_core.progress import Progress, ProgressUpdate


def write_rejected(rejected: pd.DataFrame | None, target: str | Path, command: str) -> int:
    """Write the rejected rows (with reasons) to ``target``; print how many, and where."""
    table = rejected if rejected is not None else pd.DataFrame(columns=["file", "row", "reason"])
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(target, index=False)
    print(
        f"{command}: {len(table):,} rows rejected or skipped; reasons in {target}",
        file=sys.stderr,
        flush=True,
    )
    return len(table)


def stderr_progress(quiet: bool) -> Progress:
    """Stage changes and every 10% on stderr, with an ETA (nothing when quiet)."""
    if quiet:
        return Progress()
    last: dict[str, object] = {"stage": None, "decile": -1}

    def show(update: ProgressUpdate) -> None:
        decile = int(update.fraction * 10)
        if update.stage == last["stage"] and decile == last["decile"]:
            return
        last.update(stage=update.stage, decile=decile)
        eta = f", about {update.eta_s:.0f} s left" if update.eta_s is not None else ""
        print(f"[{update.fraction:4.0%}] {update.stage}{eta}", file=sys.stderr, flush=True)

    return Progress(show)
