"""Every CSV the product writes goes through the formula neutraliser (csv_safety).

A walk of the source finds every CSV writer call; besides it, the three writers that
once wrote user text raw (``prefshap train --rejected-out``, the Data page's rejected
rows, the Intransitivity page's cycles) are checked with hostile names.
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.cli._output import write_rejected
from prefshap_core.paths import repo_root
from tests.dashboard.apptest import (
    assert_clean,
    goto,
    new_app,
    sample_upload,
    settle,
)

ROOT = repo_root()
SOURCES = ("prefshap_core", "dashboard")
# The one function that calls DataFrame.to_csv: it neutralises first (write_csv uses it).
ALLOWED = {("prefshap_core/csv_safety.py", "to_csv_bytes")}
HOSTILE = '=HYPERLINK("http://evil.example/x","click")'


def _writer_calls(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every CSV writer call or import in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = where
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = child.name
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                name, owner = child.func.attr, child.func.value
                module = owner.id if isinstance(owner, ast.Name) else None
                if name == "to_csv" or (
                    module in ("csv", "np", "numpy") and name in ("writer", "DictWriter", "savetxt")
                ):
                    found.append((inner, child.lineno))
            if (
                isinstance(child, ast.ImportFrom)
                and child.module in ("csv", "numpy")
                and any(a.name in ("writer", "DictWriter", "savetxt") for a in child.names)
            ):
                found.append((inner, child.lineno))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def test_every_csv_writer_goes_through_the_neutraliser() -> None:
    calls = {}
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for function, line in _writer_calls(path):
                calls[(rel, function, line)] = None
    assert calls, "the walk found no writer at all: it is looking in the wrong place"
    outside = sorted(c for c in calls if (c[0], c[1]) not in ALLOWED)
    assert not outside, f"CSV written without csv_safety.to_csv_bytes: {outside}"


def test_the_walk_sees_a_raw_writer(tmp_path: Path) -> None:
    sample = tmp_path / "raw.py"
    sample.write_text(
        "import csv\nimport numpy as np\n"
        "def f(t, fh):\n    t.to_csv(fh)\n    csv.writer(fh)\n    np.savetxt(fh, t)\n"
    )
    assert [line for _, line in _writer_calls(sample)] == [4, 5, 6]


def test_rejected_rows_writer_neutralises(tmp_path: Path) -> None:
    rejected = pd.DataFrame(
        {"file": ["duels.csv"], "row": [3], "reason": ["unknown item id"], "left": [HOSTILE]}
    )
    write_rejected(rejected, tmp_path / "r.csv", "prefshap train")
    text = (tmp_path / "r.csv").read_text()
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text and '"=HYPERLINK' not in text


def _hostile_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "items.csv").write_bytes((ROOT / "sample_data" / "items.csv").read_bytes())
    duels = (ROOT / "sample_data" / "duels.csv").read_text()
    quoted = '"' + HOSTILE.replace('"', '""') + '"'
    (folder / "duels.csv").write_text(
        duels + f"{quoted},c02,c02,indoor\n@SUM(1+1),c03,c03,indoor\n"
    )
    return folder


def test_train_rejected_out_neutralises(tmp_path: Path, capsys) -> None:
    folder = _hostile_folder(tmp_path)
    target = tmp_path / "rejected.csv"
    code = main(
        [
            "train", "--model", "gpm", "--data", str(folder), "--out", str(tmp_path / "m.npz"),
            "--quiet",
            "--lenient", "--rejected-out", str(target), "--n-centres", "30",
            "--penalty", "1e-3", "--lengthscale-scale", "1", "--utility-weight", "0",
        ]
    )  # fmt: skip
    capsys.readouterr()
    assert code == 0
    rejected = pd.read_csv(target, dtype=str, keep_default_na=False)
    assert sorted(rejected["left"]) == sorted(["'" + HOSTILE, "'@SUM(1+1)"])


# -- the dashboard's two downloads ---------------------------------------------------------
@pytest.fixture()
def downloads(monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """The data of every download button the app draws, by label."""
    import streamlit

    seen: dict[str, bytes] = {}
    original = streamlit.download_button

    def recording(label, data=None, *args, **kwargs):
        seen[str(label)] = data() if callable(data) else data
        return original(label, data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", recording)
    return seen


def test_dashboard_rejected_rows_and_cycles_are_neutralised(downloads, tmp_path: Path) -> None:
    items = pd.read_csv(ROOT / "sample_data" / "items.csv", dtype=str)
    items["name"] = [f'=HYPERLINK("http://evil.example/{k}","n{k}")' for k in range(len(items))]
    folder = _hostile_folder(tmp_path)
    at = sample_upload(
        new_app(),
        items=items.to_csv(index=False).encode(),  # the test's own input file
        duels=(folder / "duels.csv").read_bytes(),
        lenient=True,
    )
    assert_clean(at)
    rejected = next(v for k, v in downloads.items() if "rejected or skipped rows" in k)
    table = pd.read_csv(io.BytesIO(rejected), dtype=str, keep_default_na=False)
    assert sorted(table["left"]) == sorted(["'" + HOSTILE, "'@SUM(1+1)"])

    at = goto(at, "train")
    at.number_input(key="train:centres").set_value(60)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "intransitivity")
    assert_clean(at)
    # every cycle listed (the default shows only those sure against the posterior)
    next(s for s in at.slider if s.key.startswith("intransitivity:min_p:")).set_value(0.0).run()
    assert_clean(at)
    cycles = pd.read_csv(io.BytesIO(downloads["Cycles (CSV)"]), dtype=str)
    names = pd.concat([cycles["name_a"], cycles["name_b"], cycles["name_c"]])
    assert len(names) and names.str.startswith("'=HYPERLINK").all()
