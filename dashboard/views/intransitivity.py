"""Intransitivity page: how much of the model is rock-paper-scissors, and where.

On the N most active items: the HodgeRank cyclic share of the model's preference
matrix, its strongest cycles a > b > c > a (one row per cycle; a selected row links the
head-to-heads of its three pairs), the data's own cycles (who beat whom more often), and
the potential s, the ranking that explains the model best.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import links, pages, state
from dashboard.components.explanations import PLOT_CONFIG, require_model
from dashboard.components.export import export_name, export_stem, figure_exports, table_download
from dashboard.components.formats import percent
from dashboard.components.guard import run_guarded
from dashboard.components.text import md
from dashboard.services import views_data
from dashboard.services.analyses import intransitivity, scored_cycles
from prefshap_core.analysis.intransitivity import MAX_ITEMS
from prefshap_core.csv_safety import to_csv_bytes
from prefshap_core.plots.potential import potential_plot

DEFAULT_ITEMS = 200
TOP = 20
DEFAULT_MIN_P_CYCLE = 0.95
AVERAGED = "(averaged)"


def _percent(p: float) -> str:
    """Whole percents, but never a certain-looking 100% for a probability below 1."""
    return f"{p:.0%}" if p < 0.995 else (f"{p:.1%}" if p < 0.9995 else ">99.9%")


def head_to_head_link(a: str, b: str) -> str:
    """The head-to-head page of the pair, as a relative link."""
    return links.url(pages.HEAD_TO_HEAD, a=a, b=b)


def _edge(labels: dict[str, str], a: str, b: str, note: str) -> str:
    text = f"{md(labels[a])} › {md(labels[b])} {note}".strip()
    return f"[{text}]({head_to_head_link(a, b)})"


def _choices(loaded: state.LoadedData, model: state.TrainedModel) -> tuple[int, dict[str, str]]:
    fp = loaded.fingerprint
    n_max = min(MAX_ITEMS, loaded.data.n_items)
    c = st.columns([1, 2])
    n = c[0].number_input(
        "Items (the most active)", min_value=3, max_value=n_max,
        value=min(DEFAULT_ITEMS, n_max), step=50, key=f"intransitivity:n:{fp}",
        persist_state=state.PERSIST,
        help=f"The model is evaluated on every pair of them (at most {MAX_ITEMS:,} items).",
    )  # fmt: skip
    context: dict[str, str] = {}
    groups = views_data.context_groups(loaded, model)
    if groups:
        cols = c[1].columns(len(groups))
        for col, (group, categories) in zip(cols, groups.items(), strict=True):
            value = col.selectbox(
                f"Context: {md(group)}", [AVERAGED, *categories],
                format_func=lambda v, g=group: v if v == AVERAGED else f"{g} = {v}",
                key=f"intransitivity:ctx:{fp}:{group}", persist_state=state.PERSIST,
                help="Fix this context group; the others are averaged over the observed contexts.",
            )  # fmt: skip
            if value != AVERAGED:
                context[group] = value
    return int(n), context


def render() -> None:
    st.title("Intransitivity")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    data = loaded.data
    n, context = _choices(loaded, model)
    with st.spinner(f"Evaluating the model on all {n * (n - 1) // 2:,} pairs…"):
        result = intransitivity(loaded, model, n, context, top=TOP)
    report = result.model
    with st.spinner("Posterior draws of the model's cycles…"):
        scored = scored_cycles(loaded, model, result, n, context)
    ids = [str(i) for i in report.item_ids]
    labels = dict(zip(ids, (str(x) for x in data.labels[result.data_rows]), strict=True))

    c = st.columns(3)
    c[0].metric(
        "Cyclic share", f"{report.cyclic_share:.1%}",
        help="||G - grad||² / ||G||²: the part of the model's preferences between these "
        "items that no ranking explains (0 for a utility model, near 100% for "
        "rock-paper-scissors).",
    )  # fmt: skip
    c[1].metric(
        "Cyclic triangles (model)", f"{report.n_cyclic_triangles:,}",
        help=f"Triples a > b > c > a among the {math.comb(n, 3):,} triples of these items.",
    )  # fmt: skip
    c[2].metric(
        "Cyclic triangles (data)", f"{result.n_observed_cycles:,}",
        help=f"In the dominance graph: a beat b more often than b beat a "
        f"({result.n_compared_pairs:,} pairs decided, all contexts together).",
    )  # fmt: skip
    parts = [f"The {n:,} most active items"]
    if model.kind == "cgpm":
        where = ", ".join(f"{md(k)} = {md(v)}" for k, v in context.items())
        parts.append(f"context {where}, other groups averaged" if where else "context-averaged")
    if scored is not None:
        lo, hi = scored.share_interval
        parts.append(f"cyclic share over {scored.n_draws:,} posterior draws: {lo:.1%} to {hi:.1%}")
    parts.append("select a cycle's row to open its three pairs' head-to-heads")
    st.caption(" · ".join(parts) + ".")

    left, right = st.columns(2)
    with left:
        st.subheader("Strongest cycles of the model")
        triangles, min_p = _model_cycles(report, scored, loaded.fingerprint)
        if not triangles and (scored is None or not scored.triangles):
            st.info("The model has no cycle among these items: it ranks them.")
        elif not triangles:
            st.info(
                "None of the model's cycles among these items is distinguishable from "
                f"noise: none keeps all three edges in {min_p:.0%} of "
                f"{scored.n_draws:,} posterior draws. Lower the threshold to see weaker ones."
            )
        if triangles:
            rows = [
                {"#": k, "A": labels[t["items"][0]], "B": labels[t["items"][1]],
                 "C": labels[t["items"][2]], "P(A beats B)": percent(t["p"][0]),
                 "P(B beats C)": percent(t["p"][1]), "P(C beats A)": percent(t["p"][2]),
                 **({} if t.get("p_cycle") is None else {"p_cycle": _percent(t["p_cycle"])})}
                for k, t in enumerate(triangles, start=1)
            ]  # fmt: skip
            _cycle_table(pd.DataFrame(rows), [t["items"] for t in triangles], labels, "model")
        if triangles:
            table_download(
                to_csv_bytes(_triangle_table(triangles, labels)),
                export_name(data.name, "cycles", "model", "csv"), label="Cycles (CSV)",
                key="intransitivity:csv",
            )  # fmt: skip
    with right:
        st.subheader("The data's own cycles")
        observed = result.observed.items
        if len(observed) == 0:
            st.info("No cycle in the data among these items.")
        if len(observed):
            rows, cycles = [], []
            for k, (a, b, cc) in enumerate(observed.tolist(), start=1):
                x = [ids[i] for i in (a, b, cc)]
                nets = [result.net_wins[i, j] for i, j in ((a, b), (b, cc), (cc, a))]
                rows.append({"#": k, "A": labels[x[0]], "B": labels[x[1]], "C": labels[x[2]],
                             "A over B": f"+{nets[0]:g}", "B over C": f"+{nets[1]:g}",
                             "C over A": f"+{nets[2]:g}"})  # fmt: skip
                cycles.append(x)
            _cycle_table(pd.DataFrame(rows), cycles, labels, "data")
        st.caption("+k: the first won k more of their duels than the second.")
    st.caption("Select a cycle's row to open the head-to-head of each of its three pairs.")

    st.subheader("The ranking part: potential s")
    fig = potential_plot(report, np.array([labels[i] for i in ids]))
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG, key="intransitivity:potential")
    figure_exports(
        fig, export_stem(data.name, "potential", f"{n} items"), key="intransitivity:potential"
    )


def _cycle_table(table: pd.DataFrame, cycles: list, labels: dict[str, str], tag: str) -> None:
    """One row per cycle a > b > c > a; a selected row offers its three head-to-heads."""
    event = st.dataframe(
        table, hide_index=True, width="stretch", on_select="rerun",
        selection_mode="single-row", key=f"intransitivity:{tag}:table",
    )  # fmt: skip
    picked = event.selection.rows if event is not None else []
    if picked:
        a, b, c = cycles[picked[0]]
        st.markdown("Head-to-head: " + " · ".join(
            _edge(labels, x, y, "") for x, y in ((a, b), (b, c), (c, a))))  # fmt: skip


def _model_cycles(report, scored, fp: str) -> tuple[list[dict], float]:
    """The cycles to list and the p_cycle threshold (a control; no posterior: all)."""
    if scored is None:
        st.caption(
            "This model has no posterior, so its cycles are not tested against noise: "
            "retrain it to get p_cycle."
        )
        return report.triangles(), 0.0
    min_p = st.slider(
        "Show cycles with p_cycle at least", min_value=0.0, max_value=1.0,
        value=DEFAULT_MIN_P_CYCLE, step=0.05, key=f"intransitivity:min_p:{fp}",
        persist_state=state.PERSIST,
        help="p_cycle: the share of posterior draws of the model in which all three "
        "edges keep their direction. Cycles below it are indistinguishable from noise.",
    )  # fmt: skip
    return scored.filtered(float(min_p), TOP), float(min_p)


def _triangle_table(triangles: list[dict], labels: dict[str, str]) -> pd.DataFrame:
    rows = []
    for t in triangles:
        a, b, c = t["items"]
        rows.append({"a": a, "b": b, "c": c, "name_a": labels[a], "name_b": labels[b],
                     "name_c": labels[c], "p_ab": t["p"][0], "p_bc": t["p"][1],
                     "p_ca": t["p"][2]})  # fmt: skip
    return pd.DataFrame(rows)


run_guarded(render)
