"""Dependence plot: points are the values, colour is the most interacting player."""

from __future__ import annotations

import numpy as np

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import dependence, interaction_partner
from prefshap_core.plots.dependence import DIFFERENT, SAME, approximate_interactions


def _explanation(q: int = 500, seed: int = 0, labels: np.ndarray | None = None) -> Explanation:
    """f0's value depends on f0 times f2 (an interaction); f1 and f3 are noise."""
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(q, 4))
    values = np.stack(
        [
            data[:, 0] * data[:, 2],
            0.5 * data[:, 1],
            0.3 * rng.normal(size=q),
            0.2 * data[:, 3],
        ],
        axis=1,
    )
    data_labels = None
    if labels is not None:
        data[:, 3] = np.nan
        data_labels = np.full((q, 4), None, dtype=object)
        data_labels[:, 3] = labels
    return Explanation(
        values=values, base_values=np.zeros(q), outputs=values.sum(1), data=data,
        player_names=("f0", "f1", "f2", "f3"), duel_ids=np.arange(q).astype(str),
        left_ids=np.full(q, "a"), right_ids=np.full(q, "b"),
        winners=np.ones(q, dtype=np.int8), data_labels=data_labels,
    )  # fmt: skip


def test_the_interacting_player_colours_the_plot() -> None:
    expl = _explanation()
    assert interaction_partner(expl, 0) == 2
    scores = approximate_interactions(expl, 0)
    assert scores[0] == 0.0 and scores[2] > 2 * max(scores[1], scores[3])
    fig = dependence(expl, "f0")
    (trace,) = fig.data
    rows = np.asarray(trace.customdata)[:, 0].astype(int)
    np.testing.assert_allclose(trace.x, expl.data[rows, 0])
    np.testing.assert_allclose(trace.y, expl.values[rows, 0])
    colour = np.asarray(trace.marker.color, dtype=float)
    order = np.argsort(expl.data[rows, 2])
    assert np.all(np.diff(colour[order]) >= -1e-12)  # colour follows f2
    assert "f2" in trace.marker.colorbar.title.text
    assert fig.layout.xaxis.title.text == "f0 difference (left - right)"


def test_a_categorical_group_shows_its_category_pairs() -> None:
    rng = np.random.default_rng(1)
    kinds = np.array(["Fire", "Water"])
    labels = np.array(
        [f"{a} vs {b}" for a, b in zip(kinds[rng.integers(0, 2, 300)],
                                       kinds[rng.integers(0, 2, 300)], strict=True)]
    )  # fmt: skip
    expl = _explanation(q=300, labels=labels)
    fig = dependence(expl, "f3", colour_by=None)
    (trace,) = fig.data
    ticks = list(fig.layout.xaxis.ticktext)
    assert ticks == sorted(set(labels.tolist()))
    rows = np.asarray(trace.customdata)[:, 0].astype(int)
    positions = np.round(np.asarray(trace.x)).astype(int)
    assert [ticks[k] for k in positions] == labels[rows].tolist()
    assert np.max(np.abs(np.asarray(trace.x) - positions)) <= 0.3  # jittered, not moved


def test_many_category_pairs_become_same_or_different() -> None:
    rng = np.random.default_rng(2)
    kinds = np.array([f"t{k}" for k in range(8)])
    a, b = kinds[rng.integers(0, 8, 400)], kinds[rng.integers(0, 8, 400)]
    expl = _explanation(q=400, labels=np.char.add(np.char.add(a, " vs "), b))
    fig = dependence(expl, "f3", colour_by=None)
    assert sorted(fig.layout.xaxis.ticktext) == sorted([DIFFERENT, SAME])
    # As a colour, a categorical group splits points into same / different.
    fig0 = dependence(expl, "f0", colour_by=3)
    colours = np.asarray(fig0.data[0].marker.color)
    rows = np.asarray(fig0.data[0].customdata)[:, 0].astype(int)
    same = a[rows] == b[rows]
    assert len(set(colours[same])) == 1 and len(set(colours[~same])) == 1
    assert colours[same][0] != colours[~same][0]
