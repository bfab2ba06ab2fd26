"""Which way each feature pushes: a direction statistic per feature, and its bars.

The signed mean Pref-SHAP value is no direction in the winner view: a feature that
helped winners who had more of it and hurt those who had less has values of both
signs, which cancel. The direction is how the value follows the feature: Spearman's
rank correlation of a player's value with its difference in the view's orientation
(winner - loser; a context player, shared by both sides, with its value). Near +1:
more of it favours the side; near -1: less does.

A categorical group has no difference: its direction is the mean value per level of
the explained side's category (the winner's style, say), one bar per level.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from scipy.stats import rankdata

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style
from prefshap_core.plots.labels import feature_label

SPEARMAN = "spearman"
LEVEL_MEAN = "mean value"
TABLE_COLUMNS = ["feature", "level", "statistic", "value", "n_duels"]


def spearman(values: np.ndarray, feature: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties) over the finite pairs;
    NaN with fewer than two pairs or a constant side."""
    values, feature = np.asarray(values, np.float64), np.asarray(feature, np.float64)
    keep = np.isfinite(values) & np.isfinite(feature)
    if keep.sum() < 2:
        return float("nan")
    a, b = rankdata(values[keep]), rankdata(feature[keep])
    a, b = a - a.mean(), b - b.mean()
    denominator = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / denominator) if denominator > 0 else float("nan")


def feature_numbers(expl: Explanation, player: int) -> np.ndarray | None:
    """(q,) what the player's value is correlated with: its difference in the view's
    orientation, or a context player's value; None for categorical groups."""
    if expl.what == "context":
        source = expl.context_values
        column = None if source is None else source[:, player]
    else:
        column = expl.data[:, player]
    if column is None or not np.isfinite(column).all():
        return None
    return column


def explained_levels(expl: Explanation, player: int) -> np.ndarray | None:
    """(q,) the explained side's category of a categorical group in each duel (the
    part before " vs " of its label: the favoured side comes first; a context's
    category as it is), None for numeric players or without labels."""
    if expl.data_labels is None or feature_numbers(expl, player) is not None:
        return None
    out = []
    for label in expl.data_labels[:, player].tolist():
        text = "" if label is None else str(label)
        out.append(text.split(" vs ", 1)[0] if expl.what != "context" else text)
    return np.array(out, dtype=object)


def difference_words(expl: Explanation) -> str:
    """What the rank correlation is taken with, in words."""
    if expl.what == "context":
        return "the context value"
    return f"the feature difference ({style.difference_phrase(expl)})"


def direction_table(expl: Explanation, *, max_display: int = 10) -> pd.DataFrame:
    """One row per numeric feature (its Spearman correlation) and per level of each
    categorical group (the mean value where the explained side had that level), for
    the ``max_display`` most important features (by mean |value|), top first.
    Levels: most frequent first."""
    if expl.n_duels == 0 or expl.n_players == 0:
        return pd.DataFrame(columns=TABLE_COLUMNS)
    # Every row is one feature: no "others" row (a sum has no direction).
    shown = np.argsort(-expl.mean_abs(), kind="stable")[:max_display]
    rows: list[dict] = []
    for j in shown.tolist():
        name = expl.player_names[j]
        numbers = feature_numbers(expl, j)
        if numbers is not None:
            rho = spearman(expl.values[:, j], numbers)
            rows.append(_row(name, "", SPEARMAN, rho, expl.n_duels))
            continue
        levels = explained_levels(expl, j)
        if levels is None:
            continue
        names, counts = np.unique(levels.astype(str), return_counts=True)
        for k in np.lexsort((names, -counts)).tolist():
            hit = levels == names[k]
            mean = float(expl.values[hit, j].mean())
            rows.append(_row(name, str(names[k]), LEVEL_MEAN, mean, int(hit.sum())))
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def _row(feature: str, level: str, statistic: str, value: float, n_duels: int) -> dict:
    return dict(zip(TABLE_COLUMNS, (feature, level, statistic, value, n_duels), strict=True))


