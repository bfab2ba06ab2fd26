"""Head-to-head page: any two items, P(A beats B) per context and on average, their
past meetings, the explanation of their duel seen from A, and what-if edits."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import streamlit as st

from dashboard import links, pages, state
from dashboard.components.explanations import PLOT_CONFIG, require_model
from dashboard.components.export import export_stem, figure_exports, provenance
from dashboard.components.formats import percent
from dashboard.components.guard import run_guarded, show_error
from dashboard.components.precision import precision_control
from dashboard.components.text import md
from dashboard.services import views_data
from dashboard.services.cluster import cluster_executor
from dashboard.services.explain_requests import inline_request
from dashboard.services.intervals import interval_caption, pair_g_sd
from dashboard.services.pair_explanations import explain_pair
from dashboard.services.training import model_description
from prefshap_core.errors import PrefShapError
from prefshap_core.plots import waterfall

AVERAGE = "averaged over the observed contexts"
AVERAGE_CHOICE = "no context: averaged over the observed contexts"


def _pick_pair(loaded: state.LoadedData) -> tuple[str, str]:
    pair = state.selected_pair(loaded) or views_data.default_pair(loaded)
    choices = views_data.item_choices(loaded)
    ids, labels = choices.ids, choices.labels

    def show(i: str) -> str:
        return labels[i] if labels[i] == i else f"{labels[i]} ({i})"

    c = st.columns(2)
    # Keys carry the chosen pair, so a pair chosen elsewhere (a link) shows here.
    tag = f"{loaded.fingerprint}:{pair[0]}:{pair[1]}"
    a = c[0].selectbox("Item A", ids, index=ids.index(pair[0]), format_func=show,
                       key=f"h2h:a:{tag}")  # fmt: skip
    b = c[1].selectbox("Item B", ids, index=ids.index(pair[1]), format_func=show,
                       key=f"h2h:b:{tag}")  # fmt: skip
    if (a, b) != pair:
        state.select_pair(loaded, a, b)
        st.rerun()
    return a, b


def _edited_row(
    loaded: state.LoadedData, item: str, side: str
) -> tuple[np.ndarray, dict[str, object]]:
    """The item's model-space row after the user's edits, and the edited columns' raw
    values (empty: unedited). A link's ``edit_a`` / ``edit_b`` fills the widgets once."""
    data = loaded.data
    original = views_data.item_covariates(loaded, item)
    values = dict(original)
    linked = links.parse_edits(links.take(f"edit_{side}"))
    for column in views_data.what_if_columns(loaded):
        key = f"h2h:edit:{loaded.fingerprint}:{side}:{item}:{column.name}"
        if column.kind == "numeric":
            if column.name in linked:
                _link_number(key, linked[column.name], column)
            step = 1.0 if column.integer else (column.high - column.low) / 100 or 1.0
            # A widget whose state a link set takes it from there (a value too would warn).
            start = float(np.clip(original[column.name], column.low, column.high))
            initial = {} if key in st.session_state else {"value": start}
            values[column.name] = st.number_input(
                md(column.name), min_value=column.low, max_value=column.high,
                step=step, key=key, format="%g", **initial,
            )  # fmt: skip
        else:
            choices = ([None] if column.optional else []) + list(column.categories)
            if column.name in linked:
                wanted = linked[column.name] or None
                if wanted in choices:
                    st.session_state[key] = wanted
            current = original[column.name] if original[column.name] in choices else choices[0]
            initial = {} if key in st.session_state else {"index": choices.index(current)}
            values[column.name] = st.selectbox(
                md(column.name), choices, key=key,
                format_func=lambda c: "(none)" if c is None else str(c), **initial,
            )  # fmt: skip
    edits = {k: v for k, v in values.items() if v != original[k]}
    row = views_data.encoded_row(loaded, values) if edits else data.items[[data.item_index(item)]]
    return row, edits


def _link_number(key: str, text: str, column) -> None:
    """A linked number into its widget, if it is one within the column's range."""
    try:
        number = float(text)
    except ValueError:
        return
    if column.low <= number <= column.high:
        st.session_state[key] = number
    else:
        st.toast(
            f"The link's {md(column.name)} = {md(text)} is outside the data's range "
            f"({column.low:g} to {column.high:g}): not applied."
        )


