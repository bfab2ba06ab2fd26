"""The Train form's fields, built from the training parameter table (no Streamlit run)."""

from __future__ import annotations

import pytest

from dashboard.components.train_form import FormContext, form_rows, read_numbers
from prefshap_core.models.params import PARAMS
from prefshap_core.workflow.fingerprints import settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings

CONTEXT = FormContext(
    fingerprint="fp",
    item_columns=("speed", "power"),
    context_columns=("venue=A", "venue=B"),
    offered={"kind": ("cgpm", "gpm", "upm"), "device": ("cpu",), "backend": ("torch",)},
)
# The widget keys AppTests and saved sessions use: a contract, not a detail.
KEYS = {
    "kind": "train:kind:fp", "seed": "train:seed", "n_centres": "train:centres",
    "loss": "train:loss", "lengthscale_scale": "train:ls", "penalty": "train:penalty",
    "cme_lambda": "train:cme", "utility_weight": "train:utility_weight",
    "utility_weights": "train:utility_weights", "lengthscale_scales": "train:ls_scales",
    "lengthscales": "train:lengthscales:fp", "refine_lengthscales": "train:refine",
    "context_lengthscales": "train:context_lengthscales:fp",
    "context_cme_lambda": "train:context_cme", "dtype": "train:dtype",
    "device": "train:device", "backend": "train:backend", "baseline": "train:baseline",
}  # fmt: skip


def _fields(kind: str, context: FormContext = CONTEXT) -> dict:
    rows = form_rows(context, "basic") + form_rows(context, "advanced", kind)
    return {f.name: f for row in rows for f in row.fields}


def test_every_spec_is_a_form_field_with_its_key() -> None:
    shown = {name: f for kind in ("gpm", "upm", "cgpm") for name, f in _fields(kind).items()}
    assert set(shown) == {s.name for s in PARAMS}
    assert {name: shown[name].key for name in KEYS} == KEYS
    assert all(f.key.startswith("train:") for f in shown.values())


def test_fields_follow_the_model_and_the_data() -> None:
    assert {"utility_weight", "utility_weights"} - set(_fields("upm")) == {
        "utility_weight",
        "utility_weights",
    }
    assert "context_lengthscales" not in _fields("gpm")
    no_context = FormContext("fp", ("speed",), None, {"kind": ("gpm", "upm")})
    fields = _fields("gpm", no_context)
    assert fields["kind"].options == ("gpm", "upm") and fields["kind"].default == "gpm"
    assert fields["lengthscales"].label == "Item lengthscales (1, comma-separated)"
    assert fields["device"].widget == "text"  # nothing offered: any device name


def test_rows_keep_their_places() -> None:
    def layout(kind: str) -> list:
        rows = form_rows(CONTEXT, "advanced", kind)
        return [(row.widths, [(f.name, f.column) for f in row.fields]) for row in rows]

    upm = layout("upm")
    assert upm[:3] == [
        ((1, 1, 1), [("seed", 0), ("n_centres", 1), ("loss", 2)]),
        ((1, 1, 1), [("lengthscale_scale", 0), ("penalty", 1), ("cme_lambda", 2)]),
        ((1, 1, 1), [("lengthscale_scales", 2)]),  # the utility weights' slots stay empty
    ]
    cgpm = layout("cgpm")
    for row in [
        ((1, 1, 1), [("utility_weight", 0), ("utility_weights", 1), ("lengthscale_scales", 2)]),
        ((), [("lengthscales", 0)]),
        ((), [("refine_lengthscales", 0)]),
        ((2, 1), [("context_lengthscales", 0), ("context_cme_lambda", 1)]),
        ((1, 1, 1, 1), [("dtype", 0), ("device", 1), ("backend", 2), ("baseline", 3)]),
    ]:
        assert row in cgpm
    assert ((2, 1), [("context_lengthscales", 0), ("context_cme_lambda", 1)]) not in upm


def test_untouched_form_gives_the_default_settings() -> None:
    fields = _fields("cgpm")
    values = {name: f.default for name, f in fields.items()}
    assert values["kind"] == "cgpm"  # the first model offered
    assert TrainSettings(**values) == TrainSettings(kind="cgpm")
    gpm = {**{n: f.default for n, f in _fields("gpm").items()}, "kind": "gpm"}
    assert settings_fingerprint(TrainSettings(**gpm)) == "6685a6bf4e36c27e2b3f"  # as before
    centres = fields["n_centres"]
    assert (centres.default, centres.number) == (
        2000,
        {"min_value": 10, "max_value": 50_000, "step": 100},
    )
    assert fields["penalty"].number == {
        "min_value": 1e-12,
        "format": "%g",
        "placeholder": "automatic",
    }


@pytest.mark.parametrize(
    "name, text, value, error",
    [
        ("utility_weights", "", None, None),
        ("utility_weights", "0, 10", (0.0, 10.0), None),
        ("utility_weights", "1,-2", None, "finite numbers >= 0; using the automatic grid"),
        ("lengthscale_scales", "0,1", None, "positive numbers; using the automatic grid"),
        ("lengthscales", "0.5, 2", (0.5, 2.0), None),
        ("lengthscales", "1", None, "give 2 positive numbers (one per column: speed, power)"),
        ("lengthscales", "a,b", None, "got 2. Using automatic ones."),
        ("context_lengthscales", "1,inf", None, "give 2 positive numbers"),
    ],
)
def test_comma_separated_entries_are_checked(name, text, value, error) -> None:
    field = _fields("cgpm")[name]
    got, message = read_numbers(field, text)
    assert got == value
    assert (message is None) if error is None else (error in message)
