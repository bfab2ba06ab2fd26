"""The analyst views of a C-GPM in real Chromium at two widths (1,400 and 1,000 px):
Context effects (heatmap, sentence), Head-to-head (one probability per pair: the
metric and the waterfall agree), what-if edits from a link, Intransitivity (one row
per cycle). Every plot's text lies inside its figure (nothing clipped); screenshots go
to artifacts/ (``analysis_<view>_<width>.png``).

Skipped without Chromium or Playwright, except on CI (``CI=true``), where it must run.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from prefshap_core.paths import repo_root
from tests.dashboard.browser import (
    ARTIFACTS,
    browser_page,
    click_train,
    no_error_on,
    require_browser,
    running_app,
    trained_headline,
    upload_items_and_duels,
    wait_for_plot,
    wait_until_idle,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAMPLE = repo_root() / "sample_data"
TRAIN_WAIT_MS = 300_000  # a loaded CI machine (load 6) trains even 60 centres slowly
WIDTHS = (1400, 1000)

# Text elements of a plotly figure lying outside its own box (clipped when drawn).
CLIPPED = """(title) => {
    for (const div of document.querySelectorAll('.js-plotly-plot')) {
        const t = div.layout && div.layout.title;
        if (!String((t && (t.text || t)) || '').includes(title)) continue;
        const box = div.getBoundingClientRect();
        const out = [];
        for (const el of div.querySelectorAll('svg text')) {
            const r = el.getBoundingClientRect();
            if (r.width === 0 || !el.textContent.trim()) continue;
            if (r.left < box.left - 1 || r.right > box.right + 1 ||
                r.top < box.top - 1 || r.bottom > box.bottom + 1) out.push(el.textContent);
        }
        return out;
    }
    return null;
}"""

TITLE_TEXT = """(title) => {
    for (const div of document.querySelectorAll('.js-plotly-plot')) {
        const t = div.layout && div.layout.title;
        const text = String((t && (t.text || t)) || '');
        if (text.includes(title)) return text;
    }
    return null;
}"""


def _metric(page, label_start: str) -> tuple[str, str]:
    metric = page.locator('[data-testid="stMetric"]').filter(has_text=label_start).first
    label = metric.locator('[data-testid="stMetricLabel"]').inner_text()
    return label, metric.locator('[data-testid="stMetricValue"]').inner_text()


def _not_clipped(page, title: str) -> None:
    outside = page.evaluate(CLIPPED, title)
    assert outside is not None, f"no plot titled {title!r}"
    assert outside == [], (title, outside)


def _shot(page, view: str, width: int) -> None:
    """The window, and each plot and table whole (the page scrolls inside a container,
    so a full-page shot stops at the window)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"analysis_{view}_{width}.png"), full_page=True)
    shown = page.locator('.js-plotly-plot, [data-testid="stDataFrame"], [data-testid="stMetric"]')
    for k in range(min(shown.count(), 6)):
        shown.nth(k).screenshot(path=str(ARTIFACTS / f"analysis_{view}_{width}_part{k}.png"))


def _query(page) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}


def train_one_small_cgpm(page) -> None:
    """Train page: a C-GPM with every hyperparameter fixed (one fit, no search, no
    refinement, no UPM baseline), so even a loaded machine trains it in seconds."""
    page.get_by_role("link", name="Train").click()
    page.get_by_text("Advanced: override the automatic hyperparameters").click()
    for name, value in (("Nyström centres", "40"), ("Lengthscale scale", "1"),
                        ("Penalty (λ)", "0.001"), ("Utility weight (w)", "1")):  # fmt: skip
        box = page.get_by_role("spinbutton", name=name)
        box.fill(value)
        box.press("Enter")
        time.sleep(0.5)
    for name in ("Refine each feature group's lengthscales", "Also fit a UPM baseline"):
        box = page.get_by_role("checkbox", name=name)
        if box.is_checked():  # the label takes the click (the input is hidden under it)
            page.locator("label").filter(has_text=name).first.click()
            time.sleep(1.0)
    time.sleep(1.0)
    click_train(page, "C-GPM")  # a click landing in one of those reruns can be dropped


