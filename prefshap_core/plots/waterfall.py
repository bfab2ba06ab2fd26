"""Waterfall of one duel: how the players move g from the base value to the output.

Read bottom to top, as in shap: the path starts at the item explanation's base value
(0 for GPM/UPM items), each item player moves it by its Pref-SHAP value (smallest
effects first, the largest on top, the rest collapsed into "N other features") up to
the items' output. For a C-GPM the context explanation carries on from there (its
base value is the items' output, the context-averaged preference) up to the full
model's g. Positive moves towards the duel's left item, which is the side the
explanation is oriented to (orient it to the winner or to an item first, if wanted).

A side-aware explanation (``what="sides"``) is drawn split by side: first the left
item's own features, then the right item's, each a section named after its item
(labels show that side's own value), then the context as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import style


@dataclass(frozen=True)
class _Step:
    label: str
    value: float
    hover: str
    standard_error: float = 0.0  # sqrt(se^2 + sd^2): sampling and posterior (0: neither)


def waterfall(
    item_expl: Explanation,
    context_expl: Explanation | None = None,
    *,
    index: int = 0,
    max_display: int = 10,
    probability_note: str = "",
) -> go.Figure:
    """Waterfall of duel ``index``: item contributions, then (C-GPM) context ones.

    The title's probability is sigmoid of the path's end, as a percentage with one
    decimal (how the dashboard prints every probability); ``probability_note`` says
    which g it is (e.g. ``"averaged over the observed contexts"``)."""
    _check_index(item_expl, index)
    if context_expl is not None:
        _check_same_duel(item_expl, context_expl, index)

    left, right = (labels[index] for labels in style.duel_side_labels(item_expl))
    sections = _side_sections(item_expl, left, right) if item_expl.what == "sides" else []
    sections = sections or [("items", item_expl)]
    if context_expl is not None:
        sections.append(("context", context_expl))

    fig = go.Figure()
    start = float(item_expl.base_values[index])
    row = 0
    tick_vals: list[float] = []
    tick_text: list[str] = []
    section_bounds: list[tuple[str, int, int]] = []
    path_points = [start]
    for section, expl in sections:
        steps = _steps(expl, index, max_display)
        bases = start + np.r_[0.0, np.cumsum([s.value for s in steps])[:-1]]
        ys = np.arange(row, row + len(steps), dtype=float)
        values = np.array([s.value for s in steps])
        errors = np.array([s.standard_error for s in steps])
        fig.add_trace(
            go.Bar(
                name=section,
                x=values,
                base=bases,
                y=ys,
                orientation="h",
                width=0.7,
                marker={
                    "color": [style.RED if v >= 0 else style.BLUE for v in values.tolist()],
                    "line": {"width": 0},
                },
                hovertext=[s.hover for s in steps],
                hoverinfo="text",
                showlegend=False,
                # Sampling se and / or posterior sd (combined), at the bars' ends.
                error_x=(
                    {"type": "data", "array": errors, "color": style.TEXT_COLOUR, "thickness": 1}
                    if np.any(errors > 0)
                    else None
                ),
            )
        )
        for b, v, yy in zip(bases.tolist(), values.tolist(), ys.tolist(), strict=True):
            _print_step(fig, b, v, yy)
            path_points.append(b + v)
        tick_vals += ys.tolist()
        tick_text += [s.label for s in steps]
        section_bounds.append((section, row, row + len(steps) - 1))
        row += len(steps)
        start = float(bases[-1] + values[-1]) if steps else start

    base = float(item_expl.base_values[index])
    final_expl = context_expl if context_expl is not None else item_expl
    output = float(final_expl.outputs[index])

    style.apply_base_layout(fig, height=max(320, style.ROW_HEIGHT_PX * row + 190))
    longest = max(len(name) for name, _ in sections)
    margin_right = min(220, 20 + 8 * longest) if len(sections) > 1 else 20
    fig.update_layout(margin={"t": 125, "b": 70, "r": margin_right})
    fig.update_xaxes(title_text=f"g (positive favours {left})", range=_padded_range(path_points))
    fig.update_yaxes(
        tickmode="array",
        tickvals=tick_vals,
        ticktext=tick_text,
        range=[-0.6, row - 0.4],
        showgrid=True,
        gridcolor=style.GRID_GREY,
        griddash="dot",
    )
    _mark_level(fig, base, f"base value = {style.format_number(base)}", at_top=False)
    # Two labels at the top (g, and for a C-GPM the items' output) sit on two lines:
    # the two levels are often close, and their labels must not overlap.
    _mark_level(fig, output, f"g = {style.format_number(output)}", at_top=True, line=1)
    if context_expl is not None:
        items_out = float(item_expl.outputs[index])
        text = f"items' output = {style.format_number(items_out)}"
        _mark_level(fig, items_out, text, at_top=True, line=0)
    if len(sections) > 1:
        _separate_sections(fig, section_bounds)
    title = _title(item_expl, index, left, right, output, probability_note)
    fig.update_layout(title={"text": title, "x": 0.0})
    return fig


def sigmoid(g: float) -> float:
    """P(left wins) from the preference g, without overflow for large |g|."""
    if g >= 0:
        return 1.0 / (1.0 + math.exp(-g))
    e = math.exp(g)
    return e / (1.0 + e)


def _check_index(expl: Explanation, index: int) -> None:
    if not -expl.n_duels <= index < expl.n_duels:
        raise IndexError(f"duel index {index} out of range for {expl.n_duels} duels")


def _check_same_duel(items: Explanation, context: Explanation, index: int) -> None:
    """The two parts must describe the same duel, seen from the same side, and chain."""
    _check_index(context, index)
    if str(items.duel_ids[index]) != str(context.duel_ids[index]):
        raise ValueError(
            f"item and context explanations describe different duels at index {index}: "
            f"{items.duel_ids[index]} and {context.duel_ids[index]}"
        )
    if str(items.left_ids[index]) != str(context.left_ids[index]):
        raise ValueError("item and context explanations are oriented to different sides")
    items_out, context_base = float(items.outputs[index]), float(context.base_values[index])
    if not np.isclose(context_base, items_out, rtol=1e-4, atol=1e-6):
        raise ValueError(
            f"the context base value ({context_base:.6g}) should equal the items' output "
            f"({items_out:.6g}): the context-averaged preference of the same model"
        )


def error_bar_note(sampled: bool, with_sd: bool, n_coalitions: int = 0) -> str:
    """What a waterfall's error bars are, in one sentence."""
    what = f"Sampled values ({n_coalitions:,} coalitions)" if sampled else "Exact values"
    if sampled and with_sd:
        return (
            f"{what}: the error bars combine their sampling standard error and the "
            "model's posterior sd, sqrt(se² + sd²) (hover for each)."
        )
    if with_sd:
        return f"{what}: the error bars are the model's posterior sd (model uncertainty)."
    return f"{what}: the error bars are their sampling standard errors."


