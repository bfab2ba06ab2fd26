"""Dashboard (AppTest): the Data page's "is missing" indicator checkbox reads the data
again (uploads and built-ins), is part of the data's key, and survives a reload."""

from __future__ import annotations

import statistics

from streamlit.testing.v1 import AppTest

from tests.dashboard.apptest import (
    APP,
    TIMEOUT_S,
    assert_clean,
    goto,
    new_app,
    sample_upload,
    shown,
)

CHECKBOX = "data:missing-indicators"
# 20 items: h is missing for 8 (40 %), w for none; h decides every duel.
ITEMS = "id,h,w\n" + "".join(
    f"p{k},{'' if k % 5 in (0, 1) else 150 + 3 * k},{60 + k % 7}\n" for k in range(20)
)
PRESENT_H = [150 + 3 * k for k in range(20) if k % 5 not in (0, 1)]
MEDIAN_FILL = f"median {statistics.median(PRESENT_H):g}"
DUELS = "left,right,winner\n" + "".join(
    f"p{a},p{b},p{max(a, b)}\n" for a in range(20) for b in range(a + 1, 20) if (a + b) % 3 == 0
)


def model_columns(at: AppTest) -> str:
    """The "model columns" of the Data page's detected-features table, joined."""
    return " | ".join(at.dataframe[0].value["model columns"])


def fills(at: AppTest) -> dict[str, str]:
    table = next(d.value for d in at.dataframe if "filled with" in d.value.columns)
    return dict(zip(table["column"], table["filled with"], strict=True))


def sidebar_text(at: AppTest) -> str:
    return "\n".join(shown(m.value) for m in at.sidebar.markdown)


def test_the_checkbox_reads_an_upload_again_without_indicators_and_back() -> None:
    at = sample_upload(new_app(), ITEMS.encode(), DUELS.encode())
    assert_clean(at)
    assert at.checkbox(key=CHECKBOX).value is True  # on by default
    assert "h (missing)" in model_columns(at)
    assert fills(at)["h"].startswith("mean ") and "marked in 'h (missing)'" in fills(at)["h"]

    at.checkbox(key=CHECKBOX).uncheck().run()
    assert_clean(at)
    assert "(missing)" not in model_columns(at)
    assert fills(at)["h"] == MEDIAN_FILL
    keys = set(at.session_state["datasets"])
    assert len([k for k in keys if k.startswith("upload:")]) == 2  # a different cache key

    at.checkbox(key=CHECKBOX).check().run()  # back: the first reading, in use again
    assert_clean(at)
    assert "h (missing)" in model_columns(at)
    assert set(at.session_state["datasets"]) == keys  # nothing read a third time


def test_the_setting_survives_a_reload_of_the_session() -> None:
    at = sample_upload(new_app(), ITEMS.encode(), DUELS.encode())
    at.checkbox(key=CHECKBOX).uncheck().run()
    assert_clean(at)
    token = at.query_params["session"]
    token = token[0] if isinstance(token, list) else token

    reloaded = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    reloaded.query_params["session"] = token
    reloaded.run()
    assert_clean(reloaded)
    reloaded = goto(reloaded, "data")
    assert_clean(reloaded)
    assert "Upload" in sidebar_text(reloaded) and "Synthetic" not in sidebar_text(reloaded)
    assert "(missing)" not in model_columns(reloaded)
    assert fills(reloaded)["h"] == MEDIAN_FILL
    assert reloaded.checkbox(key=CHECKBOX).value is False  # shows how the data was read


def test_a_builtin_dataset_is_read_again_when_the_box_changes() -> None:
    at = goto(new_app(), "data")  # the demo is in use
    at.checkbox(key=CHECKBOX).uncheck().run()
    assert_clean(at)
    assert at.session_state["active_dataset"] == "builtin:demo:no-missing-indicators"
    assert "(no missing indicators)" in sidebar_text(at)
    token = at.query_params["session"]
    reloaded = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    reloaded.query_params["session"] = token[0] if isinstance(token, list) else token
    reloaded.run()
    assert_clean(reloaded)
    assert reloaded.session_state["active_dataset"] == "builtin:demo:no-missing-indicators"

    at.checkbox(key=CHECKBOX).check().run()
    assert_clean(at)
    assert at.session_state["active_dataset"] == "builtin:demo"


def test_a_deep_link_names_the_reading_and_opens_it() -> None:
    at = new_app()
    at.query_params["dataset"] = "demo:no-missing-indicators"
    at = goto(at, "rankings")
    assert_clean(at)
    assert at.session_state["active_dataset"] == "builtin:demo:no-missing-indicators"
    at = goto(at, "data")
    assert_clean(at)
    assert at.checkbox(key=CHECKBOX).value is False  # shows how the linked data was read
