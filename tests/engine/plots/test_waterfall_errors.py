"""Waterfall error bars: sampling se, posterior sd, or both combined (and said which)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from prefshap_core.plots import waterfall
from prefshap_core.plots.waterfall import error_bar_note
from tests.engine.plots.figures import make_explanation


def _bars(fig):
    bar = fig.data[0]
    order = np.argsort(np.asarray(bar.y))
    errors = None if bar.error_x.array is None else np.asarray(bar.error_x.array)[order]
    return np.asarray(bar.x)[order], errors, [bar.hovertext[k] for k in order]


def test_error_bars_combine_se_and_sd_and_say_which_is_which():
    expl = make_explanation(q=3, p=4, seed=1, group_player=None)
    rng = np.random.default_rng(2)
    se, sd = rng.uniform(0.01, 0.1, (3, 4)), rng.uniform(0.01, 0.1, (3, 4))
    values, errors, hover = _bars(waterfall(replace(expl, standard_errors=se, sd=sd), index=1))
    column = [int(np.flatnonzero(np.isclose(expl.values[1], v))[0]) for v in values]
    np.testing.assert_allclose(errors, np.hypot(se[1, column], sd[1, column]))
    assert all("sampling s.e." in h and "posterior sd" in h for h in hover)
    _, only_sd, hover_sd = _bars(waterfall(replace(expl, sd=sd), index=1))
    np.testing.assert_allclose(only_sd, sd[1, column])
    assert all(h.endswith("(posterior sd)") for h in hover_sd)
    _, none, _ = _bars(waterfall(expl, index=1))
    assert none is None  # exact and no posterior: no error bars


def test_the_collapsed_rest_bounds_its_sd_by_the_sum():
    expl = make_explanation(q=2, p=5, seed=3, group_player=None)
    sd = np.full((2, 5), 0.02)
    _, errors, hover = _bars(waterfall(replace(expl, sd=sd), index=0, max_display=2))
    rest = [k for k, h in enumerate(hover) if "other features" in h]
    n_rest = int(hover[rest[0]].split(" other features")[0])
    assert len(rest) == 1 and n_rest >= 2 and np.isclose(errors[rest[0]], 0.02 * n_rest)
    assert "at most" in hover[rest[0]]


def test_error_bar_note_names_each_error():
    assert "sqrt(se² + sd²)" in error_bar_note(True, True, 64)
    assert "posterior sd" in error_bar_note(False, True)
    assert "sampling standard errors" in error_bar_note(True, False, 64)


def test_bar_error_bars_add_the_posterior_sd_bound_to_the_se():
    from prefshap_core.plots import bar, bar_table

    expl = make_explanation(q=6, p=4, seed=5, group_player=None)
    sd = np.random.default_rng(6).uniform(0.01, 0.1, (6, 4))
    with_sd = replace(expl, sd=sd)
    for kind in ("mean", "mean_abs"):
        table = bar_table(with_sd, kind=kind, max_display=2)
        fig = bar(with_sd, kind=kind, max_display=2)
        combined = np.hypot(table["standard_error"], table["posterior_sd_bound"])
        np.testing.assert_allclose(fig.data[0].error_x.array, combined)
        assert "posterior sd ≤" in fig.data[0].hovertemplate
        # the collapsed rest: its per-duel sds add (a bound), then the mean over duels
        rest = sd[:, [list(expl.player_names).index(n) for n in expl.player_names
                      if n not in set(table["feature"][:-1])]]  # fmt: skip
        assert np.isclose(table["posterior_sd_bound"].iloc[-1], rest.sum(axis=1).mean())
    assert "posterior sd" not in bar(expl, kind="mean").data[0].hovertemplate
