"""Dashboard (AppTest): the Duel and Explain pages split g into its utility and its
intransitive part for a sum-kernel model, with the engine's numbers."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dashboard.services.explain_requests import DEFAULT_EXPLAIN_CAP
from prefshap_core.analysis.utility_split import duel_parts
from prefshap_core.workflow.selections import sample_duels
from prefshap_core.workflow.training import SMALL_TEST
from tests.dashboard.apptest import (
    assert_clean,
    goto,
    new_app,
    sample_upload,
    settle,
    texts,
)

# Every test trains a sum-kernel model in the app.
pytestmark = pytest.mark.slow

NUMBER = r"([+-]?\d+\.\d+)"


def _fingerprint(at) -> str:
    return at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint


def _trained(at, kind: str, utility_weight: float):
    """``at`` with a small ``kind`` model of fixed utility weight trained on its data."""
    at = goto(at, "train")
    at.radio(key=f"train:kind:{_fingerprint(at)}").set_value(kind)
    at.number_input(key="train:centres").set_value(120)
    at.number_input(key="train:utility_weight").set_value(utility_weight)
    at.checkbox(key="train:refine").set_value(False)
    next(b for b in at.button if b.label == "Train").click()
    return settle(at)


def _active(at):
    loaded = at.session_state["datasets"][at.session_state["active_dataset"]]
    return loaded, at.session_state["models"][loaded.fingerprint]


def test_duel_and_explain_split_a_cgpm_with_utility_weight() -> None:
    at = _trained(sample_upload(new_app()), "cgpm", 2.0)
    loaded, model = _active(at)
    fn = model.result.function
    assert fn.kind == "cgpm" and fn.utility_weight == 2.0

    at = goto(at, "duel")
    assert_clean(at)
    duel, _ = at.session_state["selected_duel"].get(loaded.fingerprint) or (
        int(model.result.split.test[0]),
        None,
    )
    pov = next(r for r in at.radio if r.key.startswith("duel:pov:"))
    data = loaded.data
    # The duel's own context, seen from the chosen side.
    parts = duel_parts(fn, data, np.array([duel]))
    sign = 1.0 if pov.value == str(data.item_ids[data.left[duel]]) else -1.0
    line = next(t for t in texts(at).splitlines() if t.startswith("g = "))
    found = re.fullmatch(
        rf"g = {NUMBER}: utility part {NUMBER} \(transitive: f\(.+\) − f\(.+\)\), "
        rf"intransitive part {NUMBER} .*",
        line,
    )
    assert found, line
    g, utility, intransitive = (float(v) for v in found.groups())
    assert utility == round(sign * float(parts.utility[0]), 3)
    assert intransitive == round(sign * float(parts.intransitive[0]), 3)
    shown_g = next(m for m in at.metric if m.label == "Preference g").value
    assert g == float(shown_g)  # the same g as the page's metric
    assert abs(utility + intransitive - g) <= 0.0015

    at = goto(at, "explain")
    assert_clean(at)
    captions = [t for t in texts(at).splitlines() if t.startswith("Of g over these")]
    assert len(captions) == 2  # the item tab (context-averaged) and the context tab
    test = model.result.split.test
    # The page's subset: all duels when the test split is small, capped (seeded).
    duels = np.arange(data.n_duels) if len(test) < SMALL_TEST else test
    duels = sample_duels(duels, DEFAULT_EXPLAIN_CAP)
    for caption, averaged in zip(captions, (True, False), strict=True):
        expected = duel_parts(fn, data, duels, averaged=averaged)
        utility, intransitive = expected.mean_sizes()
        assert caption == (
            f"Of g over these {len(duels):,} duels, the utility part (transitive) carries "
            f"{expected.utility_share():.0%} and the intransitive part the rest: mean "
            f"|utility part| {utility:.3f}, mean |intransitive part| {intransitive:.3f}."
        )


def test_plain_gpm_says_it_has_no_utility_part() -> None:
    at = _trained(new_app(), "gpm", 0.0)
    _, model = _active(at)
    assert model.result.function.utility_weight == 0.0
    at = goto(at, "duel")
    assert_clean(at)
    assert "Plain GPM (utility weight 0): no utility part" in texts(at)
    assert not any(t.startswith("g = ") for t in texts(at).splitlines())
    at = goto(at, "explain")
    assert "Of g over these" not in texts(at)
