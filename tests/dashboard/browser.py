"""Driving the dashboard in Debian's Chromium through Playwright: a live server on a
free loopback port, a page, and waits with margins for a loaded CI machine."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from prefshap_core.paths import repo_root

ROOT = repo_root()
ARTIFACTS = ROOT / "artifacts"
CHROMIUM = "/usr/bin/chromium"
# ENVIRONMENT.md: without the background-networking flags Chromium keeps trying
# (and failing) to reach Google.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ON_CI = os.environ.get("CI", "").lower() == "true"

# A Streamlit server, Chromium and a training run per test.


def trained_headline(page, kind: str | None = None):
    """The Train page's headline metric of a trained ``kind`` ("GPM", "C-GPM"; None:
    whichever ``auto`` chose): its test ROC AUC, or on small data (fewer than 200 test
    duels) its K-fold CV AUC."""
    name = "(UPM|GPM|C-GPM)" if kind is None else re.escape(kind)
    # .first: a chosen UPM is also the baseline, whose metric carries the same label
    return page.get_by_text(re.compile(rf"{name} ROC AUC \((test|\d+-fold CV)\)")).first


def require_browser() -> None:
    """Skip (fail on CI) when Chromium or Playwright is missing."""
    problem = None
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        problem = f"no Chromium at {CHROMIUM} (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "the playwright Python package is not installed"
    if problem is None:
        return
    if ON_CI:
        pytest.fail(f"CI=true but {problem}", pytrace=False)
    pytest.skip(problem)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextmanager
def running_app(cache_dir: Path, timeout_s: float = 90) -> Iterator[tuple[str, float]]:
    """The dashboard on a free local port: (base URL, time.monotonic() at launch)."""
    port = free_port()
    env = {**os.environ, "PREFSHAP_CACHE_DIR": str(cache_dir)}
    command = [
        sys.executable, "-m", "streamlit", "run", "dashboard/app.py",
        "--server.headless", "true", "--server.port", str(port),
        "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    launched = time.monotonic()
    log = cache_dir / "streamlit.log"  # printed when a step fails
    with log.open("wb") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        while not healthy(url):
            if server.poll() is not None or time.monotonic() - launched > timeout_s:
                raise AssertionError(f"the app did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield url, launched
    except BaseException:
        print(f"\n--- streamlit log (tail) ---\n{log.read_text(errors='replace')[-4000:]}")
        raise
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


@contextmanager
def browser_page() -> Iterator:
    """A Chromium page; on a failing step its screenshot goes to artifacts/."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
            page.set_default_timeout(120_000)
            try:
                yield page
            except BaseException:
                ARTIFACTS.mkdir(exist_ok=True)
                failure = ARTIFACTS / "e2e_failure.png"
                page.screenshot(path=str(failure), full_page=True)
                print(f"\nscreenshot of the failure: {failure}")
                # Streamlit scrolls inside its own container, so the screenshot shows the
                # top of the page only: its text shows the rest (a message, a progress bar).
                with suppress(Exception):
                    text = page.locator('[data-testid="stMain"]').inner_text(timeout=5_000)
                    print("--- the page's text (tail) ---\n" + text[-4000:])
                raise
        finally:
            browser.close()


def plot_points(page, title: str, webgl: bool) -> int:
    """Points (or bars) drawn by the plotly graph whose title contains ``title`` (0 if
    none); with ``webgl`` only when it also drew its WebGL canvas (the beehive)."""
    return page.evaluate(
        """([title, webgl]) => {
            for (const div of document.querySelectorAll('.js-plotly-plot')) {
                const t = div.layout && div.layout.title;
                const text = (t && (t.text || t)) || '';
                if (!String(text).includes(title)) continue;
                const gl = div.querySelector('canvas') !== null;
                // _fullData: traces as drawn (x decoded from plotly's binary encoding).
                const n = (div._fullData || []).reduce(
                    (s, tr) => s + (Number(tr._length) || (tr.x ? tr.x.length || 0 : 0)), 0);
                return gl || !webgl ? n : 0;
            }
            return 0;
        }""",
        [title, webgl],
    )


def wait_for_plot(page, title: str, *, webgl: bool = True, timeout_s: float = 180) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        points = plot_points(page, title, webgl)
        if points:
            return points
        time.sleep(0.25)
    raise AssertionError(f"no plot titled {title!r} with points within {timeout_s} s")


def plot_count(page, title: str) -> int:
    return page.evaluate(
        """(title) => [...document.querySelectorAll('.js-plotly-plot')].filter((div) => {
            const t = div.layout && div.layout.title;
            return String((t && (t.text || t)) || '').includes(title);
        }).length""",
        title,
    )


def click_until_started(button, started, tries: int = 3, wait_s: float = 30) -> None:
    """Click ``button`` until ``started`` (a locator: a progress bar, a result) shows.

    A click that lands while Streamlit reruns for the widget edited just before (a
    number input's Enter) can be dropped by the browser; a second click then starts the
    work once (a page never runs the same job twice)."""
    for attempt in range(tries):
        button.click()
        try:
            started.first.wait_for(timeout=wait_s * 1000)
            return
        except Exception:
            if attempt == tries - 1:
                raise


def click_train(page, kind: str | None = None) -> None:
    """Press the Train page's Train button until a progress bar or the trained ``kind``'s
    headline shows (see :func:`click_until_started`: the form's edits rerun the page)."""
    click_until_started(
        page.get_by_role("button", name="Train"),
        page.locator('[data-testid="stProgress"]').or_(trained_headline(page, kind)),
    )


def wait_until_idle(page, timeout_s: float = 180) -> None:
    """Until no progress bar is left (every background job of the page has ended)."""
    deadline = time.monotonic() + timeout_s
    while page.locator('[data-testid="stProgress"]').count():
        assert time.monotonic() < deadline, f"still working after {timeout_s} s"
        time.sleep(0.25)
    time.sleep(1.0)  # the rerun that draws the results


def no_error_on(page) -> None:
    alerts = page.locator('[data-testid="stAlertContentError"]')
    assert alerts.count() == 0, [alerts.nth(i).inner_text() for i in range(alerts.count())]
    assert page.locator('[data-testid="stException"]').count() == 0


def upload_items_and_duels(page, items, duels, tries: int = 3) -> None:
    """Set the Data page's items and duels files (paths, or ``set_input_files`` payloads)
    and wait until the upload is the active dataset.

    Streamlit reruns the page for each file; a file set while a rerun redraws the
    uploaders can be dropped (a loaded suite run lost items.csv that way). So items go
    first, confirmed by the page asking for the duels, and each file is set again
    until the page has it.
    """
    upload_until_shown(page, 0, items, "Upload duels.csv to continue.", tries)
    upload_until_shown(page, 1, duels, "it is now the active dataset", tries)


def upload_until_shown(page, uploader: int, payload, shown: str, tries: int = 3) -> None:
    """Set the Data page's ``uploader``-th file (0: items, 1: duels) until ``shown``
    appears, at most ``tries`` times (a rerun may drop a file: see above)."""
    uploads = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
    files = str(payload) if isinstance(payload, Path) else payload
    for attempt in range(tries):
        uploads.nth(uploader).set_input_files(files)
        try:
            page.get_by_text(shown).wait_for(timeout=60_000)
            return
        except Exception as error:
            if attempt == tries - 1:
                raise AssertionError(f"upload {uploader + 1} not taken in {tries} tries") from error
