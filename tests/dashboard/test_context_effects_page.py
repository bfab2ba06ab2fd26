"""Dashboard (AppTest): the Context effects page on a C-GPM, and its link from Explain."""

from __future__ import annotations

import json

import pytest

from prefshap_core.analysis.context_effects import context_effects
from prefshap_core.analysis.head_to_head import most_active_pair, pair_preference
from tests.dashboard.apptest import assert_clean, goto, new_app, sample_upload, settle, texts


def test_without_a_cgpm_the_page_says_what_it_needs() -> None:
    at = goto(new_app(), "context_effects")  # the demo: a GPM
    assert_clean(at)
    assert [t.value for t in at.title] == ["Context effects"]
    assert "need a C-GPM" in texts(at)


@pytest.mark.slow
def test_cgpm_heatmap_sentence_and_link_from_explain() -> None:
    at = goto(sample_upload(new_app()), "train")
    fp = at.session_state["active_dataset"]
    fingerprint = at.session_state["datasets"][fp].fingerprint
    at.radio(key=f"train:kind:{fingerprint}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "explain")
    assert_clean(at)
    assert any("Context effects" in link.label for link in at.get("page_link"))
    at = goto(at, "context_effects")
    assert_clean(at)
    model = at.session_state["models"][fingerprint]
    loaded = at.session_state["datasets"][fp]
    effects = context_effects(model.function)
    shown = texts(at)
    assert "Strongest shifts: " in shown
    row, column = effects.strongest(1)[0]
    points = 100 * abs(effects.change[row, column])
    assert f"{points:.1f} points of mean win probability under {effects.levels[column]}" in shown
    label = dict(zip(loaded.data.item_ids.astype(str), loaded.data.labels.astype(str), strict=True))
    assert "Strongest shifts: " + label[str(effects.item_ids[row])] in shown  # names, not ids
    assert "venue = indoor" in shown and "venue = outdoor" in shown
    spec = at.get("plotly_chart")[0].proto.spec
    assert '"heatmap"' in spec

    # Head-to-head on the same C-GPM: one probability per pair, the waterfall's own.
    at = goto(at, "head_to_head")
    assert_clean(at)
    fn = model.function
    data = loaded.data
    a, b = most_active_pair(data)  # the page's default pair
    pref = pair_preference(fn, data.items[[data.item_index(a)]], data.items[[data.item_index(b)]])
    box = at.selectbox(key=f"h2h:context:{fingerprint}")
    row = box.value
    assert row is not None  # the most frequent observed context first
    metric = next(m for m in at.metric if m.label.startswith("P("))
    under = f"{100 * pref.p_under(row):.1f} %"
    assert metric.value == under
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert f"wins) = {under}</b>" in title and " · P under venue = " in title
    box.select_index(len(box.options) - 1)  # no context: the context-averaged model
    at = settle(at)
    assert_clean(at)
    metric = next(m for m in at.metric if m.label.startswith("P("))
    averaged = f"{100 * pref.p_average:.1f} %"
    assert metric.value == averaged
    title = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert f"wins) = {averaged}</b>" in title
    assert " · P averaged over the observed contexts" in title
    at = settle(at)  # the choice stays (it has no context label to remember it by)
    assert next(m for m in at.metric if m.label.startswith("P(")).value == averaged
