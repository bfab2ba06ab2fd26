"""Dashboard (AppTest): split-by-side waterfall, own vs opponents' features, interactions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.dashboard.apptest import (
    assert_clean,
    goto,
    new_app,
    sample_upload,
    settle,
    texts,
)


def _fingerprint(at) -> str:
    return at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint


def _finished_results(at, prefix: str) -> list:
    return [
        job.result
        for key, job in at.session_state["jobs"].items()
        if key.startswith(prefix) and job.finished and job.result is not None
    ]


def test_explain_page_interaction_heatmap_and_pair() -> None:
    at = goto(new_app(), "explain")
    fp = _fingerprint(at)
    n_charts = len(at.get("plotly_chart"))
    at.toggle(key=f"explain:interactions:{fp}").set_value(True)
    at = settle(at)
    assert_clean(at)
    charts = at.get("plotly_chart")
    assert len(charts) == n_charts + 1
    heatmap = charts[-1].proto.spec
    assert '"symbol":"square"' in heatmap and "mean |SII|" in heatmap
    assert "Click a cell" in texts(at)
    (inter,) = _finished_results(at, "interactions:")
    assert inter.values.shape[1] == len(inter.pair_names)
    # A click on a cell (Streamlit reports scatter selections): that pair's plot opens.
    i, j = 0, 1
    at.session_state["explain:interactions"] = {
        "selection": {"points": [{"customdata": [i, j, 0.0, 0.0]}], "point_indices": [0]}
    }
    at.run()
    assert_clean(at)
    charts = at.get("plotly_chart")
    assert len(charts) == n_charts + 2
    names = inter.player_names
    title = json.loads(charts[-1].proto.spec)["layout"]["title"]["text"]
    assert title == f"{names[i]} × {names[j]}: interaction per duel"


def test_duel_page_split_by_side() -> None:
    at = goto(new_app(), "duel")
    fp = _fingerprint(at)
    plain = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["annotations"]
    assert not [a for a in plain if a["text"].endswith("'s features")]
    at.toggle(key=f"duel:split:{fp}").set_value(True)
    at = settle(at)
    assert_clean(at)
    (chart,) = at.get("plotly_chart")
    seen_from = next(r for r in at.radio if r.label == "Seen from").value
    names = [a["text"] for a in json.loads(chart.proto.spec)["layout"]["annotations"]]
    sections = [n for n in names if n.endswith("'s features")]
    assert len(sections) == 2  # one section per side, named in the margin
    (expl,) = _finished_results(at, "explain:")[-1:]
    assert expl.what == "sides" and seen_from in (expl.left_ids[0], expl.right_ids[0])
    # efficiency: both sides' values add up to the same g the plain view shows
    assert abs(expl.values[0].sum() - expl.outputs[0]) < 1e-10


def test_players_page_own_vs_opponents_in_losses() -> None:
    at = goto(new_app(), "players")
    fp = _fingerprint(at)
    at.button_group(key=f"players:view:{fp}").set_value("losses")
    at = settle(at)
    n_charts = len(at.get("plotly_chart"))
    at.toggle(key=f"players:sides:{fp}").set_value(True)
    at = settle(at)
    assert_clean(at)
    charts = at.get("plotly_chart")
    assert len(charts) == n_charts + 1
    assert "own vs opponents' features in losses" in charts[-1].proto.spec
    assert "own features moved the preference by" in texts(at)
    expl = next(r for r in _finished_results(at, "explain:") if r.what == "sides")
    item = at.session_state["selected_item"][fp]
    losses = expl.losses_of(item)
    assert losses.n_duels > 0 and np.all(losses.left_ids == item)


@pytest.mark.slow
def test_duel_page_split_by_side_with_context() -> None:
    """C-GPM: the split item sections chain into the context section."""
    at = goto(sample_upload(new_app()), "train")
    fp = _fingerprint(at)
    at.radio(key=f"train:kind:{fp}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "duel")
    at.toggle(key=f"duel:split:{fp}").set_value(True)
    at = settle(at)
    assert_clean(at)
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [a["text"] for a in spec["layout"]["annotations"]]
    assert len([n for n in names if n.endswith("'s features")]) == 2 and "context" in names
