"""Every training parameter, declared once: the table the settings, CLI and Train form use.

Each ``ParamSpec`` says what a parameter is (value type, valid range or choices, help) and
how the clients show it (``prefshap train`` flag, Train form widget). The table has two
parts:

* ``ESTIMATOR_PARAMS``: keywords of ``PreferenceModel.__init__``. Their defaults are read
  from that signature (never written here), like scikit-learn's ``get_params``.
* ``RUN_PARAMS``: what is not the estimator's (the model kind, precision, device, the UPM
  baseline); their defaults are here.

Adding a hyperparameter: a keyword of ``PreferenceModel.__init__`` (and its use), and its
``ParamSpec`` in ``ESTIMATOR_PARAMS``; ``TrainSettings``, the CLI flag and the form field
follow from the table.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from prefshap_core.models.estimators import MODELS, PreferenceModel
from prefshap_core.models.hyperparameters import SCALE_FACTORS, UTILITY_WEIGHTS

ValueType = Literal["int", "float", "floats", "choice", "bool", "text"]
_FROM_SIGNATURE = object()  # an estimator parameter: the default is the signature's


@dataclass(frozen=True)
class FormHint:
    """Where and how the Train form shows a parameter.

    ``section``: "basic" (always shown; a choice there is a radio, elsewhere a select
    box) or "advanced" (the overrides expander). Specs on one ``row`` share a row of
    columns (``column`` and ``width`` place them; a row with one spec spans the form).
    The widget key is ``train:<key>`` (``key`` defaults to the name), with the dataset
    fingerprint appended when ``per_dataset`` (values tied to one dataset's columns).
    ``min_value`` / ``max_value`` / ``step`` narrow the number input within the valid
    range (an open bound needs a smallest value to offer).
    """

    section: Literal["basic", "advanced"]
    row: int
    column: int = 0
    width: int = 1
    key: str | None = None
    per_dataset: bool = False
    help: str | None = None  # the tooltip; else the CLI help
    min_value: int | float | None = None
    max_value: int | float | None = None
    step: int | float | None = None


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: its value, its range, its flag and its form field.

    ``value``: "int", "float", "floats" (a tuple, comma-separated on the command line),
    "choice" (one of ``choices``), "bool" or "text". A ``None`` default means "chosen
    automatically" and ``None`` is then a valid value; ``auto`` says what is chosen.
    ``low``: the smallest valid number (each number of "floats"), excluded when
    ``low_open``. ``columns``: one number per "items" / "context" column. ``models``: the
    model kinds the parameter applies to (for the others it is left at its default).
    ``flag``: the ``prefshap train`` option; for a "bool", ``--no-<name>`` turns a default
    on off, any other flag is an opt-in switch (off unless given on the command line).
    """

    name: str
    value: ValueType
    label: str
    help: str
    flag: str
    form: FormHint
    default: Any = _FROM_SIGNATURE
    choices: tuple[str, ...] | None = None
    low: float | None = None
    low_open: bool = False
    columns: Literal["items", "context"] | None = None
    models: tuple[str, ...] = tuple(MODELS)
    auto: str | None = None
    # Where the CLI flag and the Train form start when not at ``default`` (None: they
    # start at it): ``prefshap train --model`` is "auto", ``TrainSettings`` a GPM.
    client_default: Any = None

    @property
    def offered_default(self) -> Any:
        """The default of the CLI flag and the Train form."""
        return self.default if self.client_default is None else self.client_default

    @property
    def optional(self) -> bool:
        return self.default is None

    @property
    def key(self) -> str:
        return self.form.key or self.name

    def bound(self) -> str:
        """The valid range in words, e.g. "positive numbers", "a whole number >= 1"."""
        many = self.value == "floats"
        if self.value == "int":
            return "a whole number" if self.low is None else f"a whole number >= {self.low:g}"
        if self.low is None:
            return "finite numbers" if many else "a finite number"
        if self.low == 0 and self.low_open:
            return "positive numbers" if many else "a positive number"
        op = ">" if self.low_open else ">="
        return f"{'finite numbers' if many else 'a finite number'} {op} {self.low:g}"

    def check(self, value: Any) -> Any:
        """``value`` if valid (containers as tuples, numpy scalars as Python's), else a
        ValueError naming the parameter."""
        if value is None and self.optional:
            return None
        checked = _checked(self, value)
        if checked is None:
            raise ValueError(f"{self.name} must be {self._expected()}, got {value!r}")
        return checked

    def _expected(self) -> str:
        if self.value == "choice":
            assert self.choices is not None
            return "one of " + ", ".join(self.choices)
        if self.value == "bool":
            return "True or False"
        if self.value == "text":
            return "a text"
        return self.bound() + (" (or None: automatic)" if self.optional else "")


def _checked(spec: ParamSpec, value: Any) -> Any:
    """The normalised value, or None when it is not valid for ``spec``."""
    if spec.value == "choice":
        return value if isinstance(value, str) and value in (spec.choices or ()) else None
    if spec.value == "bool":
        return bool(value) if isinstance(value, bool | np.bool_) else None
    if spec.value == "text":
        return value if isinstance(value, str) and value else None
    if spec.value == "floats":
        if isinstance(value, str | bytes) or not hasattr(value, "__iter__"):
            return None
        numbers = tuple(_number(spec, v) for v in value)
        return numbers if numbers and None not in numbers else None
    return _number(spec, value)


def _number(spec: ParamSpec, value: Any) -> int | float | None:
    # Python numbers are kept as given (the fingerprint hashes them as JSON); numpy
    # scalars become Python's (JSON has no numpy types).
    if isinstance(value, bool | np.bool_):
        return None
    if isinstance(value, np.integer):
        value = int(value)
    elif isinstance(value, np.floating):
        value = float(value)
    if spec.value == "int" and not isinstance(value, int):
        return None
    if not isinstance(value, int | float) or not math.isfinite(value):
        return None
    if spec.low is not None and (value <= spec.low if spec.low_open else value < spec.low):
        return None
    return value


def _grid(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def _advanced(row: int, column: int = 0, **hints: Any) -> FormHint:
    return FormHint("advanced", row, column, **hints)


# The keywords of PreferenceModel.__init__ that are not user settings: the penalty
# path's internals, and the runtime objects the workflow builds (compute from the run
# settings dtype and device, solver from the memory budget).
INTERNAL_ESTIMATOR_PARAMS = ("penalty_path", "cg_iterations", "selection", "compute", "solver")

_SCALES_AUTO = f"sqrt(groups) x {_grid(SCALE_FACTORS)}"
_WEIGHTS_AUTO = _grid(UTILITY_WEIGHTS)
_CONTEXT_KINDS = ("cgpm",)
_SUM_KERNEL_KINDS = ("gpm", "cgpm")  # the kernels with a utility weight

# In the order of ``prefshap train --help``.
_ESTIMATOR_SPECS = (
    ParamSpec(
        "seed", "int", "Seed (split, centres)", "split, orientation and centres", "--seed",
        _advanced(1, 0, step=1), low=0,
    ),
    ParamSpec(
        "n_centres", "int", "Nyström centres", "Nyström centres (duels)", "--n-centres",
        _advanced(1, 1, key="centres", min_value=10, max_value=50_000, step=100,
                  help="More centres: a more flexible model, slower training and explanations."),
        low=1,
    ),
    ParamSpec(
        "lengthscales", "floats", "Item lengthscales",
        "fix every item lengthscale (comma-separated, one per model column, model space)",
        "--lengthscales", _advanced(4, per_dataset=True), low=0, low_open=True,
        columns="items", auto="median heuristic x scale",
    ),
    ParamSpec(
        "lengthscale_scale", "float", "Lengthscale scale", "fix the lengthscale scale",
        "--lengthscale-scale",
        _advanced(2, 0, key="ls", min_value=1e-3,
                  help="Multiplies the median-heuristic lengthscales of every feature."),
        low=0, low_open=True,
    ),
    ParamSpec(
        "lengthscale_scales", "floats", "Lengthscale scales to search",
        f"the lengthscale scales to search (comma-separated; default: sqrt(groups) times "
        f"{_grid(SCALE_FACTORS)})",
        "--lengthscale-scales", _advanced(3, 2, key="ls_scales"), low=0, low_open=True,
        auto=_SCALES_AUTO,
    ),
    ParamSpec(
        "utility_weight", "float", "Utility weight (w)",
        "fix the utility weight w of the GPM / C-GPM kernel k_E + w k_UPM (0: plain GPM)",
        "--utility-weight",
        _advanced(3, 0, min_value=0.0,
                  help="Kernel k_E + w k_UPM: the generalised part plus w times a utility "
                  "model. 0: the plain GPM; empty: chosen on validation."),
        low=0, models=_SUM_KERNEL_KINDS,
    ),
    ParamSpec(
        "utility_weights", "floats", "Utility weights to search",
        f"the utility weights to search (comma-separated, >= 0; default: "
        f"{_WEIGHTS_AUTO.replace(', ', ',')})",
        "--utility-weights", _advanced(3, 1), low=0, models=_SUM_KERNEL_KINDS,
        auto=_WEIGHTS_AUTO,
    ),
    ParamSpec(
        "refine_lengthscales", "bool", "Refine each feature group's lengthscales",
        "keep one lengthscale scale for every feature group (default: after the grid "
        "search, each group's lengthscales are doubled or halved while the validation loss "
        "falls; not done for fixed --lengthscales or K-fold selection)",
        "--no-refine-lengthscales",
        _advanced(5, key="refine",
                  help="After the grid search, double or halve one group's lengthscales at a "
                  "time while the validation loss falls (a deciding feature gets a short "
                  "lengthscale, noise a long one). Not done for fixed item lengthscales or "
                  "small data (K-fold selection)."),
    ),
    ParamSpec(
        "context_lengthscales", "floats", "Context lengthscales",
        "fix the context lengthscales (comma-separated, C-GPM)", "--context-lengthscales",
        _advanced(6, 0, width=2, per_dataset=True), low=0, low_open=True, columns="context",
        models=_CONTEXT_KINDS, auto="median heuristic x scale",
    ),
    ParamSpec(
        "context_cme_lambda", "float", "Context CME regulariser",
        "regulariser of the context explanations' CMEs (C-GPM)", "--context-cme-lambda",
        _advanced(6, 1, key="context_cme", min_value=1e-12), low=0, low_open=True,
        models=_CONTEXT_KINDS,
    ),
    ParamSpec(
        "penalty", "float", "Penalty (λ)", "fix the penalty (else chosen on validation)",
        "--penalty", _advanced(2, 1, min_value=1e-12), low=0, low_open=True,
    ),
    ParamSpec(
        "loss", "choice", "Loss", "the training loss", "--loss", _advanced(1, 2),
        choices=("logistic", "squared"),
    ),
    ParamSpec(
        "cme_lambda", "float", "CME regulariser (explanations)",
        "regulariser of the explanations' CMEs", "--cme-lambda",
        _advanced(2, 2, key="cme", min_value=1e-12), low=0, low_open=True,
    ),
)  # fmt: skip

# Run settings: not keywords of the estimator, so their defaults are given here.
_KIND = ParamSpec(
    "kind", "choice", "Model",
    "the model to train; auto (the default here): fit the UPM, the GPM and (with context "
    "columns) the C-GPM, keep the best by validation log loss (K-fold CV on small data)",
    "--model", FormHint("basic", 0, per_dataset=True), default="gpm",
    choices=(*MODELS, "auto"), client_default="auto",
)  # fmt: skip
_RUN_SPECS = (
    ParamSpec(
        "dtype",
        "choice",
        "Precision",
        "floating-point precision of the maths",
        "--dtype",
        _advanced(7, 0),
        default="float64",
        choices=("float64", "float32"),
    ),
    ParamSpec(
        "device",
        "text",
        "Device",
        "cpu or cuda",
        "--device",
        _advanced(7, 1),
        default="cpu",
    ),
)
_BASELINE = ParamSpec(
    "baseline",
    "bool",
    "Also fit a UPM baseline",
    "also fit a UPM and report it",
    "--baseline",
    _advanced(7, 3),
    default=True,
)
_BACKEND = ParamSpec(
    "backend",
    "choice",
    "Solver",
    "solver: our torch FALKON (default) or the falkon package",
    "--backend",
    _advanced(7, 2, help="torch: the built-in FALKON-style solver; falkon: the optional package."),
    choices=("torch", "falkon"),
)


def _with_signature_defaults(specs: tuple[ParamSpec, ...]) -> tuple[ParamSpec, ...]:
    signature = inspect.signature(PreferenceModel.__init__).parameters
    missing = [s.name for s in specs if s.name not in signature]
    if missing:
        raise TypeError(f"not keywords of PreferenceModel.__init__: {', '.join(missing)}")
    return tuple(replace(s, default=signature[s.name].default) for s in specs)


ESTIMATOR_PARAMS = _with_signature_defaults((*_ESTIMATOR_SPECS, _BACKEND))
RUN_PARAMS = (_KIND, *_RUN_SPECS, _BASELINE)
# Every spec, in the order of ``prefshap train --help`` (the solver backend, an estimator
# parameter, is listed with the run settings there).
PARAMS: tuple[ParamSpec, ...] = (
    _KIND,
    *ESTIMATOR_PARAMS[:-1],
    *_RUN_SPECS,
    ESTIMATOR_PARAMS[-1],
    _BASELINE,
)
_BY_NAME = {s.name: s for s in PARAMS}


def spec(name: str) -> ParamSpec:
    """The spec of ``name``; a ValueError naming the known ones otherwise."""
    try:
        return _BY_NAME[name]
    except KeyError:
        known = ", ".join(s.name for s in PARAMS)
        raise ValueError(f"unknown training parameter {name!r}; known: {known}") from None


__all__ = [
    "ESTIMATOR_PARAMS",
    "INTERNAL_ESTIMATOR_PARAMS",
    "PARAMS",
    "RUN_PARAMS",
    "FormHint",
    "ParamSpec",
    "spec",
]
