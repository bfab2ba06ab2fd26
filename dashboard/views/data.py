"""Data page: pick a built-in dataset or upload items + duels (+ contexts); see what was read."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import sources, state
from dashboard.components import column_mapping
from dashboard.components.export import export_name
from dashboard.components.guard import run_guarded, show_error, without_paths
from dashboard.components.share import share_link
from dashboard.components.tables import paginated
from dashboard.components.text import md
from prefshap_core.csv_safety import to_csv_bytes
from prefshap_core.data.encoding.tables import MISSING_INDICATOR_SHARE
from prefshap_core.data.readers import UPLOAD_TYPES
from prefshap_core.errors import PrefShapError
from prefshap_core.workflow.training import LARGE_DUELS, expected_training_minutes

FORMAT_HELP = """
**items** — one row per item: an `id` column (unique), an optional `name`
column (display label), and at least one covariate column (numbers or categories).

**duels** — one row per duel: `left`, `right` (item ids) and the outcome as `winner`
(the winning id, `left` / `right`, or `draw` / `tie`) **or** `y` (`1` left won, `-1`
right won, `0` a tie); or just `winner` and `loser` columns. An optional `duel_id`;
any other column is a **context** covariate (e.g. surface), which enables the C-GPM.
Rows with no outcome are skipped and counted.

**contexts** (optional) — context covariates in their own table: its first column is
a key that is also a column of the duels (e.g. `student`, who chose).

