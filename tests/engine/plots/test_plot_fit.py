"""Texts that fit narrow figures: wrapped titles and axis titles (no line longer than its
limit, nothing lost), and beehive rows at least 28 px tall under titles and notes."""

from __future__ import annotations

import pytest

from prefshap_core.plots import bar, beehive, dependence, style
from tests.engine.plots.figures import make_explanation


def test_wrap_keeps_every_word_and_breaks_at_spaces() -> None:
    text = "mean Pref-SHAP value over 1,000 duels (positive favours Novak Djokovic)"
    wrapped = style.wrap(text, 28)
    assert wrapped.replace("<br>", " ") == text
    assert all(len(line) <= 28 for line in wrapped.split("<br>"))
    assert style.wrap("short", 28) == "short"
    assert style.wrap("a-very-long-single-word-that-cannot-break", 10).count("<br>") == 0


@pytest.mark.parametrize("kind", ["mean_abs", "mean", "direction"])
def test_bar_titles_are_wrapped_to_the_narrow_column(kind: str) -> None:
    expl = make_explanation(q=120, p=5, seed=2).oriented_to_winner()
    fig = bar(expl, kind=kind, title="Type 1 Fire vs the rest · venue = indoor (1,234 duels)")
    titles = [fig.layout.title.text]
    titles += [fig.layout[name].title.text for name in fig.layout if name.startswith("xaxis")]
    for text in titles:
        limit = max(style.NARROW_TITLE_CHARS, style.AXIS_TITLE_CHARS)
        longest_word = max(len(w) for w in text.replace("<br>", " ").split())
        assert all(len(line) <= max(limit, longest_word) for line in text.split("<br>")), text
    # the top margin holds every title line
    assert fig.layout.margin.t >= 40 + style.LINE_PX * style.n_lines(fig.layout.title.text)


@pytest.mark.parametrize("n_players", [2, 6, 12])
def test_beehive_rows_keep_their_height_under_a_title_and_notes(n_players: int) -> None:
    expl = make_explanation(q=800, p=n_players, seed=3).oriented_to_winner()
    fig = beehive(
        expl, max_points_per_row=300, title="All test duels (800 duels): Pref-SHAP values"
    )
    margin = fig.layout.margin
    rows = len(fig.layout.yaxis.tickvals)
    assert (fig.layout.height - margin.t - margin.b) / rows >= 28


def test_dependence_axis_titles_are_wrapped() -> None:
    expl = make_explanation(q=100, p=3, seed=4).oriented_to_winner()
    fig = dependence(expl, 0, title="x")
    y_title = fig.layout.yaxis.title.text
    assert "<br>" in y_title and "favours the winner" in y_title.replace("<br>", " ")
