"""Plotly figures of Explanations (no Streamlit): beehive, bar, waterfall (split by side
for side-aware explanations), own vs opponents, interaction heatmap and pair scatter,
and export.

Importing this package does not import kaleido or start a browser; static export
starts one on first use (see ``export``).
"""

from prefshap_core.plots.bar import bar, bar_table
from prefshap_core.plots.beehive import beehive
from prefshap_core.plots.dependence import dependence, interaction_partner
from prefshap_core.plots.export import (
    explanation_to_csv,
    figure_to_html,
    figure_to_png,
    figure_to_svg,
    static_export_available,
    with_provenance,
)
from prefshap_core.plots.interaction_heatmap import interaction_heatmap
from prefshap_core.plots.interaction_scatter import interaction_scatter
from prefshap_core.plots.own_vs_opponents import own_vs_opponents
from prefshap_core.plots.waterfall import waterfall

__all__ = [
    "bar",
    "bar_table",
    "beehive",
    "dependence",
    "explanation_to_csv",
    "figure_to_html",
    "figure_to_png",
    "figure_to_svg",
    "interaction_heatmap",
    "interaction_partner",
    "interaction_scatter",
    "own_vs_opponents",
    "static_export_available",
    "waterfall",
    "with_provenance",
]
