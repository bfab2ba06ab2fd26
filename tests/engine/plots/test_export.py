"""Figure and table export: HTML and CSV always; PNG/SVG through a real Chromium when
one is installed (skipped with the reason otherwise)."""

from __future__ import annotations

import io
import struct
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from prefshap_core.errors import PrefShapError, StaticExportUnavailable
from prefshap_core.explain.explanation import Explanation
from prefshap_core.plots import export
from prefshap_core.plots.export import (
    StaticExporter,
    explanation_to_csv,
    figure_to_html,
    figure_to_png,
    figure_to_svg,
    find_browser,
    static_export_available,
)

BROWSER, BROWSER_REASON = find_browser()
needs_browser = pytest.mark.skipif(BROWSER is None, reason=f"no static export: {BROWSER_REASON}")


def small_explanation(*, with_se: bool) -> Explanation:
    rng = np.random.default_rng(0)
    values = rng.normal(size=(5, 3))
    return Explanation(
        values=values,
        base_values=np.zeros(5),
        outputs=values.sum(axis=1),
        data=rng.normal(size=(5, 3)),
        player_names=("speed", "type", "hp"),
        duel_ids=np.array([f"d{i}" for i in range(5)]),
        left_ids=np.array(["a", "b", "c", "a", "b"]),
        right_ids=np.array(["b", "c", "a", "c", "a"]),
        winners=np.array([1, -1, 1, 0, -1], dtype=np.int8),
        standard_errors=np.abs(rng.normal(size=(5, 3))) if with_se else None,
    )


def small_figure(width: int = 400, height: int = 300) -> go.Figure:
    fig = go.Figure(go.Scattergl(x=[0, 1, 2], y=[2, 0, 1], mode="markers"))
    fig.update_layout(width=width, height=height)
    return fig


def png_size(png: bytes) -> tuple[int, int]:
    width, height = struct.unpack(">II", png[16:24])  # IHDR follows the 8-byte signature
    return width, height


# -- always available ------------------------------------------------------------------
def test_html_export_is_a_standalone_page() -> None:
    fig = small_figure()
    linked = figure_to_html(fig)
    embedded = figure_to_html(fig, include_plotlyjs=True)
    cdn_tag = 'src="https://cdn.plot.ly/'
    assert linked.lstrip().lower().startswith("<!doctype html>") and cdn_tag in linked
    assert '"type":"scattergl"' in linked
    assert cdn_tag not in embedded and len(embedded) > len(linked) + 1_000_000


def test_csv_export_round_trips_values_and_standard_errors() -> None:
    expl = small_explanation(with_se=True)
    frame = pd.read_csv(io.BytesIO(explanation_to_csv(expl)))
    assert list(frame.columns[:6]) == ["duel_id", "left", "right", "winner", "output", "base_value"]
    np.testing.assert_allclose(frame[["speed", "type", "hp"]].to_numpy(), expl.values)
    np.testing.assert_allclose(
        frame[["se:speed", "se:type", "se:hp"]].to_numpy(), expl.standard_errors
    )
    assert frame["winner"].fillna("").tolist() == ["a", "c", "c", "", "a"]


def test_csv_export_without_standard_errors_has_no_se_columns() -> None:
    frame = pd.read_csv(io.BytesIO(explanation_to_csv(small_explanation(with_se=False))))
    assert not [c for c in frame.columns if c.startswith("se:")]
    assert len(frame) == 5


def test_missing_browser_is_reported_and_raises_a_prefshap_error(tmp_path: Path) -> None:
    exporter = StaticExporter(str(tmp_path / "no-such-chrome"))
    ok, reason = exporter.available()
    assert not ok and "no-such-chrome" in reason
    with pytest.raises(StaticExportUnavailable, match="no-such-chrome") as caught:
        exporter.export(small_figure(), "png")
    assert isinstance(caught.value, PrefShapError)
    assert not exporter.running


def test_bad_browser_path_in_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BROWSER_PATH", "/nonexistent/chrome")
    path, reason = find_browser()
    assert path is None and "BROWSER_PATH" in reason and "/nonexistent/chrome" in reason


def test_missing_kaleido_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_installed(name: str) -> str:
        raise export.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(export.importlib.metadata, "version", not_installed)
    ok, reason = StaticExporter("/usr/bin/true").available()
    assert not ok and "kaleido" in reason


def test_browser_that_dies_at_start_is_remembered(tmp_path: Path) -> None:
    fake = tmp_path / "fake-chrome"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    exporter = StaticExporter(str(fake), start_timeout_s=20)
    with pytest.raises(StaticExportUnavailable, match="failed to start"):
        exporter.export(small_figure(), "svg")
    ok, reason = exporter.available()
    assert not ok and "failed to start" in reason
    with pytest.raises(StaticExportUnavailable, match="failed to start"):
        exporter.export(small_figure(), "svg")  # fails fast, no second launch


def test_browser_that_hangs_at_start_times_out_and_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hang = tmp_path / "hanging-chrome"
    hang.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    hang.chmod(0o755)
    exporter = StaticExporter(str(hang), start_timeout_s=1)
    with pytest.raises(StaticExportUnavailable, match="did not start within 1 s"):
        exporter.export(small_figure(), "png")
    pid = int(pid_file.read_text())
    assert not _alive(pid), "the hanging browser process was left running"


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status  # a zombie has exited; only its entry remains


# -- with a real Chromium --------------------------------------------------------------
@pytest.mark.slow
@needs_browser
@pytest.mark.browser
def test_png_and_svg_export_through_chromium() -> None:
    ok, reason = static_export_available()
    assert ok, reason
    png = figure_to_png(small_figure(400, 300), scale=2)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert png_size(png) == (800, 600)
    svg = figure_to_svg(small_figure(400, 300))
    root = ET.fromstring(svg)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("width") == "400" and root.get("height") == "300"
    assert export.default_exporter().running  # kept for the next export


@pytest.mark.slow
@needs_browser
@pytest.mark.browser
def test_concurrent_exports_each_get_their_own_result() -> None:
    results: dict[str, bytes] = {}

    def run(name: str, fmt: str, width: int) -> None:
        results[name] = export.default_exporter().export(small_figure(width, 200), fmt)  # type: ignore[arg-type]

    threads = [
        threading.Thread(target=run, args=("png", "png", 333)),
        threading.Thread(target=run, args=("svg", "svg", 444)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["png"][:8] == b"\x89PNG\r\n\x1a\n" and png_size(results["png"]) == (333, 200)
    assert ET.fromstring(results["svg"]).get("width") == "444"


@pytest.mark.slow
@needs_browser
@pytest.mark.browser
def test_closing_an_exporter_ends_its_browser() -> None:
    exporter = StaticExporter(BROWSER)
    try:
        exporter.export(small_figure(), "svg")
        pid = exporter.browser_pid
        assert pid is not None and _alive(pid)
    finally:
        exporter.close()
    assert not exporter.running and not _alive(pid)
