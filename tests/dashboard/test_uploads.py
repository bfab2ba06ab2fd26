"""Dashboard uploads as users have them: lenient reports, names, contexts tables,
id-like columns, and a browser reload that keeps the dataset and the model."""

from __future__ import annotations

import re

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import pages
from tests.dashboard.apptest import (
    APP,
    SAMPLE,
    TIMEOUT_S,
    assert_clean,
    new_app,
    sample_upload,
    settle,
    shown,
    texts,
)

BAD_ROWS = (SAMPLE / "duels.csv").read_text() + "c01,nobody,c01,indoor\nc02,c03,,indoor\n"


def sidebar_text(at: AppTest) -> str:
    return "\n".join(shown(m.value) for m in at.sidebar.markdown)


def test_lenient_upload_drops_bad_rows_and_offers_the_report() -> None:
    at = sample_upload(new_app(), duels=BAD_ROWS.encode())
    assert_clean(at)
    shown = texts(at)
    assert "it is now the active dataset" in shown
    assert "1 invalid duel rows were dropped" in shown
    assert "1 duel rows have no outcome and were skipped" in shown
    assert at.metric[1].value == "800"
    labels = [b.proto.label for b in at.get("download_button")]
    assert any("Download the 2 rejected or skipped rows" in label for label in labels)
    # The sidebar shows the new upload at once, not the demo.
    assert "Upload 1: items.csv + duels.csv" in sidebar_text(at)


def test_two_uploads_get_distinct_names() -> None:
    at = sample_upload(new_app())
    first = re.search(r"Upload 1: items\.csv \+ duels\.csv · \w+", sidebar_text(at))
    assert first is not None
    at = sample_upload(at, duels=BAD_ROWS.encode())
    second = re.search(r"Upload 2: items\.csv \+ duels\.csv · \w+", sidebar_text(at))
    assert second is not None and second.group(0)[-6:] != first.group(0)[-6:]


def test_contexts_table_upload_and_id_like_opt_in() -> None:
    at = new_app()
    at.switch_page(pages.DATA.script).run()
    at.button_group(key="data:source").set_value("Upload CSV files").run()
    items = "id,speed,badge_id\n" + "".join(f"p{k},{k % 7},{k}\n" for k in range(30))
    duels = "left,right,winner,fan\n" + "".join(
        f"p{k},p{(k * 7 + 3) % 30},p{k},{k % 4}\n" for k in range(30) if k != (k * 7 + 3) % 30
    )
    contexts = "fan,age\n0,20\n1,30\n2,40\n3,50\n"
    uploader = {u.label: u for u in at.file_uploader}
    uploader["items.csv"].set_value(("items.csv", items.encode(), "text/csv"))
    uploader["duels.csv"].set_value(("duels.csv", duels.encode(), "text/csv"))
    uploader["contexts.csv (optional)"].set_value(("fans.csv", contexts.encode(), "text/csv"))
    at.run()
    assert_clean(at)
    groups = at.dataframe[0].value
    assert list(groups["feature (Shapley player)"]) == ["speed", "age"]
    assert "Upload 1: items.csv + duels.csv + fans.csv" in sidebar_text(at)
    ignored = next(d.value for d in at.dataframe if "why" in d.value.columns)
    assert ignored["column"].tolist() == ["badge_id"]
    at.multiselect[0].set_value(["badge_id"]).run()
    assert_clean(at)
    assert "badge_id" in set(at.dataframe[0].value["feature (Shapley player)"])


@pytest.mark.slow
def test_a_reload_restores_the_upload_and_its_model_by_a_random_token() -> None:
    at = sample_upload(new_app())
    at.switch_page(pages.TRAIN.script).run()
    next(b for b in at.button if b.label == "Train").click().run()
    at = settle(at)
    assert_clean(at)
    token = at.query_params["session"]
    token = token[0] if isinstance(token, list) else token
    assert re.fullmatch(r"[0-9a-f]{32}", token)
    assert token not in {"", None}

    reloaded = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    reloaded.query_params["session"] = token
    reloaded.run()
    assert_clean(reloaded)
    shown = sidebar_text(reloaded)
    assert "Upload 1: items.csv + duels.csv" in shown and "Synthetic" not in shown
    assert any("test ROC AUC" in str(c.value) for c in reloaded.sidebar.caption)

    stranger = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    stranger.query_params["session"] = "0" * 32  # a guess: nothing to restore
    stranger.run()
    assert_clean(stranger)
    assert "Synthetic clusters (demo" in sidebar_text(stranger)
