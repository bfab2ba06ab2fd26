"""Score plot of the HodgeRank potential."""

import dataclasses

import numpy as np

from prefshap_core.analysis.intransitivity import IntransitivityReport, hodge_split
from prefshap_core.analysis.triangles import Cycles
from prefshap_core.plots.potential import potential_plot


def _report(n: int, seed: int = 0) -> IntransitivityReport:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, n))
    g = np.triu(x, 1) - np.triu(x, 1).T + np.subtract.outer(np.arange(n), np.arange(n)) * 0.3
    s, share, per_item = hodge_split(g)
    empty = Cycles(np.zeros((0, 3), dtype=np.int64), np.zeros(0))
    return IntransitivityReport(np.arange(n), np.array([f"i{k}" for k in range(n)]), g, s,
                                share, per_item, empty, 0)  # fmt: skip


def test_dots_sorted_best_on_top_coloured_by_own_cyclic_share():
    report = _report(12)
    labels = np.array([f"name {k}" for k in range(12)])
    fig = potential_plot(report, labels)
    trace = fig.data[0]
    order = np.argsort(-report.potential, kind="stable")
    np.testing.assert_allclose(trace.x, report.potential[order])
    assert list(trace.y) == list(range(11, -1, -1))  # first (best) on top
    np.testing.assert_allclose(trace.marker.color, report.item_cyclic_share[order])
    assert list(fig.layout.yaxis.ticktext) == labels[order].tolist()
    assert f"{report.cyclic_share:.1%}" in fig.layout.annotations[0].text


def test_many_items_hide_the_names_and_no_items_say_so():
    fig = potential_plot(_report(60))
    assert fig.layout.yaxis.showticklabels is False
    assert "60 items" in fig.layout.yaxis.title.text
    full = _report(3)
    empty = dataclasses.replace(full, item_rows=full.item_rows[:0], item_ids=full.item_ids[:0],
                                potential=full.potential[:0],
                                item_cyclic_share=full.item_cyclic_share[:0])  # fmt: skip
    assert "No items" in potential_plot(empty).layout.annotations[0].text
