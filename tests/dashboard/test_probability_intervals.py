"""Duel and Head-to-head pages show P(A beats B) with its 90 % posterior interval."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dashboard.services.intervals import interval_caption
from prefshap_core.analysis.head_to_head import most_active_pair
from prefshap_core.models.posterior import Z90, probability_interval
from tests.dashboard.apptest import assert_clean, goto, new_app, settle, texts


def test_probability_interval_is_the_sigmoid_of_gs_interval():
    g, sd = np.array([0.3, -2.0]), np.array([0.5, 0.0])
    lo, hi = probability_interval(g, sd)
    np.testing.assert_allclose(lo, 1 / (1 + np.exp(-(g - Z90 * sd))))
    np.testing.assert_allclose(hi, 1 / (1 + np.exp(-(g + Z90 * sd))))
    assert lo[1] == hi[1]


def test_interval_caption_needs_a_sd():
    assert interval_caption("A beats B", 0.4, None) is None
    text = interval_caption("A beats B", 0.4, 0.5)
    lo, hi = probability_interval(0.4, 0.5)
    assert f"{100 * lo:.1f} % – {100 * hi:.1f} %" in text and "P(A beats B)" in text


def _interval(at) -> tuple[float, float]:
    found = re.search(r"90 % interval of P\(.*?\): ([\d.]+) % – ([\d.]+) %", texts(at))
    assert found, texts(at)
    return float(found[1]), float(found[2])


@pytest.mark.slow
def test_head_to_head_and_duel_show_the_interval_around_the_probability():
    at = goto(new_app(), "head_to_head")
    assert_clean(at)
    loaded = at.session_state["datasets"][at.session_state["active_dataset"]]
    fn = at.session_state["models"][loaded.fingerprint].result.function
    data = loaded.data
    a, b = most_active_pair(data)
    x_a, x_b = data.items[[data.item_index(a)]], data.items[[data.item_index(b)]]
    g = float(fn.decision(x_a, x_b)[0])
    lo, hi = probability_interval(g, fn.decision_sd(x_a, x_b)[0])
    shown = _interval(at)
    assert abs(shown[0] - 100 * lo) < 0.051 and abs(shown[1] - 100 * hi) < 0.051
    assert shown[0] < 100 / (1 + np.exp(-g)) < shown[1]
    at = goto(at, "duel")
    assert_clean(at)
    lo_d, hi_d = _interval(at)
    p = next(m for m in at.metric if m.label.startswith("P(")).value
    assert lo_d <= float(p.removesuffix(" %")) <= hi_d


@pytest.mark.slow
def test_rankings_show_sd_and_a_rank_interval_around_each_rank():
    at = goto(new_app(), "rankings")
    assert_clean(at)
    table = at.dataframe[0].value
    bounds = table["90 % rank interval"].str.split("–", expand=True).astype(int)
    n = len(table)
    assert ((bounds[0] >= 1) & (bounds[0] <= bounds[1]) & (bounds[1] <= n)).all()
    # The 5 % / 95 % quantiles of the draws' ranks hold the point estimate's rank for
    # nearly every item, not for all: the item the estimate ranks last is last in
    # fewer than 5 % of the draws when a dozen items are about as weak (the demo: its
    # interval was 253-399 in one fit).
    inside = (bounds[0] <= table["rank"]) & (table["rank"] <= bounds[1])
    assert inside.mean() >= 0.95
    # ... and the intervals move with the ranking.
    assert bounds[0].iloc[: n // 10].mean() < bounds[0].iloc[-(n // 10) :].mean()
    assert table["± sd"].str.endswith(" pp").all()
    assert "UPM utility f(x) ± sd" in table.columns
    assert (table["UPM utility f(x) ± sd"] > 0).all()
    assert "posterior draws" in texts(at)


def test_head_to_head_interval_is_of_the_probability_shown_under_a_context():
    """Under a chosen observed context the sd is g(u, a, b)'s, averaged: g_bar's."""
    from dataclasses import replace
    from types import SimpleNamespace

    from dashboard.services.intervals import pair_g_sd
    from prefshap_core.explain.reference import random_preference_function

    fn = random_preference_function("cgpm", n_items=8, n_centres=10, groups=[("a", 1), ("b", 2)],
                                    seed=3, context_groups=[("c", 2)], n_contexts=5)  # fmt: skip
    rng = np.random.default_rng(3)
    fn = replace(fn, posterior_factor=rng.standard_normal((fn.n_centres, 4)))
    model = SimpleNamespace(function=fn)
    x_a, x_b = fn.items[[0]], fn.items[[1]]
    averaged = pair_g_sd(model, x_a, x_b)
    assert averaged == pytest.approx(float(fn.decision_sd(x_a, x_b)[0]), rel=1e-12)
    for row in range(len(fn.contexts)):
        expected = float(fn.decision_sd(x_a, x_b, fn.contexts[[row]])[0])
        assert pair_g_sd(model, x_a, x_b, row) == pytest.approx(expected, rel=1e-12)
    assert pair_g_sd(model, x_a, x_b, 0) != pytest.approx(averaged, rel=1e-6)


@pytest.mark.slow
def test_explain_bars_add_the_posterior_sd_when_asked():
    at = goto(new_app(), "explain")
    assert_clean(at)
    toggle = next(t for t in at.toggle if t.label == "Model uncertainty on the bars")
    assert "posterior sd" not in texts(at)
    at = settle(toggle.set_value(True).run(timeout=120))
    assert_clean(at)
    assert "combined with the model's posterior sd" in texts(at)
    bars = [c for c in at.get("plotly_chart") if "posterior sd" in c.proto.spec]
    assert bars, "no bar chart with posterior sd error bars"
