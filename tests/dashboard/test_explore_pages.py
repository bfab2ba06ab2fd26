"""Dashboard (AppTest): Explain subsets, the Players view of one item, the Duel view."""

from __future__ import annotations

import numpy as np
import pytest

from dashboard import pages
from tests.dashboard.apptest import (
    assert_clean,
    export_labels,
    goto,
    new_app,
    sample_upload,
    settle,
    shown,
    texts,
)

VIEW_WORD = {"all": "all duels", "losses": "losses", "wins": "wins"}


def _fingerprint(at) -> str:
    return at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint


def _trained_sample_cgpm():
    """The app with the sample upload active and a small C-GPM trained on it."""
    at = goto(sample_upload(new_app()), "train")
    at.radio(key=f"train:kind:{_fingerprint(at)}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    next(b for b in at.button if b.label == "Train").click()
    return settle(at)


def test_explain_between_two_groups() -> None:
    at = goto(new_app(), "explain")
    fp = _fingerprint(at)
    at.button_group(key=f"explain:subset:{fp}").set_value("Between two groups").run()
    at.selectbox(key=f"explain:gcol:{fp}").set_value("cluster").run()
    at.selectbox(key=f"explain:ga:{fp}:cluster").set_value("A")
    at.selectbox(key=f"explain:gb:{fp}:cluster").set_value("B")
    at.toggle(key=f"explain:gtest:{fp}").set_value(False)  # all duels, then capped
    at.number_input(key="explain:cap").set_value(120)
    at = settle(at)
    assert_clean(at)
    assert "cluster A vs B (120 duels)" in at.get("plotly_chart")[0].proto.spec
    assert "random sample of 120" in texts(at)
    # The paper's finding on A-vs-B duels: x_AB matters most there.
    expl = next(
        v for v in at.session_state["jobs"].values() if v.finished and v.result is not None
    ).result
    importance = dict(zip(expl.player_names, np.abs(expl.values).mean(0), strict=True))
    assert max(importance, key=importance.get) == "x_AB"


@pytest.mark.slow
def test_explain_under_one_context() -> None:
    at = goto(_trained_sample_cgpm(), "explain")
    fp = _fingerprint(at)
    at.button_group(key=f"explain:subset:{fp}").set_value("Under one context").run()
    at.selectbox(key=f"explain:ccol:{fp}").set_value("venue")
    at.selectbox(key=f"explain:cval:{fp}:venue").set_value("indoor")
    at = settle(at)
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["Item features", "Context features"]
    assert len(at.get("plotly_chart")) == 6  # beehive, bar, dependence per tab
    assert export_labels(at).count("CSV") == 6


@pytest.mark.slow
def test_player_view_losses_and_duel() -> None:
    at = goto(_trained_sample_cgpm(), "players")
    fp = _fingerprint(at)
    at.selectbox(key=f"players:item:{fp}").set_value("c01").run()
    assert [s.value for s in at.subheader] == ["Swift Otter (c01)"]
    record = {m.label: m.value for m in at.metric}
    assert record == {"Duels": "31", "Wins": "18", "Losses": "13", "Win rate": "58%"}
    for view, n in (("losses", 13), ("wins", 18), ("all", 31)):
        at.button_group(key=f"players:view:{fp}").set_value(view)
        at = settle(at)
        assert_clean(at)
        assert len(at.get("plotly_chart")) == 6  # items and context: beehive, bar, dependence
        assert f"{VIEW_WORD[view]} ({n})" in at.get("plotly_chart")[0].proto.spec
        table = at.dataframe[-1].value
        assert len(table) == min(n, 20)  # first page of the duels table
        if view != "all":
            assert set(table["result"]) == {"lost" if view == "losses" else "won"}
    assert {"PNG", "SVG", "HTML", "CSV"} <= set(export_labels(at))
    # The explanation is from c01's point of view: in its wins c01 is the winner side.
    at.button_group(key=f"players:view:{fp}").set_value("losses")
    at = settle(at)
    lost = at.dataframe[-1].value.iloc[0]
    at.selectbox(key="players:open:c01:losses").set_value(lost["duel_id"]).run()
    # st.switch_page ran: AppTest shows the Duel page for that run only (its next
    # run returns to the page AppTest itself last switched to), so go there to wait.
    assert [t.value for t in at.title] == ["Duel"]
    assert at.session_state["selected_duel"][fp] == (int(lost["duel"]), "c01")
    at = goto(at, "duel")
    assert_clean(at)
    assert f"Duel {lost['duel_id']}:" in texts(at)
    pov = next(r for r in at.radio if r.key.startswith("duel:pov:"))
    assert pov.value == "c01"  # seen from the player who was selected
    probs = [m for m in at.metric if m.label.startswith("P(")]
    p_me = float(probs[0].value.rstrip("%"))
    p_other = float(probs[1].value.rstrip("%"))
    assert probs[0].label == "P(Swift Otter wins)"
    assert abs(p_me + p_other - 100) < 0.2
    assert len(at.get("plotly_chart")) == 1
    assert "Context values (CSV)" in export_labels(at)


def test_duel_by_id() -> None:
    at = goto(new_app(), "duel")
    fp = _fingerprint(at)
    box = next(t for t in at.text_input if t.label.startswith("Duel id"))
    box.set_value("17")
    at = settle(at)
    assert_clean(at)
    assert "Duel 17:" in texts(at)
    box = next(t for t in at.text_input if t.label.startswith("Duel id"))
    box.set_value("no-such-duel").run()
    assert not at.exception
    assert any("no-such-duel" in shown(e.value) for e in at.error)
    assert at.session_state["selected_duel"][fp][0] == 16  # duel ids are 1-based rows here


def test_unexpected_errors_are_friendly(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.services import views_data

    def broken(*args, **kwargs):
        raise RuntimeError("a bug deep inside")

    at = new_app()
    monkeypatch.setattr(views_data, "item_record", broken)  # the page's call, cached or not
    at.switch_page(pages.PLAYERS.script).run()
    assert not at.exception  # no traceback reached Streamlit
    assert [e.value for e in at.error] == [
        "Something went wrong here. Your data and models are kept: try again, or switch "
        "page and come back. If it happens again, please report it with the details below."
    ]
    assert "RuntimeError: a bug deep inside" in at.get("code")[0].value  # folded away
    assert at.expander[-1].label == "Details"
