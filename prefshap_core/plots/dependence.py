"""Dependence plot (shap's scatter) of one player of an Explanation.

x is the player's value difference in the explanation's orientation (winner - loser,
or the chosen item - its opponent), y its Pref-SHAP value, one point per duel; the
colour is the player that interacts most with it (:func:`interaction_partner`). A
categorical group has no difference: x is then the pair of categories that met
("Fire vs Water", favoured side first) or, with many pairs, same / different
category, jittered. Context players (shared by both sides) use their value.

Each point's ``customdata[0]`` is its duel's row in ``expl`` (for click handlers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style
from prefshap_core.plots.beehive import row_colour_positions
from prefshap_core.plots.direction import direction_table
from prefshap_core.plots.labels import feature_label

MAX_PAIRS = 12  # more category pairs than this: x is same / different
JITTER = 0.3
SAME, DIFFERENT = "same category", "different categories"


@dataclass(frozen=True)
class PlayerValues:
    """What a player was in each duel: a number, or a category label."""

    numbers: np.ndarray | None  # (q,) difference or context value; None for categories
    labels: np.ndarray | None  # (q,) "Fire vs Water" / "Clay"; None for numbers
    meaning: str  # axis words, e.g. "difference (winner - loser)"


def player_values(expl: Explanation, player: int) -> PlayerValues:
    """The numbers (or categories) behind player ``player``'s points."""
    name = expl.player_names[player]
    if expl.what == "context":
        source = expl.context_values
        if source is not None and np.isfinite(source[:, player]).all():
            return PlayerValues(source[:, player], None, f"{name} (context value)")
    elif np.isfinite(expl.data[:, player]).all():
        return PlayerValues(
            expl.data[:, player], None, f"{name} difference ({style.difference_phrase(expl)})"
        )
    labels = (
        np.array([str(x) for x in expl.data_labels[:, player]], dtype=object)
        if expl.data_labels is not None
        else np.full(expl.n_duels, "?", dtype=object)
    )
    words = "categories" if expl.what == "items" else "context category"
    return PlayerValues(None, labels, f"{name} ({words}, {style.favoured_side(expl)} first)")


def _heuristic_column(values: PlayerValues) -> np.ndarray:
    """A number per duel for the interaction heuristic: the value, or for pairs of
    categories 1 = same category / 0 = different, for one category its code."""
    if values.numbers is not None:
        return values.numbers.astype(np.float64)
    assert values.labels is not None
    if all(" vs " in s for s in values.labels.tolist()):
        return np.array([float(a == b) for a, b in (s.split(" vs ", 1) for s in values.labels)])
    _, codes = np.unique(values.labels.astype(str), return_inverse=True)
    return codes.astype(np.float64)