CSV (comma, semicolon or tab; decimal commas are recognised), `.xlsx` or `.parquet`.
Columns that look like identifiers are not used unless you tick them below. Every
problem is reported with its file, row and column.
"""
MISSING_INDICATORS_LABEL = "Add 'is missing' indicator columns for mostly-missing covariates"
MISSING_INDICATORS_HELP = (
    f"On (the default): a covariate with at least {MISSING_INDICATOR_SHARE:.0%} of its "
    "values missing gets a 0/1 "
    "column '<column> (missing)' in its group, so that unknown items are not made "
    "identical to the typical one. Off: its missing values are only filled (median or "
    "most frequent category), like every other column's. Changing it reads the data again."
)


def _choose_builtin() -> None:
    choices = sources.builtin_choices()
    usable = [c for c in choices if c.available]
    active = state.active()
    keys = [c.key for c in usable]
    active_choice = sources.split_builtin_key(active.key)[0] if active is not None else None
    index = keys.index(active_choice) if active_choice in keys else 0
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
    indicators, changed = _advanced_options()
    key = sources.builtin_key(choice.key, indicators)
    already = active is not None and active.key == key
    other_setting = (
        active is not None and sources.split_builtin_key(active.key)[0] == choice.key
    ) and not already
    label = "Reload with this setting" if other_setting else "Use this dataset"
    clicked = st.button(
        "In use" if already else label,
        type="primary",
        disabled=already,
        key="data:load",
    )
    # Ticking the checkbox reads the dataset in use again at once.
    if clicked or (changed and other_setting):
        loaded = state.datasets().get(key)
        if loaded is None:
            with st.spinner(f"Loading {choice.title}…"):
                loaded = sources.load_builtin(choice, missing_indicators=indicators)
        state.add_dataset(loaded)
        st.rerun()


def _advanced_options() -> tuple[bool, bool]:
    """The reading options of built-ins and uploads: (missing_indicators, just changed)."""
    options = state.load_options()
    before = bool(options["missing_indicators"])
    with st.expander("Advanced reading options"):
        options["missing_indicators"] = st.checkbox(
            MISSING_INDICATORS_LABEL,
            value=before,
            help=MISSING_INDICATORS_HELP,
            key="data:missing-indicators",
        )
    return bool(options["missing_indicators"]), bool(options["missing_indicators"]) != before


def _upload() -> None:
    st.markdown(FORMAT_HELP)
    with st.expander("The upload format in full (every column, every error message)"):
        st.markdown(sources.upload_format())
    left, middle, right = st.columns(3)
    left.download_button(
        "Template: items.csv",
        data=sources.sample_file("items.csv"),
        file_name="items.csv",
        mime="text/csv",
        on_click="ignore",
        icon=":material/download:",
        key="data:template-items",
    )
    middle.download_button(
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
    for kind, column, label in (
        ("items", left, "items.csv"),
        ("duels", middle, "duels.csv"),
        ("contexts", right, "contexts.csv (optional)"),
    ):
        file = column.file_uploader(
            label, type=list(UPLOAD_TYPES), key=f"data:{kind}-file:{state.upload_round()}"
        )
        kept = uploads.get(kind)
        if file is not None and (kept is None or kept.file_id != file.file_id):
            uploads[kind] = sources.uploaded_file(file.name, file.getvalue(), file.file_id)
    options = state.load_options()
    options["lenient"] = st.toggle(
        "Lenient: drop invalid duel rows and report them (off: every problem is an error)",
        value=options["lenient"],
        key="data:lenient",
    )
    indicators, changed = _advanced_options()
    # Drawn once the files are read (open when the reader is not sure), in this place.
    panel = st.container()
    mapping = column_mapping.overrides()
    wide = "duels" in uploads and "items" not in uploads and sources.is_wide(uploads["duels"])
    if "duels" not in uploads or ("items" not in uploads and not wide):
        with panel:
            column_mapping.panel(None, open_=False)
        waiting = [n for n in ("items", "duels") if n not in uploads]
        st.info(f"Upload {' and '.join(f'{n}.csv' for n in waiting)} to continue.")
        st.caption("A wide choice table (both alternatives on each row) needs no items.csv.")
        return
    files = [uploads.get("items"), uploads["duels"], uploads.get("contexts")]
    names = " + ".join(md(f.name) for f in files if f is not None)
    try:
        loaded = sources.load_upload(
            *files,
            lenient=options["lenient"],
            use_columns=tuple(options["use_columns"]),
            missing_indicators=indicators,
            mapping=mapping,
        )
    except PrefShapError as exc:
        message = md(without_paths(str(exc)))
        hint = "\n\nIf the reader guessed a column wrong, say which it is under *Column mapping*."
        st.error(f"Could not use {names}.\n\n{message}{hint}", icon=":material/error:")
        loaded = None
    with panel:  # before any rerun below, so that its fields keep their values
        column_mapping.panel(loaded, open_=loaded is None or bool(loaded.data.report.doubt))
    if loaded is not None:
        active = state.active()
        if loaded.key not in state.datasets():
            # New files: use them at once (the usual intent of an upload), and rerun so
            # that the sidebar, drawn before this page, shows them too.
            state.add_dataset(loaded)
            state.set_notice(f"Loaded {names}: it is now the active dataset.")
            st.rerun()
        elif changed:  # the same files read the other way: use them at once
            state.add_dataset(loaded)
            st.rerun()
        elif active is None or active.key != loaded.key:
            if st.button(f"Use {names}", type="primary", key="data:use-upload"):
                state.add_dataset(loaded)
                st.rerun()
        else:
            st.success(f"Using {names}.", icon=":material/check:")
    if st.button("Forget the uploaded files", key="data:forget"):
        state.forget_uploads()
        st.rerun()


def _ignored_columns(loaded: state.LoadedData) -> None:
    """Id-like columns left out, and a way to use them anyway (uploads only)."""
    report = loaded.data.report
    if not report.ignored_columns and not loaded.use_columns:
        return
    st.markdown("**Columns not used: they look like identifiers**")
    if report.ignored_columns:
        st.dataframe(
            pd.DataFrame(
                [
                    {"table": c.table, "column": c.column, "why": c.reason.split(" (")[0]}
                    for c in report.ignored_columns
                ]
            ),
            hide_index=True,
            width="stretch",
        )
    if loaded.source != "upload":
        return
    candidates = sorted({c.column for c in report.ignored_columns} | set(loaded.use_columns))
    chosen = st.multiselect(
        "Use these columns as covariates anyway",
        candidates,
        default=list(loaded.use_columns),
        key=f"data:use-columns:{loaded.key}",
    )
    if sorted(chosen) != sorted(loaded.use_columns):
        state.load_options()["use_columns"] = tuple(chosen)
        try:
            again = sources.load_upload(
                *sources.upload_parts(loaded),
                lenient=loaded.lenient,
                use_columns=tuple(chosen),
                missing_indicators=loaded.missing_indicators,
                mapping=loaded.mapping,
            )
        except PrefShapError as exc:
            show_error(exc)  # escaped: it names the user's columns
            return
        state.add_dataset(again)
        st.rerun()


def _summary(loaded: state.LoadedData) -> None:
    data = loaded.data
    st.subheader(md(loaded.title))
    share_link(loaded)
    c = st.columns(4)
    c[0].metric("Items", f"{data.n_items:,}")
    c[1].metric("Duels", f"{data.n_duels:,}")
    c[2].metric("Feature groups", data.item_space.n_groups)
    c[3].metric("Context groups", data.context_space.n_groups if data.context_space else 0)
    if data.n_duels >= LARGE_DUELS:
        minutes = expected_training_minutes(data.n_duels)
        st.warning(
            f"{data.n_duels:,} duels is very large data: training may take roughly "
            f"{minutes:.0f} minutes on a small CPU (the Train page shows the time left)."
        )

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
            f"{report.dropped_duels:,} invalid duel rows were dropped:\n\n"
            + "\n".join(f"- {md(r)}" for r in report.dropped_reasons)
        )
    if report.skipped_duels:
        st.info(f"{report.skipped_duels:,} duel rows have no outcome and were skipped.")
    if report.ties:
        st.info(
            f"{report.ties:,} ties: each counts as half a win for each side in training; "
            "ROC AUC and accuracy leave them out."
        )
    if report.rejected is not None and len(report.rejected):
        st.download_button(
            f"Download the {len(report.rejected):,} rejected or skipped rows, with reasons (CSV)",
            data=to_csv_bytes(report.rejected),
            file_name=export_name(data.name, "rejected rows", "", "csv"),
            mime="text/csv",
            on_click="ignore",
            icon=":material/download:",
            key=f"data:rejected:{loaded.key}",
        )
    _ignored_columns(loaded)
    if report.read_as:
        st.caption(md(report.read_as))
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
    notice = state.pop_notice()
    if notice:
        st.success(notice, icon=":material/check:")
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
