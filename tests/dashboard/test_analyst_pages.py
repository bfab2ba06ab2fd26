"""Dashboard (AppTest): Head-to-head (with what-if), Rankings, deep links, drill-down."""

from __future__ import annotations

import json

import numpy as np
import pytest

from prefshap_core.analysis.head_to_head import most_active_pair, pair_preference
from tests.dashboard.apptest import (
    active_dataset,
    assert_clean,
    goto,
    new_app,
    sample_upload,
    settle,
    texts,
)


def _model(at):
    return at.session_state["models"][active_dataset(at).fingerprint]


def _p(at, label_start: str) -> float:
    metric = next(m for m in at.metric if m.label.startswith(label_start))
    assert metric.value.endswith(" %"), metric.value
    return float(metric.value.removesuffix(" %"))


def test_head_to_head_defaults_to_the_most_active_pair() -> None:
    at = goto(new_app(), "head_to_head")
    assert_clean(at)
    assert [t.value for t in at.title] == ["Head-to-head"]
    data = active_dataset(at).data
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
    data = active_dataset(at).data
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
    data = active_dataset(at).data
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
    data = active_dataset(at).data
    assert len(table) == data.n_items
    p = table["mean P(win) vs pool"].str.removesuffix(" %").astype(float).to_numpy()
    assert np.all(np.diff(p) <= 0)
    assert (table["duels"] == table["wins"] + table["losses"]).all()
    # The demo GPM was fitted with a UPM baseline: its f(x) is the score.
    assert "UPM utility f(x)" in table.columns
    assert "Rankings (CSV)" in [b.label for b in at.get("download_button")]


