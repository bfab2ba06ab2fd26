"""Beehive (shap's beeswarm) of an Explanation: every duel a point, one row per player.

Reading it: x is the Pref-SHAP value in the explanation's orientation (pass
``expl.oriented_to_winner()`` for the paper's figures, so positive = helped the
winner); colour is the player's difference between the two sides in that same
orientation (red = the favoured side had more of it), or for context players the
context's value itself (red = high), as shap colours feature values. Points pile up where values are
dense, so the row's shape is the value distribution.

Each point's ``customdata[0]`` is its duel's row index in ``expl`` (so a click handler
can open that duel); ``customdata[1]``, where present, its feature difference.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style

# shap's beeswarm constants: 100 value bins per row, points fill 90% of 0.4 row units
# on either side of the row's centre line.
N_BINS = 100
ROW_HALF_HEIGHT = 0.4 * 0.9
MARKER_SIZE = 5


def beehive(
    expl: Explanation,
    *,
    max_display: int = 10,
    max_points_per_row: int = 3000,
    seed: int = 0,
    title: str | None = None,
) -> go.Figure:
    """Beeswarm of ``expl``: rows by mean |phi| (largest on top), WebGL points."""
    if max_points_per_row < 1:
        raise ValueError("max_points_per_row must be at least 1")
    if expl.n_duels == 0 or expl.n_players == 0:
        return style.empty_figure("No duels to show for this selection.", title=title)

    shown, rest = style.rank_players(expl.mean_abs(), max_display)
    rng = np.random.default_rng(seed)
    duels = _sample_duels(expl.n_duels, max_points_per_row, rng)
    left, right = style.duel_side_labels(expl)
    # Per-point strings dominate the figure's size (and so its transfer and export
    # time): only the duel's own words go per point, the rest is in the hovertemplate.
    duel_text = np.array(
        [f"{expl.duel_ids[i]}<br>{left[i]} vs {right[i]}" for i in duels.tolist()], dtype=object
    )

    rows: list[tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]] = []
    for j in shown.tolist():
        rows.append(
            (
                expl.player_names[j],
                expl.values[duels, j],
                _colour_source(expl)[:, j],
                _label_texts(expl, j, duels),
                row_categories(expl, j),
            )
        )
    if rest.size:
        # The collapsed row has no single feature difference: grey.
        name = style.other_players_label(int(rest.size))
        summed = expl.values[:, rest].sum(axis=1)
        nan_data = np.full(expl.n_duels, np.nan)
        rows.append((name, summed[duels], nan_data, np.full(duels.size, "", dtype=object), None))

    fig = go.Figure()
    n_rows = len(rows)
    known_template = (
        "<br>value: %{customdata[1]:.4g}"
        if _shows_context_values(expl)
        else f"<br>difference ({style.difference_phrase(expl)}): %{{customdata[1]:+.3g}}"
    )
    colorbar_drawn = False
    keys: list[str] = []
    for r, (name, x, all_data, label_texts, categories) in enumerate(rows):
        y_centre = float(n_rows - 1 - r)  # first (most important) row on top
        y = y_centre + _pile_offsets(x, rng)
        colour = row_colour_positions(all_data)[duels]
        head = f"duel %{{text}}<br>{name}: %{{x:+.3g}}"
        known = np.isfinite(colour)
        if categories is not None and not known.any():
            keys.append(_category_traces(fig, name, x, y, duels, duel_text + label_texts,
                                         categories[duels], head))  # fmt: skip
            continue
        bounds = _row_scale_bounds(all_data)
        if bounds is not None:  # say exactly where this row's colour scale is clipped
            head += (
                f"<br>colour scale: {style.format_number(bounds[0])} to "
                f"{style.format_number(bounds[1])} ({bounds[2]}), clipped beyond"
            )
        if known.any():
            fig.add_trace(
                _points(
                    name,
                    x[known],
                    y[known],
                    np.stack([duels[known], all_data[duels[known]]], axis=1),
                    duel_text[known] + label_texts[known],
                    hovertemplate=head + known_template,
                    marker={
                        "color": colour[known],
                        "colorscale": style.RED_BLUE_COLORSCALE,
                        "cmin": 0.0,
                        "cmax": 1.0,
                        "showscale": not colorbar_drawn,
                        "colorbar": _colorbar(expl),
                    },
                )
            )
            colorbar_drawn = True
        if (~known).any():
            unknown = ~known
            fig.add_trace(
                _points(
                    name,
                    x[unknown],
                    y[unknown],
                    duels[unknown][:, None],
                    duel_text[unknown] + label_texts[unknown],
                    hovertemplate=head,
                    marker={"color": style.NAN_GREY},
                )
            )

    style.apply_base_layout(fig, height=max(320, style.ROW_HEIGHT_PX * n_rows + 150))
    fig.update_xaxes(title_text=style.value_axis_title(expl))
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(n_rows)),
        ticktext=[name for name, *_ in rows][::-1],
        range=[-0.6, n_rows - 0.4],
        showgrid=True,
        gridcolor=style.GRID_GREY,
        griddash="dot",
    )
    fig.add_vline(x=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    notes = []
    if colorbar_drawn:
        notes.append("colour: each row's 5th-95th percentile (hover for its range), clipped")
    if duels.size < expl.n_duels:
        notes.append(f"showing {duels.size:,} of {expl.n_duels:,} duels per row (random sample)")
    if notes:
        style.add_note(fig, " · ".join(notes))
    if keys:
        fig.add_annotation(
            text="<br>".join(keys), xref="paper", yref="paper", x=0.0, y=0.0,
            xanchor="left", yanchor="top", yshift=-48, showarrow=False, align="left",
            font={"size": 11, "color": style.NOTE_GREY},
        )  # fmt: skip
        fig.update_layout(margin={"b": 70 + 16 * len(keys)})
    style.set_title(fig, title)
    return fig


def row_categories(expl: Explanation, player: int) -> np.ndarray | None:
    """(q,) the category a categorical row is coloured by, or None (numeric rows).

    Item groups: "same" / "different" (did both sides have the same category; in a
    multi-category group, the same set). Context groups: the context's category.
    """
    if expl.data_labels is None:
        return None
    numeric = _colour_source(expl)[:, player]
    if np.isfinite(numeric).any():
        return None
    labels = [str(v) if v is not None else "" for v in expl.data_labels[:, player]]
    if expl.what == "context":
        return np.array(labels, dtype=object)
    pairs = [label.split(" vs ", 1) if " vs " in label else None for label in labels]
    return np.array(
        ["?" if p is None else SAME if p[0] == p[1] else DIFFERENT for p in pairs], dtype=object
    )


SAME, DIFFERENT = "same", "different"
SAME_COLOUR, DIFFERENT_COLOUR = "#009E73", "#E69F00"  # Okabe-Ito: colour-blind safe
# Okabe-Ito again for context categories; categories beyond the palette are grey.
CATEGORY_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9",
                    "#F0E442", "#000000")  # fmt: skip


def category_colours(categories: np.ndarray) -> dict[str, str]:
    """Colour of each category of a row (same/different, or a context's categories)."""
    values = sorted({str(c) for c in categories.tolist()})
    if set(values) <= {SAME, DIFFERENT, "?"}:
        return {SAME: SAME_COLOUR, DIFFERENT: DIFFERENT_COLOUR, "?": style.NAN_GREY}
    return {
        v: CATEGORY_PALETTE[k] if k < len(CATEGORY_PALETTE) else style.NAN_GREY
        for k, v in enumerate(values)
    }


def _category_traces(
    fig: go.Figure,
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    duels: np.ndarray,
    text: np.ndarray,
    categories: np.ndarray,
    head: str,
) -> str:
    """One trace per category of a categorical row; returns the row's colour key."""
    colours = category_colours(categories)
    for category, colour in colours.items():
        hit = categories == category
        if not hit.any():
            continue
        fig.add_trace(
            _points(name, x[hit], y[hit], duels[hit][:, None], text[hit],
                    hovertemplate=head + f"<br>colour: {category}", marker={"color": colour})
        )  # fmt: skip
    shown = [c for c in colours if (categories == c).any()]
    entries = " ".join(f"<span style='color:{colours[c]}'>●</span> {c}" for c in shown)
    return f"{name}: {entries}"


def _row_scale_bounds(data: np.ndarray) -> tuple[float, float, str] | None:
    """(low, high, which percentiles) of the row's colour scale, as in
    :func:`row_colour_positions`; None when the row has no numbers."""
    finite = np.isfinite(data)
    if not finite.any():
        return None
    vals = data[finite]
    for lo, hi in ((5, 95), (1, 99)):
        vmin, vmax = np.percentile(vals, lo), np.percentile(vals, hi)
        if vmin != vmax:
            return float(vmin), float(vmax), f"{lo}th-{hi}th percentile"
    return float(np.min(vals)), float(np.max(vals)), "min-max"


def _sample_duels(n_duels: int, cap: int, rng: np.random.Generator) -> np.ndarray:
    """The same duels in every row (so rows stay comparable), in their original order."""
    if n_duels <= cap:
        return np.arange(n_duels)
    return np.sort(rng.choice(n_duels, size=cap, replace=False))


def _pile_offsets(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Vertical offsets that pile points by density, as shap's beeswarm does.

    Values are cut into ``N_BINS`` bins; within a bin (in random order) the k-th point
    goes to layer ceil(k/2) alternately above and below the centre, so a bin spreads
    symmetrically, in proportion to its count. The row's fullest bin fills the row.
    """
    n = x.size
    if n == 0:
        return np.zeros(0)
    lo, hi = float(np.min(x)), float(np.max(x))
    bins = np.round(N_BINS * (x - lo) / (hi - lo + 1e-8)).astype(np.int64)
    order = np.lexsort((rng.random(n), bins))
    sorted_bins = bins[order]
    starts = np.flatnonzero(np.r_[True, sorted_bins[1:] != sorted_bins[:-1]])
    counts = np.diff(np.r_[starts, n])
    layer = np.arange(n) - np.repeat(starts, counts)
    sorted_offsets = np.ceil(layer / 2) * np.where(layer % 2 == 1, 1.0, -1.0)
    offsets = np.empty(n)
    offsets[order] = sorted_offsets
    return offsets * (ROW_HALF_HEIGHT / np.max(offsets + 1))


def row_colour_positions(data: np.ndarray) -> np.ndarray:
    """Each duel's position on the red-blue scale: 0 = low, 1 = high, NaN = no value.

    As in shap, the scale spans the row's 5th-95th percentiles (falling back to 1st-99th,
    then min-max, when those coincide), so a few outliers do not wash out the rest.
    Computed on all duels, so sampling does not change a point's colour.
    """
    out = np.full(data.shape, np.nan)
    finite = np.isfinite(data)
    if not finite.any():
        return out
    vals = data[finite]
    vmin, vmax = np.percentile(vals, 5), np.percentile(vals, 95)
    if vmin == vmax:
        vmin, vmax = np.percentile(vals, 1), np.percentile(vals, 99)
        if vmin == vmax:
            vmin, vmax = float(np.min(vals)), float(np.max(vals))
    if vmax <= vmin:
        out[finite] = 0.5  # one value only: neither high nor low
        return out
    out[finite] = (np.clip(vals, vmin, vmax) - vmin) / (vmax - vmin)
    return out


def _shows_context_values(expl: Explanation) -> bool:
    return expl.what == "context" and expl.context_values is not None


def _colour_source(expl: Explanation) -> np.ndarray:
    """Item players: the difference between the sides. Context players: the context's
    own value, as in shap (a context is shared by both sides, so has no difference)."""
    return expl.context_values if _shows_context_values(expl) else expl.data


def _label_texts(expl: Explanation, player: int, duels: np.ndarray) -> np.ndarray:
    """'<br>188 vs 185', '<br>Fire vs Water', '<br>clay': the explanation's own words for
    what met what (empty when it has none)."""
    out = np.full(duels.size, "", dtype=object)
    if expl.data_labels is None:
        return out
    for k, i in enumerate(duels.tolist()):
        label = expl.data_labels[i][player]
        if label is not None and label != "":
            out[k] = f"<br>{label}"
    return out


def _colorbar(expl: Explanation) -> dict:
    text = (
        "Context value"
        if _shows_context_values(expl)
        else f"Feature difference ({style.difference_phrase(expl)})"
    )
    return {
        "title": {
            "text": text,
            "side": "right",
            "font": {"size": 12},
        },
        "tickmode": "array",
        "tickvals": [0.0, 1.0],
        "ticktext": ["Low", "High"],
        "ticks": "",
        "thickness": 10,
        "len": 1.0,
        "outlinewidth": 0,
    }


def _points(
    name: str,
    x: np.ndarray,
    y: np.ndarray,
    customdata: np.ndarray,
    text: np.ndarray,
    *,
    hovertemplate: str,
    marker: dict,
) -> go.Scattergl:
    return go.Scattergl(
        x=x,
        y=y,
        mode="markers",
        name=name,
        customdata=customdata,
        text=text,
        hovertemplate=hovertemplate + "<extra></extra>",
        marker={"size": MARKER_SIZE, "line": {"width": 0}, **marker},
        showlegend=False,
    )
