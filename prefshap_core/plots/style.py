"""Colours, wording and layout shared by every Pref-SHAP plot.

The look follows shap (red = pushes up / high, blue = pushes down / low, grey for
what has no single value), so users who know shap read our plots without a legend.
The wording follows the explanation's orientation, because a Pref-SHAP value only
means something once we say which side of the duel it favours.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation


def _lch_to_rgb(lightness: float, chroma: float, hue: float) -> tuple[int, int, int]:
    """CIE LCh(ab) (D65, hue in radians) to 8-bit sRGB, as skimage's lab2rgb does."""
    a, b = chroma * math.cos(hue), chroma * math.sin(hue)
    fy = (lightness + 16.0) / 116.0
    fx, fz = fy + a / 500.0, fy - b / 200.0

    def finv(t: float) -> float:
        return t**3 if t**3 > 0.008856 else (t - 16.0 / 116.0) / 7.787

    x, y, z = 0.95047 * finv(fx), finv(fy), 1.08883 * finv(fz)
    linear = (
        3.2406 * x - 1.5372 * y - 0.4986 * z,
        -0.9689 * x + 1.8758 * y + 0.0415 * z,
        0.0557 * x - 0.2040 * y + 1.0570 * z,
    )

    def gamma(c: float) -> int:
        c = 1.055 * c ** (1 / 2.4) - 0.055 if c > 0.0031308 else 12.92 * c
        return round(255 * min(max(c, 0.0), 1.0))

    r, g, b_ = (gamma(c) for c in linear)
    return r, g, b_


def _shap_red_blue(n_stops: int = 21) -> list[list[float | str]]:
    """shap's ``red_blue`` map: a straight path in LCh from blue to red whose lightness
    dips to 40 in the middle, so the midpoint is a dark purple rather than a washed-out
    grey and low/high stay distinguishable for colour-blind readers."""
    blue, red, mid_lightness = (54.0, 70.0, 4.6588), (54.0, 90.0, 0.35470565 + 2 * math.pi), 40.0
    scale: list[list[float | str]] = []
    for t in np.linspace(0.0, 1.0, n_stops):
        lightness = (
            blue[0] + (mid_lightness - blue[0]) * (2 * t)
            if t <= 0.5
            else mid_lightness + (red[0] - mid_lightness) * (2 * t - 1)
        )
        chroma = blue[1] + (red[1] - blue[1]) * t
        hue = blue[2] + (red[2] - blue[2]) * t
        r, g, b = _lch_to_rgb(lightness, chroma, hue)
        scale.append([float(t), f"rgb({r},{g},{b})"])
    return scale


RED = "#ff0051"  # shap's positive colour
BLUE = "#008bfb"  # shap's negative colour
NAN_GREY = "#777777"  # points with no single feature difference (groups)
AXIS_GREY = "#999999"
GRID_GREY = "#cccccc"
TEXT_COLOUR = "#333333"
NOTE_GREY = "#666666"
FONT_FAMILY = "Arial, Helvetica, sans-serif"
RED_BLUE_COLORSCALE = _shap_red_blue()
ROW_HEIGHT_PX = 34


# Okabe-Ito: colour-blind safe; levels beyond the palette are grey, as one entry.
CATEGORY_PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9",
                    "#F0E442", "#000000")  # fmt: skip


def category_levels(categories: np.ndarray) -> list[str]:
    """The row's levels, most frequent first (ties by name): the first get the
    palette's colours, so the levels that fill the row are the ones told apart."""
    names, counts = np.unique(np.asarray(categories).astype(str), return_counts=True)
    return [str(names[k]) for k in np.lexsort((names, -counts)).tolist()]


def category_colours(categories: np.ndarray) -> dict[str, str]:
    """Colour of each level of a row (grey beyond the palette's eight)."""
    return {
        level: CATEGORY_PALETTE[k] if k < len(CATEGORY_PALETTE) else NAN_GREY
        for k, level in enumerate(category_levels(categories))
    }


def colorscale_rgb(position: float) -> tuple[int, int, int]:
    """The red-blue colour at ``position`` in [0, 1] (linear between stops, as plotly)."""
    position = min(max(float(position), 0.0), 1.0)
    stops = [float(s[0]) for s in RED_BLUE_COLORSCALE]
    k = min(int(np.searchsorted(stops, position, side="right")), len(stops) - 1)
    lo, hi = RED_BLUE_COLORSCALE[max(k - 1, 0)], RED_BLUE_COLORSCALE[k]
    span = float(hi[0]) - float(lo[0])
    w = 0.0 if span == 0 else (position - float(lo[0])) / span
    a, b = _parse_rgb(str(lo[1])), _parse_rgb(str(hi[1]))
    r, g, bl = (round(x + (y - x) * w) for x, y in zip(a, b, strict=True))
    return r, g, bl