@pytest.mark.slow
def test_rankings_per_context_and_bradley_terry_without_a_baseline() -> None:
    at = goto(sample_upload(new_app()), "train")
    fp = _fp(at)
    at.radio(key=f"train:kind:{fp}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    at.checkbox(key="train:baseline").set_value(False)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "rankings")
    assert_clean(at)
    table = at.dataframe[0].value
    assert "Bradley-Terry score" in table.columns  # no UPM baseline: the record's BT
    box = at.selectbox(key=f"rankings:context:{fp}")
    assert "venue = indoor" in box.options
    box.set_value("p_mean[venue = indoor]")
    at = settle(at)
    assert_clean(at)
    ranked = at.dataframe[0].value
    from prefshap_core.analysis.rankings import rankings

    data, model = active_dataset(at).data, _model(at)
    expected = rankings(model.result.function, data).table
    expected = expected.sort_values(["p_mean[venue = indoor]", "item_id"],
                                    ascending=[False, True], kind="stable")  # fmt: skip
    assert ranked["item_id"].tolist() == expected["item_id"].tolist()
    assert at.query_params["context"] == "venue = indoor"


def _layout(at, k: int) -> dict:
    return json.loads(at.get("plotly_chart")[k].proto.spec)["layout"]


def _fp(at) -> str:
    return active_dataset(at).fingerprint


def test_duel_page_accepts_a_vs_b_by_names() -> None:
    at = goto(new_app(), "duel")
    data = active_dataset(at).data
    k = 40
    a, b = str(data.labels[data.left[k]]), str(data.labels[data.right[k]])
    box = next(t for t in at.text_input if t.label.startswith("Duel id"))
    box.set_value(f"{a.upper()} vs {b}")
    at = settle(at)
    assert_clean(at)
    duel, seen_from = at.session_state["selected_duel"][_fp(at)]
    pair = {data.left[duel], data.right[duel]}
    assert pair == {data.left[k], data.right[k]}
    assert seen_from == str(data.item_ids[data.left[k]])
    box = next(t for t in at.text_input if t.label.startswith("Duel id"))
    box.set_value("nobody vs nothing").run()
    assert any("no item is named" in str(e.value) and "nobody" in str(e.value) for e in at.error)


def test_opponents_filter_narrows_a_players_duels() -> None:
    at = goto(new_app(), "players")
    fp = _fp(at)
    item = at.selectbox(key=f"players:item:{fp}").value
    key = f"players:opponent:{fp}:{item}"
    choices = at.selectbox(key=key).options
    assert choices[0] == "all opponents"
    opponent = at.selectbox(key=key)
    data = active_dataset(at).data
    from prefshap_core.workflow.items import item_record

    table = item_record(data, item).duels
    top = table["opponent_id"].value_counts().index[0]
    opponent.set_value(top)
    at = settle(at)
    assert_clean(at)
    shown = at.dataframe[-1].value
    assert set(shown["opponent_id"]) == {top}
    assert len(shown) == int((table["opponent_id"] == top).sum())
    assert " against " in at.get("plotly_chart")[0].proto.spec
    # The duel table downloads in `prefshap explain --duels` format.
    assert "Duels (CSV)" in [b.label for b in at.get("download_button")]


def test_precision_control_samples_and_shows_standard_errors() -> None:
    at = goto(new_app(), "duel")
    at.radio(key="precision:mode:duel").set_value("sampled").run()
    at.number_input(key="precision:n:duel").set_value(32)
    at = settle(at)
    assert_clean(at)
    assert at.session_state["explain_precision"] == ("sampled", 32)
    assert "Sampled values (32 coalitions)" in texts(at)


def test_group_view_from_side_a_with_a_numeric_range() -> None:
    at = goto(new_app(), "explain")
    fp = _fp(at)
    at.button_group(key=f"explain:subset:{fp}").set_value("Between two groups").run()
    at.selectbox(key=f"explain:gcol:{fp}").set_value("x0").run()
    at.selectbox(key=f"explain:gopa:{fp}:x0").set_value(">").run()
    at.number_input(key=f"explain:gthra:{fp}:x0").set_value(0.5)
    at.toggle(key=f"explain:gtest:{fp}").set_value(False)
    at.number_input(key="explain:cap").set_value(60)
    at = settle(at)
    assert_clean(at)
    data = active_dataset(at).data
    from prefshap_core.analysis.groups import ItemCondition, duels_between, group_record, item_mask

    mask = item_mask(data, ItemCondition("x0", ">", 0.5))
    duels, signs = duels_between(data, mask, ~mask)
    wins, losses = group_record(data, duels, signs)
    assert f"Group A won {wins:,} and lost {losses:,} of these {len(duels):,} duels." in texts(at)
    assert _layout(at, 0)["title"]["text"].startswith("x0 > 0.5 vs the rest (60 duels)")
    # The dependence plot: its feature is a choice.
    at.selectbox(key="dep:feature:explain:items").set_value("x_AB")
    at = settle(at)
    assert _layout(at, 2)["xaxis"]["title"]["text"] == "x_AB difference (x0 > 0.5 - opponent)"


def test_a_deep_link_opens_a_players_losses() -> None:
    at = new_app()
    data = active_dataset(at).data
    item = str(data.item_ids[3])
    at.query_params["player"] = item
    at.query_params["view"] = "losses"
    at = goto(at, "players")
    assert_clean(at)
    assert at.selectbox(key=f"players:item:{_fp(at)}").value == item
    assert at.button_group(key=f"players:view:{_fp(at)}").value == "losses"
    assert at.query_params["player"] == item and at.query_params["view"] == "losses"


def test_a_deep_link_opens_an_explain_view_and_a_duel() -> None:
    at = new_app()
    at.query_params["view"] = "groups"
    at = goto(at, "explain")
    assert_clean(at)
    assert at.button_group(key=f"explain:subset:{_fp(at)}").value == "Between two groups"
    assert at.query_params["view"] == "groups"
    fresh = new_app()
    fresh.query_params["duel"] = "42"
    fresh = goto(fresh, "duel")
    assert_clean(fresh)
    assert "Duel 42:" in texts(fresh)
    assert fresh.query_params["duel"] == "42"


@pytest.mark.slow
def test_head_to_head_per_context_on_a_cgpm() -> None:
    at = goto(sample_upload(new_app()), "train")
    fp = _fp(at)
    at.radio(key=f"train:kind:{fp}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "head_to_head")
    assert_clean(at)
    data, fn = active_dataset(at).data, _model(at).result.function
    a, b = most_active_pair(data)
    pref = pair_preference(fn, data.items[[data.item_index(a)]], data.items[[data.item_index(b)]])
    table = next(d.value for d in at.dataframe if "observed context value" in d.value.columns)
    assert table["observed context value"].tolist() == [
        f"{g} = {v}" for g, v in zip(pref.by_context["group"], pref.by_context["value"],
                                     strict=True)
    ]  # fmt: skip
    shown = table.iloc[:, 1].str.removesuffix(" %").astype(float).to_numpy()
    np.testing.assert_allclose(shown, 100 * pref.by_context["p_a"].to_numpy(), atol=0.051)
    # The waterfall has the item and the context part (under the chosen context).
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert len(spec["data"]) == 2
    box = next(s for s in at.selectbox if s.label == "Context of the duel")
    assert len(box.options) == len(fn.contexts) + 1  # and the context-averaged model
