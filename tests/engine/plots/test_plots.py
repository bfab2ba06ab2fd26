"""Beehive, bar and waterfall figures: their structure checked against direct computation."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import bar, beehive, style, waterfall
from prefshap_core.plots.beehive import ROW_HALF_HEIGHT, _pile_offsets
from prefshap_core.plots.waterfall import sigmoid
from tests.engine.plots.figures import make_explanation, rows_of


def one_line(text: str) -> str:
    """A wrapped title as one line."""
    return text.replace("<br>", " ")


def tick_names_top_down(fig: go.Figure) -> list[str]:
    pairs = sorted(
        zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext, strict=True), reverse=True
    )
    return [name for _, name in pairs]


# -- beehive ---------------------------------------------------------------------------
def test_beehive_traces_are_webgl_and_rows_follow_mean_abs_phi() -> None:
    expl = make_explanation(p=6, seed=1)
    # Shuffle the columns so the importance order is not the column order.
    perm = np.array([3, 0, 5, 1, 4, 2])
    expl = Explanation(
        **{
            **expl.__dict__,
            "values": expl.values[:, perm],
            "data": expl.data[:, perm],
            "data_labels": expl.data_labels[:, perm],
            "player_names": tuple(expl.player_names[j] for j in perm),
        }
    )
    fig = beehive(expl)
    assert fig.data and all(isinstance(tr, go.Scattergl) for tr in fig.data)
    expected = [expl.player_names[j] for j in np.argsort(-np.abs(expl.values).mean(axis=0))]
    assert tick_names_top_down(fig) == expected
    rows = rows_of(fig)
    for j, name in enumerate(expl.player_names):
        row = rows[name]
        np.testing.assert_allclose(row["x"], expl.values[row["duel"], j])
        assert sorted(row["duel"].tolist()) == list(range(expl.n_duels))


def test_beehive_sum_row_holds_the_sum_of_the_rest() -> None:
    expl = make_explanation(p=8, seed=2)
    fig = beehive(expl, max_display=4)
    order = np.argsort(-np.abs(expl.values).mean(axis=0))
    shown, rest = order[:3], order[3:]
    names = tick_names_top_down(fig)
    assert names == [*(expl.player_names[j] for j in shown), "Sum of 5 other features"]
    row = rows_of(fig)["Sum of 5 other features"]
    np.testing.assert_allclose(row["x"], expl.values[row["duel"]][:, rest].sum(axis=1))
    assert row["grey"].all()


def test_beehive_without_extra_players_has_no_sum_row() -> None:
    expl = make_explanation(p=5)
    names = tick_names_top_down(beehive(expl, max_display=5))
    assert len(names) == 5 and not any(n.startswith("Sum of") for n in names)


def test_beehive_samples_the_same_duels_in_every_row_with_a_note() -> None:
    expl = make_explanation(q=2500, p=4, seed=3)
    fig = beehive(expl, max_points_per_row=700, seed=5)
    rows = rows_of(fig)
    first = np.sort(rows["f0"]["duel"])
    for row in rows.values():
        assert row["x"].size == 700
        np.testing.assert_array_equal(np.sort(row["duel"]), first)
    assert np.unique(first).size == 700
    notes = [a.text.replace("<br>", " ") for a in fig.layout.annotations]
    assert any("showing 700 of 2,500 duels per row" in t for t in notes)
    again = rows_of(beehive(expl, max_points_per_row=700, seed=5))
    np.testing.assert_array_equal(again["f0"]["duel"], rows["f0"]["duel"])
    np.testing.assert_array_equal(again["f0"]["y"], rows["f0"]["y"])


def test_beehive_without_sampling_has_no_note() -> None:
    fig = beehive(make_explanation(q=300), max_points_per_row=300)
    assert not any("showing" in (a.text or "") for a in fig.layout.annotations)


def test_beehive_colour_is_redder_for_higher_difference_and_categorical_for_groups() -> None:
    expl = make_explanation(q=600, p=4, seed=4, group_player=1)
    fig = beehive(expl)
    coloured = [tr for tr in fig.data if tr.name == "f0" and tr.marker.color is not None]
    (trace,) = [tr for tr in coloured if not isinstance(tr.marker.color, str)]
    colour = np.asarray(trace.marker.color, dtype=float)
    duels = np.asarray(trace.customdata)[:, 0].astype(int)
    data = expl.data[duels, 0]
    np.testing.assert_array_equal(np.asarray(trace.customdata)[:, 1], data)
    by_data = np.argsort(data, kind="stable")
    assert np.all(np.diff(colour[by_data]) >= -1e-12)  # never bluer for a larger difference
    # shap's normalisation: the 5th-95th percentiles span the scale, beyond is clipped.
    lo, hi = np.percentile(expl.data[:, 0], [5, 95])
    np.testing.assert_allclose(colour, (np.clip(data, lo, hi) - lo) / (hi - lo))
    assert colour.min() == 0.0 and colour.max() == 1.0
    red, blue = style.colorscale_rgb(1.0), style.colorscale_rgb(0.0)
    assert red[0] > red[2] and blue[2] > blue[0]
    group = rows_of(fig)["f1"]  # the winner's category (test_beehive_categories.py)
    assert not group["grey"].any() and group["x"].size == expl.n_duels
    assert trace.marker.showscale
    bar_title = one_line(trace.marker.colorbar.title.text)
    assert bar_title == "Feature difference (left - right)"
    assert list(trace.marker.colorbar.ticktext) == ["Low", "High"]


def test_beehive_constant_data_row_is_mid_scale() -> None:
    expl = make_explanation(q=50, p=2, group_player=None)
    expl = Explanation(**{**expl.__dict__, "data": np.ones_like(expl.data)})
    colours = [np.asarray(tr.marker.color) for tr in beehive(expl).data]
    assert all(np.all(c == 0.5) for c in colours)


def test_beehive_axis_title_states_the_orientation() -> None:
    expl = make_explanation(q=200)
    assert "favours the left item" in one_line(beehive(expl).layout.xaxis.title.text)
    winner_fig = beehive(expl.oriented_to_winner())
    assert one_line(winner_fig.layout.xaxis.title.text) == (
        "Pref-SHAP value (positive favours the winner)"
    )
    colorbar_titles = [
        one_line(tr.marker.colorbar.title.text) for tr in winner_fig.data if tr.marker.showscale
    ]
    assert colorbar_titles == ["Feature difference (winner - loser)"]
    item = expl.left_ids[0]
    label = expl.left_labels[0]
    view = beehive(expl.from_point_of_view(item))
    assert one_line(view.layout.xaxis.title.text) == f"Pref-SHAP value (positive favours {label})"


def test_beehive_hover_names_duel_sides_value_and_difference() -> None:
    expl = make_explanation(q=30, p=3, group_player=1).oriented_to_winner()
    fig = beehive(expl)
    for tr in fig.data:
        row = tr.legendgroup or tr.name  # a categorical row's traces are its levels
        j = expl.player_names.index(row)
        assert tr.hovertemplate.startswith(f"duel %{{text}}<br>{row}: %{{x:+.3g}}")
        if j == 1:
            assert "difference" not in tr.hovertemplate
        else:
            assert "difference (winner - loser): %{customdata[1]:+.3g}" in tr.hovertemplate
        for duel, text in zip(np.asarray(tr.customdata)[:, 0].astype(int), tr.text, strict=True):
            assert text.startswith(
                f"{expl.duel_ids[duel]}<br>{expl.left_labels[duel]} vs {expl.right_labels[duel]}"
            )
            if j == 1:
                assert text.endswith(f"<br>{expl.data_labels[duel, 1]}")


def test_pile_offsets_spread_denser_bins_more_and_symmetrically() -> None:
    rng = np.random.default_rng(0)
    x = np.r_[np.zeros(101), np.ones(11)]
    offsets = _pile_offsets(x, rng)
    dense, sparse = offsets[:101], offsets[101:]
    assert np.ptp(dense) > np.ptp(sparse) > 0
    assert abs(dense.sum()) < 1e-12 and abs(sparse.sum()) < 1e-12  # odd counts: symmetric
    assert np.unique(dense).size == 101  # no two points of a bin on top of each other
    assert np.max(np.abs(offsets)) <= ROW_HALF_HEIGHT + 1e-12


def test_plots_of_an_empty_selection_say_so() -> None:
    empty = make_explanation(q=20).subset(np.zeros(20, dtype=bool))
    for fig in (beehive(empty), bar(empty), bar(empty, kind="mean")):
        assert not fig.data
        assert "No duels" in fig.layout.annotations[0].text


def test_invalid_arguments_are_refused() -> None:
    expl = make_explanation(q=20)
    with pytest.raises(ValueError, match="max_display"):
        beehive(expl, max_display=0)
    with pytest.raises(ValueError, match="max_points_per_row"):
        beehive(expl, max_points_per_row=0)
    with pytest.raises(ValueError, match="kind"):
        bar(expl, kind="median")  # type: ignore[arg-type]


# -- bar -------------------------------------------------------------------------------
def bar_rows(fig: go.Figure) -> tuple[list[str], np.ndarray]:
    (trace,) = fig.data
    order = np.argsort(-np.asarray(trace.y))
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext, strict=True))
    return [ticks[trace.y[i]] for i in order], np.asarray(trace.x)[order]


def test_bar_mean_abs_is_global_importance_with_sum_row() -> None:
    expl = make_explanation(p=7, seed=6)
    fig = bar(expl, max_display=4)
    names, values = bar_rows(fig)
    importance = np.abs(expl.values).mean(axis=0)
    order = np.argsort(-importance)
    assert names == [*(expl.player_names[j] for j in order[:3]), "Sum of 4 other features"]
    np.testing.assert_allclose(values[:3], importance[order[:3]])
    np.testing.assert_allclose(values[3], importance[order[3:]].sum())
    printed = {a.text for a in fig.layout.annotations}
    assert {style.format_number(v) for v in values} <= printed
    assert fig.data[0].error_x.array is None


def test_bar_mean_is_signed_coloured_and_has_standard_errors() -> None:
    expl = make_explanation(q=300, p=6, seed=7).oriented_to_winner()
    shift = np.array([0.2, -0.15, 0.1, -0.08, 0.05, -0.03])  # both signs among the means
    expl = Explanation(**{**expl.__dict__, "values": expl.values - expl.values.mean(0) + shift})
    fig = bar(expl, kind="mean", max_display=4)
    names, values = bar_rows(fig)
    means = expl.values.mean(axis=0)
    order = np.argsort(-np.abs(means))
    assert names == [*(expl.player_names[j] for j in order[:3]), "Sum of 3 other features"]
    np.testing.assert_allclose(values[:3], means[order[:3]])
    rest_sum = expl.values[:, order[3:]].sum(axis=1)
    np.testing.assert_allclose(values[3], rest_sum.mean())
    trace = fig.data[0]
    sem = np.r_[expl.values[:, order[:3]].std(axis=0, ddof=1), rest_sum.std(ddof=1)] / np.sqrt(300)
    by_row = np.argsort(-np.asarray(trace.y))
    np.testing.assert_allclose(np.asarray(trace.error_x.array)[by_row], sem)
    colours = np.asarray(trace.marker.color)[by_row]
    assert all(
        c == (style.RED if v >= 0 else style.BLUE) for c, v in zip(colours, values, strict=True)
    )
    assert (values < 0).any() and (values > 0).any()
    assert "favours the winner" in one_line(fig.layout.xaxis.title.text)
    assert {style.format_number(v, signed=True) for v in values} <= {
        a.text for a in fig.layout.annotations
    }


# -- waterfall -------------------------------------------------------------------------
def path_of(trace: go.Bar) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Bars in path order (bottom to top): starts, steps."""
    order = np.argsort(np.asarray(trace.y))
    starts = np.asarray(trace.base, dtype=float)[order]
    return starts, np.asarray(trace.x, dtype=float)[order], list(np.asarray(trace.y)[order])


