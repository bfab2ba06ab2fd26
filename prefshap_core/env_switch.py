"""Opt-out switches in the environment: one rule for the values that turn a feature off."""

from __future__ import annotations

import os

OFF_VALUES = frozenset({"0", "false", "no", "off"})


def turned_off(name: str) -> str | None:
    """``"off: NAME=value"`` when the variable ``name`` turns its feature off, else None."""
    value = os.environ.get(name)
    if value is not None and value.strip().lower() in OFF_VALUES:
        return f"off: {name}={value}"
    return None
