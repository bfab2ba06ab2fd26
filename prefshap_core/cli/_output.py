"""Printing helpers shared by the subcommands."""

from __future__ import annotations

import sys

from prefshap_core.progress import Progress, ProgressUpdate


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