def _what_if(loaded: state.LoadedData, a: str, b: str, names: dict[str, str]):
    with st.expander("What if… edit either side's covariates (raw units)", icon=":material/tune:"):
        st.caption("Numbers stay within the data's range; categories are the column's own.")
        c = st.columns(2)
        rows = []
        for column, item, side in ((c[0], a, "a"), (c[1], b, "b")):
            with column:
                st.markdown(f"**{md(names[item])}**")
                rows.append(_edited_row(loaded, item, side))
    (x_a, edits_a), (x_b, edits_b) = rows
    return x_a, x_b, edits_a, edits_b


def _context_choice(loaded: state.LoadedData, model: state.TrainedModel) -> int | None:
    """Index of the observed context the duel is read under (C-GPM), or None: the
    context-averaged model (also for a model without contexts)."""
    contexts = views_data.context_choices(loaded, model)
    if contexts is None:
        return None
    labels, order = contexts.labels, contexts.order
    chosen = state.selected_context(loaded)
    choices: list[int | None] = [*order, None]
    key, seen = f"h2h:context:{loaded.fingerprint}", f"h2h:context-seen:{loaded.fingerprint}"
    averaged = f"h2h:averaged:{loaded.fingerprint}"  # the last choice, kept (no label)
    # The widget keeps the user's pick; a context chosen elsewhere (a link, Explain,
    # Rankings) since this page last ran is put into it first.
    if key not in st.session_state or st.session_state.get(seen, "") != chosen:
        if chosen in labels:
            st.session_state[key] = labels.index(chosen)
        else:
            st.session_state[key] = None if st.session_state.get(averaged) else order[0]
    pick = st.selectbox(
        "Context of the duel", choices, key=key,
        format_func=lambda k: AVERAGE_CHOICE if k is None else labels[k],
        help="The probabilities above and the waterfall read the duel under this observed "
        "context; the last choice is the model averaged over the observed contexts.",
    )  # fmt: skip
    st.session_state[averaged] = pick is None
    label = None if pick is None else labels[pick]
    if label != chosen:
        state.select_context(loaded, label)
    st.session_state[seen] = label
    return None if pick is None else int(pick)


def render() -> None:
    st.title("Head-to-head")
    ready = require_model()
    if ready is None:
        return
    loaded, model = ready
    executor = cluster_executor()  # where explanations run (the environment, read once)
    data = loaded.data
    a, b = _pick_pair(loaded)
    names = views_data.item_choices(loaded).labels
    if a == b:
        st.info("Pick two different items.")
        links.write(a=a, b=b)
        return
    edits_a: dict[str, object] = {}
    edits_b: dict[str, object] = {}
    try:
        x_a, x_b, edits_a, edits_b = _what_if(loaded, a, b, names)
    except PrefShapError as exc:
        show_error(exc)
        x_a, x_b = data.items[[data.item_index(a)]], data.items[[data.item_index(b)]]
    edited = bool(edits_a or edits_b)
    started = time.perf_counter()
    pref = views_data.pair_probabilities(loaded, model, x_a, x_b)
    met = views_data.pair_meetings(loaded, a, b)
    hyp_a, hyp_b = (" (edited)" if e else "" for e in (edits_a, edits_b))
    context_row = _context_choice(loaded, model)
    # One probability per pair: the waterfall's own end (the chosen context, or g_bar).
    p_a = pref.p_under(context_row)
    choices = views_data.context_choices(loaded, model)
    where = AVERAGE if context_row is None or choices is None else (
        f"under {choices.labels[context_row]}")  # fmt: skip
    c = st.columns(3)
    c[0].metric(f"P({md(names[a])}{hyp_a} beats {md(names[b])}{hyp_b})", percent(p_a),
                help=md(f"The model's probability, {where}."))  # fmt: skip
    c[1].metric(f"P({md(names[b])}{hyp_b} beats {md(names[a])}{hyp_a})", percent(1 - p_a),
                help=md(f"The model's probability, {where}."))  # fmt: skip
    c[2].metric("Past meetings", f"{met.wins_a} – {met.wins_b}",
                help=f"Wins of {md(names[a])} – wins of {md(names[b])} in the data.")  # fmt: skip
    # The interval of the one probability shown: under the chosen context, or averaged.
    beats = f"{names[a]}{hyp_a} beats {names[b]}{hyp_b}"
    g_shown = pref.g_under(context_row)
    if note := interval_caption(beats, g_shown, pair_g_sd(model, x_a, x_b, context_row)):
        st.caption(md(note))
    if not pref.by_context.empty:
        table = pref.by_context.assign(
            context=pref.by_context["group"] + " = " + pref.by_context["value"],
            share=pref.by_context["share"].map(percent),
            p_a=pref.by_context["p_a"].map(percent),
        )[["context", "p_a", "share"]]
        table.columns = [
            "observed context value",
            f"P({names[a]} beats {names[b]})",
            "share of duels",
        ]
        st.markdown("**Per observed context value** (other context columns averaged over "
                    "the observed contexts with that value)")  # fmt: skip
        st.dataframe(table, hide_index=True, width="stretch")
    sides = _Sides(a, b, x_a, x_b, bool(edits_a), bool(edits_b))
    _explanation(loaded, model, sides, names, context_row, executor, where)
    st.caption(
        f"Probabilities and explanation computed in "
        f"{time.perf_counter() - started:.2f} s" + (" (after your edit)." if edited else ".")
    )
    _meetings(loaded, met, names, a, b)
    view = {"a": a, "b": b, "context": state.selected_context(loaded)}
    links.write(**view, edit_a=links.edits_param(edits_a), edit_b=links.edits_param(edits_b))


