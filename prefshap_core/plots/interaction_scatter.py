"""One pair's interaction per duel against the value difference of its first group.

For a pair ``(a, b)`` of feature groups: one point per duel, x the difference in
``a`` (winner - loser in the winner view; for a multi-column group its "what met
what" label, e.g. "Fire vs Water"), y the pair's Shapley interaction index in that
duel, coloured by the difference in ``b``. The item explanation supplies the
differences and must cover the same duels in the same orientation.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.interaction_explanation import InteractionExplanation
from prefshap_core.plots import style

# Categories shown along x for a multi-column group; the rest share one column.
_MAX_CATEGORIES = 25


def interaction_scatter(
    inter: InteractionExplanation,
    expl: Explanation,
    first: int,
    second: int,
    *,
    title: str | None = None,
) -> go.Figure:
    """SII of ``(first, second)`` per duel vs the duel's difference in ``first``."""
    if first == second:
        raise ValueError("an interaction needs two different groups")
    expl = _aligned(inter, expl)
    i, j = sorted((int(first), int(second)))
    column = [tuple(pair) for pair in inter.pairs.tolist()].index((i, j))
    y = inter.values[:, column]
    names = inter.player_names
    a, b = names[first], names[second]
    if inter.n_duels == 0:
        return style.empty_figure("No duels to show for this selection.", title=title)
    x_numeric = expl.data[:, first]
    numeric = bool(np.isfinite(x_numeric).all())
    x = x_numeric if numeric else _categories(expl, first)
    colour = expl.data[:, second]
    coloured = bool(np.isfinite(colour).any())
    marker: dict = {"size": 7, "opacity": 0.8, "line": {"width": 0}}
    if coloured:
        limit = float(np.nanmax(np.abs(colour))) or 1.0
        marker.update(
            color=np.where(np.isfinite(colour), colour, 0.0),
            colorscale=style.RED_BLUE_COLORSCALE,
            cmin=-limit,
            cmax=limit,
            colorbar={"title": {"text": f"Δ {b}"}, "thickness": 12},
        )
    else:
        marker.update(color=style.NAN_GREY)
    labels = (
        expl.data_labels[:, second].astype(str)
        if expl.data_labels is not None
        else np.full(inter.n_duels, "")
    )
    fig = go.Figure(
        go.Scatter(
            x=x,
            y=y,
            mode="markers",
            marker=marker,
            customdata=np.stack([inter.duel_ids, labels], axis=1),
            hovertemplate=(
                f"duel %{{customdata[0]}}<br>{a}: %{{x}}<br>{b}: %{{customdata[1]}}"
                f"<br>SII {a} × {b} = %{{y:+.4g}}<extra></extra>"
            ),
        )
    )
    style.apply_base_layout(fig, height=420)
    phrase = style.difference_phrase(expl)
    fig.update_xaxes(title_text=f"{a} ({phrase})" if numeric else a)
    fig.update_yaxes(title_text=f"interaction {a} × {b}", showline=True, ticks="outside")
    fig.add_hline(y=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    style.set_title(fig, title or f"{a} × {b}: interaction per duel")
    return fig


def _aligned(inter: InteractionExplanation, expl: Explanation) -> Explanation:
    """``expl`` rows in ``inter``'s duel order; both must be seen from the same side."""
    if inter.orientation != expl.orientation:
        raise ValueError(
            f"interactions ({inter.orientation}) and the explanation ({expl.orientation}) "
            "are oriented differently"
        )
    if np.array_equal(inter.duel_ids, expl.duel_ids):
        return expl
    position = {str(d): k for k, d in enumerate(expl.duel_ids)}
    missing = [d for d in inter.duel_ids if str(d) not in position]
    if missing:
        raise ValueError(f"the explanation lacks duel {missing[0]!r} of the interactions")
    return expl.subset(np.array([position[str(d)] for d in inter.duel_ids]))


def _categories(expl: Explanation, player: int) -> np.ndarray:
    labels = (
        expl.data_labels[:, player].astype(str)
        if expl.data_labels is not None
        else np.full(expl.n_duels, "?")
    )
    values, counts = np.unique(labels, return_counts=True)
    if len(values) <= _MAX_CATEGORIES:
        return labels
    common = set(values[np.argsort(-counts)[: _MAX_CATEGORIES - 1]].tolist())
    return np.array([label if label in common else "other" for label in labels])