def test_waterfall_runs_from_base_to_output_largest_on_top() -> None:
    expl = make_explanation(q=10, p=7, seed=8, base=np.full(10, 0.25))
    fig = waterfall(expl, index=4, max_display=5)
    (trace,) = fig.data
    starts, steps, _ = path_of(trace)
    assert starts[0] == pytest.approx(0.25)
    np.testing.assert_allclose(starts[1:], starts[:-1] + steps[:-1])
    assert starts[-1] + steps[-1] == pytest.approx(expl.outputs[4], abs=1e-12)
    phi = expl.values[4]
    order = np.argsort(-np.abs(phi))
    np.testing.assert_allclose(steps[::-1][:4], phi[order[:4]])
    assert steps[0] == pytest.approx(phi[order[4:]].sum())
    labels = tick_names_top_down(fig)
    assert labels[0].startswith(expl.player_names[order[0]])
    assert labels[-1] == "3 other features"
    # the dashboard's one rounding of probabilities: a percentage, one decimal
    assert f"= {100 * sigmoid(expl.outputs[4]):.1f} %" in fig.layout.title.text
    assert expl.left_labels[4] in fig.layout.title.text


def test_waterfall_labels_show_difference_or_group_label() -> None:
    expl = make_explanation(q=5, p=3, group_player=1)
    labels = tick_names_top_down(waterfall(expl, index=2))
    assert f"f1 ({expl.data_labels[2, 1]})" in labels
    assert f"f0 (Δ {style.format_number(expl.data[2, 0], signed=True)})" in labels


