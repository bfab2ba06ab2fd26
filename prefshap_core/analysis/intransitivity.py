"""Intransitivity of a preference model: the HodgeRank split and its cyclic triangles.

For ``n`` items the model's preference matrix is ``G_ab = g(a, b)`` (skew-symmetric,
``G_aa = 0``; a C-GPM context-averaged, or under a context, see
:mod:`prefshap_core.analysis.context_condition`). On the complete graph of the
items (HodgeRank, Jiang, Lim, Yao and Ye 2011) ``G`` splits orthogonally into

    gradient  s_a - s_b   with the least-squares potential  s_a = (1/n) sum_b G_ab
    cyclic    G - gradient   (the part no ranking explains)

and the **cyclic share** ``||G - gradient||^2 / ||G||^2`` is in [0, 1]: 0 for any
utility model (``G_ab = f(a) - f(b)`` is a gradient), near 1 for rock-paper-scissors.
The strongest cycles are the triangles ``a > b > c > a`` of largest
``G_ab + G_bc + G_ca`` (the data's own cycles: :mod:`prefshap_core.analysis.explorer`).

``G`` is the model's own matrix evaluation (:meth:`PreferenceFunction.decision_matrix`:
two matrix products, about a second for 2,000 items where 2 M single duels take
minutes), exactly skew-symmetric.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from prefshap_core.analysis.triangles import Cycles, count_cycles, top_cycles
from prefshap_core.compute import Compute
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress

MAX_ITEMS = 2000  # 2 M duels; G is n x n float64 (32 MB)


@dataclass(frozen=True, eq=False)
class IntransitivityReport:
    """The split of ``G`` for ``item_rows`` of the model's pool, and its top cycles."""

    item_rows: np.ndarray  # (n,) rows of fn.items, increasing: the order of G
    item_ids: np.ndarray  # (n,) str
    preference: np.ndarray  # (n, n) G
    potential: np.ndarray  # (n,) s
    cyclic_share: float
    item_cyclic_share: np.ndarray  # (n,) each row's share: sum_b R_ab^2 / sum_b G_ab^2
    cycles: Cycles  # indices into item_rows
    n_cyclic_triangles: int
    item_names: np.ndarray | None = None  # (n,) str display names; None: the ids

    @property
    def n_items(self) -> int:
        return len(self.item_rows)

    def triangles(self) -> list[dict]:
        """The contract's list: ``{"items": [a, b, c], "names": [...], "p": [P(a>b),
        P(b>c), P(c>a)]}`` (``names``: the items' names, their ids when there are none)."""
        names = self.item_ids if self.item_names is None else self.item_names
        out = []
        for a, b, c in self.cycles.items.tolist():
            g = self.preference[[a, b, c], [b, c, a]]
            out.append(
                {
                    "items": [str(self.item_ids[x]) for x in (a, b, c)],
                    "names": [str(names[x]) for x in (a, b, c)],
                    "p": [float(v) for v in _sigmoid(g)],
                }
            )
        return out


def check_item_rows(fn: PreferenceFunction, item_rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(item_rows, dtype=np.int64).reshape(-1)
    if len(rows) < 3:
        raise ValueError(f"cycles need at least 3 items, got {len(rows)}")
    if len(rows) > MAX_ITEMS:
        raise ValueError(f"at most {MAX_ITEMS:,} items (n^2 duels), got {len(rows):,}")
    if rows.min() < 0 or rows.max() >= len(fn.items):
        raise ValueError("item rows outside the model's items")
    if len(np.unique(rows)) != len(rows):
        raise ValueError("an item is listed twice")
    return rows


def preference_matrix(
    fn: PreferenceFunction, item_rows: np.ndarray, *, compute: Compute | None = None
) -> np.ndarray:
    """(n, n) ``G_ab = g(item a, item b)`` (C-GPM: context-averaged), ``G_aa = 0``."""
    rows = np.asarray(item_rows, dtype=np.int64)
    return fn.decision_matrix(fn.items[rows], compute=compute)


def hodge_split(preference: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
    """(potential s, cyclic share, per-item cyclic share) of a skew-symmetric ``G``.

    For a utility model ``G_ab = f_a - f_b`` (rounded once), so ``s_a = f_a - mean f``
    up to rounding and the residual is a few ulps of ``|f|``: the share is ~1e-30.
    """
    g = np.asarray(preference, dtype=np.float64)
    s = g.mean(axis=1)
    residual = g - (s[:, None] - s[None, :])
    row_total = np.einsum("ab,ab->a", g, g)
    row_cyclic = np.einsum("ab,ab->a", residual, residual)
    total = float(row_total.sum())
    share = float(row_cyclic.sum()) / total if total > 0 else 0.0
    per_item = np.divide(row_cyclic, row_total, out=np.zeros_like(row_total), where=row_total > 0)
    return s, share, per_item


def analyse(
    fn: PreferenceFunction,
    item_rows: np.ndarray,
    *,
    top: int = 20,
    compute: Compute | None = None,
    progress: Progress | None = None,
) -> IntransitivityReport:
    """The HodgeRank split of ``fn`` on ``item_rows`` and its ``top`` strongest cycles.

    The items are taken in pool order (whatever the order of ``item_rows``), so each
    cycle starts at its smallest-pool-index item.
    """
    rows = np.sort(check_item_rows(fn, item_rows))
    progress = ensure_progress(progress)
    progress.update("Evaluating the model on every pair", 0.0)
    g = preference_matrix(fn, rows, compute=compute)
    progress.update("Splitting gradient and cycles", 0.3)
    s, share, per_item = hodge_split(g)
    cycles = top_cycles(g, top, progress=progress.span(0.32, 0.97))
    progress.update("Counting cyclic triangles", 0.97)
    n_cyclic = count_cycles(g)
    progress.update("Done", 1.0)
    return IntransitivityReport(
        item_rows=rows,
        item_ids=np.asarray(fn.item_ids)[rows].astype(str),
        preference=g,
        potential=s,
        cyclic_share=share,
        item_cyclic_share=per_item,
        cycles=cycles,
        n_cyclic_triangles=n_cyclic,
        item_names=fn.item_labels[rows],
    )


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=np.float64)))
