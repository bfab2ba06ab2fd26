"""Dashboard (AppTest): what-if edits travel in the URL (edit_a / edit_b) and come back."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode

from dashboard import links
from prefshap_core.analysis.covariates import encode_covariates, raw_covariates
from prefshap_core.analysis.head_to_head import most_active_pair, pair_preference
from tests.dashboard.apptest import active_dataset, assert_clean, goto, new_app, settle


def test_edits_param_round_trips_hostile_names_through_a_url() -> None:
    edits = {"price; per = kg": 12.5, "type": "a=b;c", "size": 3.0, "opt": None}
    text = links.edits_param(edits)
    assert text.count(";") == len(edits) - 1  # one separator per column, names encoded
    query = urlencode({"edit_a": text})
    back = links.parse_edits(parse_qs(query)["edit_a"][0])
    assert back == {"price; per = kg": "12.5", "type": "a=b;c", "size": "3", "opt": ""}
    assert links.edits_param({}) is None
    assert links.parse_edits(None) == {} and links.parse_edits("nonsense") == {}
    assert "edit_a" in links.PARAMS and "edit_b" in links.PARAMS


def test_an_edit_goes_into_the_url_and_a_link_reopens_it() -> None:
    at = goto(new_app(), "head_to_head")
    data = active_dataset(at).data
    a, b = most_active_pair(data)
    box = next(n for n in at.number_input if n.key.endswith(f":a:{a}:x0"))
    target = box.max if abs(box.value - box.max) > abs(box.value - box.min) else box.min
    box.set_value(target)
    at = settle(at)
    assert_clean(at)
    linked = links.edits_param({"x0": float(target)})
    assert at.query_params["edit_a"] == linked
    assert float(links.parse_edits(linked)["x0"]) == target  # exactly, every digit
    assert "edit_b" not in at.query_params
    edited = next(m for m in at.metric if m.label.startswith("P("))
    second = [m for m in at.metric if m.label.startswith("P(")][1]
    assert "(edited)" in edited.label and "(edited)" in second.label  # both probabilities

    fresh = new_app()
    for key, value in {"dataset": "demo", "a": a, "b": b, "edit_a": linked}.items():
        fresh.query_params[key] = value
    fresh = goto(fresh, "head_to_head")
    assert_clean(fresh)
    metric = next(m for m in fresh.metric if m.label.startswith("P("))
    assert "(edited)" in metric.label and metric.value == edited.value
    raw = {**raw_covariates(data, a), "x0": target}
    expected = pair_preference(
        at.session_state["models"][active_dataset(at).fingerprint].function,
        encode_covariates(data, raw), data.items[[data.item_index(b)]],
    )  # fmt: skip
    assert metric.value == f"{100 * expected.p_average:.1f} %"
