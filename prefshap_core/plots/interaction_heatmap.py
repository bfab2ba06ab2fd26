"""Interaction heatmap: mean |Shapley interaction| of every pair of feature groups.

Drawn as a scatter of square markers rather than a heatmap trace, because Streamlit
reports clicks (selections) on scatter points only: each cell carries its pair
``(i, j)`` in ``customdata`` so a page can open that pair's plot. The matrix is
symmetric (both cells of a pair are clickable); the diagonal is left empty.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.interaction_explanation import InteractionExplanation
from prefshap_core.plots import style

# White to shap's red: mean |SII| is never negative.
COLOURSCALE = [[0.0, "#ffffff"], [1.0, style.RED]]


def interaction_heatmap(inter: InteractionExplanation, *, title: str | None = None) -> go.Figure:
    """Square cells coloured by mean |SII| over the duels; hover adds the signed mean."""
    if inter.n_duels == 0:
        return style.empty_figure("No duels to show for this selection.", title=title)
    names = list(inter.player_names)
    p = len(names)
    strength, signed = inter.square(inter.mean_abs()), inter.square(inter.mean())
    rows, cols = np.nonzero(~np.eye(p, dtype=bool))
    values = strength[rows, cols]
    cell_px = max(22, min(70, 520 // max(1, p)))
    fig = go.Figure(
        go.Scatter(
            x=[names[j] for j in cols.tolist()],
            y=[names[i] for i in rows.tolist()],
            mode="markers+text" if p <= 10 else "markers",
            marker={
                "symbol": "square",
                "size": cell_px,
                "color": values,
                "colorscale": COLOURSCALE,
                "cmin": 0.0,
                "cmax": float(values.max()) if values.size and values.max() > 0 else 1.0,
                "line": {"color": style.GRID_GREY, "width": 1},
                "colorbar": {"title": {"text": "mean |SII|"}, "thickness": 12},
            },
            text=[style.format_number(v) for v in values.tolist()],
            textfont={"size": 10, "color": style.TEXT_COLOUR},
            customdata=np.stack([rows, cols, values, signed[rows, cols]], axis=1),
            hovertemplate=(
                "%{y} × %{x}<br>mean |SII| = %{customdata[2]:.4g}"
                f"<br>mean SII ({_orientation_word(inter)}) = %{{customdata[3]:+.4g}}"
                "<extra></extra>"
            ),
        )
    )
    size = cell_px * p + 220
    style.apply_base_layout(fig, height=size, width=size + 120)
    fig.update_xaxes(
        categoryorder="array", categoryarray=names, tickangle=-45, showline=False, ticks=""
    )
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1])
    style.set_title(fig, title)
    style.add_note(fig, f"{inter.n_duels:,} duels · click a cell for the pair's plot")
    return fig


def _orientation_word(inter: InteractionExplanation) -> str:
    return "winner's side" if inter.orientation == "winner" else "left side"
