"""Data page: pick a built-in dataset or upload items.csv + duels.csv; see what was read."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import sources, state
from dashboard.components.guard import run_guarded, show_error, without_paths
from dashboard.components.tables import paginated
from dashboard.components.text import md
from prefshap_core.errors import PrefShapError

FORMAT_HELP = """
**items.csv** — one row per item: an `id` column (unique), an optional `name`
column (display label), and at least one covariate column (numbers or categories).

**duels.csv** — one row per duel: `left`, `right` (item ids), the outcome as `winner`
(the winning id, or `left` / `right`) **or** `y` (`1` left won, `-1` right won), an
optional `duel_id`; any other column is a **context** covariate (e.g. surface), which
enables the C-GPM model.

Categorical covariates become one feature group each (explained as one feature).
Missing cells (empty, `NA`, `?`, …) are imputed and reported below. Every problem is
reported with its file, row and column. Full description: `sample_data/README.md`.
"""


def _choose_builtin() -> None:
    choices = sources.builtin_choices()
    usable = [c for c in choices if c.available]
    active = state.active()
    keys = [c.key for c in usable]
    index = keys.index(active.key) if active is not None and active.key in keys else 0
    choice = st.selectbox(
        "Dataset",
        usable,
        index=index,
        format_func=lambda c: f"{c.title} — {c.description}",
        key="data:builtin",
    )
    missing = [c for c in choices if not c.available]
    if missing:
        with st.expander(f"{len(missing)} dataset(s) not available here"):
            for c in missing:
                st.markdown(f"- **{c.title}**: {c.reason}")
    already = active is not None and active.key == choice.key
    if st.button(
        "In use" if already else "Use this dataset",
        type="primary",
        disabled=already,
        key="data:load",
    ):
        loaded = state.datasets().get(choice.key)
        if loaded is None:
            with st.spinner(f"Loading {choice.title}…"):
                loaded = sources.load_builtin(choice)
        state.add_dataset(loaded)
        st.rerun()


def _upload() -> None:
    st.markdown(FORMAT_HELP)
    left, right = st.columns(2)
    left.download_button(
        "Template: items.csv",
        data=sources.sample_file("items.csv"),
        file_name="items.csv",
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        key="data:template-items",
    )
    right.download_button(
        "Template: duels.csv",
        data=sources.sample_file("duels.csv"),
        file_name="duels.csv",
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        key="data:template-duels",
    )
    uploads = state.uploads()
    # The uploader forgets its file on a page switch; the session keeps the bytes.
    for kind, column in (("items", left), ("duels", right)):
        file = column.file_uploader(
            f"{kind}.csv", type=["csv", "txt"], key=f"data:{kind}-file:{state.upload_round()}"
        )
        kept = uploads.get(kind)
        if file is not None and (kept is None or kept.file_id != file.file_id):
            uploads[kind] = sources.uploaded_csv(file.name, file.getvalue(), file.file_id)
    if "items" not in uploads or "duels" not in uploads:
        waiting = [n for n in ("items", "duels") if n not in uploads]
        st.info(f"Upload {' and '.join(f'{n}.csv' for n in waiting)} to continue.")
        return
    names = f"{md(uploads['items'].name)} + {md(uploads['duels'].name)}"
    try:
        loaded = sources.load_upload(uploads["items"], uploads["duels"])
    except PrefShapError as exc:
        message = md(without_paths(str(exc)))
        st.error(f"Could not use {names}.\n\n{message}", icon=":material/error:")
        loaded = None
    if loaded is not None:
        active = state.active()
        if loaded.key not in state.datasets():
            # New files: use them at once (the usual intent of an upload).
            state.add_dataset(loaded)
            st.success(f"Loaded {names}: it is now the active dataset.", icon=":material/check:")
        elif active is None or active.key != loaded.key:
            if st.button(f"Use {names}", type="primary", key="data:use-upload"):
                state.add_dataset(loaded)
                st.rerun()
        else:
            st.success(f"Using {names}.", icon=":material/check:")
    if st.button("Forget the uploaded files", key="data:forget"):
        state.forget_uploads()
        st.rerun()


def _summary(loaded: state.LoadedData) -> None:
    data = loaded.data
    st.subheader(md(loaded.title))
    c = st.columns(4)
    c[0].metric("Items", f"{data.n_items:,}")
    c[1].metric("Duels", f"{data.n_duels:,}")
    c[2].metric("Feature groups", data.item_space.n_groups)
    c[3].metric("Context groups", data.context_space.n_groups if data.context_space else 0)

    groups = pd.DataFrame(
        [
            {
                "table": table,
                "feature (Shapley player)": name,
                "kind": "numeric" if len(space.group_columns(g)) == 1 else "categorical",
                "model columns": ", ".join(space.feature_names[j] for j in space.group_columns(g)),
            }
            for table, space in (("items", data.item_space), ("context", data.context_space))
            if space is not None
            for g, name in enumerate(space.group_names)
        ]
    )
    st.markdown("**Detected features**" + ("" if data.has_context else " (no context columns)"))
    st.dataframe(groups, hide_index=True, width="stretch")

    report = data.report
    st.markdown("**Missing values and cleaning**")
    if report.imputed:
        st.dataframe(
            pd.DataFrame(
                [
                    {
                        "table": n.table,
                        "column": n.column,
                        "missing cells": n.n_missing,
                        "filled with": n.filled_with,
                    }
                    for n in report.imputed
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    else:
        st.caption("No missing covariate values.")
    if report.dropped_duels:
        st.warning(
            f"{report.dropped_duels:,} duel rows were dropped:\n\n"
            + "\n".join(f"- {md(r)}" for r in report.dropped_reasons)
        )
    with st.expander("Notes from reading the data"):
        for note in report.notes:
            st.markdown(f"- {md(note)}")

    items_tab, duels_tab = st.tabs(["Items preview", "Duels preview"])
    with items_tab:
        if data.raw_items is not None:
            paginated(data.raw_items, key=f"items:{loaded.fingerprint}")
    with duels_tab:
        if data.raw_duels is not None:
            paginated(data.raw_duels, key=f"duels:{loaded.fingerprint}")


def render() -> None:
    st.title("Data")
    source = st.segmented_control(
        "Source",
        ["Built-in dataset", "Upload CSV files"],
        default="Built-in dataset",
        required=True,
        key="data:source",
        persist_state=state.PERSIST,
    )
    if source == "Upload CSV files":
        _upload()
    else:
        _choose_builtin()
    st.divider()
    loaded = state.active()
    if loaded is None:
        st.info("No dataset yet: choose one above or upload your own.")
        return
    try:
        _summary(loaded)
    except Exception as exc:  # a summary problem must not hide the chooser above
        show_error(exc)


run_guarded(render)
