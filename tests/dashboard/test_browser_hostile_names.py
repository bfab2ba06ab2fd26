"""In a real Chromium: hostile names make the browser fetch nothing from outside.

The upload's ids, names, a header, categories, context and file names are Markdown
images and links to ``evil.invalid`` (see tests/dashboard/hostile.py), and so is
a deep link's ``dataset=``. Every request the pages make is recorded: all must go to
the app's own 127.0.0.1 address.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode, urlparse

import pytest

from tests.dashboard.browser import (
    browser_page,
    click_train,
    no_error_on,
    require_browser,
    running_app,
    trained_headline,
    upload_items_and_duels,
)
from tests.dashboard.hostile import (
    FILE_NAME,
    ITEM_LINK,
    ITEM_TAG,
    LINKED_DATASET,
    hostile_files,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]
# Images and links in the page that lead off this server, with the element holding them.
PLANTED = """() => [...document.querySelectorAll('img[src], a[href]')].filter((e) => {
        const url = new URL(e.src || e.href, location.href);
        return !['data:', 'blob:'].includes(url.protocol) && url.host !== location.host;
    }).map((e) => (e.closest('[data-testid]') || e).outerHTML.slice(0, 400))"""


def _settled(page, timeout_s: float = 180) -> None:
    """Until no progress bar or spinner is left, then one more second to draw."""
    deadline = time.monotonic() + timeout_s
    busy = '[data-testid="stProgress"], [data-testid="stSpinner"]'
    while page.locator(busy).count():
        assert time.monotonic() < deadline, f"still working after {timeout_s} s"
        time.sleep(0.25)
    time.sleep(1.0)


def _rankings_query(page, names: tuple[str, ...], tries: int = 4) -> dict[str, list[str]]:
    """Open Rankings (a page that writes its link) until its URL has all of ``names``.

    The app writes them once the page has rendered. Right after a navigation click,
    Chromium sometimes keeps the bare ``/rankings`` URL: the query update of that run
    is dropped (seen in CI and locally, about one run in two, at any load), and the
    server, which believes the URL written, sends it again only after another
    navigation. So a URL still bare after 20 s gets another click.
    """
    for _ in range(tries):
        page.get_by_role("link", name="Rankings").click()
        page.get_by_text("Rankings (CSV)").wait_for()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            query = parse_qs(urlparse(page.url).query)
            if all(n in query for n in names):
                return query
            time.sleep(0.25)
    raise AssertionError(f"after {tries} visits the Rankings URL lacks {names}: {page.url}")


def test_hostile_names_fetch_nothing_from_outside(tmp_path: Path) -> None:
    require_browser()
    items, duels = hostile_files()
    # A cold cache on purpose: started from a cache that already holds the demo, the
    # Rankings page's URL lacked its session token in CI (seen 2026-12-02, not yet
    # explained), while the same flow from a cold start has always had it.
    with running_app(tmp_path) as (url, _), browser_page() as page:
        outside: list[str] = []
        own = urlparse(url).netloc

        def record(request) -> None:
            parsed = urlparse(request.url)
            if parsed.scheme not in ("data", "blob") and parsed.netloc != own:
                outside.append(request.url)

        page.context.on("request", record)
        page.goto(f"{url}/data?dataset={quote(LINKED_DATASET)}")
        page.get_by_text("is not available here").wait_for()
        page.get_by_text("Upload CSV files").click()
        # Both files through the shared helper: set back to back, the duels file was most
        # likely dropped by the rerun the items file started (CI, 2026-12-07, loaded).
        upload_items_and_duels(
            page,
            *(
                {"name": FILE_NAME, "mimeType": "text/csv", "buffer": data}
                for data in (items, duels)
            ),
        )
        no_error_on(page)

        page.get_by_role("link", name="Train").click()
        page.get_by_text("Advanced: override the automatic hyperparameters").click()
        centres = page.get_by_role("spinbutton", name="Nyström centres")
        centres.fill("60")
        centres.press("Enter")
        click_train(page, "C-GPM")  # the Enter reruns the page: a click may be dropped
        trained_headline(page, "C-GPM").wait_for(timeout=300_000)  # load ~6 margin
        query = _rankings_query(page, ("session", "dataset"))
        session, dataset = query["session"][0], query["dataset"][0]

        visits = {
            "explain": {"view": "groups"},
            "players": {"player": ITEM_LINK, "view": "losses"},
            "head-to-head": {"a": ITEM_LINK, "b": ITEM_TAG},
            "duel": {},
            "rankings": {},
            "intransitivity": {},
        }
        for path, view in visits.items():
            params = {"session": session, "dataset": dataset, **view}
            page.goto(f"{url}/{path}?{urlencode(params)}")
            page.locator("h1").first.wait_for()
            _settled(page)
            if path == "head-to-head":
                page.get_by_text("What if… edit either side's covariates").click()
                time.sleep(1.0)
            no_error_on(page)
            planted = page.evaluate(PLANTED)
            assert not planted, (path, planted)
        assert not outside, outside