def test_waterfall_context_part_starts_at_the_items_output() -> None:
    items = make_explanation(q=6, p=5, seed=9)
    context = make_explanation(
        q=6,
        p=3,
        seed=10,
        base=items.outputs,
        what="context",
        group_player=None,
        names=("surface", "indoor", "year"),
    )
    context = Explanation(
        **{
            **context.__dict__,
            **{
                k: getattr(items, k)
                for k in (
                    "duel_ids",
                    "left_ids",
                    "right_ids",
                    "winners",
                    "left_labels",
                    "right_labels",
                )
            },
        }
    )
    fig = waterfall(items, context, index=-1)
    item_trace, context_trace = fig.data
    assert (item_trace.name, context_trace.name) == ("items", "context")
    i_starts, i_steps, i_rows = path_of(item_trace)
    c_starts, c_steps, c_rows = path_of(context_trace)
    assert max(i_rows) < min(c_rows)  # context drawn above the items
    assert i_starts[0] == 0.0
    assert i_starts[-1] + i_steps[-1] == pytest.approx(items.outputs[-1], abs=1e-12)
    assert c_starts[0] == pytest.approx(items.outputs[-1], abs=1e-12)
    np.testing.assert_allclose(c_starts[1:], c_starts[:-1] + c_steps[:-1])
    assert c_starts[-1] + c_steps[-1] == pytest.approx(context.outputs[-1], abs=1e-12)
    assert f"= {100 * sigmoid(context.outputs[-1]):.1f} %" in fig.layout.title.text
    noted = waterfall(items, context, index=-1, probability_note="under surface = clay")
    assert f"= {100 * sigmoid(context.outputs[-1]):.1f} %</b><br>" in noted.layout.title.text
    assert " · P under surface = clay</sup><br><sup>duel " in noted.layout.title.text
    assert any(t.startswith("surface = ") for t in fig.layout.yaxis.ticktext)


