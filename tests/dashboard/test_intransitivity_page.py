"""Dashboard (AppTest): the Intransitivity page on the demo and on a C-GPM."""

from __future__ import annotations

import re

import pytest

from tests.dashboard.apptest import (
    assert_clean,
    export_labels,
    goto,
    new_app,
    sample_upload,
    settle,
    texts,
)


def _fingerprint(at) -> str:
    return at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint


def _metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_demo_page_shows_share_cycles_links_and_the_potential() -> None:
    at = goto(new_app(), "intransitivity")
    assert_clean(at)
    assert [t.value for t in at.title] == ["Intransitivity"]
    fp = _fingerprint(at)
    assert at.number_input(key=f"intransitivity:n:{fp}").value == 200
    metrics = _metrics(at)
    share = float(metrics["Cyclic share"].rstrip("%"))
    # The clusters game is cyclic across clusters (A beats B on x_AB, ...).
    assert 5.0 < share < 100.0
    assert int(metrics["Cyclic triangles (model)"].replace(",", "")) > 0
    assert int(metrics["Cyclic triangles (data)"].replace(",", "")) > 0
    # One row per cycle: three names, three probabilities in columns (not a wall of links).
    # With every cycle listed (threshold 0): the demo's posterior is wide enough that
    # few of its cycles pass the default 95 %.
    at.slider(key=f"intransitivity:min_p:{fp}").set_value(0.0)
    at = settle(at)
    assert_clean(at)
    model_cycles, data_cycles = (frame.value for frame in at.dataframe[:2])
    assert list(model_cycles.columns[:7]) == [
        "#", "A", "B", "C", "P(A beats B)", "P(B beats C)", "P(C beats A)",
    ]  # fmt: skip
    assert len(model_cycles) == 20
    percent = re.compile(r"\d{1,3}\.\d %")  # the dashboard's one rounding of probabilities
    for column in ("P(A beats B)", "P(B beats C)", "P(C beats A)"):
        assert all(percent.fullmatch(v) and float(v[:-2]) > 50 for v in model_cycles[column])
    assert list(data_cycles.columns) == ["#", "A", "B", "C", "A over B", "B over C", "C over A"]
    names = set(at.session_state["datasets"][at.session_state["active_dataset"]].data.labels)
    assert set(model_cycles[["A", "B", "C"]].to_numpy().ravel()) <= set(map(str, names))
    assert "head-to-head?" not in texts(at)  # the links come with a selected row
    assert "potential s" in at.get("plotly_chart")[0].proto.spec
    assert "Cycles (CSV)" in export_labels(at)

    at.number_input(key=f"intransitivity:n:{fp}").set_value(30)
    at = settle(at)
    assert_clean(at)
    assert "The 30 most active items" in texts(at)


@pytest.mark.slow
def test_cgpm_context_changes_the_model_not_the_data() -> None:
    at = goto(sample_upload(new_app()), "train")
    fp = _fingerprint(at)
    at.radio(key=f"train:kind:{fp}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "intransitivity")
    assert_clean(at)
    averaged = _metrics(at)
    assert "context-averaged" in texts(at)
    at.selectbox(key=f"intransitivity:ctx:{fp}:venue").set_value("indoor")
    at = settle(at)
    assert_clean(at)
    indoor = _metrics(at)
    assert "context venue = indoor, other groups averaged" in texts(at)
    assert indoor["Cyclic share"] != averaged["Cyclic share"]
    assert indoor["Cyclic triangles (data)"] == averaged["Cyclic triangles (data)"]
