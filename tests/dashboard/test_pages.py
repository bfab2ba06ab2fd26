"""The dashboard's page list (dashboard/pages.py): one entry per view file, URLs kept."""

from __future__ import annotations

from dashboard import pages

# The URL paths of the pages as links were made with them (a contract), and their files.
PINNED = {
    "data": "views/data.py",
    "train": "views/train.py",
    "explain": "views/explain.py",
    "players": "views/players.py",
    "duel": "views/duel.py",
    "head-to-head": "views/head_to_head.py",
    "rankings": "views/rankings.py",
    "intransitivity": "views/intransitivity.py",
}


def test_every_view_file_is_a_page_and_every_page_a_view_file() -> None:
    files = {f"views/{p.name}" for p in (pages.DASHBOARD / "views").glob("*.py")}
    scripts = [view.script for view in pages.ALL]
    assert sorted(scripts) == sorted(files)
    assert len(set(scripts)) == len(scripts)
    assert all((pages.DASHBOARD / script).is_file() for script in scripts)


def test_url_paths_of_existing_pages_are_unchanged() -> None:
    by_url = {view.url_path: view.script for view in pages.ALL}
    assert {url: by_url.get(url) for url in PINNED} == PINNED
    assert pages.DEFAULT.url_path == "explain"  # the root URL opens the Explain page
    assert pages.DEFAULT in pages.ALL


def test_url_paths_and_titles_are_unique_and_url_safe() -> None:
    urls = [view.url_path for view in pages.ALL]
    titles = [view.title for view in pages.ALL]
    assert len(set(urls)) == len(urls) and len(set(titles)) == len(titles)
    for url in urls:  # one path segment: Streamlit has no nested page URLs
        assert url and "/" not in url and url == url.strip() and url.lower() == url
    assert all(view.icon.startswith(":material/") for view in pages.ALL)
