"""What every visitor depends on: the demo recovers from a timeout, user strings are shown
literally (never as Markdown), error details name no server paths (no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dashboard import pages
from dashboard.services import demo
from dashboard.services.stores import disk_cache
from prefshap_core.progress import Progress
from tests.dashboard.apptest import SAMPLE, new_app, sample_upload, shown


@pytest.fixture
def cache_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PREFSHAP_CACHE_DIR", str(tmp_path))
    return str(tmp_path)


@pytest.mark.slow
def test_demo_preparation_times_out_discards_and_recomputes(
    cache_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    stages: list[str] = []
    monkeypatch.setattr(demo, "DEMO_TIMEOUT_S", 0.0)  # every first attempt is too slow
    loaded, model = demo._demo(cache_root, Progress(lambda u: stages.append(u.stage)))
    assert model.result.function.n_centres > 0
    assert loaded.fingerprint == model.data_fp
    # The recomputed explanation is in the cache for the next visitor.
    req = demo.demo_request(loaded, model)
    assert disk_cache().load_explanation(req.key) is not None


# -- Markdown injection and error details, through the real app -----------------------

EVIL_IMAGE = "![x](https://evil.example/p.png)"
EVIL_LINK = "[click](https://evil.example)"


def _markdown_sources(at) -> list[str]:
    kinds = ("title", "header", "subheader", "markdown", "caption", "info", "success",
             "warning", "error")  # fmt: skip
    found = [str(e.value) for kind in kinds for e in at.get(kind)]
    found += [str(e.value) for e in at.sidebar.markdown]
    found += [str(b.label) for b in at.button]
    return found


def test_user_strings_are_shown_literally_never_as_markdown() -> None:
    items = (SAMPLE / "items.csv").read_text().splitlines()
    items[0] = items[0].replace("stamina", EVIL_LINK)
    duels = (SAMPLE / "duels.csv").read_text().splitlines()
    duels[3] = f"{EVIL_IMAGE},c01,c01,indoor"  # an unknown item id, quoted in the error
    at = sample_upload(
        new_app(),
        ("\n".join(items) + "\n").encode(),
        ("\n".join(duels) + "\n").encode(),
        items_name=f"{EVIL_IMAGE}.csv",
        duels_name="duels.csv",
    )
    assert not at.exception
    sources = _markdown_sources(at)
    assert any(EVIL_IMAGE in shown(s) for s in sources)  # shown, as typed ...
    for source in sources:  # ... but never as an image or a link
        assert "](" not in source.replace("\\]\\(", ""), source


def test_unexpected_error_details_name_no_server_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    from dashboard.services import views_data

    secret = str(Path(__file__).resolve().parent / "private" / "secret.npz")

    def broken(*args, **kwargs):
        raise FileNotFoundError(2, "No such file or directory", secret)

    at = new_app()
    monkeypatch.setattr(views_data, "item_record", broken)  # the page's call, cached or not
    at.switch_page(pages.PLAYERS.script).run()
    assert not at.exception
    details = "\n".join(str(c.value) for c in at.get("code"))
    assert "FileNotFoundError" in details and "secret.npz" in details
    assert str(Path(__file__).resolve().parent) not in details and "Traceback" not in details
