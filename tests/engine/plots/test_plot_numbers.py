"""The bar chart's numbers (its CSV), sampled standard errors on bar and waterfall,
and the provenance line of exported figures."""

from __future__ import annotations

import numpy as np

from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import bar, bar_table, waterfall, with_provenance
from tests.engine.plots.figures import make_explanation


def _sampled(expl: Explanation, seed: int = 0) -> Explanation:
    se = np.random.default_rng(seed).uniform(0.01, 0.1, size=expl.values.shape)
    return Explanation(**{**expl.__dict__, "standard_errors": se})


def test_bar_table_holds_the_bars_numbers() -> None:
    expl = make_explanation(q=200, p=8, seed=1)
    for kind in ("mean_abs", "mean"):
        table = bar_table(expl, kind=kind, max_display=4)
        per_duel = np.abs(expl.values) if kind == "mean_abs" else expl.values
        order = np.argsort(-np.abs(per_duel.mean(0)), kind="stable")
        shown, rest = order[:3], order[3:]
        expected = [*per_duel.mean(0)[shown], per_duel[:, rest].sum(1).mean()]
        np.testing.assert_allclose(table["value"], expected)
        assert table["feature"].tolist()[:3] == [expl.player_names[j] for j in shown]
        assert table["feature"].iloc[3] == "Sum of 5 other features"
        (trace,) = bar(expl, kind=kind, max_display=4).data
        np.testing.assert_allclose(trace.x, table["value"])  # the bars are these numbers
        assert (table["n_duels"] == 200).all()
    mean = bar_table(expl, kind="mean", max_display=4)
    col = expl.values[:, order[0]]
    np.testing.assert_allclose(mean["standard_error"].iloc[0], np.std(col, ddof=1) / np.sqrt(200))


def test_sampled_importances_show_their_sampling_error() -> None:
    expl = make_explanation(q=50, p=3, seed=2)
    exact = bar_table(expl, kind="mean_abs")
    assert (exact["standard_error"] == 0).all()
    assert bar(expl, kind="mean_abs").data[0].error_x.array is None
    sampled = _sampled(expl)
    table = bar_table(sampled, kind="mean_abs")
    j = sampled.player_names.index(table["feature"].iloc[0])
    expected = np.sqrt(np.sum(sampled.standard_errors[:, j] ** 2)) / 50
    np.testing.assert_allclose(table["standard_error"].iloc[0], expected)
    np.testing.assert_allclose(bar(sampled, kind="mean_abs").data[0].error_x.array,
                               table["standard_error"])  # fmt: skip


def test_waterfall_draws_standard_errors_when_sampled() -> None:
    expl = make_explanation(q=2, p=3, seed=3, group_player=None)
    assert waterfall(expl).data[0].error_x.array is None
    sampled = _sampled(expl, seed=4)
    (trace,) = waterfall(sampled).data
    order = np.argsort(-np.abs(sampled.values[0]), kind="stable")[::-1]  # path order
    np.testing.assert_allclose(trace.error_x.array, sampled.standard_errors[0, order])


def test_exported_figures_say_what_they_show() -> None:
    fig = bar(make_explanation(q=20, p=3))
    marked = with_provenance(fig, "Pokémon · GPM · 20 duels")
    assert [a.text for a in marked.layout.annotations if "Pokémon" in a.text] == [
        "Pokémon · GPM · 20 duels"
    ]
    assert not any("Pokémon" in (a.text or "") for a in fig.layout.annotations)  # a copy
