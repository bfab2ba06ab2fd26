"""Export buttons under every figure: PNG, SVG, interactive HTML, and the values as CSV.

Files are produced only when a button is clicked (``st.download_button`` with a
callable), so drawing a page costs nothing and static export's browser starts on
the first PNG/SVG click, not at page load. PNG/SVG need kaleido and a Chromium; when
the engine says static export is unavailable here, the page says why and offers the
interactive HTML (which also saves as an image from any browser).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import plotly.graph_objects as go
import streamlit as st

from prefshap_core.csv_safety import safe_file_name
from prefshap_core.explain.explanation import Explanation
from prefshap_core.models.model_file import model_to_bytes
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.plots import (
    explanation_to_csv,
    figure_to_html,
    figure_to_png,
    figure_to_svg,
    static_export_available,
    with_provenance,
)

# Every exported file is named `<dataset>-<view>-<selection>.<ext>`: lower-case ASCII
# letters, digits and '-', e.g. 'pokemon-beehive-all-test-duels-items.png'.
_FILE_EXTENSIONS = re.compile(r"\.(csv|tsv|txt|xlsx?|parquet|json|npz|zip|gz)\b", re.IGNORECASE)
MAX_PART_CHARS = 60


def name_part(text: str) -> str:
    """One part of an export's name: accents dropped ('é' -> 'e'), file extensions
    dropped ('items.csv' -> 'items'), lower case, every run of other characters one
    '-', at most ``MAX_PART_CHARS``."""
    ascii_text = unicodedata.normalize("NFKD", str(text)).encode("ascii", "ignore").decode()
    text = _FILE_EXTENSIONS.sub("", ascii_text).lower()
    return re.sub(r"[^a-z0-9]+", "-", text).strip("-")[:MAX_PART_CHARS].strip("-")


def export_stem(dataset: str, view: str, selection: str = "") -> str:
    """'<dataset>-<view>-<selection>' (an empty selection: 'all'), each a
    :func:`name_part`: the one naming scheme of every download."""
    parts = (
        name_part(dataset) or "data",
        name_part(view) or "figure",
        name_part(selection) or "all",
    )
    return "-".join(parts)


def export_name(dataset: str, view: str, selection: str, ext: str) -> str:
    """'<dataset>-<view>-<selection>.<ext>'."""
    return f"{export_stem(dataset, view, selection)}.{ext}"


def plot_config(stem: str) -> dict:
    """Plotly's chart options with its camera button saving '<stem>.png' too."""
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "scale": 2, "filename": stem}}  # fmt: skip


def figure_exports(
    fig: go.Figure,
    stem: str,
    *,
    expl: Explanation | None = None,
    key: str,
    table: Callable[[], bytes] | None = None,
    table_help: str | None = None,
    provenance: str | None = None,
) -> None:
    """A row of download buttons for one figure and the numbers behind it, each file
    named ``<stem>.<ext>`` (``stem`` from :func:`export_stem`).

    ``table``: the figure's own numbers as CSV (e.g. the bars'); default: the
    explanation's per-duel values. ``provenance`` (dataset, model, duel count) is
    written into every exported figure, so a file away from the dashboard says what
    it shows.
    """
    if provenance:
        fig = with_provenance(fig, provenance)
    available, why = static_export_available()
    row = st.container(horizontal=True, gap="small")
    common = {"on_click": "ignore", "width": "content"}
    if available:
        row.download_button(
            "PNG",
            data=lambda: figure_to_png(fig),
            file_name=f"{stem}.png",
            mime="image/png",
            key=f"png:{key}",
            icon=":material/image:",
            **common,
        )
        row.download_button(
            "SVG",
            data=lambda: figure_to_svg(fig),
            file_name=f"{stem}.svg",
            mime="image/svg+xml",
            key=f"svg:{key}",
            icon=":material/shape_line:",
            **common,
        )
    else:
        row.button("PNG", disabled=True, key=f"png:{key}", help=why)
        row.button("SVG", disabled=True, key=f"svg:{key}", help=why)
    row.download_button(
        "HTML",
        data=lambda: figure_to_html(fig, include_plotlyjs=True).encode("utf-8"),
        file_name=f"{stem}.html",
        mime="text/html",
        key=f"html:{key}",
        icon=":material/code:",
        help="Interactive figure; works offline (plotly.js is embedded).",
        **common,
    )
    if table is not None or expl is not None:
        row.download_button(
            "CSV",
            data=table if table is not None else lambda: explanation_to_csv(expl),
            file_name=f"{stem}.csv",
            mime="text/csv",
            key=f"csv:{key}",
            icon=":material/table:",
            help=table_help
            or "The Pref-SHAP values behind this figure: one row per duel, one "
            "column per feature, as oriented here.",
            **common,
        )
    if not available:
        st.caption(
            f"PNG/SVG export is unavailable on this server ({why}). Download the "
            "interactive HTML instead: it opens in any browser, which can save it as an image."
        )


def model_download(fn: PreferenceFunction, stem: str, *, key: str) -> None:
    """The trained model file (.npz, docs/model-format.md)."""
    st.download_button(
        "Model file (.npz)",
        data=lambda: model_to_bytes(fn),
        file_name=f"{stem}.npz",
        mime="application/octet-stream",
        key=f"model:{key}",
        on_click="ignore",
        icon=":material/download:",
        help="Pickle-free model file (docs/model-format.md); `prefshap explain --model` reads it.",
    )


def table_download(
    data: bytes, file_name: str, *, label: str = "CSV", key: str, help: str | None = None
) -> None:
    """A CSV download; ``data`` from ``csv_safety.to_csv_bytes`` (formula-safe)."""
    st.download_button(
        label,
        data=data,
        file_name=safe_file_name(file_name, "table.csv"),
        mime="text/csv",
        key=f"table:{key}",
        on_click="ignore",
        icon=":material/table:",
        help=help,
    )


def provenance(dataset: str, model: str, n_duels: int) -> str:
    """The line exported figures carry, e.g. 'Pokémon · GPM (settings 1a2b…) · 1,000 duels'."""
    return f"{dataset} · {model} · {n_duels:,} duel{'s' if n_duels != 1 else ''}"
