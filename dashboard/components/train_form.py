"""The Train form, built from the training parameter table (``prefshap_core.models.params``).

``form_rows`` turns the specs into widget descriptions (pure, so a test can walk them
without Streamlit); ``render_rows`` draws them and returns the values entered. A new
parameter in the table appears here with no edit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import streamlit as st

from dashboard import state
from dashboard.components.text import md
from prefshap_core.models.params import PARAMS, ParamSpec, spec

Widget = Literal["radio", "select", "number", "checkbox", "numbers", "column_numbers", "text"]
AUTO = "automatic"


@dataclass(frozen=True)
class FormContext:
    """What the form depends on besides the table.

    ``offered``: the choices this session offers for a parameter, the first preselected
    (the model kinds the data allows, the devices and solvers installed); parameters
    not named offer their spec's choices, the default preselected.
    """

    fingerprint: str  # of the dataset: keys of per-dataset widgets end with it
    item_columns: tuple[str, ...]
    context_columns: tuple[str, ...] | None = None
    offered: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class FormField:
    """One widget: what it is, its key, label and default, and where it sits in its row."""

    name: str  # the parameter
    widget: Widget
    key: str
    label: str
    help: str | None
    default: Any
    column: int
    options: tuple[Any, ...] = ()
    placeholder: str | None = None
    columns: tuple[str, ...] = ()  # column_numbers: the data columns, one number each
    number: Mapping[str, Any] = field(default_factory=dict)  # number_input's bounds etc.


@dataclass(frozen=True)
class FormRow:
    widths: tuple[int, ...]  # st.columns(widths); () spans the form
    fields: tuple[FormField, ...]


def form_rows(
    context: FormContext, section: Literal["basic", "advanced"], kind: str | None = None
) -> list[FormRow]:
    """The rows of one form section; fields that do not apply to ``kind`` are left out
    (their slot stays empty, so the others keep their places)."""
    specs = [s for s in PARAMS if s.form.section == section]
    rows: list[FormRow] = []
    for row in sorted({s.form.row for s in specs}):
        in_row = sorted((s for s in specs if s.form.row == row), key=lambda s: s.form.column)
        fields = tuple(f for s in in_row if (f := form_field(s, context, kind)) is not None)
        if not fields:
            continue
        widths = () if len(in_row) == 1 else tuple(s.form.width for s in in_row)
        rows.append(FormRow(widths, fields))
    return rows


def form_field(param: ParamSpec, context: FormContext, kind: str | None) -> FormField | None:
    """The widget of one parameter, or None where it does not apply."""
    if kind is not None and kind != "auto" and kind not in param.models:
        return None  # under auto every candidate's fields apply
    columns = {"items": context.item_columns, "context": context.context_columns}
    data_columns = columns[param.columns] if param.columns else ()
    if param.columns and not data_columns:
        return None
    key = f"train:{param.key}" + (f":{context.fingerprint}" if param.form.per_dataset else "")
    base = dict(
        name=param.name, key=key, label=param.label, column=param.form.column,
        help=param.form.help or param.help[:1].upper() + param.help[1:],
    )  # fmt: skip
    options = tuple(context.offered.get(param.name, param.choices or ()))
    if options:
        default = options[0] if param.name in context.offered else param.default
        widget: Widget = "radio" if param.form.section == "basic" else "select"
        return FormField(widget=widget, default=default, options=options, **base)
    if param.value == "bool":
        return FormField(widget="checkbox", default=param.default, **base)
    if param.value == "text":
        return FormField(widget="text", default=param.default, **base)
    if param.value == "floats":
        placeholder = f"{AUTO} ({param.auto})" if param.auto else AUTO
        if data_columns:
            base["label"] = f"{param.label} ({len(data_columns)}, comma-separated)"
            base["help"] = "In model space (standardised columns), in this order: " + ", ".join(
                md(c) for c in data_columns
            )
            return FormField(
                widget="column_numbers", default=None, placeholder=placeholder,
                columns=tuple(data_columns), **base,
            )  # fmt: skip
        return FormField(widget="numbers", default=None, placeholder=placeholder, **base)
    low = param.form.min_value if param.form.min_value is not None else param.low
    number = {"min_value": low, "max_value": param.form.max_value, "step": param.form.step}
    if param.value == "float":
        number.update(format="%g", placeholder=AUTO if param.optional else None)
    number = {k: v for k, v in number.items() if v is not None}
    return FormField(widget="number", default=param.default, number=number, **base)


def read_numbers(field_: FormField, text: str) -> tuple[Any, str | None]:
    """The numbers typed into a comma-separated field, or (None, what is wrong).

    Empty: None (automatic), no error. A wrong entry is named and not used.
    """
    param = spec(field_.name)
    text = text.strip()
    if not text:
        return None, None
    try:
        values = param.check(tuple(float(v) for v in text.split(",")))
    except ValueError:
        values = None
    if field_.widget == "column_numbers":
        n = len(field_.columns)
        if values is None or len(values) != n:
            got = len(text.split(","))
            names = ", ".join(md(c) for c in field_.columns)
            return None, (
                f"{param.label}: give {n} {param.bound()} (one per column: {names}); got "
                f"{got}. Using automatic ones."
            )
        return values, None
    if values is None:
        return None, (
            f"{param.label}: give comma-separated {param.bound()}; using the automatic grid."
        )
    return values, None


def render_rows(
    rows: list[FormRow], widget_options: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """Draw ``rows``; the values entered by parameter name.

    ``widget_options``: extra Streamlit arguments of a parameter's widget (captions,
    labels of the options).
    """
    values: dict[str, Any] = {}
    for row in rows:
        slots = st.columns(list(row.widths)) if row.widths else None
        for f in row.fields:
            extra = dict((widget_options or {}).get(f.name, {}))
            if slots is None:
                values[f.name] = _widget(f, extra)
            else:
                with slots[f.column]:
                    values[f.name] = _widget(f, extra)
    return values


def _widget(f: FormField, extra: dict[str, Any]) -> Any:
    common = dict(key=f.key, persist_state=state.PERSIST, help=f.help, **extra)
    if f.widget == "radio":
        index = f.options.index(f.default)
        return st.radio(f.label, f.options, index=index, horizontal=True, **common)
    if f.widget == "select":
        return st.selectbox(f.label, f.options, index=f.options.index(f.default), **common)
    if f.widget == "checkbox":
        return bool(st.checkbox(f.label, value=f.default, **common))
    if f.widget == "text":
        return st.text_input(f.label, value=f.default, **common)
    if f.widget == "number":
        value = st.number_input(f.label, value=f.default, **f.number, **common)
        return int(value) if spec(f.name).value == "int" and value is not None else value
    text = st.text_input(f.label, placeholder=f.placeholder, **common)
    values, error = read_numbers(f, text)
    if error:
        st.error(error)
    return values
