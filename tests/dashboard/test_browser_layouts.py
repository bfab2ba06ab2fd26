"""A published layout through the browser with no renaming: a wide choice table (both
alternatives' attributes on each row, a `choice` column, a respondent `id`) uploaded on
the Data page in real Chromium, trained on the Train page and explained on Explain.

Skipped without Chromium or Playwright, except on CI (``CI=true``), where it must run.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.dashboard.browser import (
    browser_page,
    click_train,
    no_error_on,
    require_browser,
    running_app,
    trained_headline,
    upload_until_shown,
    wait_for_plot,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Training waits: a loaded CI machine (load 6) trains even a small model slowly.
TRAIN_WAIT_MS = 300_000


def _wide_choice_table(path: Path, n_rows: int = 60) -> Path:
    """Stated-preference-like rows: respondent `id`, two alternatives' price and time,
    and the one chosen (the cheaper-per-minute one, mostly)."""
    rows = ["id,price1,time1,price2,time2,choice"]
    for k in range(n_rows):
        p1, t1 = 1000 + 200 * (k % 5), 90 + 30 * (k % 3)
        p2, t2 = 1100 + 200 * ((k * 3) % 4), 120 + 30 * ((k * 2) % 3)
        cheaper = 1 if p1 + 5 * t1 <= p2 + 5 * t2 else 2
        chosen = cheaper if k % 7 else 3 - cheaper  # some choices against the rule
        rows.append(f"{k // 6 + 1},{p1},{t1},{p2},{t2},choice{chosen}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_wide_choice_table_uploaded_trained_and_explained(tmp_path: Path, warm_cache: Path) -> None:
    require_browser()
    table = _wide_choice_table(tmp_path / "travel.csv")
    with running_app(warm_cache) as (url, _), browser_page() as page:
        page.goto(f"{url}/data")
        page.get_by_text("Upload CSV files").click()
        # the second uploader is duels.csv; a wide table needs no items.csv
        upload_until_shown(page, 1, table, "it is now the active dataset")
        # the summary's caption (the format help and the notes quote such lines too)
        read_as = page.get_by_test_id("stCaptionContainer").filter(
            has_text=re.compile(r"^read as: wide choice table; ")
        )
        read_as.wait_for()
        summary = read_as.inner_text()
        assert re.fullmatch(
            r"read as: wide choice table; \d+ distinct alternatives from 2 paired "
            r"attributes; respondent id set aside",
            summary.replace("`", ""),
        ), summary
        no_error_on(page)

        page.get_by_role("link", name="Train").click()
        page.get_by_text(re.compile(r"Dataset: Upload \d+: travel\.csv")).wait_for()
        page.get_by_text("Advanced: override the automatic hyperparameters").click()
        centres = page.get_by_role("spinbutton", name="Nyström centres")
        centres.fill("20")
        centres.press("Enter")
        started = time.monotonic()
        click_train(page)  # the Enter reruns the page: a click may be dropped
        trained_headline(page).wait_for(timeout=TRAIN_WAIT_MS)  # the model auto chose
        print(f"\ntrain (wide choice table, 20 centres): {time.monotonic() - started:.1f} s")
        no_error_on(page)

        page.get_by_role("link", name="Explain").click()
        # 60 duels leave a test split too small to explain alone: all of them are
        # ("All duels (small data) (60 duels): Pref-SHAP values"), a point per feature
        points = wait_for_plot(page, "(60 duels):", timeout_s=300)  # the title wraps after it
        assert points >= 60 and points % 60 == 0, points  # every duel, on each feature row
        no_error_on(page)