def approximate_interactions(expl: Explanation, player: int) -> np.ndarray:
    """(p,) shap's ``approximate_interactions`` score of every player with ``player``.

    Duels sorted by the player's value are cut into bins of ``min(q / 10, 50)``; in
    each bin the |correlation| between the player's Pref-SHAP value and the other
    player's value is summed. 0 for the player itself and constant players.
    """
    q = expl.n_duels
    x = _heuristic_column(player_values(expl, player))
    order = np.argsort(x, kind="stable")
    phi = expl.values[order, player]
    step = max(min(q // 10, 50), 1)
    scores = np.zeros(expl.n_players)
    for k in range(expl.n_players):
        if k == player:
            continue
        other = _heuristic_column(player_values(expl, k))[order]
        if np.sum(np.abs(other)) < 1e-8:
            continue
        total = 0.0
        for start in range(0, q, step):
            a, b = phi[start : start + step], other[start : start + step]
            if a.size > 1 and np.std(a) > 0 and np.std(b) > 0:
                total += abs(float(np.corrcoef(a, b)[0, 1]))
        scores[k] = total
    return scores


def interaction_partner(expl: Explanation, player: int) -> int | None:
    """The player to colour ``player``'s dependence plot by (None: no other player).

    Today shap's approximate-interactions heuristic; once Shapley interaction indices
    exist, the player with the largest mean |interaction index| (this function is
    the one place that choice is made).
    """
    if expl.n_players < 2 or expl.n_duels < 2:
        return None
    scores = approximate_interactions(expl, player)
    scores[player] = -np.inf
    return int(np.argmax(scores))


def dependence(
    expl: Explanation,
    player: int | str,
    *,
    colour_by: int | str | None = "auto",
    max_points: int = 5000,
    seed: int = 0,
    title: str | None = None,
    imputed: Mapping[str, float] | None = None,
) -> go.Figure:
    """Scatter of ``player``'s Pref-SHAP value against its value (difference), with its
    direction (:mod:`direction`) in a note. ``imputed``: the share of filled-in rows
    per feature (its axis title says so from 5 %)."""
    j = expl.player_names.index(player) if isinstance(player, str) else int(player)
    if expl.n_duels == 0:
        return style.empty_figure("No duels to show for this selection.", title=title)
    partner = interaction_partner(expl, j) if colour_by == "auto" else colour_by
    rng = np.random.default_rng(seed)
    rows = np.arange(expl.n_duels)
    if rows.size > max_points:
        rows = np.sort(rng.choice(rows, size=max_points, replace=False))
    values = player_values(expl, j)
    x, ticks = _x_positions(values, rng)
    y = expl.values[:, j]
    fig = go.Figure()
    hover_x = "%{customdata[1]}"
    text = np.array(
        [f"{expl.duel_ids[i]}: {a} vs {b}" for i, a, b in zip(
            rows.tolist(), *(lab[rows] for lab in style.duel_side_labels(expl)), strict=True
        )],
        dtype=object,
    )  # fmt: skip
    shown_x = (
        np.array([style.format_number(v, signed=True) for v in values.numbers], dtype=object)
        if values.numbers is not None
        else values.labels
    )
    marker: dict = {"size": 6, "opacity": 0.8, "color": style.NAN_GREY}
    colour_words = ""
    if partner is not None:
        partner_values = player_values(expl, int(partner))
        name = expl.player_names[int(partner)]
        if partner_values.numbers is not None:
            positions = row_colour_positions(partner_values.numbers)
            marker.update(
                color=positions[rows], colorscale=style.RED_BLUE_COLORSCALE, cmin=0.0, cmax=1.0,
                showscale=True, colorbar=_colorbar(partner_values.meaning),
            )  # fmt: skip
            shown_partner = partner_values.numbers
        else:
            column = _heuristic_column(partner_values)
            marker.update(color=np.where(column[rows] > 0.5, style.RED, style.BLUE))
            shown_partner = partner_values.labels
        colour_words = f"<br>{name}: %{{customdata[2]}}"
    else:
        shown_partner = np.full(expl.n_duels, "", dtype=object)
    fig.add_trace(
        go.Scattergl(
            x=x[rows],
            y=y[rows],
            mode="markers",
            marker=marker,
            text=text,
            customdata=np.stack(
                [rows, shown_x[rows], np.asarray(shown_partner, dtype=object)[rows]], axis=1
            ),
            hovertemplate=(
                "duel %{text}<br>"
                + f"{expl.player_names[j]}: "
                + hover_x
                + "<br>Pref-SHAP value: %{y:+.3g}"
                + colour_words
                + "<extra></extra>"
            ),
            name=expl.player_names[j],
        )
    )
    style.apply_base_layout(fig, height=420)
    meaning = values.meaning
    label = feature_label(expl.player_names[j], imputed, html=False)
    if meaning.startswith(expl.player_names[j]):
        meaning = label + meaning[len(expl.player_names[j]) :]
    fig.update_xaxes(title_text=style.wrap(meaning, 2 * style.AXIS_TITLE_CHARS))
    if ticks is not None:
        fig.update_xaxes(tickmode="array", tickvals=list(range(len(ticks))), ticktext=ticks)
    fig.update_yaxes(
        title_text=style.wrap(
            style.value_axis_title(expl, f"Pref-SHAP value of {expl.player_names[j]}"),
            style.AXIS_TITLE_CHARS + 8,
        ),
        showline=True, ticks="outside",
    )  # fmt: skip
    fig.add_hline(y=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    notes = [direction_note(expl, j)]
    if partner is not None and player_values(expl, int(partner)).numbers is None:
        notes.append(
            f"colour: {expl.player_names[int(partner)]} — red {SAME}, blue {DIFFERENT}"
            if expl.what == "items"
            else f"colour: {expl.player_names[int(partner)]} category"
        )
    if rows.size < expl.n_duels:
        notes.append(f"showing {rows.size:,} of {expl.n_duels:,} duels (random sample)")
    style.add_note(fig, " · ".join(n for n in notes if n))
    style.set_title(fig, title)
    return fig


MAX_NOTE_LEVELS = 6


def direction_note(expl: Explanation, player: int) -> str:
    """The player's direction in words: its Spearman rho, or its mean value per level
    of the favoured side's category (the most frequent levels)."""
    table = direction_table(expl, max_display=expl.n_players)
    rows = table[table["feature"] == expl.player_names[player]]
    if rows.empty:
        return ""
    if rows["statistic"].iloc[0] == "spearman":
        rho = float(rows["value"].iloc[0])
        shown = "n/a" if not np.isfinite(rho) else f"{rho:+.2f}"
        return f"direction: Spearman ρ(value, {player_values(expl, player).meaning}) = {shown}"
    levels = ", ".join(
        f"{level}: {style.format_number(v, signed=True)}"
        for level, v in zip(rows["level"][:MAX_NOTE_LEVELS], rows["value"], strict=False)
    )
    return f"direction: mean value by {style.favoured_side(expl)}'s category: {levels}"


def _x_positions(values: PlayerValues, rng: np.random.Generator) -> tuple[np.ndarray, list | None]:
    """Numbers as they are; categories as jittered positions with their tick labels."""
    if values.numbers is not None:
        return values.numbers.astype(np.float64), None
    assert values.labels is not None
    labels = values.labels.astype(str)
    if len(np.unique(labels)) > MAX_PAIRS and all(" vs " in s for s in labels.tolist()):
        labels = np.array(
            [SAME if a == b else DIFFERENT for a, b in (s.split(" vs ", 1) for s in labels)]
        )
    ticks, codes = np.unique(labels, return_inverse=True)
    jitter = rng.uniform(-JITTER, JITTER, size=labels.size)
    return codes.astype(np.float64) + jitter, ticks.tolist()


def _colorbar(meaning: str) -> dict:
    return {
        "title": {"text": meaning, "side": "right", "font": {"size": 12}},
        "tickmode": "array",
        "tickvals": [0.0, 1.0],
        "ticktext": ["Low (≤ 5th pct.)", "High (≥ 95th pct.)"],
        "ticks": "",
        "thickness": 10,
        "outlinewidth": 0,
    }
