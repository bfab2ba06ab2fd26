"""Helpers of the plot tests: a random explanation to draw, and a beehive's points by row."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style


def make_explanation(
    q: int = 400,
    p: int = 6,
    *,
    seed: int = 0,
    group_player: int | None = 1,
    base: np.ndarray | None = None,
    what: str = "items",
    names: tuple[str, ...] | None = None,
) -> Explanation:
    """Random explanation whose players have clearly different importances (player j's
    values scale like 1 / (j + 1)), values that grow with the data (so colour has a
    direction to check), and ``base + sum(values) == output``."""
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(q, p)) * 3.0
    values = (np.tanh(data) + 0.3 * rng.normal(size=(q, p))) / (np.arange(p) + 1.0)
    data_labels = None
    if group_player is not None:
        data[:, group_player] = np.nan
        kinds = np.array(["Fire", "Water", "Grass"])
        data_labels = np.full((q, p), None, dtype=object)
        data_labels[:, group_player] = [
            f"{a} vs {b}"
            for a, b in zip(kinds[rng.integers(0, 3, q)], kinds[rng.integers(0, 3, q)], strict=True)
        ]
    base_values = np.zeros(q) if base is None else np.asarray(base, dtype=np.float64)
    ids = rng.integers(0, 50, size=(2, q))
    return Explanation(
        values=values,
        base_values=base_values,
        outputs=base_values + values.sum(axis=1),
        data=data,
        player_names=names or tuple(f"f{j}" for j in range(p)),
        duel_ids=np.array([f"d{i}" for i in range(q)]),
        left_ids=np.array([f"i{k}" for k in ids[0]]),
        right_ids=np.array([f"i{k}" for k in ids[1]]),
        winners=np.where(rng.random(q) < 0.5, 1, -1).astype(np.int8),
        left_labels=np.array([f"Item {k}" for k in ids[0]]),
        right_labels=np.array([f"Item {k}" for k in ids[1]]),
        data_labels=data_labels,
        what=what,
    )


def rows_of(fig: go.Figure) -> dict[str, dict[str, np.ndarray]]:
    """Points per row name: x, y, duel indices (customdata) and colours, merged over the
    coloured and grey traces of the row (a categorical row's traces are its levels,
    grouped under the row's name)."""
    rows: dict[str, dict[str, list]] = {}
    for tr in fig.data:
        row = rows.setdefault(tr.legendgroup or tr.name, {"x": [], "y": [], "duel": [], "grey": []})
        n = len(tr.x)
        row["x"] += list(tr.x)
        row["y"] += list(tr.y)
        row["duel"] += list(np.asarray(tr.customdata)[:, 0].astype(int))
        row["grey"] += [tr.marker.color == style.NAN_GREY] * n
    return {k: {kk: np.asarray(vv) for kk, vv in v.items()} for k, v in rows.items()}
