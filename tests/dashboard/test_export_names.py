"""One naming scheme for every download, `<dataset>-<view>-<selection>.<ext>`, and tables
that do not repeat an id as its name."""

from __future__ import annotations

import re

import pandas as pd

from dashboard.components.export import export_name, export_stem, name_part
from dashboard.components.tables import without_duplicate_names

SAFE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*\.(png|svg|html|csv|json|npz)$")


def test_names_follow_dataset_view_selection() -> None:
    name = export_name("upload (items.csv + duels.csv)", "beehive", "All test duels items", "svg")
    assert name == "upload-items-duels-beehive-all-test-duels-items.svg"
    assert export_name("pokemon", "bar importance", "Type 1 = Fire vs the rest", "png") == (
        "pokemon-bar-importance-type-1-fire-vs-the-rest.png"
    )
    assert export_stem("tennis", "rankings") == "tennis-rankings-all"  # no selection: all
    assert export_name("", "", "", "csv") == "data-figure-all.csv"


def test_hostile_or_accented_parts_become_safe_characters() -> None:
    for dataset, view, selection in [
        ("../../etc/passwd", "waterfall", "=HYPERLINK(1)"),
        ("Flabébé", "dependence", "Ünïcode · “quotes” / \\ \r\n"),
        ("x" * 500, "beehive", "y" * 500),
    ]:
        name = export_name(dataset, view, selection, "png")
        assert SAFE.match(name), name
        assert len(name) <= 3 * 60 + 6
    assert name_part("Flabébé") == "flabebe"


def test_a_name_column_equal_to_the_ids_is_dropped() -> None:
    frame = pd.DataFrame({"item": ["a", "b"], "item_id": ["a", "b"], "p": [0.1, 0.2]})
    assert list(without_duplicate_names(frame, "item", "item_id").columns) == ["item_id", "p"]
    named = frame.assign(item=["Alpha", "b"])
    assert list(without_duplicate_names(named, "item", "item_id").columns) == [
        "item", "item_id", "p",
    ]  # fmt: skip
