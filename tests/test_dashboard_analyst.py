"""Dashboard (AppTest): Head-to-head (with what-if), Rankings, deep links, drill-down."""

from __future__ import annotations

import numpy as np
from test_dashboard_support import (
    assert_clean,
    dashboard_cache,  # noqa: F401  (autouse fixture: a temporary disk cache)
    goto,
    new_app,
    settle,
    texts,
)

from prefshap_core.analysis.head_to_head import most_active_pair, pair_preference


def _loaded(at):
    return at.session_state["datasets"][at.session_state["active_dataset"]]


def _model(at):
    return at.session_state["models"][_loaded(at).fingerprint]


def _p(at, label_start: str) -> float:
    metric = next(m for m in at.metric if m.label.startswith(label_start))
    assert metric.value.endswith(" %"), metric.value
    return float(metric.value.removesuffix(" %"))


def test_head_to_head_defaults_to_the_most_active_pair() -> None:
    at = goto(new_app(), "head_to_head")
    assert_clean(at)
    assert [t.value for t in at.title] == ["Head-to-head"]
    data = _loaded(at).data
    a, b = most_active_pair(data)
    labels = dict(zip(data.item_ids, data.labels, strict=True))
    fn = _model(at).result.function
    expected = pair_preference(
        fn, data.items[[data.item_index(a)]], data.items[[data.item_index(b)]]
    )
    p = _p(at, f"P({labels[a]} beats")
    assert abs(p - 100 * expected.p_average) < 0.051
    assert abs(p + _p(at, f"P({labels[b]} beats") - 100) < 0.11
    assert len(at.get("plotly_chart")) == 1  # the waterfall seen from A
    assert f"Why: {labels[a]} vs {labels[b]}, seen from {labels[a]}" in texts(at)
    assert at.query_params["a"] == a and at.query_params["b"] == b
    assert at.query_params["dataset"] == "demo"


def test_what_if_edit_changes_the_probability() -> None:
    at = goto(new_app(), "head_to_head")
    data = _loaded(at).data
    a, _ = most_active_pair(data)
    before = next(m for m in at.metric if m.label.startswith("P(")).value
    box = next(n for n in at.number_input if n.key.endswith(f":a:{a}:x0"))
    box.set_value(box.max if abs(box.value - box.max) > abs(box.value - box.min) else box.min)
    at = settle(at)
    assert_clean(at)
    after = next(m for m in at.metric if m.label.startswith("P("))
    assert "(edited)" in after.label
    assert after.value != before


def test_a_deep_link_opens_a_pair() -> None:
    at = new_app()
    data = _loaded(at).data
    a, b = str(data.item_ids[5]), str(data.item_ids[9])
    at.query_params["dataset"] = "demo"
    at.query_params["a"] = a
    at.query_params["b"] = b
    at = goto(at, "head_to_head")
    assert_clean(at)
    labels = dict(zip(data.item_ids, data.labels, strict=True))
    assert any(m.label.startswith(f"P({labels[a]} beats {labels[b]})") for m in at.metric)


def test_rankings_table_and_its_export() -> None:
    at = goto(new_app(), "rankings")
    assert_clean(at)
    assert [t.value for t in at.title] == ["Rankings"]
    table = at.dataframe[0].value
    data = _loaded(at).data
    assert len(table) == data.n_items
    p = table["mean P(win) vs pool"].str.removesuffix(" %").astype(float).to_numpy()
    assert np.all(np.diff(p) <= 0)
    assert (table["duels"] == table["wins"] + table["losses"]).all()
    assert "Bradley-Terry score" in table.columns  # a GPM: the record's BT score
    assert "Rankings (CSV)" in [b.label for b in at.get("download_button")]
