"""Context effects heatmap: item x context value, coloured by the change in mean win
probability against the pool (probability points; red: the value helps the item)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.analysis.context_effects import ContextEffects
from prefshap_core.plots import style

MAX_ITEMS_SHOWN = 30
MAX_LABEL_CHARS = 28  # longer item names are cut (the hover has them whole)


def context_effects_heatmap(
    effects: ContextEffects, *, max_items: int = MAX_ITEMS_SHOWN, title: str | None = None
) -> go.Figure:
    """The ``max_items`` items a context value moves most (largest |change| first, top
    row), one column per value of each context group."""
    if not effects.levels:
        return style.empty_figure("This model has no context value to compare.", title=title)
    rows = effects.item_order()[:max_items]
    change = 100.0 * effects.change[rows]
    names = [_short(str(effects.item_names[r])) for r in rows.tolist()]
    ranks, mix_ranks = effects.rank_level[rows], effects.rank_mix[rows]
    p_level, p_mix = effects.p_level[rows], effects.p_mix[rows]
    hover = np.empty(change.shape, dtype=object)
    for i, r in enumerate(rows.tolist()):
        for k, level in enumerate(effects.levels):
            hover[i, k] = (
                f"{effects.item_names[r]} under {level}<br>mean P(win) {100 * p_level[i, k]:.1f} %"
                f" (mix {100 * p_mix[i]:.1f} %): {change[i, k]:+.1f} points"
                f"<br>rank {mix_ranks[i]} → {ranks[i, k]} of {len(effects.item_ids)}"
            )
    limit = float(np.abs(change).max()) or 1.0
    fig = go.Figure(
        go.Heatmap(
            z=change,
            x=list(effects.levels),
            y=list(range(len(rows))),  # positions: two items may share a (shortened) name
            zmin=-limit,
            zmax=limit,
            colorscale=_diverging(),
            text=[[f"{v:+.1f}" for v in row] for row in change.tolist()],
            texttemplate="%{text}" if change.size <= 400 else None,
            textfont={"size": 11},
            hovertext=hover,
            hoverinfo="text",
            colorbar={
                "title": {"text": "change in mean<br>P(win), points", "side": "top"},
                "thickness": 12,
            },
            xgap=1,
            ygap=1,
        )
    )
    height = max(300, 28 * len(rows) + 200)
    style.apply_base_layout(fig, height=height)
    fig.update_yaxes(
        autorange="reversed", tickmode="array", tickvals=list(range(len(rows))), ticktext=names
    )
    # The values on top, under the title: no axis title there to collide with it (the
    # colour bar says what the numbers are).
    fig.update_xaxes(side="top", tickangle=-30, showline=False, ticks="")
    style.set_title(fig, title)
    # Room above the plot for the title, the slanted value labels and the axis title
    # (automargin grows it further when the labels are long).
    fig.update_layout(margin={"t": 120, "l": 10, "r": 10, "b": 20})
    return fig


def _diverging() -> list[list[float | str]]:
    return [[0.0, style.BLUE], [0.5, "#ffffff"], [1.0, style.RED]]


def _short(name: str) -> str:
    return name if len(name) <= MAX_LABEL_CHARS else name[: MAX_LABEL_CHARS - 1] + "…"
