"""The readable notes of a build (``DataReport.notes``): what was read and how."""

from __future__ import annotations

from prefshap_core.data.context_table import ContextJoin
from prefshap_core.data.encoding.spec import EncodedTable, EncodingSpec
from prefshap_core.data.id_columns import IgnoredColumn


def build_notes(
    items: EncodedTable,
    context: EncodedTable | None,
    label: str | None,
    n_duels: int,
    n_flipped: int,
    seed: int,
) -> tuple[str, ...]:
    notes = [f"items: {len(items.model)}; display label column: {label or '(the id)'}"]
    notes.append(kinds("item covariates", items.spec))
    if context is not None:
        notes.append(kinds("context columns", context.spec))
    notes.append(
        f"orientation randomised (seed {seed}): {n_flipped} of {n_duels} duels had "
        "left and right swapped (and y negated)"
    )
    return tuple(notes)


def kinds(title: str, spec: EncodingSpec) -> str:
    parts = [
        g.name if g.kind == "numeric" else f"{g.name} ({g.kind}, {len(g.categories)} categories)"
        for g in spec.groups
    ]
    return f"{title}: " + ", ".join(parts)


def more_notes(
    n_ties: int,
    n_skipped: int,
    ignored: list[IgnoredColumn],
    join: ContextJoin | None,
    missing_indicators: bool,
) -> tuple[str, ...]:
    notes = []
    if not missing_indicators:
        notes.append(
            "missing indicators off: mostly-missing columns are only filled (median or "
            "most frequent category), with no '(missing)' column"
        )
    if n_ties:
        notes.append(
            f"{n_ties} ties: each counts as half a win for each side in the fit; ROC AUC "
            "and accuracy leave them out"
        )
    if n_skipped:
        notes.append(f"{n_skipped} rows have no outcome and were skipped")
    if join is not None:
        notes.append(
            f"context covariates joined from the contexts table on '{join.key}': "
            + ", ".join(join.columns)
        )
    notes.extend(i.describe() for i in ignored)
    return tuple(notes)