def _parse_rgb(text: str) -> tuple[int, int, int]:
    r, g, b = (int(v) for v in text[text.index("(") + 1 : text.index(")")].split(","))
    return r, g, b


# -- wording that depends on the view --------------------------------------------------
def item_label(expl: Explanation, item_id: str) -> str:
    """The display name of ``item_id`` (its id when the explanation carries no labels)."""
    for ids, labels in ((expl.left_ids, expl.left_labels), (expl.right_ids, expl.right_labels)):
        if labels is None:
            continue
        hits = np.flatnonzero(ids == item_id)
        if hits.size:
            return str(labels[hits[0]])
    return str(item_id)


def favoured_side(expl: Explanation) -> str:
    """Who a positive value favours in this view: 'the winner', an item, 'the left item'."""
    if expl.orientation == "winner":
        return "the winner"
    if expl.orientation.startswith("item:"):
        return item_label(expl, expl.orientation.removeprefix("item:"))
    if expl.orientation.startswith("side:"):  # a group of items, e.g. "Speed > 100"
        return expl.orientation.removeprefix("side:")
    return "the left item"


def difference_phrase(expl: Explanation) -> str:
    """What the colour (``data``) is a difference of, in this view."""
    if expl.orientation == "winner":
        return "winner - loser"
    if expl.orientation.startswith(("item:", "side:")):
        return f"{favoured_side(expl)} - opponent"
    return "left - right"


def value_axis_title(expl: Explanation, quantity: str = "Pref-SHAP value") -> str:
    return f"{quantity} (positive favours {favoured_side(expl)})"


def duel_side_labels(expl: Explanation) -> tuple[np.ndarray, np.ndarray]:
    """Left and right display names per duel (ids when no labels)."""
    left = expl.left_labels if expl.left_labels is not None else expl.left_ids
    right = expl.right_labels if expl.right_labels is not None else expl.right_ids
    return np.asarray(left).astype(str), np.asarray(right).astype(str)


def format_number(value: float, *, signed: bool = False) -> str:
    """Three significant figures, thousands separated; '+' on request (shap prints it)."""
    if not np.isfinite(value):
        return "nan"
    sign = "+" if signed else ""
    value = float(value) + 0.0  # -0.0 + 0.0 is 0.0: never print "-0"
    if abs(value) >= 1000:
        return f"{value:{sign},.0f}"
    return f"{value:{sign}.3g}"


def other_players_label(n_other: int, *, summed: bool = True) -> str:
    noun = "feature" if n_other == 1 else "features"
    return f"Sum of {n_other:,} other {noun}" if summed else f"{n_other:,} other {noun}"


# -- ranking ---------------------------------------------------------------------------
def rank_players(importance: np.ndarray, max_display: int) -> tuple[np.ndarray, np.ndarray]:
    """(shown, rest): players by decreasing importance, the top ``max_display - 1`` shown
    when the rest must be collapsed into one row (so the plot has ``max_display`` rows,
    as in shap), all of them otherwise. Ties keep the players' own order."""
    if max_display < 1:
        raise ValueError("max_display must be at least 1")
    order = np.argsort(-np.asarray(importance, dtype=np.float64), kind="stable")
    if order.size <= max_display:
        return order, order[:0]
    return order[: max_display - 1], order[max_display - 1 :]


# -- layout ----------------------------------------------------------------------------
def apply_base_layout(fig: go.Figure, *, height: int, width: int = 820) -> go.Figure:
    """White background, shap-like thin axes, one font: the same for every plot."""
    fig.update_layout(
        template="simple_white",
        width=width,
        height=height,
        font={"family": FONT_FAMILY, "size": 13, "color": TEXT_COLOUR},
        plot_bgcolor="white",
        paper_bgcolor="white",
        margin={"l": 10, "r": 20, "t": 40, "b": 60},
        showlegend=False,
        hoverlabel={"font": {"family": FONT_FAMILY}},
    )
    fig.update_xaxes(
        showline=True,
        linecolor=TEXT_COLOUR,
        ticks="outside",
        zeroline=False,
        automargin=True,
    )
    fig.update_yaxes(showline=False, ticks="", zeroline=False, automargin=True, ticklabelstandoff=6)
    return fig