def test_cgpm_analyst_views_at_two_widths(warm_cache: Path) -> None:
    require_browser()
    with running_app(warm_cache) as (url, _), browser_page() as page:
        page.goto(f"{url}/data")
        page.get_by_text("Upload CSV files").click()
        upload_items_and_duels(page, SAMPLE / "items.csv", SAMPLE / "duels.csv")
        train_one_small_cgpm(page)
        started = time.monotonic()
        trained_headline(page, "C-GPM").wait_for(timeout=TRAIN_WAIT_MS)
        print(f"\ntrain (sample C-GPM, 60 centres): {time.monotonic() - started:.1f} s")
        no_error_on(page)

        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 1000})
            # Explain links to Context effects.
            page.get_by_role("link", name="Explain").first.click()
            link = page.get_by_role("link", name=re.compile("^Context effects: how each"))
            link.wait_for()
            link.click()
            page.get_by_role("heading", name="Context effects").wait_for()
            wait_for_plot(page, "Change in mean win probability", webgl=False)
            page.get_by_text(re.compile(r"^Strongest shifts: ")).wait_for()
            no_error_on(page)
            _not_clipped(page, "Change in mean win probability")
            _shot(page, "context_effects", width)

            # Head-to-head: the metric and the waterfall give one probability.
            page.get_by_role("link", name="Head-to-head").first.click()
            page.get_by_role("heading", name="Head-to-head").wait_for()
            wait_for_plot(page, "wins) = ", webgl=False)
            wait_until_idle(page)
            _, value = _metric(page, "P(")
            title = page.evaluate(TITLE_TEXT, "wins) = ")
            assert f"wins) = {value}</b>" in title and " · P under venue = " in title, title
            _not_clipped(page, "wins) = ")
            assert "Context of the duel" in page.content()
            no_error_on(page)
            _shot(page, "head_to_head", width)

            # The same pair averaged over the contexts: both say so, with one number.
            page.get_by_role("combobox", name="Context of the duel").click()
            option = page.get_by_role("option", name=re.compile("^no context: averaged"))
            option.wait_for()
            option.click()
            wait_for_plot(page, "P averaged over the observed contexts", webgl=False)
            wait_until_idle(page)
            _, averaged = _metric(page, "P(")
            title = page.evaluate(TITLE_TEXT, "wins) = ")
            assert f"wins) = {averaged}</b>" in title
            assert " · P averaged over the observed contexts" in title
            _not_clipped(page, "wins) = ")

            # What-if edits travel in the URL and reopen with "(edited)" on both metrics.
            query = _query(page)
            query.update(edit_a="speed=70")
            page.goto(f"{url}/head-to-head?{urlencode(query)}")
            page.get_by_role("heading", name="Head-to-head").wait_for()
            first, _ = _metric(page, "P(")
            second = page.locator('[data-testid="stMetric"]').nth(1).inner_text()
            assert "(edited)" in first and "(edited)" in second, (first, second)
            wait_until_idle(page)
            assert _query(page).get("edit_a") == "speed=70"
            wait_for_plot(page, "(edited) wins) = ", webgl=False)
            _not_clipped(page, "(edited) wins) = ")  # longer names, the same room
            no_error_on(page)
            _shot(page, "what_if_link", width)

            # Intransitivity: one row per cycle (names and probabilities in columns).
            page.get_by_role("link", name="Intransitivity").first.click()
            page.get_by_role("heading", name="Strongest cycles of the model").wait_for()
            wait_for_plot(page, "", webgl=False)  # the potential plot (untitled)
            wait_until_idle(page)
            assert page.locator("a", has_text="›").count() == 0  # no wall of links
            assert page.locator('[data-testid="stDataFrame"]').count() >= 1
            no_error_on(page)
            _shot(page, "intransitivity", width)
