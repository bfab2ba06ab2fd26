"""Intransitivity of a dataset and its model, as the dashboard shows it.

The items are the ``n`` most active ones of the data (a model file alone has no
activity; ``prefshap cycles`` uses pool order instead). Next to the model's split
(:func:`~prefshap_core.analysis.intransitivity.analyse`) stand the data's own cycles:
its dominance graph has ``a -> b`` when ``a`` beat ``b`` more often than ``b`` beat
``a`` (over every duel between the two, all contexts together; ties count for
neither), and a cycle's strength is the sum of its three net win counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from prefshap_core.analysis.context_condition import condition_on_context
from prefshap_core.analysis.intransitivity import IntransitivityReport, analyse, check_item_rows
from prefshap_core.analysis.triangles import Cycles, count_cycles, top_cycles
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress


@dataclass(frozen=True, eq=False)
class DatasetIntransitivity:
    """The model's split and the data's cycles on the same items (data rows)."""

    data_rows: np.ndarray  # (n,) rows of data's items, the order of every index below
    model: IntransitivityReport  # cycles index data_rows
    net_wins: np.ndarray  # (n, n) wins of a over b minus wins of b over a
    observed: Cycles  # the data's strongest cycles (by net wins)
    n_observed_cycles: int
    n_compared_pairs: int  # pairs where one side won more often than the other

    @property
    def n_items(self) -> int:
        return len(self.data_rows)


def most_active_items(data: DuelData, n: int) -> np.ndarray:
    """Rows of the ``n`` items with the most duels (ties: pool order), in pool order."""
    activity = np.bincount(data.left, minlength=data.n_items) + np.bincount(
        data.right, minlength=data.n_items
    )
    return np.sort(np.argsort(-activity, kind="stable")[:n])


def net_wins(data: DuelData, item_rows: np.ndarray) -> np.ndarray:
    """(n, n) wins of a over b minus wins of b over a, over the duels of ``data``
    between two of ``item_rows`` (rows of ``data``'s items); ties count 0."""
    rows = np.asarray(item_rows, dtype=np.int64)
    position = np.full(data.n_items, -1, dtype=np.int64)
    position[rows] = np.arange(len(rows))
    a, b = position[data.left], position[data.right]
    among = (a >= 0) & (b >= 0) & (a != b)
    outcome = np.sign(np.asarray(data.y, dtype=np.float64))[among]
    m = np.zeros((len(rows), len(rows)))
    np.add.at(m, (a[among], b[among]), outcome)
    return m - m.T


def dataset_intransitivity(
    fn: PreferenceFunction,
    data: DuelData,
    n_items: int,
    *,
    context: Mapping[str, str] | None = None,
    top: int = 20,
    compute: Compute | None = None,
    progress: Progress | None = None,
) -> DatasetIntransitivity:
    """The model's cyclic share and cycles on the ``n_items`` most active items of
    ``data``, and the data's own cycles on the same items."""
    progress = ensure_progress(progress)
    rows = most_active_items(data, n_items)
    position = {str(i): k for k, i in enumerate(fn.item_ids)}
    missing = [str(i) for i in data.item_ids[rows] if str(i) not in position]
    if missing:
        raise ValueError(f"item {missing[0]!r} of the data is not among the model's items")
    fn_rows = check_item_rows(fn, np.array([position[str(i)] for i in data.item_ids[rows]]))
    order = np.argsort(fn_rows)  # the report's order: the model's pool order
    rows, fn_rows = rows[order], fn_rows[order]
    model = analyse(
        condition_on_context(fn, context or {}),
        fn_rows,
        top=top,
        compute=compute,
        progress=progress.span(0.0, 0.8),
    )
    progress.update("The data's own cycles", 0.8)
    wins = net_wins(data, rows)
    observed = top_cycles(wins, top)
    progress.update("Done", 1.0)
    return DatasetIntransitivity(
        data_rows=rows,
        model=model,
        net_wins=wins,
        observed=observed,
        n_observed_cycles=count_cycles(wins),
        n_compared_pairs=int(np.count_nonzero(np.triu(wins != 0, 1))),
    )