def test_waterfall_refuses_parts_of_different_duels() -> None:
    items = make_explanation(q=4, p=3, seed=11)
    wrong_base = make_explanation(q=4, p=2, seed=12, base=items.outputs + 1.0, what="context")
    wrong_base = Explanation(**{**wrong_base.__dict__, "left_ids": items.left_ids})
    with pytest.raises(ValueError, match="base value"):
        waterfall(items, wrong_base)
    other_duel = Explanation(**{**wrong_base.__dict__, "duel_ids": np.array(["x"] * 4)})
    with pytest.raises(ValueError, match="different duels"):
        waterfall(items, other_duel)
    with pytest.raises(IndexError):
        waterfall(items, index=4)


def test_sigmoid_is_stable_for_large_preferences() -> None:
    assert sigmoid(0.0) == 0.5
    assert sigmoid(800.0) == 1.0 and sigmoid(-800.0) == 0.0
    assert sigmoid(1.3) == pytest.approx(1 / (1 + math.exp(-1.3)))
    assert sigmoid(-1.3) == pytest.approx(1 - sigmoid(1.3))


def test_format_number_never_prints_negative_zero() -> None:
    assert style.format_number(-0.0) == "0"
    assert style.format_number(0.0, signed=True) == "+0"
    assert style.format_number(12345.6) == "12,346"
    assert style.format_number(-0.012345, signed=True) == "-0.0123"


def test_context_beehive_colours_by_the_context_value() -> None:
    expl = make_explanation(q=300, p=2, seed=13, what="context", group_player=1)
    values = np.random.default_rng(1).uniform(0, 3000, size=(300, 2))
    values[:, 1] = np.nan
    expl = Explanation(**{**expl.__dict__, "context_values": values})
    fig = beehive(expl.oriented_to_winner())
    (trace,) = [tr for tr in fig.data if tr.name == "f0"]
    duels = np.asarray(trace.customdata)[:, 0].astype(int)
    # Views flip sides, never the context: the colour is the raw value, unflipped.
    np.testing.assert_array_equal(np.asarray(trace.customdata)[:, 1], values[duels, 0])
    colour = np.asarray(trace.marker.color, dtype=float)
    assert np.all(np.diff(colour[np.argsort(values[duels, 0])]) >= -1e-12)
    assert trace.marker.colorbar.title.text == "Context value"
    assert "value: %{customdata[1]:.4g}" in trace.hovertemplate
    # A categorical context row is coloured by its category (tests/test_beehive_categories.py).
    assert len({tr.marker.color for tr in fig.data if tr.legendgroup == "f1"}) > 1


def test_waterfall_uses_the_explanations_labels_and_standard_errors() -> None:
    expl = make_explanation(q=3, p=3, seed=14, group_player=None)
    labels = np.array([[f"{k} vs {k + 1}" for k in range(3)]] * 3, dtype=object)
    se = np.full((3, 3), 0.01)
    expl = Explanation(**{**expl.__dict__, "data_labels": labels, "standard_errors": se})
    (trace,) = waterfall(expl, index=1).data
    assert {"f0 (0 vs 1)", "f1 (1 vs 2)", "f2 (2 vs 3)"} == set(
        waterfall(expl, index=1).layout.yaxis.ticktext
    )
    assert all(t.endswith("± 0.01 (s.e.)") for t in trace.hovertext)
