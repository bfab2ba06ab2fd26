"""Dashboard (AppTest): the Intransitivity page lists only the cycles that survive the
posterior (p_cycle, a threshold control) and says so when none does."""

from __future__ import annotations

import re

from tests.dashboard.apptest import (
    assert_clean,
    goto,
    new_app,
    settle,
    texts,
)


def _model_cycle_lines(at) -> list[str]:
    return [line for line in texts(at).splitlines() if "(p_cycle " in line]


def test_the_threshold_filters_the_model_cycles_and_none_left_is_said() -> None:
    at = goto(new_app(), "intransitivity")
    assert_clean(at)
    fp = at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint
    slider = at.slider(key=f"intransitivity:min_p:{fp}")
    assert slider.value == 0.95
    assert "posterior draws" in texts(at)
    shown = _model_cycle_lines(at)
    p_cycles = [float(p) for p in re.findall(r"\(p_cycle (\d+)%\)", "\n".join(shown))]
    assert all(p >= 95 for p in p_cycles)
    slider.set_value(0.0)
    at = settle(at)
    assert_clean(at)
    everything = _model_cycle_lines(at)
    assert len(everything) == 20 and len(everything) >= len(shown)  # the clusters game
    at.slider(key=f"intransitivity:min_p:{fp}").set_value(1.0)
    at = settle(at)
    assert_clean(at)
    sure = _model_cycle_lines(at)
    assert all("(p_cycle 100%)" in line or ">99.9%" in line for line in sure)
    if not sure:
        assert "distinguishable from noise" in texts(at)
