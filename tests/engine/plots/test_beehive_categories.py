"""Beehive colours of categorical rows: the favoured side's category for item groups,
the category itself for context groups, one colour per level with a legend beside
the plot; rows stay tall enough for the legend; the numeric scale's clipping stated."""

from __future__ import annotations

import numpy as np

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import beehive, style
from prefshap_core.plots.beehive import row_categories
from prefshap_core.plots.style import CATEGORY_PALETTE, category_colours
from tests.engine.plots.figures import make_explanation, rows_of


def _colour_by_duel(fig, row: str) -> dict[int, str]:
    out = {}
    for tr in fig.data:
        if (tr.legendgroup or tr.name) == row and isinstance(tr.marker.color, str):
            for d in np.asarray(tr.customdata)[:, 0].astype(int).tolist():
                out[d] = tr.marker.color
    return out


def test_item_groups_are_coloured_by_the_favoured_sides_category() -> None:
    expl = make_explanation(q=300, p=3, seed=5, group_player=1).oriented_to_winner()
    fig = beehive(expl)
    colours = _colour_by_duel(fig, "f1")
    assert sorted(colours) == list(range(300))
    winners_type = [expl.data_labels[d, 1].split(" vs ")[0] for d in range(300)]
    palette = category_colours(np.array(winners_type, dtype=object))
    assert sorted(palette) == ["Fire", "Grass", "Water"]
    assert len(set(palette.values())) == 3 and style.NAN_GREY not in palette.values()
    for d, colour in colours.items():
        assert colour == palette[winners_type[d]]
    # the legend: one entry per level under the row's name, beside the plot
    entries = [tr for tr in fig.data if tr.legendgroup == "f1"]
    assert sorted(tr.name for tr in entries) == ["Fire", "Grass", "Water"]
    assert all(tr.showlegend for tr in entries)
    assert entries[0].legendgrouptitle.text == "f1 of the winner"
    assert fig.layout.showlegend and fig.layout.legend.x >= 1.0
    assert not [a for a in fig.layout.annotations if "Fire" in (a.text or "")]
    # the loser's view colours by the loser's category: the same duels, the other side
    flipped = expl.reoriented(-np.ones(300), "left")
    np.testing.assert_array_equal(
        row_categories(flipped, 1), [expl.data_labels[d, 1].split(" vs ")[1] for d in range(300)]
    )


def test_levels_beyond_the_palette_are_one_grey_entry() -> None:
    q = 400
    expl = make_explanation(q=q, p=2, seed=8, group_player=1)
    kinds = [f"k{k:02d}" for k in range(12)]
    rng = np.random.default_rng(3)
    labels = expl.data_labels.copy()
    labels[:, 1] = [f"{kinds[a]} vs {kinds[b]}" for a, b in rng.integers(0, 12, (q, 2))]
    fig = beehive(Explanation(**{**expl.__dict__, "data_labels": labels}))
    names = [tr.name for tr in fig.data if tr.legendgroup == "f1"]
    assert len(names) == len(CATEGORY_PALETTE) + 1 and names[-1] == "4 other levels"
    assert len(_colour_by_duel(fig, "f1")) == q


def test_rows_stay_tall_beside_a_long_legend() -> None:
    q = 200
    base = make_explanation(q=q, p=8, seed=9, what="context", group_player=None)
    rng = np.random.default_rng(0)
    labels = np.full((q, 8), None, dtype=object)
    values = rng.normal(size=(q, 8))
    for j in range(8):
        labels[:, j] = np.array(["poor", "good", "other"])[rng.integers(0, 3, q)]
        values[:, j] = np.nan
    expl = Explanation(**{**base.__dict__, "context_values": values, "data_labels": labels,
                          "data": np.full((q, 8), np.nan)})  # fmt: skip
    fig = beehive(expl, title="Under one context: Pref-SHAP values")
    margin = fig.layout.margin
    plot_px = fig.layout.height - margin.t - margin.b
    assert plot_px / 8 >= 28
    legend_px = 8 * (4 * 19 + 8)  # eight groups of a title and three levels
    assert plot_px >= legend_px


def test_context_groups_are_coloured_by_their_category() -> None:
    q = 200
    expl = make_explanation(q=q, p=2, seed=6, what="context", group_player=None)
    surfaces = np.array(["Clay", "Grass", "Hard"])[np.random.default_rng(0).integers(0, 3, q)]
    labels = np.full((q, 2), None, dtype=object)
    labels[:, 1] = surfaces
    values = np.c_[np.random.default_rng(1).normal(size=q), np.full(q, np.nan)]
    data = np.full((q, 2), np.nan)
    expl = Explanation(**{**expl.__dict__, "context_values": values, "data_labels": labels,
                          "data": data})  # fmt: skip
    fig = beehive(expl)
    palette = category_colours(surfaces)
    assert len(set(palette.values())) == 3
    colours = _colour_by_duel(fig, "f1")
    assert all(colours[d] == palette[surfaces[d]] for d in range(q))
    assert not rows_of(fig)["f1"]["grey"].any()
    assert next(tr.legendgrouptitle.text for tr in fig.data if tr.legendgroup == "f1") == "f1"


def test_the_colour_scale_says_where_it_is_clipped() -> None:
    expl = make_explanation(q=400, p=2, seed=7, group_player=None)
    fig = beehive(expl)
    notes = " ".join(a.text for a in fig.layout.annotations).replace("<br>", " ")
    assert "5th-95th percentile" in notes and "clipped" in notes
    (trace,) = [tr for tr in fig.data if tr.name == "f0"]
    lo, hi = np.percentile(expl.data[:, 0], [5, 95])
    assert (
        f"colour scale: {style.format_number(lo)} to {style.format_number(hi)} "
        "(5th-95th percentile), clipped beyond"
    ) in trace.hovertemplate