@dataclass(frozen=True, eq=False)
class _Sides:
    a: str
    b: str
    x_a: np.ndarray  # (1, d) model-space rows, edited or not
    x_b: np.ndarray
    edited_a: bool
    edited_b: bool

    @property
    def edited(self) -> bool:
        return self.edited_a or self.edited_b


def _explanation(loaded, model, sides: _Sides, names, context_row, executor, where) -> None:
    a, b = sides.a, sides.b
    c = st.columns([4, 1], vertical_alignment="bottom")
    edited_a, edited_b = (" (edited)" if e else "" for e in (sides.edited_a, sides.edited_b))
    c[0].subheader(
        f"Why: {md(names[a])}{edited_a} vs {md(names[b])}{edited_b}, seen from {md(names[a])}"
    )
    with c[1]:
        precision = precision_control("head-to-head")
    fn = model.function
    # Unedited: by id (the explainer's own pool rows); edited: the edited rows.
    left, right = (sides.x_a, sides.x_b) if sides.edited else ([a], [b])
    labels = (names[a] + edited_a, names[b] + edited_b)
    ids = (a + edited_a, b + edited_b)
    items_req = inline_request(loaded, model, left, right, precision=precision, executor=executor)
    items = explain_pair(items_req, labels, ids=ids)
    ctx = None
    if context_row is not None:
        assert fn.contexts is not None
        ctx_req = inline_request(
            loaded, model, left, right, "context", precision=precision, executor=executor,
            contexts=fn.contexts[[context_row]],
        )  # fmt: skip
        ctx = explain_pair(ctx_req, labels, ids=ids)
    fig = waterfall(items, ctx, probability_note=where)
    st.plotly_chart(fig, width="stretch", config=PLOT_CONFIG, key="h2h:waterfall")
    figure_exports(
        fig, export_stem(loaded.data.name, "head-to-head", f"{a} vs {b}"), expl=items,
        key="h2h:waterfall",
        provenance=provenance(loaded.title, model_description(model), 1),
    )  # fmt: skip


def _meetings(loaded, met, names, a, b) -> None:
    st.markdown(f"**Past meetings** ({met.n_duels:,})" + (" — select a row to open it"
                                                          if met.n_duels else ""))  # fmt: skip
    if met.n_duels == 0:
        st.caption(f"{md(names[a])} and {md(names[b])} never met in the data.")
        return
    event = st.dataframe(
        pd.DataFrame(met.table).drop(columns=["duel"]), hide_index=True, width="stretch",
        on_select="rerun", selection_mode="single-row", key=f"h2h:meetings:{a}:{b}",
    )  # fmt: skip
    rows = event.selection.rows if event is not None else []
    if rows:
        state.select_duel(loaded, int(met.table["duel"].iloc[rows[0]]), a)
        st.switch_page(pages.DUEL.page())


run_guarded(render)
