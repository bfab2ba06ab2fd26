"""Dashboard (AppTest): first screen, navigation, dataset choice, uploads good and bad."""

from __future__ import annotations

import pytest

from dashboard import pages
from tests.dashboard.apptest import (
    SAMPLE,
    assert_clean,
    export_labels,
    goto,
    new_app,
    sample_upload,
    shown,
    texts,
)


def test_first_screen_is_the_demo_explained() -> None:
    at = new_app()
    assert [t.value for t in at.title] == ["Explain"]
    assert len(at.get("plotly_chart")) == 3  # beehive, bar, dependence
    assert "demo" in texts(at)
    labels = export_labels(at)
    for kind in ("PNG", "SVG", "HTML", "CSV"):
        assert labels.count(kind) == 3, labels  # one set per figure (beehive, bar, dependence)


def test_navigation_through_every_page_with_exports() -> None:
    at = new_app()
    for page in pages.ALL:
        at = goto(at, page)
        assert_clean(at)
        assert [t.value for t in at.title] == [page.title]
        labels = set(export_labels(at))
        if page == pages.PLAYERS:
            assert len(at.get("plotly_chart")) == 3  # beehive, bar, dependence of its duels
            assert {"PNG", "SVG", "HTML", "CSV", "Duels (CSV)"} <= labels
        elif page == pages.DUEL:
            assert len(at.get("plotly_chart")) == 1  # the waterfall
            assert {"PNG", "SVG", "HTML", "CSV"} <= labels
        elif page == pages.TRAIN:
            assert {"Model file (.npz)", "Metrics (.json)"} <= labels
        elif page == pages.EXPLAIN:
            assert len(at.get("plotly_chart")) == 3
        elif page == pages.HEAD_TO_HEAD:
            assert len(at.get("plotly_chart")) == 1  # the pair's waterfall
            assert {"PNG", "SVG", "HTML", "CSV"} <= labels
        elif page == pages.RANKINGS:
            assert "Rankings (CSV)" in labels


def test_choosing_a_builtin_dataset() -> None:
    at = goto(new_app(), "data")
    box = at.selectbox(key="data:builtin")
    box.select_index(next(i for i, o in enumerate(box.options) if "paper size" in o)).run()
    next(b for b in at.button if b.label == "Use this dataset").click().run()
    assert_clean(at)
    assert "Synthetic clusters (paper size)" in texts(at)
    assert at.metric[1].value == "40,000"  # duels
    # Nothing trained on it yet: the Explain page says so instead of failing.
    at = goto(at, "explain")
    assert_clean(at)
    assert "train one first" in texts(at)


def test_upload_of_the_sample_files() -> None:
    at = sample_upload(new_app())
    assert_clean(at)
    shown = texts(at)
    assert "it is now the active dataset" in shown
    assert [m.value for m in at.metric[:4]] == ["60", "800", "4", "1"]  # items, duels, groups
    # Detected features, context and the missing-value report are on the page.
    features = at.dataframe[0].value
    assert set(features["feature (Shapley player)"]) == {
        "speed",
        "power",
        "stamina",
        "style",
        "venue",
    }
    imputed = at.dataframe[1].value
    assert set(imputed["column"]) == {"speed", "stamina", "style"}
    # The upload survives a page switch (the uploader itself forgets its file).
    at = goto(at, "train")
    assert "Upload 1: items.csv + duels.csv" in texts(at)
    at = goto(at, "data")
    assert "Upload 1: items.csv + duels.csv" in texts(at)


def _edit(file: str, row: int, column: str, value: str) -> bytes:
    """The sample file with one cell changed (``row``: 1-based data row)."""
    lines = (SAMPLE / file).read_text().splitlines()
    header = lines[0].split(",")
    cells = lines[row].split(",")
    cells[header.index(column)] = value
    lines[row] = ",".join(cells)
    return ("\n".join(lines) + "\n").encode()


HEADERLESS = b"c17,c55,c55,indoor\nc02,c25,c25,outdoor\n"


@pytest.mark.parametrize(
    ("items", "duels", "expected"),
    [
        (None, _edit("duels.csv", 3, "right", "nobody"),
         ["my_duels.csv", "row 3", "column 'right'", "'nobody' is not an id"]),
        (_edit("items.csv", 1, "speed", "fast"), None,
         ["my_items.csv", "row 1", "column 'speed'", "'fast'"]),
        (None, _edit("duels.csv", 2, "right", "c02"),
         ["my_duels.csv", "row 2", "duels itself"]),
        (None, _edit("duels.csv", 4, "winner", "c99"),
         ["my_duels.csv", "row 4", "column 'winner'"]),
        (b"", None, ["my_items.csv", "empty"]),
        (None, HEADERLESS, ["my_duels.csv", "header"]),
        (b"PK\x03\x04binary", None, ["my_items.csv", "zip"]),
    ],
    ids=["unknown-id", "non-numeric", "self-duel", "bad-winner", "empty", "no-header", "zip"],
)  # fmt: skip
def test_broken_uploads_are_explained_not_raised(
    items: bytes | None, duels: bytes | None, expected: list[str]
) -> None:
    at = sample_upload(
        new_app(), items, duels, items_name="my_items.csv", duels_name="my_duels.csv",
        lenient=False,
    )  # fmt: skip
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert len(errors) == 1, errors
    for part in expected:
        assert part in errors[0], (part, errors[0])
    # The demo stays the active dataset and still works.
    assert "Synthetic clusters (demo" in "\n".join(shown(m.value) for m in at.sidebar.markdown)
    at = goto(at, "explain")
    assert_clean(at)


def test_forgetting_the_uploaded_files() -> None:
    at = sample_upload(new_app())
    next(b for b in at.button if b.label == "Forget the uploaded files").click().run()
    assert_clean(at)
    assert "Upload items.csv and duels.csv to continue." in texts(at)
    assert all(u.value in (None, []) for u in at.file_uploader)  # fresh, empty uploaders
