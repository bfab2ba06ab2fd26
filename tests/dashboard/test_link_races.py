"""Dashboard (AppTest): a click that races the page's URL update keeps the user's choice.

Every run the browser asks for carries the browser's URL of that moment. A click
that lands while a run is still sending its URL change (a player picked, then
"Losses" clicked at once) carries the URL from before that change; applied as a new
link it undid the pick (the fresh-clone CI once showed the previous player's duels).
"""

from __future__ import annotations

from tests.dashboard.apptest import active_dataset, assert_clean, goto, new_app


def _link(at) -> dict[str, str]:
    return {k: at.query_params[k] for k in ("player", "view") if k in at.query_params}


def _items(at) -> list[str]:
    return [str(i) for i in active_dataset(at).data.item_ids]


def test_a_click_carrying_the_url_before_a_pick_keeps_the_pick() -> None:
    at = goto(new_app(), "players")
    fp = active_dataset(at).fingerprint
    player = at.selectbox(key=f"players:item:{fp}")
    first = player.value
    assert _link(at) == {"player": first, "view": "all"}
    picked = next(i for i in _items(at) if i != first)
    player.set_value(picked).run()
    assert _link(at) == {"player": picked, "view": "all"}
    # The browser has not applied that URL yet when "Losses" is clicked: the click's
    # run comes with the URL from before the pick.
    at.query_params["player"] = first
    at.button_group(key=f"players:view:{fp}").set_value("losses").run()
    assert_clean(at)
    assert at.selectbox(key=f"players:item:{fp}").value == picked
    assert at.button_group(key=f"players:view:{fp}").value == "losses"
    assert _link(at) == {"player": picked, "view": "losses"}


def test_a_new_url_in_the_same_session_still_opens_its_view() -> None:
    at = goto(new_app(), "players")
    fp = active_dataset(at).fingerprint
    player = at.selectbox(key=f"players:item:{fp}")
    first = player.value
    picked, linked = [i for i in _items(at) if i != first][:2]
    player.set_value(picked).run()
    at.run()  # a run with the page's own URL: the browser has it
    # Neither this session's URL nor the one it replaced: a link opened in this tab.
    at.query_params["player"] = linked
    at.query_params["view"] = "wins"
    at.run()
    assert_clean(at)
    assert at.selectbox(key=f"players:item:{fp}").value == linked
    assert at.button_group(key=f"players:view:{fp}").value == "wins"
    # The URL the pick replaced, once the browser had the pick's URL, is a link too.
    at.query_params["player"] = first
    at.query_params["view"] = "all"
    at.run()
    assert at.selectbox(key=f"players:item:{fp}").value == first
