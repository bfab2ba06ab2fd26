"""Helpers for the dashboard's AppTests: run the real app script, wait for its jobs, read it.

Every AppTest runs dashboard/app.py with the temporary disk cache that
tests/dashboard/conftest.py sets for the whole run (``PREFSHAP_CACHE_DIR``), so the
first-screen demo is trained once per run, not once per test.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from dashboard import pages
from prefshap_core.paths import repo_root

ROOT = repo_root()
APP = ROOT / "dashboard" / "app.py"
SAMPLE = ROOT / "sample_data"
# Training and the first-screen demo run inside the script: generous, CI machines vary.
TIMEOUT_S = 180


def new_app() -> AppTest:
    """The app after its first run (the demo is ready), with no errors."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.run()
    assert_clean(at)
    return at


def active_dataset(at: AppTest):
    """The session's active ``state.LoadedData`` (after a run)."""
    return at.session_state["datasets"][at.session_state["active_dataset"]]


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


# Pages by their script's name ("head_to_head"), the names the tests use.
PAGES_BY_NAME = {Path(view.script).stem: view for view in pages.ALL}


def goto(at: AppTest, page: pages.View | str) -> AppTest:
    """Open a page (or the page of dashboard/views/<page>.py) and wait for its work."""
    view = page if isinstance(page, pages.View) else PAGES_BY_NAME[page]
    at.switch_page(view.script)
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
    at.switch_page(pages.DATA.script).run()
    at.button_group(key="data:source").set_value("Upload CSV files").run()
    if lenient is not None:
        at.toggle(key="data:lenient").set_value(lenient).run()
    items = (SAMPLE / "items.csv").read_bytes() if items is None else items
    duels = (SAMPLE / "duels.csv").read_bytes() if duels is None else duels
    uploader = {u.label: u for u in at.file_uploader}
    uploader["items.csv"].set_value((items_name, items, "text/csv"))
    uploader["duels.csv"].set_value((duels_name, duels, "text/csv"))
    return at.run()