def _errors(expl: Explanation, index: int) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(se, sd) of duel ``index``: the sampling error (None: exact) and the posterior sd
    (None: no uncertainty asked for), per player."""
    se = None if expl.standard_errors is None else expl.standard_errors[index]
    if se is not None and not np.any(se > 0):
        se = None
    sd = None if expl.sd is None else expl.sd[index]
    return se, sd


def _error_text(se: float | None, sd: float | None, bound: bool = False) -> str:
    """' ± 0.1 (s.e.)', ' ± 0.1 (posterior sd)' or the combined ' ± (s.e. a, sd b)'."""
    at_most = "at most " if bound else ""
    if se is not None and sd is not None:
        total = float(np.sqrt(se**2 + sd**2))
        return (f" ± {at_most}{style.format_number(total)} (sampling s.e. "
                f"{style.format_number(se)}, posterior sd {style.format_number(sd)})")  # fmt: skip
    if sd is not None:
        return f" ± {at_most}{style.format_number(sd)} (posterior sd)"
    if se is not None:
        return f" ± {style.format_number(se)} (s.e.)"
    return ""


def _steps(expl: Explanation, index: int, max_display: int) -> list[_Step]:
    """The section's bars in path order: collapsed rest first, then by increasing |phi|.

    A bar's error is sqrt(se^2 + sd^2): the sampling error of a sampled value and the
    model's posterior sd are independent. The collapsed rest's sd is bounded by the sum
    of its sds (the values' errors are correlated through the coefficients)."""
    phi = expl.values[index]
    se, sd = _errors(expl, index)
    shown, rest = style.rank_players(np.abs(phi), max_display)
    steps = []
    if rest.size:
        names = ", ".join(expl.player_names[j] for j in rest.tolist())
        value = float(phi[rest].sum())
        se_rest = None if se is None else float(np.sqrt(np.sum(se[rest] ** 2)))
        sd_rest = None if sd is None else float(np.sum(sd[rest]))
        steps.append(
            _Step(
                style.other_players_label(int(rest.size), summed=False),
                value,
                f"{rest.size} other features ({names}): {style.format_number(value, signed=True)}"
                + _error_text(se_rest, sd_rest, bound=sd_rest is not None),
                float(np.hypot(se_rest or 0.0, sd_rest or 0.0)),
            )
        )
    for j in shown.tolist()[::-1]:
        label = _player_label(expl, index, j)
        se_j = None if se is None else float(se[j])
        sd_j = None if sd is None else float(sd[j])
        hover = f"{label}: {style.format_number(phi[j], signed=True)}" + _error_text(se_j, sd_j)
        steps.append(_Step(label, float(phi[j]), hover, float(np.hypot(se_j or 0.0, sd_j or 0.0))))
    return steps


def _player_label(expl: Explanation, index: int, player: int) -> str:
    """What the player was in this duel: 'Height (188 vs 185)' or 'Type (Fire vs Water)'
    for items (the explanation's labels; 'Speed (Δ +12)' without them), 'surface = clay'
    for context (shared by both sides)."""
    name = expl.player_names[player]
    label = None if expl.data_labels is None else expl.data_labels[index][player]
    if expl.what == "context":
        if label is not None and label != "":
            return f"{name} = {label}"
        raw = expl.context_values if expl.context_values is not None else expl.data
        value = float(raw[index, player])
        return f"{name} = {style.format_number(value)}" if np.isfinite(value) else name
    if label is not None and label != "":
        return f"{name} ({label})"
    d = float(expl.data[index, player])
    return f"{name} (Δ {style.format_number(d, signed=True)})" if np.isfinite(d) else name


def _side_sections(expl: Explanation, left: str, right: str) -> list[tuple[str, Explanation]]:
    """A side-aware explanation as two item-like parts: left's groups, then right's.

    Each part keeps the plain group names, and its labels keep that side's own value
    ('Height (188)' rather than '188 vs 185').
    """
    p = expl.n_players // 2
    names = [name.split(":", 1)[-1] for name in expl.player_names[:p]]
    parts = []
    for k, (side, columns) in enumerate(((left, slice(0, p)), (right, slice(p, 2 * p)))):
        labels = None
        if expl.data_labels is not None:
            labels = np.array(
                [[_own_value(label, k) for label in row] for row in expl.data_labels[:, columns]],
                dtype=object,
            )
        errors = None if expl.standard_errors is None else expl.standard_errors[:, columns]
        part = replace(
            expl,
            values=expl.values[:, columns],
            data=np.full((expl.n_duels, p), np.nan),
            player_names=tuple(names),
            standard_errors=errors,
            data_labels=labels,
            what="items",
        )
        parts.append((f"{side}'s features", part))
    return parts


def _own_value(label: object, side: int) -> object:
    """'188 vs 185' -> '188' for the left side, '185' for the right."""
    if isinstance(label, str) and " vs " in label:
        return label.split(" vs ", 1)[side]
    return label


def _print_step(fig: go.Figure, start: float, value: float, y: float) -> None:
    """The value at the bar's far end, outside it, like shap's waterfall."""
    positive = value >= 0
    fig.add_annotation(
        x=start + value,
        y=y,
        text=style.format_number(value, signed=True),
        showarrow=False,
        xanchor="left" if positive else "right",
        xshift=4 if positive else -4,
        font={"size": 12, "color": style.RED if positive else style.BLUE},
    )


def _mark_level(fig: go.Figure, x: float, text: str, *, at_top: bool, line: int = 0) -> None:
    fig.add_vline(x=x, line={"color": style.AXIS_GREY, "width": 1, "dash": "dash"}, layer="below")
    fig.add_annotation(
        x=x,
        xref="x",
        yref="paper",
        y=1.0 if at_top else 0.0,
        yanchor="bottom" if at_top else "top",
        yshift=2 + 15 * line if at_top else -28,
        text=text,
        showarrow=False,
        font={"size": 11, "color": style.NOTE_GREY},
    )


def _padded_range(points: list[float]) -> list[float]:
    """Room on both sides for the values printed beyond the bars' ends."""
    lo, hi = min(points), max(points)
    pad = 0.14 * ((hi - lo) or 1.0)
    return [lo - pad, hi + pad]


def _separate_sections(fig: go.Figure, bounds: list[tuple[str, int, int]]) -> None:
    """A line between consecutive sections (items or each side, then context); each
    part named in the right margin, where no bar or value can hide it."""
    for _, _, hi in bounds[:-1]:
        fig.add_hline(y=hi + 0.5, line={"color": style.AXIS_GREY, "width": 1})
    for section, lo, hi in bounds:
        fig.add_annotation(
            xref="paper",
            x=1.0,
            xanchor="left",
            xshift=6,
            y=(lo + hi) / 2,
            text=section,
            showarrow=False,
            font={"size": 12, "color": style.NOTE_GREY},
        )


def _title(
    expl: Explanation, index: int, left: str, right: str, output: float, note: str = ""
) -> str:
    p_left = f"{100.0 * sigmoid(output):.1f} %"
    ids = f"{expl.left_ids[index]} vs {expl.right_ids[index]}"
    winner = int(expl.winners[index])
    outcome = {1: f" · winner: {left}", -1: f" · winner: {right}"}.get(winner, "")
    # The probability alone on the first line, so a narrow page never cuts it; the
    # pair, which g it is (the note) and the duel on the second.
    note = f" · P {note}" if note else ""
    return (
        f"<b>P({left} wins) = {p_left}</b>"
        f"<br><sup>{left} (left) vs {right} (right){note}</sup>"
        f"<br><sup>duel {expl.duel_ids[index]} · ids {ids}{outcome}</sup>"
    )
