"""Beehive (shap's beeswarm) of an Explanation: every duel a point, one row per player.

Reading it: x is the Pref-SHAP value in the explanation's orientation (pass
``expl.oriented_to_winner()`` for the paper's figures, so positive = helped the
winner); colour is the player's difference between the two sides in that same
orientation (red = the favoured side had more of it), or for context players the
context's value itself (red = high), as shap colours feature values. A categorical
row is coloured by the favoured side's category (a context's own category), one
colour per level, with its legend beside the plot. Points pile up where values are
dense, so the row's shape is the value distribution. Rows are at least
``style.ROW_HEIGHT_PX`` tall whatever the legend needs.

Each point's ``customdata[0]`` is its duel's row index in ``expl`` (so a click handler
can open that duel); ``customdata[1]``, where present, its feature difference.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style
from prefshap_core.plots.labels import feature_label

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
    imputed: Mapping[str, float] | None = None,
) -> go.Figure:
    """Beeswarm of ``expl``: rows by mean |phi| (largest on top), WebGL points.
    ``imputed``: the share of filled-in rows per feature (labels say so from 5 %)."""
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
    legend_rows: list[int] = []  # legend entries of each categorical row
    for r, (name, x, all_data, label_texts, categories) in enumerate(rows):
        y_centre = float(n_rows - 1 - r)  # first (most important) row on top
        y = y_centre + _pile_offsets(x, rng)
        colour = row_colour_positions(all_data)[duels]
        head = f"duel %{{text}}<br>{name}: %{{x:+.3g}}"
        known = np.isfinite(colour)
        if categories is not None and not known.any():
            legend_rows.append(_category_traces(fig, name, _legend_title(expl, name), x, y,
                                                duels, duel_text + label_texts,
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

    x_title = style.wrap(style.value_axis_title(expl), style.AXIS_TITLE_CHARS)
    bottom = 44 + style.LINE_PX * style.n_lines(x_title)
    # Legend: a group title and a line per level; the colour bar, when there is one,
    # takes the upper part of the right side (its title on top) and the legend below.
    legend_px = sum(LEGEND_LINE_PX * (n + 1) + LEGEND_GAP_PX for n in legend_rows)
    colorbar_title = style.wrap(_colorbar(expl)["title"]["text"], COLORBAR_TITLE_CHARS)
    colorbar_px = COLORBAR_BAR_PX + LEGEND_LINE_PX * style.n_lines(colorbar_title)
    stacked = colorbar_drawn and bool(legend_rows)
    plot_px = max(style.ROW_HEIGHT_PX * n_rows, 170,
                  legend_px + (colorbar_px + 20 if stacked else 0) + 10)  # fmt: skip
    share = (colorbar_px + 20) / plot_px if stacked else 0.0
    style.apply_base_layout(fig, height=plot_px + bottom)
    fig.update_layout(margin={"b": bottom})
    fig.update_xaxes(title_text=x_title)
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(n_rows)),
        ticktext=[feature_label(name, imputed) for name, *_ in rows][::-1],
        range=[-0.6, n_rows - 0.4],
        showgrid=True,
        gridcolor=style.GRID_GREY,
        griddash="dot",
    )
    fig.add_vline(x=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    notes = []
    if colorbar_drawn:
        notes.append("colour: each row's 5th-95th percentile, clipped (hover for its range)")
    if duels.size < expl.n_duels:
        notes.append(f"showing {duels.size:,} of {expl.n_duels:,} duels per row (random sample)")
    if notes:
        style.add_note(fig, " · ".join(notes))
    if legend_rows:
        fig.update_layout(
            showlegend=True,
            legend={"x": 1.02, "xanchor": "left", "y": 1.0 - share, "yanchor": "top",
                    "tracegroupgap": LEGEND_GAP_PX, "font": {"size": 11},
                    "groupclick": "toggleitem", "itemsizing": "constant"},
        )  # fmt: skip
        for trace in fig.data:
            if trace.marker.showscale:  # the one colour bar: above the legend, titled on top
                trace.marker.colorbar.update(
                    len=colorbar_px, lenmode="pixels", y=1.0, yanchor="top",
                    title={"side": "top", "text": colorbar_title},
                )  # fmt: skip
    style.set_title(fig, title)
    style.fit_height(fig, plot_px)  # rows keep their height under a title and notes
    return fig


LEGEND_LINE_PX = 19
LEGEND_GAP_PX = 8
COLORBAR_BAR_PX = 80  # the colour bar's own length when a legend is stacked under it
COLORBAR_TITLE_CHARS = 14


def _legend_title(expl: Explanation, name: str) -> str:
    """Whose category colours the row: the favoured side's (a context is shared)."""
    return name if expl.what == "context" else f"{name} of {style.favoured_side(expl)}"


def row_categories(expl: Explanation, player: int) -> np.ndarray | None:
    """(q,) the category a categorical row is coloured by, or None (numeric rows).

    Item groups: the favoured (left, in the explanation's orientation) side's category,
    the part of "Fire vs Water" before " vs " (in a multi-category group, its set,
    "Fire/Flying"), so a row shows which categories win. Context groups: the
    context's category.
    """
    if expl.data_labels is None:
        return None
    numeric = _colour_source(expl)[:, player]
    if np.isfinite(numeric).any():
        return None
    labels = [str(v) if v is not None else "" for v in expl.data_labels[:, player]]
    if expl.what == "context":
        return np.array(labels, dtype=object)
    return np.array([label.split(" vs ", 1)[0] for label in labels], dtype=object)


def _category_traces(
    fig: go.Figure,
    name: str,
    legend_title: str,
    x: np.ndarray,
    y: np.ndarray,
    duels: np.ndarray,
    text: np.ndarray,
    categories: np.ndarray,
    head: str,
) -> int:
    """One trace per level of a categorical row (the levels beyond the palette: one grey
    trace), each a legend entry under the row's name; returns the number of entries."""
    colours = style.category_colours(categories)
    coloured = [c for c in colours if colours[c] != style.NAN_GREY]
    rest = [c for c in colours if colours[c] == style.NAN_GREY]
    groups = [(c, categories == c, colours[c]) for c in coloured]
    if rest:
        others = f"{len(rest)} other level{'s' if len(rest) > 1 else ''}"
        groups.append((others, np.isin(categories, rest), style.NAN_GREY))
    for level, hit, colour in groups:
        trace = _points(name, x[hit], y[hit], duels[hit][:, None], text[hit],
                        hovertemplate=head + f"<br>colour: {legend_title} = {level}",
                        marker={"color": colour})  # fmt: skip
        trace.update(name=level, showlegend=True, legendgroup=name,
                     legendgrouptitle={"text": legend_title})  # fmt: skip
        fig.add_trace(trace)
    return len(groups)


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
