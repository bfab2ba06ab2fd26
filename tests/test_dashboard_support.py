"""Helpers shared by the dashboard tests (AppTest); holds no tests itself.

Every dashboard test runs the real app script (dashboard/app.py) with a temporary
disk cache (``PREFSHAP_CACHE_DIR``) shared by all dashboard test modules of one
pytest run, so the first-screen demo is trained once per run, not once per test.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "dashboard" / "app.py"
SAMPLE = ROOT / "sample_data"
# Training and the first-screen demo run inside the script: generous, CI machines vary.
TIMEOUT_S = 180


@pytest.fixture(autouse=True)
def dashboard_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A temporary disk cache for the app, the same folder for the whole run."""
    folder = tmp_path_factory.getbasetemp() / "dashboard-cache"
    folder.mkdir(exist_ok=True)
    before = os.environ.get("PREFSHAP_CACHE_DIR")
    os.environ["PREFSHAP_CACHE_DIR"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("PREFSHAP_CACHE_DIR", None)
    else:
        os.environ["PREFSHAP_CACHE_DIR"] = before


def new_app() -> AppTest:
    """The app after its first run (the demo is ready), with no errors."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.run()
    assert_clean(at)
    return at


def jobs(at: AppTest) -> dict:
    try:
        return at.session_state["jobs"]
    except KeyError:  # before the first run
        return {}


def settle(at: AppTest, timeout_s: float = TIMEOUT_S) -> AppTest:
    """Rerun until every background job has ended (what the page's polling does)."""
    deadline = time.monotonic() + timeout_s
    at.run()
    while not all(job.finished for job in jobs(at).values()):
        if time.monotonic() > deadline:
            raise AssertionError(f"jobs still running after {timeout_s} s")
        time.sleep(0.2)
        at.run()
    at.run()  # the run that publishes the results
    return at


def goto(at: AppTest, page: str) -> AppTest:
    """Open dashboard/views/<page>.py and wait for its work to finish."""
    at.switch_page(f"views/{page}.py")
    return settle(at)


def assert_clean(at: AppTest) -> None:
    """No exception reached Streamlit and no error box is shown."""
    assert not at.exception, [e.value for e in at.exception]
    # The friendly error's details (the traceback) are in a code block below it.
    assert not at.error, [e.value for e in at.error] + [c.value for c in at.get("code")]


def shown(markdown: object) -> str:
    """The text a Markdown source shows: user strings in it are backslash-escaped (and
    carry invisible word joiners that stop autolinks: components/text.py)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown)).replace("\u2060", "")


def texts(at: AppTest) -> str:
    """All visible text of the main area (markdown, captions, alerts, headings)."""
    parts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "success",
                 "warning", "error"):  # fmt: skip
        parts.extend(shown(e.value) for e in at.get(kind))
    return "\n".join(parts)


def export_labels(at: AppTest) -> list[str]:
    """Labels of the download buttons plus disabled PNG/SVG stand-ins (no Chromium)."""
    labels = [b.label for b in at.get("download_button")]
    labels += [b.label for b in at.button if b.label in ("PNG", "SVG") and b.disabled]
    return labels


def sample_upload(
    at: AppTest,
    items: bytes | None = None,
    duels: bytes | None = None,
    *,
    items_name: str = "items.csv",
    duels_name: str = "duels.csv",
    lenient: bool | None = None,
) -> AppTest:
    """Upload items.csv and duels.csv (the sample files unless given) on the Data page.

    ``lenient``: set the page's lenient toggle first (None: leave it as it is).
    """
    at.switch_page("views/data.py").run()
    at.button_group(key="data:source").set_value("Upload CSV files").run()
    if lenient is not None:
        at.toggle(key="data:lenient").set_value(lenient).run()
    items = (SAMPLE / "items.csv").read_bytes() if items is None else items
    duels = (SAMPLE / "duels.csv").read_bytes() if duels is None else duels
    uploader = {u.label: u for u in at.file_uploader}
    uploader["items.csv"].set_value((items_name, items, "text/csv"))
    uploader["duels.csv"].set_value((duels_name, duels, "text/csv"))
    return at.run()
