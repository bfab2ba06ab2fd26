"""Score plot of the HodgeRank potential: one dot per item, best on top.

x is the potential ``s_a = (1/n) sum_b g(a, b)`` (the ranking that explains the
model's preferences best, in the units of g); colour is the item's own cyclic share
``sum_b R_ab^2 / sum_b G_ab^2`` (grey-blue: its duels follow the ranking; red: they
are mostly cyclic), so items caught in rock-paper-scissors stand out.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.analysis.intransitivity import IntransitivityReport
from prefshap_core.plots import style

MAX_TICK_LABELS = 40  # beyond this the names overlap: hover instead


def potential_plot(
    report: IntransitivityReport,
    labels: np.ndarray | None = None,
    *,
    title: str | None = None,
) -> go.Figure:
    """Dots of ``report.potential`` sorted (highest on top), coloured by each item's
    cyclic share; ``labels`` are display names in ``report``'s item order."""
    n = report.n_items
    if n == 0:
        return style.empty_figure("No items to rank.", title=title)
    names = np.asarray(labels if labels is not None else report.item_ids).astype(str)
    order = np.argsort(-report.potential, kind="stable")
    s = report.potential[order]
    share = report.item_cyclic_share[order]
    y = np.arange(n)[::-1].astype(float)  # rank 1 on top
    fig = go.Figure(
        go.Scatter(
            x=s,
            y=y,
            mode="markers",
            marker={
                "size": 9 if n <= 200 else 6,
                "color": share,
                "cmin": 0.0,
                "cmax": 1.0,
                "colorscale": style.RED_BLUE_COLORSCALE,
                "colorbar": {"title": {"text": "cyclic<br>share", "side": "top"}, "len": 0.6},
                "line": {"width": 0},
            },
            customdata=[
                [name, item, rank, float(item_share)]
                for rank, (name, item, item_share) in enumerate(
                    zip(names[order], report.item_ids[order], share, strict=True), start=1
                )
            ],
            hovertemplate=(
                "#%{customdata[2]} %{customdata[0]} (%{customdata[1]})<br>"
                "potential s = %{x:.4g}<br>own cyclic share %{customdata[3]:.1%}<extra></extra>"
            ),
        )
    )
    height = max(320, min(1400, 18 * n + 140)) if n <= MAX_TICK_LABELS else 560
    style.apply_base_layout(fig, height=height)
    fig.update_xaxes(title_text="potential s (mean preference g against the other items)")
    if n <= MAX_TICK_LABELS:
        fig.update_yaxes(
            tickmode="array", tickvals=y.tolist(), ticktext=names[order].tolist(),
            range=[-0.8, n - 0.2],
        )  # fmt: skip
    else:
        fig.update_yaxes(showticklabels=False, title_text=f"{n:,} items, best on top")
    fig.add_vline(x=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    style.add_note(fig, f"cyclic share of the whole model: {report.cyclic_share:.1%}")
    style.set_title(fig, title)
    return fig
