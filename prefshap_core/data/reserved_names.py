"""Player names that would collide with the columns every export writes.

Exports (the dashboard's CSV, ``prefshap explain``'s OUT.csv) have the columns
``duel_id, left, right, winner, output, base_value``, then one column per player
(feature group), then ``se:<player>``. A covariate called ``output`` or ``se:speed``
would overwrite one of them, and two groups of one name would drop a player, so an
export column would no longer mean what its header says. Such names are refused
where users choose them (upload, training) and renamed, with a note, where another
program chose them (a foreign model file).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import DataValidationError

RESERVED_NAMES = ("left", "right", "output", "base_value", "duel_id", "winner")
RESERVED_PREFIXES = ("se:", "left:", "right:")
RENAME_SUFFIX = " (group)"


def reserved_reason(name: str) -> str | None:
    """Why ``name`` cannot be a player's name, or None when it can."""
    if name in RESERVED_NAMES:
        return f"'{name}' is the name of an export column"
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            return f"names starting with '{prefix}' are export columns"
    if "*" in name:
        return "names containing '*' are reserved"
    return None


def check_player_names(
    names: Sequence[str], *, file: str | None = None, what: str = "covariate"
) -> None:
    """Refuse reserved or repeated player names (DataValidationError naming the column)."""
    seen: set[str] = set()
    for name in names:
        reason = reserved_reason(name)
        if reason is not None:
            raise DataValidationError(
                f"a {what} cannot be called '{name}': {reason}; rename the column",
                file=file,
                column=name,
            )
        if name in seen:
            raise DataValidationError(
                f"two {what}s are called '{name}': each feature needs its own name",
                file=file,
                column=name,
            )
        seen.add(name)


def check_dataset_names(
    item_space: FeatureSpace,
    context_space: FeatureSpace | None,
    *,
    items_file: str | None = None,
    duels_file: str | None = None,
) -> None:
    """The upload's and training's check: item and context players (DataValidationError)."""
    check_player_names(item_space.group_names, file=items_file, what="covariate")
    if context_space is not None:
        check_player_names(context_space.group_names, file=duels_file, what="context covariate")


def rename_reserved(names: Iterable[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """Names made safe for export: reserved or repeated ones get ``' (group)'`` (then
    ``' (group 2)'``, ...; a ``*`` becomes ``_``). Returns the names and ``{old: new}``
    for every renamed one, for the caller to report."""
    names = list(names)
    taken = {n for n in names if reserved_reason(n) is None}
    out: list[str] = []
    renamed: dict[str, str] = {}
    used: set[str] = set()
    for name in names:
        if reserved_reason(name) is None and name not in used:
            out.append(name)
            used.add(name)
            continue
        stem = name.replace("*", "_")
        candidate, k = stem + RENAME_SUFFIX, 1
        while _collides(candidate, used | taken):
            k += 1
            candidate = f"{stem} (group {k})"
        out.append(candidate)
        used.add(candidate)
        renamed[name if name not in renamed else f"{name} #{len(renamed) + 1}"] = candidate
    return tuple(out), renamed


def _collides(candidate: str, names: set[str]) -> bool:
    """A renamed player must not be an export column, nor another player's ``se:``
    (or ``left:``/``right:``) column. (It may keep a reserved prefix of its own:
    "se:x (group)" is no export column unless a player "x (group)" exists.)"""
    if candidate in names or candidate in RESERVED_NAMES:
        return True
    return any(candidate == prefix + other for prefix in RESERVED_PREFIXES for other in names)
