"""Bar plot of an Explanation: one bar per player, sorted, the rest collapsed.

``kind="mean_abs"``: mean |phi| over the duels, the global importance (orientation
does not matter). ``kind="mean"``: signed mean phi in the explanation's orientation,
for a chosen subset (say one item's losses), red when it favours the favoured side,
blue when against, with the standard error of the mean across duels as error bars.
Sampled explanations also show their coalition-sampling error on ``mean_abs`` bars.
With posterior sds (``ExplainOptions(uncertainty=True)``) the error bars add the
model's uncertainty: ``sqrt(se^2 + sd^2)``, ``sd`` the bound on the posterior sd of
the bar's mean (docs/method.md, "Uncertainty"; :func:`bar_table`). The hover says
which is which. :func:`bar_table` gives the bars' numbers (what the bar's CSV export
holds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style
from prefshap_core.plots.direction import direction_bar, direction_table
from prefshap_core.plots.labels import feature_label

BarKind = Literal["mean_abs", "mean", "direction"]


def bar(
    expl: Explanation,
    *,
    kind: BarKind = "mean_abs",
    max_display: int = 10,
    title: str | None = None,
    imputed: Mapping[str, float] | None = None,
) -> go.Figure:
    """Horizontal bars of mean |phi| or signed mean phi, largest on top, values printed;
    ``kind="direction"``: :func:`direction.direction_bar`. ``imputed``: the share of
    filled-in rows per feature (labels say so from 5 %)."""
    if kind not in ("mean_abs", "mean", "direction"):
        raise ValueError(f"kind must be 'mean_abs', 'mean' or 'direction', not {kind!r}")
    if expl.n_duels == 0 or expl.n_players == 0:
        return style.empty_figure("No duels to show for this selection.", title=title)
    if kind == "direction":
        return direction_bar(expl, max_display=max_display, title=title, imputed=imputed)

    table = bar_table(expl, kind=kind, max_display=max_display)
    names = table["feature"].tolist()
    values = table["value"].to_numpy()
    se = table["standard_error"].to_numpy()
    sd = table["posterior_sd_bound"].to_numpy() if "posterior_sd_bound" in table else None
    errors = se if sd is None else np.hypot(se, sd)
    show_errors = kind == "mean" or bool(np.any(errors > 0))

    n_rows = values.size
    y = np.arange(n_rows)[::-1].astype(float)  # first (largest) on top
    colours = [style.RED if v >= 0 else style.BLUE for v in values.tolist()]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=y,
            orientation="h",
            marker={"color": colours, "line": {"width": 0}},
            error_x=(
                {"type": "data", "array": errors, "color": style.TEXT_COLOUR, "thickness": 1}
                if show_errors
                else None
            ),
            customdata=np.stack([errors, se, se if sd is None else sd], axis=1),
            hovertemplate="%{text}: %{x:.4g}" + _error_hover(show_errors, sd is not None),
            text=names,
            textposition="none",
            width=0.7,
        )
    )

    n_text = f"{expl.n_duels:,} duel{'s' if expl.n_duels != 1 else ''}"
    axis_title = style.wrap(
        f"mean |Pref-SHAP value| over {n_text}"
        if kind == "mean_abs"
        else style.value_axis_title(expl, f"mean Pref-SHAP value over {n_text}"),
        style.NARROW_AXIS_CHARS,
    )
    extra = style.LINE_PX * (style.n_lines(axis_title) - 1)
    style.apply_base_layout(fig, height=max(260, style.ROW_HEIGHT_PX * n_rows + 140) + extra)
    fig.update_xaxes(title_text=axis_title, range=_padded_range(values, errors))
    fig.update_yaxes(
        tickmode="array", tickvals=y.tolist(), ticktext=[feature_label(n, imputed) for n in names],
        range=[-0.6, n_rows - 0.4],
    )  # fmt: skip
    _print_values(fig, values, errors, y, signed=kind == "mean")  # after the base margins
    if kind == "mean":
        fig.add_vline(x=0.0, line={"color": style.AXIS_GREY, "width": 1}, layer="below")
    style.set_title(fig, title, chars=style.NARROW_TITLE_CHARS)
    return fig


def bar_table(
    expl: Explanation, *, kind: BarKind = "mean_abs", max_display: int = 10
) -> pd.DataFrame:
    """The bars' numbers, top bar first: feature, value, standard_error, n_duels,
    and ``posterior_sd_bound`` after ``standard_error`` when the explanation has sds.

    ``mean``: the standard error of the mean across duels. ``mean_abs``: the
    coalition-sampling error of the mean, sqrt(sum_i se_i^2) / n (0 when exact), so a
    sampled explanation says how sure its importances are. ``posterior_sd_bound``:
    the mean of the per-duel posterior sds, which bounds the posterior sd of the bar's
    mean (the values are correlated through the coefficients, so their sds add at
    most; for ``mean_abs`` to first order). ``direction``:
    :func:`direction.direction_table` (feature, level, statistic, value, n_duels).
    """
    if kind == "direction":
        return direction_table(expl, max_display=max_display)
    if expl.n_duels == 0 or expl.n_players == 0:
        return pd.DataFrame(columns=["feature", "value", "standard_error", "n_duels"])
    per_duel = np.abs(expl.values) if kind == "mean_abs" else expl.values
    se = expl.standard_errors if expl.standard_errors is not None else np.zeros_like(per_duel)
    means = per_duel.mean(axis=0)
    shown, rest = style.rank_players(np.abs(means), max_display)
    names = [expl.player_names[j] for j in shown.tolist()]
    columns = [per_duel[:, j] for j in shown.tolist()]
    se_columns = [se[:, j] for j in shown.tolist()]
    sd = expl.sd
    sd_columns = [] if sd is None else [sd[:, j] for j in shown.tolist()]
    if rest.size:
        # The mean of the rest's per-duel sum is the sum of their means, and its
        # standard error must come from that per-duel sum (the rest are correlated).
        names.append(style.other_players_label(int(rest.size)))
        columns.append(per_duel[:, rest].sum(axis=1))
        se_columns.append(np.sqrt((se[:, rest] ** 2).sum(axis=1)))
        if sd is not None:
            sd_columns.append(sd[:, rest].sum(axis=1))
    stacked = np.stack(columns, axis=1)
    if kind == "mean":
        errors = _standard_error_of_mean(stacked)
    else:
        errors = np.sqrt((np.stack(se_columns, axis=1) ** 2).sum(axis=0)) / expl.n_duels
    table = {"feature": names, "value": stacked.mean(axis=0), "standard_error": errors}
    if sd is not None:
        table["posterior_sd_bound"] = np.stack(sd_columns, axis=1).mean(axis=0)
    return pd.DataFrame({**table, "n_duels": expl.n_duels})


def _error_hover(show_errors: bool, with_sd: bool) -> str:
    if not show_errors:
        return "<extra></extra>"
    if not with_sd:
        return " ± %{customdata[0]:.2g} (s.e.)<extra></extra>"
    return (" ± %{customdata[0]:.2g} (s.e. %{customdata[1]:.2g},"
            " posterior sd ≤ %{customdata[2]:.2g})<extra></extra>")  # fmt: skip


def _standard_error_of_mean(columns: np.ndarray) -> np.ndarray:
    n = columns.shape[0]
    if n < 2:
        return np.zeros(columns.shape[1])
    return columns.std(axis=0, ddof=1) / np.sqrt(n)


def _print_values(
    fig: go.Figure, values: np.ndarray, errors: np.ndarray, y: np.ndarray, *, signed: bool
) -> None:
    """Each bar's value in a column right of the plot area (``style.value_column``)."""
    del errors  # the column is beside the plot, whatever each bar's error bar reaches
    texts = [style.format_number(v, signed=signed) for v in values.tolist()]
    style.value_column(fig, values.tolist(), y.tolist(), texts)


def _padded_range(values: np.ndarray, errors: np.ndarray) -> list[float]:
    """The bars and their error bars, with a little room at both ends."""
    return style.padded_range(float(np.min(values - errors)), float(np.max(values + errors)))
