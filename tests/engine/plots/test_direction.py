"""The direction statistic (Spearman rho of value and difference; mean value per level of
the favoured side's category), its bars and the dependence plot's note, and the
labels' imputed shares."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from scipy.stats import spearmanr

from prefshap_core.data.duel_data import DataReport, ImputationNote
from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import bar, dependence
from prefshap_core.plots.bar import bar_table
from prefshap_core.plots.direction import direction_table, spearman
from prefshap_core.plots.labels import feature_label, imputed_shares
from tests.engine.plots.figures import make_explanation


def test_spearman_matches_scipy_with_ties_and_is_nan_when_constant() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 200).astype(float)  # many ties
    y = x + rng.normal(size=200)
    assert spearman(y, x) == pytest.approx(spearmanr(y, x).statistic, abs=1e-12)
    assert np.isnan(spearman(y, np.ones(200)))
    assert np.isnan(spearman(np.array([1.0]), np.array([2.0])))


def _always_against(q: int = 400, seed: int = 1) -> Explanation:
    """A feature whose effect is negative in every duel (value = -0.5 x difference),
    in duels another feature decides: seen from the winner, its values have
    both signs and their mean is near 0."""
    base = make_explanation(q=q, p=2, seed=seed, group_player=None)
    rng = np.random.default_rng(seed)
    diff = rng.normal(size=q) * 3.0
    values = np.c_[-0.5 * diff + 0.1 * rng.normal(size=q), 2.0 * rng.normal(size=q)]
    winners = np.where(values[:, 1] > 0, 1, -1).astype(np.int8)  # f1 decides
    return Explanation(**{**base.__dict__, "values": values, "outputs": values.sum(axis=1),
                          "data": np.c_[diff, rng.normal(size=q)], "winners": winners})  # fmt: skip


def test_a_feature_that_always_hurts_has_a_negative_direction_though_its_mean_is_small() -> None:
    view = _always_against().oriented_to_winner()
    table = direction_table(view)
    rho = float(table.loc[table["feature"] == "f0", "value"].iloc[0])
    assert table.loc[table["feature"] == "f0", "statistic"].iloc[0] == "spearman"
    assert rho == pytest.approx(spearmanr(view.values[:, 0], view.data[:, 0]).statistic)
    assert rho < -0.9
    # the signed mean says almost nothing: values of both signs cancel
    assert abs(view.values[:, 0].mean()) < 0.2 * np.abs(view.values[:, 0]).mean()


def test_categorical_groups_get_the_mean_value_per_level_of_the_favoured_side() -> None:
    view = make_explanation(q=300, p=3, seed=2, group_player=1).oriented_to_winner()
    table = direction_table(view)
    levels = table[table["feature"] == "f1"]
    assert set(levels["statistic"]) == {"mean value"}
    winners_type = np.array([lab.split(" vs ")[0] for lab in view.data_labels[:, 1]])
    assert sorted(levels["level"]) == sorted(set(winners_type))
    for level, value, n in zip(levels["level"], levels["value"], levels["n_duels"], strict=True):
        hit = winners_type == level
        assert n == hit.sum()
        assert value == pytest.approx(view.values[hit, 1].mean())
    assert list(levels["n_duels"]) == sorted(levels["n_duels"], reverse=True)  # most first


def test_direction_bars_show_the_table_one_bar_per_level() -> None:
    view = make_explanation(q=300, p=3, seed=3, group_player=1).oriented_to_winner()
    fig = bar(view, kind="direction", title="All test duels (300 duels)")
    table = bar_table(view, kind="direction")
    rho_bars, level_bars = fig.data
    rho = table[table["statistic"] == "spearman"]
    np.testing.assert_allclose(rho_bars.x, rho["value"])
    assert list(level_bars.y) == list(table.loc[table["feature"] == "f1", "level"])
    assert "winner's f1" in fig.layout.xaxis2.title.text.replace("<br>", " ")
    assert list(fig.layout.xaxis.range) == pytest.approx([-1.08, 1.08])  # rho's fixed axis
    assert "Spearman ρ" in fig.layout.xaxis.title.text.replace("<br>", " ")
    # printed values: a column right of each plot area, never inside it
    printed = [a for a in fig.layout.annotations if a.xref in ("x domain", "x2 domain")]
    assert len(printed) == len(table) and all(a.x == 1.0 for a in printed)
    assert fig.layout.margin.r >= 7 * max(len(a.text) for a in printed)


def test_bar_values_sit_right_of_the_plot_area_with_room_in_the_margin() -> None:
    expl = make_explanation(q=200, p=4, seed=4, group_player=None).oriented_to_winner()
    for kind in ("mean_abs", "mean"):
        fig = bar(expl, kind=kind)
        printed = [a for a in fig.layout.annotations if a.xref == "paper" and a.x == 1.0]
        assert len(printed) == len(fig.data[0].x)
        assert all(a.xanchor == "left" for a in printed)
        assert fig.layout.margin.r >= 7 * max(len(a.text) for a in printed)


def test_dependence_note_states_the_direction() -> None:
    view = _always_against().oriented_to_winner()
    fig = dependence(view, 0)
    notes = " ".join(a.text for a in fig.layout.annotations).replace("<br>", " ")
    rho = spearmanr(view.values[:, 0], view.data[:, 0]).statistic
    assert f"Spearman ρ(value, f0 difference (winner - loser)) = {rho:+.2f}" in notes
    cats = make_explanation(q=300, p=3, seed=2, group_player=1).oriented_to_winner()
    notes = " ".join(a.text for a in dependence(cats, 1).layout.annotations)
    assert "mean value by the winner's category:" in notes.replace("<br>", " ")


def test_imputed_shares_and_labels_from_five_percent() -> None:
    report = DataReport(imputed=(
        ImputationNote("items", "height", 17, "median 185"),
        ImputationNote("items", "hand", 4, "most frequent category 'R'"),
        ImputationNote("context", "surface", 50, "most frequent category 'Hard'"),
    ))  # fmt: skip
    data = SimpleNamespace(n_items=100, n_duels=500, report=report)
    shares = imputed_shares(data)
    assert shares == {"height": 0.17, "hand": 0.04, "surface": 0.1}
    assert feature_label("height", shares, html=False) == "height (17 % imputed)"
    assert feature_label("hand", shares) == "hand"  # 4 %: below the note's threshold
    assert feature_label("left:height", shares, html=False) == "left:height (17 % imputed)"
    assert "17 % imputed" in feature_label("height", shares)
    fig = bar(make_explanation(q=50, p=2, group_player=None, names=("height", "hand")),
              imputed=shares)  # fmt: skip
    assert any("17 % imputed" in t for t in fig.layout.yaxis.ticktext)
    assert "hand" in fig.layout.yaxis.ticktext
