"""Dashboard uploads in the published layouts: a count table and a lizard-like trait
table read with no renaming, and the Data page says what it detected."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.dashboard.apptest import (
    APP,
    TIMEOUT_S,
    assert_clean,
    new_app,
    shown,
)

TEAMS = ["Baltimore", "Boston", "Cleveland", "Detroit", "Milwaukee", "New York", "Toronto"]


MAPPING_PANEL = "Column mapping: which column is which (the reader guesses; change any)"


def mapping_panel_open(at: AppTest) -> bool:
    (panel,) = [e for e in at.expander if e.label == MAPPING_PANEL]
    return bool(panel.proto.expanded)


def _upload(items: str, duels: str):
    at = new_app()
    at.switch_page("views/data.py").run()
    at.button_group(key="data:source").set_value("Upload CSV files").run()
    uploader = {u.label: u for u in at.file_uploader}
    uploader["items.csv"].set_value(("teams.csv", items.encode(), "text/csv"))
    uploader["duels.csv"].set_value(("counts.csv", duels.encode(), "text/csv"))
    at.run()
    assert_clean(at)
    return at


def test_count_table_upload_reads_as_weighted_duels() -> None:
    items = "team,payroll\n" + "".join(f"{t},{k + 2.5}\n" for k, t in enumerate(TEAMS))
    duels = "home.team,away.team,home.wins,away.wins\n" + "".join(
        f"{h},{a},{(i + j) % 4},{(i * j) % 3}\n"
        for i, h in enumerate(TEAMS)
        for j, a in enumerate(TEAMS)
        if h != a
    )
    at = _upload(items, duels)
    assert mapping_panel_open(at)  # another layout than one row per duel: check it
    assert at.text_input(key="data:mapping:counts").placeholder == "guess: home.wins,away.wins"
    assert any(
        shown(c.value) == "Worth checking: read as a count table: check the columns it took."
        for c in at.caption
    )
    n_duels = sum((i + j) % 4 + (i * j) % 3 for i in range(7) for j in range(7) if i != j)
    captions = [shown(c.value) for c in at.caption]
    assert any(
        c.startswith(f"read as: count table; 42 rows -> {n_duels} duels") for c in captions
    ), captions


def test_trait_table_with_text_ids_next_to_a_numeric_id() -> None:
    items = "id,lizard,svl\n" + "".join(f"{k},lizard{k:03d},{60 + k % 9}\n" for k in range(1, 61))
    duels = "winner,loser\n" + "".join(
        f"lizard{k:03d},lizard{(k * 7) % 60 + 1:03d}\n"
        for k in range(1, 61)
        if k != (k * 7) % 60 + 1
    )
    at = _upload(items, duels)
    assert any("item ids: `lizard`" in shown(c.value) for c in at.caption)


def test_column_mapping_panel_overrides_a_guess() -> None:
    items = "id,speed\n" + "".join(f"p{k},{k % 5}\n" for k in range(12))
    duels = "home,away,res\n" + "".join(
        f"p{k},p{(k + 5) % 12},{1 if k % 3 else -1}\n" for k in range(12)
    )
    at = new_app()
    at.switch_page("views/data.py").run()
    at.button_group(key="data:source").set_value("Upload CSV files").run()
    uploader = {u.label: u for u in at.file_uploader}
    uploader["items.csv"].set_value(("items.csv", items.encode(), "text/csv"))
    uploader["duels.csv"].set_value(("games.csv", duels.encode(), "text/csv"))
    at.run()
    errors = [shown(e.value) for e in at.error]
    assert any("there is no 'left' column" in e and "*Column mapping*" in e for e in errors)
    assert mapping_panel_open(at)  # the read failed
    for part, column in (("left", "home"), ("right", "away"), ("outcome", "res")):
        at.text_input(key=f"data:mapping:{part}").set_value(column)
    at.run()
    assert_clean(at)
    captions = [shown(c.value) for c in at.caption]
    assert "read as: long table (one row per duel); item ids: `id`" in captions
    assert at.text_input(key="data:mapping:id").placeholder == "guess: id"
    assert not mapping_panel_open(at)  # read as mapped: nothing left to check


def test_mapping_panel_collapsed_for_a_plain_long_upload() -> None:
    items = "id,speed\n" + "".join(f"p{k},{k % 5}\n" for k in range(12))
    duels = "left,right,y\n" + "".join(
        f"p{k},p{(k + 5) % 12},{1 if k % 3 else -1}\n" for k in range(12)
    )
    at = _upload(items, duels)
    assert not mapping_panel_open(at)
    assert at.text_input(key="data:mapping:left").placeholder == "guess: left"


def test_mapping_panel_open_when_two_item_columns_hold_every_id() -> None:
    items = "code,ref,speed\n" + "".join(f"p{k},p{k},{k % 5}\n" for k in range(12))
    duels = "left,right,y\n" + "".join(
        f"p{k},p{(k + 5) % 12},{1 if k % 3 else -1}\n" for k in range(12)
    )
    at = _upload(items, duels)
    assert mapping_panel_open(at)
    assert at.text_input(key="data:mapping:id").placeholder == "guess: code"
    assert (
        "Worth checking: several item columns hold every id (`code`, `ref`): `code` was taken."
        in [shown(c.value) for c in at.caption]
    )


def test_wide_choice_table_needs_no_items_upload() -> None:
    rows = ["id,choiceid,choice,price1,time1,price2,time2"]
    for k in range(40):
        p1, p2 = 1000 + 100 * (k % 5), 1500 + 100 * (k % 3)
        rows.append(f"{k // 10 + 1},{k + 1},choice{1 + k % 2},{p1},{90 + k % 3},{p2},{120}")
    people = "id,age\n1,20\n2,30\n3,40\n4,50\n"
    at = new_app()
    at.switch_page("views/data.py").run()
    at.button_group(key="data:source").set_value("Upload CSV files").run()
    uploader = {u.label: u for u in at.file_uploader}
    uploader["duels.csv"].set_value(("Train.csv", "\n".join(rows).encode(), "text/csv"))
    uploader["contexts.csv (optional)"].set_value(("people.csv", people.encode(), "text/csv"))
    at.run()
    assert_clean(at)
    assert mapping_panel_open(at)
    captions = [shown(c.value) for c in at.caption]
    assert any(
        c.startswith("read as: wide choice table;") and c.endswith("respondent `id` -> context key")
        for c in captions
    ), captions
    # a reload restores the upload without an items table, and its overrides
    token = at.query_params["session"]
    token = token[0] if isinstance(token, list) else token
    reloaded = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    reloaded.query_params["session"] = token
    reloaded.run()
    assert_clean(reloaded)
    sidebar = "\n".join(shown(m.value) for m in reloaded.sidebar.markdown)
    assert "Train.csv + people.csv" in sidebar and "Synthetic" not in sidebar