# Characters per line of wrapped text: set so that the narrowest place a figure is
# shown (a dashboard column of a 1,000 px wide window) still holds the line.
TITLE_CHARS = 44
NARROW_TITLE_CHARS = 30  # figures in a dashboard's narrow column (the bar charts)
AXIS_TITLE_CHARS = 28
NARROW_AXIS_CHARS = 22  # the bar charts: ~200 px wide in a 1,000 px window
CHAR_PX = 7.0  # width of one 12-13 px Arial character, on average (digits ~6.7 px)
LINE_PX = 18


def wrap(text: str, width: int) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (plotly's
    ``<br>``), so long titles wrap instead of running off the figure."""
    lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    return "<br>".join(lines) if lines else text


def n_lines(text: str) -> int:
    return text.count("<br>") + 1


def value_column(
    fig: go.Figure,
    values: list[float],
    y: list,
    texts: list[str],
    *,
    xref: str = "paper",
    yref: str = "y",
) -> None:
    """Printed values as a column just right of the plot area, one per bar, red when
    >= 0 and blue below: beside the bars they ran into the tick labels (negative bars)
    or off narrow plots; here they never meet either. Widens the right margin to fit."""
    for v, yy, text in zip(values, y, texts, strict=True):
        fig.add_annotation(
            x=1.0, xref=xref, y=yy, yref=yref, text=text, showarrow=False, xanchor="left",
            xshift=8, font={"size": 12, "color": RED if v >= 0 else BLUE},
        )  # fmt: skip
    longest = max((len(t) for t in texts), default=0)
    right = max(fig.layout.margin.r or 0, round(CHAR_PX * longest + 20))
    fig.update_layout(margin={"r": right})


def padded_range(lo: float, hi: float) -> list[float]:
    """[lo, hi] widened to include 0, with a little room at both ends."""
    lo, hi = min(0.0, lo), max(0.0, hi)
    if hi == lo:  # every value 0: any symmetric window shows that
        return [-1.0, 1.0]
    margin = 0.04 * (hi - lo)
    return [lo - margin, hi + margin]


NOTE_CHARS = 30  # notes sit over the plot area, which in a narrow column is ~150 px
NOTE_LINE_PX = 14


def set_title(fig: go.Figure, title: str | None, *, chars: int = TITLE_CHARS) -> None:
    """A left-aligned title, wrapped at ``chars``; the top margin grows by its lines
    (above any notes already there)."""
    if title:
        text = wrap(title, chars)
        # plotly centres the title in the top margin ("y": "auto"); anchored to the top
        # instead, a title of several lines rises above the figure by its extra lines.
        top = (fig.layout.margin.t or 40) + LINE_PX * n_lines(text) + 40
        fig.update_layout(title={"text": text, "x": 0.0, "xanchor": "left"}, margin={"t": top})


def add_note(fig: go.Figure, text: str) -> None:
    """A small grey line (wrapped: several) above the plot area's right end (sampling
    notes and the like); the top margin grows by its extra lines."""
    text = wrap(text, NOTE_CHARS)
    fig.add_annotation(
        text=text,
        xref="paper",
        yref="paper",
        x=1.0,
        y=1.0,
        xanchor="right",
        yanchor="bottom",
        yshift=4,
        align="right",
        showarrow=False,
        font={"size": 11, "color": NOTE_GREY},
    )
    extra = NOTE_LINE_PX * (n_lines(text) - 1)
    if extra:
        fig.update_layout(margin={"t": (fig.layout.margin.t or 40) + extra})


def fit_height(fig: go.Figure, plot_px: float) -> None:
    """The figure's height: its margins as they stand plus a plot area of ``plot_px``."""
    margin = fig.layout.margin
    fig.update_layout(height=round((margin.t or 0) + (margin.b or 0) + plot_px))


def empty_figure(message: str, *, title: str | None = None) -> go.Figure:
    """A figure that says why there is nothing to show (an empty subset, say)."""
    fig = go.Figure()
    apply_base_layout(fig, height=260)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(
        text=message,
        xref="paper",
        yref="paper",
        x=0.5,
        y=0.5,
        showarrow=False,
        font={"size": 14, "color": NOTE_GREY},
    )
    set_title(fig, title)
    return fig
