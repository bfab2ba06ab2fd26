"""How numbers read on every page (one place, so pages agree)."""

from __future__ import annotations


def percent(p: float) -> str:
    """A probability as a percentage with one decimal, e.g. '63.2 %'."""
    return f"{100.0 * float(p):.1f} %"