def direction_bar(
    expl: Explanation,
    *,
    max_display: int = 10,
    title: str | None = None,
    imputed: Mapping[str, float] | None = None,
) -> go.Figure:
    """Bars of :func:`direction_table`: the rank correlations on a fixed -1..1 axis;
    below, each categorical group's level means, on its own (Pref-SHAP value) axis."""
    table = direction_table(expl, max_display=max_display)
    if table.empty:
        return style.empty_figure("No duels to show for this selection.", title=title)
    rho = table[table["statistic"] == SPEARMAN]
    levels = table[table["statistic"] == LEVEL_MEAN]
    # One panel for the correlations, one per categorical group (its levels as ticks:
    # "style = aggressive" would not fit a narrow column).
    groups = list(dict.fromkeys(levels["feature"]))
    panels = ([rho] if len(rho) else []) + [levels[levels["feature"] == g] for g in groups]
    favoured = style.favoured_side(expl)
    axis_titles = [
        style.wrap(
            f"Spearman ρ of value and {difference_words(expl)}"
            if panel is rho
            else f"mean Pref-SHAP value by {favoured}'s "
            f"{feature_label(str(panel['feature'].iloc[0]), imputed, html=False)}",
            style.NARROW_AXIS_CHARS,
        )
        for panel in panels
    ]
    title_px = [style.LINE_PX * style.n_lines(t) + 34 for t in axis_titles]  # ticks + title
    bars_px = style.ROW_HEIGHT_PX * len(table)
    gap = max(title_px[:-1], default=0) + 20
    plot_px = bars_px + gap * (len(panels) - 1)  # make_subplots' spacing is a share of it
    fig = make_subplots(
        rows=len(panels), cols=1, row_heights=[len(p) for p in panels],
        vertical_spacing=gap / plot_px if len(panels) > 1 else 0.0,
    )  # fmt: skip
    columns = []  # printed values, drawn once the base layout has set the margins
    for r, (panel, axis_title) in enumerate(zip(panels, axis_titles, strict=True), start=1):
        values = panel["value"].to_numpy(dtype=np.float64)
        shown = np.nan_to_num(values)
        is_rho = panel is rho
        ticks = (
            [feature_label(n, imputed) for n in panel["feature"]]
            if is_rho
            else [str(v) for v in panel["level"]]
        )
        texts = ["n/a" if not np.isfinite(v) else
                 style.format_number(v, signed=True) for v in values.tolist()]  # fmt: skip
        hover = (
            "%{y}: ρ = %{x:+.3f}<extra></extra>"
            if is_rho
            else "%{y}: mean value %{x:+.4g} over %{customdata[0]:,} duels<extra></extra>"
        )
        fig.add_trace(
            go.Bar(
                x=shown, y=ticks, orientation="h", width=0.7,
                marker={"color": [style.RED if v >= 0 else style.BLUE for v in shown.tolist()],
                        "line": {"width": 0}},
                customdata=panel[["n_duels"]].to_numpy(), hovertemplate=hover,
                name="Spearman ρ" if is_rho else "mean value per level",
            ),
            row=r, col=1,
        )  # fmt: skip
        columns.append((r, shown.tolist(), ticks, texts))
        lo, hi = (-1.0, 1.0) if is_rho else (float(np.min(shown)), float(np.max(shown)))
        fig.update_xaxes(title_text=axis_title, range=style.padded_range(lo, hi), row=r, col=1)
        fig.update_yaxes(categoryorder="array", categoryarray=ticks[::-1], row=r, col=1)
        fig.add_vline(x=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below",
                      row=r, col=1)  # fmt: skip
    style.apply_base_layout(fig, height=260)
    fig.update_layout(margin={"b": title_px[-1] + 10})
    for r, values, ticks, texts in columns:
        axis = "" if r == 1 else str(r)
        style.value_column(fig, values, ticks, texts, xref=f"x{axis} domain", yref=f"y{axis}")
    style.set_title(fig, title, chars=style.NARROW_TITLE_CHARS)
    style.fit_height(fig, max(plot_px, 120))
    return fig
