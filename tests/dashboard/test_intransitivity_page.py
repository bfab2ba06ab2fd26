"""Dashboard (AppTest): the Intransitivity page on the demo and on a C-GPM."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

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
    shown = texts(at)
    # Each edge opens the Head-to-head page of its pair on this dataset and model.
    targets = re.findall(r"\]\((head-to-head\?[^)]+)\)", shown)
    queries = [parse_qs(urlsplit(target).query) for target in targets]
    model = at.session_state["models"][fp].settings_fp
    assert all(q["dataset"] == ["demo"] and q["model"] == [model] for q in queries)
    links = [(q["a"][0], q["b"][0]) for q in queries]
    assert len(links) >= 3 * 20  # 20 model cycles, three edges each, and the data's
    first = links[:3]  # one cycle: a > b, b > c, c > a
    assert first[0][1] == first[1][0] and first[1][1] == first[2][0] and first[2][1] == first[0][0]
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
