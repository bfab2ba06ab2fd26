"""Dashboard (AppTest): the Intransitivity page lists only the cycles that survive the
posterior (p_cycle, a threshold control) and says so when none does."""

from __future__ import annotations

from tests.dashboard.apptest import (
    assert_clean,
    goto,
    new_app,
    settle,
    texts,
)


def _model_p_cycles(at) -> list[float]:
    """The p_cycle column (percent) of the model's cycle table; [] when none is listed."""
    for frame in at.dataframe:
        table = frame.value
        if {"A", "B", "C", "P(A beats B)"} <= set(table.columns):
            return [float(v.lstrip(">").rstrip("%").strip()) for v in table["p_cycle"]]
    return []


def test_the_threshold_filters_the_model_cycles_and_none_left_is_said() -> None:
    at = goto(new_app(), "intransitivity")
    assert_clean(at)
    fp = at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint
    slider = at.slider(key=f"intransitivity:min_p:{fp}")
    assert slider.value == 0.95
    assert "posterior draws" in texts(at)
    shown = _model_p_cycles(at)
    assert all(p >= 95 for p in shown)
    if not shown:
        assert "distinguishable from noise" in texts(at)
    slider.set_value(0.0)
    at = settle(at)
    assert_clean(at)
    everything = _model_p_cycles(at)
    assert len(everything) == 20 and len(everything) >= len(shown)  # the clusters game
    at.slider(key=f"intransitivity:min_p:{fp}").set_value(1.0)
    at = settle(at)
    assert_clean(at)
    sure = _model_p_cycles(at)
    assert all(p >= 99.9 for p in sure)
    if not sure:
        assert "distinguishable from noise" in texts(at)
