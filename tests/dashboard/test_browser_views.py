"""The Explain page's figures as drawn in real Chromium, at 1,400 and 1,000 px wide: no
text outside its figure (titles, axis titles, tick and value labels, legends), value
labels clear of tick labels, categorical beehive rows coloured one colour per level with
the legend beside the plot, and every beehive row at least 28 px tall.

Sample data (a categorical item column `style`, a categorical context `venue`), a small
C-GPM trained in the browser. Screenshots of each width go to ``artifacts/`` (or to
``PREFSHAP_SCREENS_DIR``). Skipped without Chromium or Playwright, except on CI.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.dashboard.browser import (
    ARTIFACTS,
    ROOT,
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

TRAIN_WAIT_MS = 600_000  # a loaded CI machine (load 6) trains slowly
MIN_ROW_PX = 28

# Every visible plotly figure: its title, the texts drawn outside its own svg, value
# labels (annotations) that overlap a tick label, and for beehives the row height and
# the colours of each categorical row's traces.
FIGURE_REPORT = """() => {
  const inside = (b, box) => b.left >= box.left - 1 && b.right <= box.right + 1
      && b.top >= box.top - 1 && b.bottom <= box.bottom + 1;
  const meets = (a, b) => a.left < b.right && a.right > b.left && a.top < b.bottom
      && a.bottom > b.top;
  const out = [];
  for (const div of document.querySelectorAll('.js-plotly-plot')) {
    const r = div.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || div.offsetParent === null) continue;
    const svg = div.querySelector('svg.main-svg');
    const box = svg.getBoundingClientRect();
    const t = div.layout && div.layout.title;
    const title = String((t && (t.text || t)) || '');
    const clipped = [];
    for (const el of div.querySelectorAll('text')) {
      const text = el.textContent.trim();
      const b = el.getBoundingClientRect();
      if (!text || b.width === 0) continue;
      if (!inside(b, box)) {
        clipped.push(`${text} [${b.left.toFixed(0)}..${b.right.toFixed(0)} x `
            + `${b.top.toFixed(0)}..${b.bottom.toFixed(0)} in ${box.left.toFixed(0)}..`
            + `${box.right.toFixed(0)} x ${box.top.toFixed(0)}..${box.bottom.toFixed(0)}]`);
      }
    }
    const ticks = [...div.querySelectorAll('.ytick text, .xtick text')]
        .map((e) => e.getBoundingClientRect());
    const overlaps = [];
    for (const a of div.querySelectorAll('.annotation-text')) {
      const b = a.getBoundingClientRect();
      if (ticks.some((tb) => meets(b, tb))) overlaps.push(a.textContent);
    }
    const fl = div._fullLayout;
    const rows = (fl.yaxis && fl.yaxis.ticktext) ? fl.yaxis.ticktext.length : 0;
    const groups = {};
    for (const tr of div.data || []) {
      if (!tr.legendgroup) continue;
      (groups[tr.legendgroup] = groups[tr.legendgroup] || []).push(String(tr.marker.color));
    }
    const legend = div.querySelector('.legend');
    const lb = legend ? legend.getBoundingClientRect() : null;
    const plot = div.querySelector('.nsewdrag');
    const pb = plot ? plot.getBoundingClientRect() : null;
    out.push({title, clipped, overlaps, width: box.width,
              row_px: rows && fl.yaxis ? fl.yaxis._length / rows : null,
              groups, legend_right_of_plot: lb && pb ? lb.left >= pb.right : null});
  }
  return out;
}"""


def _screens_dir() -> Path:
    folder = Path(os.environ.get("PREFSHAP_SCREENS_DIR", str(ARTIFACTS)))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _check_figures(page, where: str) -> list[dict]:
    figures = page.evaluate(FIGURE_REPORT)
    assert figures, f"{where}: no figure drawn"
    for fig in figures:
        name = f"{where}: {fig['title'][:60]!r} ({fig['width']:.0f} px)"
        assert not fig["clipped"], f"{name}: text outside the figure: {fig['clipped']}"
        assert not fig["overlaps"], f"{name}: value labels on tick labels: {fig['overlaps']}"
        if "Pref-SHAP values" in fig["title"]:
            assert fig["row_px"] >= MIN_ROW_PX, f"{name}: rows {fig['row_px']:.1f} px tall"
    return figures


def _categorical_rows(figures: list[dict], row: str) -> list[str]:
    (beehive,) = [f for f in figures if "Pref-SHAP values" in f["title"]]
    assert beehive["legend_right_of_plot"], "the legend is not beside the plot"
    return beehive["groups"][row]


def _shoot(page, name: str) -> None:
    path = _screens_dir() / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def _settle(page, seconds: float = 2.0) -> None:
    time.sleep(seconds)  # plotly relayouts after a resize or a rerun
    wait_until_idle(page)


def _fixed_hyperparameters(page) -> None:
    """A small C-GPM with every hyperparameter given: no search, so seconds of training."""
    for name, value in (("Nyström centres", "40"), ("Lengthscale scale", "1"),
                        ("Penalty (λ)", "0.01"), ("Utility weight (w)", "1")):  # fmt: skip
        box = page.get_by_role("spinbutton", name=name)
        box.fill(value)
        box.press("Enter")
        time.sleep(1.0)  # its rerun, before the next edit
    for name in ("Refine each feature group's lengthscales", "Also fit a UPM baseline"):
        box = page.get_by_role("checkbox", name=name)
        if box.is_checked():
            box.click(force=True)  # uncheck (its state changes after a rerun)
            time.sleep(1.0)


def test_explain_figures_fit_and_colour_categories_at_two_widths(warm_cache: Path) -> None:
    require_browser()
    with running_app(warm_cache) as (url, _), browser_page() as page:
        page.goto(f"{url}/data")
        # the demo comes from the warm cache; the wait covers a loaded machine
        page.get_by_text("Upload CSV files").click(timeout=TRAIN_WAIT_MS)
        upload_items_and_duels(
            page, ROOT / "sample_data" / "items.csv", ROOT / "sample_data" / "duels.csv"
        )
        page.get_by_role("link", name="Train").click()
        page.get_by_text(re.compile(r"Dataset: Upload \d+: items\.csv \+ duels\.csv")).wait_for()
        page.get_by_text("Advanced: override the automatic hyperparameters").click()
        _fixed_hyperparameters(page)
        click_train(page, "C-GPM")
        trained_headline(page, "C-GPM").wait_for(timeout=TRAIN_WAIT_MS)
        page.get_by_role("link", name="Explain").click()
        wait_for_plot(page, "Pref-SHAP values", timeout_s=600)
        wait_until_idle(page, timeout_s=600)
        no_error_on(page)
        for width in (1400, 1000):
            page.set_viewport_size({"width": width, "height": 1000})
            _settle(page)
            figures = _check_figures(page, f"items, {width} px")
            colours = _categorical_rows(figures, "style")
            assert len(set(colours)) == len(colours) >= 2, colours  # one colour per level
            _shoot(page, f"explain-items-{width}")

            page.get_by_text("direction (rank correlation)").first.click()
            _settle(page)
            figures = _check_figures(page, f"items, direction, {width} px")
            assert any("All duels" in f["title"] for f in figures)
            _shoot(page, f"explain-items-direction-{width}")
            page.get_by_text("mean |value| (importance)").first.click()
            _settle(page)

            page.get_by_text("Dependence plot: one feature's value").first.click()
            wait_for_plot(page, "dependence of", timeout_s=120)
            _settle(page)
            _check_figures(page, f"dependence, {width} px")
            _shoot(page, f"explain-dependence-{width}")
            page.get_by_text("Dependence plot: one feature's value").first.click()

            page.get_by_role("tab", name="Context features").click()
            _settle(page)
            figures = _check_figures(page, f"context, {width} px")
            colours = _categorical_rows(figures, "venue")
            assert len(set(colours)) == len(colours) >= 2, colours
            _shoot(page, f"explain-context-{width}")
            page.get_by_role("tab", name="Item features").click()
            no_error_on(page)
