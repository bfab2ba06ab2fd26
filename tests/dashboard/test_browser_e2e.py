"""End to end in a real headless Chromium: launch the dashboard, upload, train, explore.

Drives Debian's Chromium (/usr/bin/chromium) through Playwright's Python API; never
a browser Playwright downloads. Without Chromium the test is skipped, except on CI
(``CI=true``), where it must run. It prints the launch-to-first-plot time and saves
a screenshot under ``artifacts/`` (git-ignored).

``test_pokemon_from_the_browser`` (opt-in: ``PREFSHAP_BROWSER_BENCH=1``, needs the
Pokémon data) times training and explaining Pokémon through the browser.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
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
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _require_browser() -> None:
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


@contextmanager
def running_app(cache_dir: Path, timeout_s: float = 90) -> Iterator[tuple[str, float]]:
    """The dashboard on a free local port: (base URL, time.monotonic() at launch)."""
    port = _free_port()
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
        while not _healthy(url):
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
                raise
        finally:
            browser.close()


def _plot_points(page, title: str, webgl: bool) -> int:
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


def _wait_for_plot(page, title: str, *, webgl: bool = True, timeout_s: float = 180) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        points = _plot_points(page, title, webgl)
        if points:
            return points
        time.sleep(0.25)
    raise AssertionError(f"no plot titled {title!r} with points within {timeout_s} s")


def _plot_count(page, title: str) -> int:
    return page.evaluate(
        """(title) => [...document.querySelectorAll('.js-plotly-plot')].filter((div) => {
            const t = div.layout && div.layout.title;
            return String((t && (t.text || t)) || '').includes(title);
        }).length""",
        title,
    )


def _wait_until_idle(page, timeout_s: float = 180) -> None:
    """Until no progress bar is left (every background job of the page has ended)."""
    deadline = time.monotonic() + timeout_s
    while page.locator('[data-testid="stProgress"]').count():
        assert time.monotonic() < deadline, f"still working after {timeout_s} s"
        time.sleep(0.25)
    time.sleep(1.0)  # the rerun that draws the results


def _no_error_on(page) -> None:
    alerts = page.locator('[data-testid="stAlertContentError"]')
    assert alerts.count() == 0, [alerts.nth(i).inner_text() for i in range(alerts.count())]
    assert page.locator('[data-testid="stException"]').count() == 0


def test_upload_train_and_a_players_losses(tmp_path: Path) -> None:
    _require_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    with running_app(tmp_path) as (url, launched), browser_page() as page:
        # First screen: the demo explained (trained on first launch: empty cache).
        page.goto(url)
        _wait_for_plot(page, "All test duels")
        first_plot_s = time.monotonic() - launched
        print(f"\nlaunch to first plot: {first_plot_s:.1f} s (empty cache)")
        _no_error_on(page)
        # A second visitor (a new session) gets the demo from the cache.
        visitor = page.context.browser.new_page()
        started = time.monotonic()
        visitor.goto(url)
        _wait_for_plot(visitor, "All test duels")
        print(f"second visitor to first plot: {time.monotonic() - started:.1f} s (cached)")
        visitor.close()

        # Data: upload the sample CSV files.
        page.get_by_role("link", name="Data").click()
        page.get_by_text("Upload CSV files").click()
        uploads = page.locator('[data-testid="stFileUploaderDropzoneInput"]')
        uploads.nth(0).set_input_files(str(ROOT / "sample_data" / "items.csv"))
        uploads.nth(1).set_input_files(str(ROOT / "sample_data" / "duels.csv"))
        page.get_by_text("it is now the active dataset").wait_for()
        _no_error_on(page)

        # Train: cancel a first run (default settings: seconds of work), then train a
        # small C-GPM (fewer centres keep the test short).
        page.get_by_role("link", name="Train").click()
        # uploads are named "Upload N: <files> · <digest>"
        page.get_by_text(re.compile(r"Dataset: Upload \d+: items\.csv \+ duels\.csv")).wait_for()
        page.get_by_role("button", name="Train").click()
        page.get_by_role("button", name="Cancel").click()
        page.get_by_text("Training was cancelled").wait_for()
        page.get_by_text("Advanced: override the automatic hyperparameters").click()
        centres = page.get_by_role("spinbutton", name="Nyström centres")
        centres.fill("200")
        centres.press("Enter")
        started = time.monotonic()
        page.get_by_role("button", name="Train").click()
        page.get_by_text("C-GPM ROC AUC (test)").wait_for(timeout=180_000)
        print(f"train (sample data, C-GPM, 200 centres): {time.monotonic() - started:.1f} s")
        _no_error_on(page)

        # Players: one item's losses, explained from its point of view.
        page.get_by_role("link", name="Players").click()
        page.get_by_text("Player (type to search by name or id)").wait_for()
        page.get_by_test_id("stSelectbox").first.click()
        page.keyboard.type("Swift Otter")
        page.keyboard.press("Enter")
        page.get_by_role("heading", name="Swift Otter (c01)").wait_for()
        page.get_by_role("radio", name="Losses").click()
        points = _wait_for_plot(page, "Swift Otter: losses")
        assert points >= 13, points  # its 13 losses, one point per duel and feature row
        _wait_until_idle(page)  # both tabs (items, context) explained
        # beehive + bar in 2 tabs (each tab's dependence plot sits in an expander)
        shown = _plot_count(page, "Swift Otter: losses (13)") - _plot_count(page, "dependence of")
        assert shown == 4
        _no_error_on(page)
        shot = ARTIFACTS / "e2e_players_losses.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"screenshot: {shot}")

        # Exports of the beehive: a real PNG (kaleido + Chromium) and the values as CSV.
        for label, check in (
            ("PNG", lambda data: data.startswith(b"\x89PNG")),
            ("CSV", lambda data: data.startswith(b"duel_id,left,right,winner,output")),
        ):
            with page.expect_download() as download:
                page.get_by_role("button", name=label, exact=True).first.click()
            data = Path(download.value.path()).read_bytes()
            assert check(data), (label, download.value.suggested_filename, data[:40])

        # A click on a row of its duels table opens that duel.
        grid = page.locator('[data-testid="stDataFrame"]').last
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()
        assert box is not None
        page.mouse.click(box["x"] + 12, box["y"] + 52)  # the first data row's marker
        page.get_by_role("heading", name="Duel").wait_for()
        _wait_for_plot(page, "P(", webgl=False)  # the waterfall: "... P(<side> wins) = ..."
        _no_error_on(page)


@pytest.mark.realdata
def test_pokemon_from_the_browser(tmp_path: Path) -> None:
    """Opt-in timing: train (default settings) and explain Pokémon from the browser."""
    if os.environ.get("PREFSHAP_BROWSER_BENCH") != "1":
        pytest.skip("timing run: set PREFSHAP_BROWSER_BENCH=1 to run it")
    _require_browser()
    from prefshap_core.datasets.registry import available_datasets

    pokemon = next(d for d in available_datasets() if d.name == "pokemon")
    if not pokemon.available:
        pytest.skip(pokemon.reason)
    with running_app(tmp_path) as (url, _), browser_page() as page:
        page.goto(f"{url}/data")
        page.get_by_text("Detected features").wait_for()
        page.get_by_test_id("stSelectbox").first.click()
        page.keyboard.type("Pokémon")
        page.keyboard.press("Enter")
        page.get_by_role("button", name="Use this dataset").click()
        page.get_by_role("heading", name="Pokémon").first.wait_for()
        page.get_by_role("link", name="Train").click()
        page.get_by_text("Dataset: Pokémon").wait_for()
        started = time.monotonic()
        page.get_by_role("button", name="Train").click()
        page.get_by_text("GPM ROC AUC (test)").wait_for(timeout=1_200_000)
        trained = time.monotonic()
        page.get_by_role("link", name="Explain").click()
        _wait_for_plot(page, "All test duels", timeout_s=1_200)
        done = time.monotonic()
        _no_error_on(page)
        print(
            f"\nPokémon from the browser: train {trained - started:.1f} s, explain 1,000 test "
            f"duels {done - trained:.1f} s, total {done - started:.1f} s"
        )
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "e2e_pokemon_explain.png"), full_page=True)


def _first_point_position(page, title: str) -> tuple[float, float] | None:
    """Page coordinates of the first point of the plot titled ``title`` (None if none)."""
    return page.evaluate(
        """(title) => {
            for (const div of document.querySelectorAll('.js-plotly-plot')) {
                const t = div.layout && div.layout.title;
                if (!String((t && (t.text || t)) || '').includes(title)) continue;
                const trace = (div._fullData || []).find((tr) => tr._length > 0);
                const full = div._fullLayout;
                if (!trace || !full) return null;
                const x = trace.x[0], y = trace.y[0];
                const box = div.getBoundingClientRect();
                return [box.left + full.xaxis._offset + full.xaxis.l2p(x),
                        box.top + full.yaxis._offset + full.yaxis.l2p(y)];
            }
            return null;
        }""",
        title,
    )


def _metric_value(page, label_start: str) -> str:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text=label_start).first
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


def test_head_to_head_link_what_if_and_a_beehive_click(tmp_path: Path) -> None:
    """A deep link to a head-to-head of two demo items shows its waterfall and the
    probability; a what-if edit changes the probability; a beehive click opens a duel.
    Screenshots of each view go to artifacts/."""
    _require_browser()
    ARTIFACTS.mkdir(exist_ok=True)
    from prefshap_core.datasets.synthetic import synthetic_clusters

    demo = synthetic_clusters(n_items=400, n_duels=3000, seed=0)  # the app's demo data
    a, b = str(demo.item_ids[5]), str(demo.item_ids[9])
    with running_app(tmp_path) as (url, _), browser_page() as page:
        page.goto(url)
        _wait_for_plot(page, "All test duels")
        _wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "view_explain.png"), full_page=True)

        # A deep link (a new session) to the head-to-head of two demo items.
        page.goto(f"{url}/head-to-head?dataset=demo&a={a}&b={b}")
        page.get_by_role("heading", name="Head-to-head").wait_for()
        _wait_for_plot(page, "P(", webgl=False)  # the waterfall, seen from A
        before = _metric_value(page, f"P({a} beats {b})")
        assert before.endswith(" %"), before
        _no_error_on(page)
        _wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "view_head_to_head.png"), full_page=True)

        # What-if: A's x0 set to the top of its range changes the probability.
        page.get_by_text("What if… edit either side's covariates").click()
        box = page.get_by_role("spinbutton", name="x0").first
        box.fill("3")
        started = time.monotonic()
        box.press("Enter")
        page.get_by_text(f"P({a} (edited) beats {b})").wait_for()
        print(
            f"\nwhat-if edit to new probability (demo, browser): {time.monotonic() - started:.2f} s"
        )
        after = _metric_value(page, f"P({a} (edited) beats {b})")
        assert after != before, (before, after)
        _no_error_on(page)
        _wait_until_idle(page)
        page.screenshot(path=str(ARTIFACTS / "view_what_if.png"), full_page=True)

        # Rankings.
        page.get_by_role("link", name="Rankings").click()
        page.get_by_role("heading", name="Rankings").wait_for()
        page.locator('[data-testid="stDataFrame"]').first.wait_for()
        _no_error_on(page)
        page.screenshot(path=str(ARTIFACTS / "view_rankings.png"), full_page=True)

        # Players, with the dependence plot open.
        page.get_by_role("link", name="Players").click()
        page.get_by_text("Player (type to search by name or id)").wait_for()
        _wait_for_plot(page, "all duels")
        _wait_until_idle(page)
        page.get_by_text("Dependence plot: one feature's value").first.click()
        _wait_for_plot(page, "dependence of", timeout_s=60)
        page.screenshot(path=str(ARTIFACTS / "view_players_dependence.png"), full_page=True)

        # A click on a beehive point of the Explain page opens that duel.
        page.get_by_role("link", name="Explain").click()
        _wait_for_plot(page, "All test duels")
        _wait_until_idle(page)
        point = _first_point_position(page, "All test duels")
        assert point is not None
        page.mouse.click(point[0], point[1])
        page.get_by_role("heading", name="Duel").wait_for()
        _wait_for_plot(page, "P(", webgl=False)
        _no_error_on(page)
        page.screenshot(path=str(ARTIFACTS / "view_duel.png"), full_page=True)
        print(f"screenshots: {sorted(p.name for p in ARTIFACTS.glob('view_*.png'))}")
