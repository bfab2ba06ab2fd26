"""Own features vs opponents' features: a side-aware explanation seen from one item.

For a set of one item's duels (its losses, say) explained with side-aware players and
oriented to that item (``Explanation.losses_of(item)``: the item is always the left
side), each feature group has two numbers: the mean value of the item's *own* group
(``left:<g>``) and of its opponents' (``right:<g>``), both signed from the item's
point of view (negative: pushed towards its loss). The top row sums each side over
all groups, so "did it lose because of its own features or its opponents'?" is
answered first; each side's total plus the other's is the mean output.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style

OWN_COLOUR = "#7b3294"
OPPONENT_COLOUR = "#008837"
ALL_FEATURES = "All features"


def side_totals(expl: Explanation) -> tuple[np.ndarray, np.ndarray]:
    """(q,) per duel: the sum of the left side's values and of the right side's."""
    _check_sides(expl)
    p = expl.n_players // 2
    return expl.values[:, :p].sum(1), expl.values[:, p:].sum(1)


def own_vs_opponents(
    expl: Explanation, *, title: str | None = None, max_display: int = 10
) -> go.Figure:
    """Paired bars per group (own, opponents'), largest first, with the totals on top."""
    _check_sides(expl)
    if expl.n_duels == 0:
        return style.empty_figure("No duels to show for this selection.", title=title)
    p = expl.n_players // 2
    names = [name.split(":", 1)[-1] for name in expl.player_names[:p]]
    own, opponents = expl.values[:, :p].mean(0), expl.values[:, p:].mean(0)
    shown, rest = style.rank_players(np.abs(own) + np.abs(opponents), max_display)
    rows = [names[j] for j in shown.tolist()]
    own_rows, opp_rows = own[shown].tolist(), opponents[shown].tolist()
    if rest.size:
        rows.append(style.other_players_label(int(rest.size)))
        own_rows.append(float(own[rest].sum()))
        opp_rows.append(float(opponents[rest].sum()))
    own_total, opp_total = (float(t.mean()) for t in side_totals(expl))
    rows, own_rows, opp_rows = [ALL_FEATURES, *rows], [own_total, *own_rows], [opp_total, *opp_rows]
    subject = style.favoured_side(expl)
    y = np.arange(len(rows))[::-1].astype(float)
    fig = go.Figure()
    for offset, name, values, colour in (
        (0.18, f"{subject}'s own", own_rows, OWN_COLOUR),
        (-0.18, "opponents'", opp_rows, OPPONENT_COLOUR),
    ):
        fig.add_trace(
            go.Bar(
                name=name,
                x=values,
                y=y + offset,
                orientation="h",
                width=0.34,
                marker={"color": colour, "line": {"width": 0}},
                text=[style.format_number(v, signed=True) for v in values],
                textposition="outside",
                cliponaxis=False,
                customdata=np.array(rows, dtype=object)[:, None],
                hovertemplate=f"{name} %{{customdata[0]}}: %{{x:.4g}}<extra></extra>",
            )
        )
    style.apply_base_layout(fig, height=max(300, 2 * style.ROW_HEIGHT_PX * len(rows) + 150))
    fig.update_layout(
        showlegend=True,
        legend={"orientation": "h", "x": 0.0, "y": 1.0, "yanchor": "bottom"},
        barmode="overlay",
    )
    span = max(1e-12, float(np.max(np.abs(own_rows + opp_rows))))
    fig.update_xaxes(
        title_text=style.value_axis_title(
            expl, f"mean Pref-SHAP value over {expl.n_duels:,} duels"
        ),
        range=[-1.35 * span, 1.35 * span],
    )
    fig.update_yaxes(tickmode="array", tickvals=y.tolist(), ticktext=rows)
    fig.add_vline(x=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    fig.add_hline(y=y[0] - 0.5, line={"color": style.AXIS_GREY, "width": 1})
    style.set_title(fig, title)
    if title:
        fig.update_layout(margin={"t": 110})
    return fig


def _check_sides(expl: Explanation) -> None:
    if expl.what != "sides":
        raise ValueError(f"own vs opponents needs a side-aware explanation, not {expl.what!r}")
