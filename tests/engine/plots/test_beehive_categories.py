"""Beehive colours of categorical rows: same / different category for item groups,
the category itself for context groups; the numeric scale's clipping stated."""

from __future__ import annotations

import numpy as np

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import beehive
from prefshap_core.plots.beehive import (
    DIFFERENT_COLOUR,
    SAME_COLOUR,
    category_colours,
    row_categories,
)
from tests.engine.plots.figures import make_explanation, rows_of


def _colour_by_duel(fig, name: str) -> dict[int, str]:
    out = {}
    for tr in fig.data:
        if tr.name == name and isinstance(tr.marker.color, str):
            for d in np.asarray(tr.customdata)[:, 0].astype(int).tolist():
                out[d] = tr.marker.color
    return out


def test_item_groups_are_coloured_same_or_different() -> None:
    expl = make_explanation(q=300, p=3, seed=5, group_player=1)
    fig = beehive(expl)
    colours = _colour_by_duel(fig, "f1")
    assert sorted(colours) == list(range(300))
    for d, colour in colours.items():
        a, b = expl.data_labels[d, 1].split(" vs ")
        assert colour == (SAME_COLOUR if a == b else DIFFERENT_COLOUR)
    keys = [a.text for a in fig.layout.annotations if a.text.startswith("f1:")]
    assert len(keys) == 1 and "same" in keys[0] and "different" in keys[0]
    # The winner view swaps "A vs B" but same stays same.
    swapped = row_categories(expl.oriented_to_winner(), 1)
    np.testing.assert_array_equal(swapped, row_categories(expl, 1))


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


def test_the_colour_scale_says_where_it_is_clipped() -> None:
    expl = make_explanation(q=400, p=2, seed=7, group_player=None)
    fig = beehive(expl)
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert "5th-95th percentile" in notes and "clipped" in notes
    (trace,) = [tr for tr in fig.data if tr.name == "f0"]
    lo, hi = np.percentile(expl.data[:, 0], [5, 95])
    from prefshap_core.plots import style

    assert (
        f"colour scale: {style.format_number(lo)} to {style.format_number(hi)} "
        "(5th-95th percentile), clipped beyond"
    ) in trace.hovertemplate
