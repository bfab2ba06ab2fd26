"""The training parameter table: one declaration, read by the estimator, settings and CLI."""

from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import pickle

import numpy as np
import pytest

from prefshap_core.cli import train_command
from prefshap_core.cli.data_flags import MAPPING_DESTS
from prefshap_core.compute import Compute
from prefshap_core.models.estimators import GPM, UPM, PreferenceModel
from prefshap_core.models.hyperparameters import (
    CG_ITERATIONS,
    PENALTY_PATH,
    UPM_CG_ITERATIONS,
    UPM_PENALTY_PATH,
)
from prefshap_core.models.params import (
    ESTIMATOR_PARAMS,
    INTERNAL_ESTIMATOR_PARAMS,
    PARAMS,
    RUN_PARAMS,
    spec,
)
from prefshap_core.workflow import fingerprints
from prefshap_core.workflow.fingerprints import settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings


def _signature() -> dict[str, inspect.Parameter]:
    return dict(inspect.signature(PreferenceModel.__init__).parameters)


def test_the_table_and_the_estimator_signature_agree() -> None:
    keywords = {n for n, p in _signature().items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    names = {s.name for s in ESTIMATOR_PARAMS}
    # Every user-facing keyword has a spec; what has none is declared internal.
    assert names | set(INTERNAL_ESTIMATOR_PARAMS) == keywords
    assert not names & set(INTERNAL_ESTIMATOR_PARAMS)
    for s in ESTIMATOR_PARAMS:
        assert s.default == _signature()[s.name].default, s.name
    # Run settings are not the estimator's; no name is declared twice.
    assert not {s.name for s in RUN_PARAMS} & keywords
    assert len({s.name for s in PARAMS}) == len(PARAMS)
    assert {s.name for s in PARAMS} >= fingerprints.FINGERPRINTED_ALWAYS  # none dropped
    for s in PARAMS:  # each default is a valid value of its own spec
        assert s.check(s.default) == s.default, s.name


def test_get_params_is_the_signature_as_given() -> None:
    lengthscales = np.array([1.0, 2.0])
    model = GPM(n_centres=7, lengthscales=lengthscales, utility_weights=(0.0, 5.0), seed=3)
    params = model.get_params()
    assert list(params) == [n for n in _signature() if n != "self"]
    assert params["lengthscales"] is lengthscales  # stored as given, not copied
    assert params["n_centres"] == 7 and params["seed"] == 3
    assert params["utility_weights"] == (0.0, 5.0)
    assert params["penalty_path"] is None and params["cg_iterations"] is None  # the kind's
    assert model.path() == (PENALTY_PATH, CG_ITERATIONS)
    assert UPM().path() == (UPM_PENALTY_PATH, UPM_CG_ITERATIONS)
    assert UPM().path()[0][: len(PENALTY_PATH)] == PENALTY_PATH  # the same path, two more steps
    given = GPM(penalty_path=(1e-2, 1e-4))
    assert given.path() == ((1e-2, 1e-4), CG_ITERATIONS[:2])
    assert GPM().get_params()["utility_weights"] is None  # automatic: UTILITY_WEIGHTS
    assert model.set_params(seed=9, penalty=1e-3) is model
    assert model.get_params()["seed"] == 9 and model.penalty == 1e-3
    with pytest.raises(ValueError, match=r"unknown parameter.*n_trees"):
        model.set_params(n_trees=3)


def test_settings_check_every_value_and_name_the_parameter() -> None:
    with pytest.raises(ValueError, match="unknown training parameter 'n_trees'"):
        TrainSettings(n_trees=3)
    bad = [
        ("n_centres", 0), ("seed", -1), ("penalty", -1.0), ("penalty", float("nan")),
        ("utility_weight", -0.5), ("utility_weights", (1.0, -2.0)),
        ("lengthscales", (1.0, 0.0)), ("lengthscale_scales", ()), ("loss", "hinge"),
        ("dtype", "float16"), ("refine_lengthscales", "yes"), ("kind", "svm"),
    ]  # fmt: skip
    for name, value in bad:
        with pytest.raises(ValueError, match=rf"^{name} must be"):
            TrainSettings(**{name: value})
    with pytest.raises(ValueError, match="n_centres must be a whole number"):
        TrainSettings(n_centres=2.5)


def test_settings_are_a_frozen_hashable_mapping() -> None:
    a = TrainSettings(kind="cgpm", n_centres=40, lengthscales=[1.0, np.float64(2.0)])
    b = TrainSettings(kind="cgpm", n_centres=np.int64(40), lengthscales=(1.0, 2.0))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.lengthscales == (1.0, 2.0) and type(a.lengthscales[1]) is float
    assert type(b.n_centres) is int
    assert a.kind == "cgpm" and a.params["n_centres"] == 40 and a.penalty is None
    assert "kind" not in a.params and next(iter(a.as_dict())) == "kind"
    with pytest.raises(AttributeError):
        a.seed = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        a.params["seed"] = 3  # type: ignore[index]
    with pytest.raises(AttributeError, match="no parameter 'n_trees'"):
        _ = a.n_trees
    c = a.replace(seed=5, kind="gpm")
    assert (c.seed, c.kind, c.n_centres, a.seed) == (5, "gpm", 40, 0)
    assert pickle.loads(pickle.dumps(a)) == a
    # A stored record: lists for tuples, names of another version left out.
    record = {**a.as_dict(), "lengthscales": [1.0, 2.0], "retired_option": 1}
    assert TrainSettings.from_record(record) == a


def test_model_is_built_from_the_mapping() -> None:
    settings = TrainSettings(
        kind="cgpm", seed=4, n_centres=77, lengthscales=(0.5, 1.5), context_lengthscales=(2.0,),
        penalty=1e-3, cme_lambda=0.1, context_cme_lambda=0.2, lengthscale_scales=(1.0, 2.0),
        utility_weights=(0.0, 5.0), refine_lengthscales=False, loss="squared", dtype="float32",
        backend="falkon",
    )  # fmt: skip
    model = settings.model()
    assert type(model).__name__ == "CGPM"
    expected = {
        "n_centres": 77, "loss": "squared", "lengthscales": (0.5, 1.5),
        "lengthscale_scale": None, "lengthscale_scales": (1.0, 2.0),
        "context_lengthscales": (2.0,), "penalty": 1e-3, "penalty_path": None,
        "cg_iterations": None, "utility_weight": None, "utility_weights": (0.0, 5.0),
        "refine_lengthscales": False, "cme_lambda": 0.1, "context_cme_lambda": 0.2,
        "selection": "auto", "backend": "falkon", "seed": 4,
        "compute": Compute(device="cpu", dtype="float32"), "solver": None,
    }  # fmt: skip
    params = model.get_params()
    assert {name: params[name] for name in expected} == expected
    for s in ESTIMATOR_PARAMS:  # any parameter added since: at its default
        assert s.name in expected or params[s.name] == s.default, s.name
    # The UPM baseline: what only the sum kernel or the context has stays at its default.
    upm = TrainSettings(kind="gpm", utility_weight=3.0, context_cme_lambda=0.2).model("upm")
    assert isinstance(upm, UPM)
    assert upm.utility_weight is None and upm.context_cme_lambda is None


# Fingerprints of the previous release (computed with its TrainSettings dataclass and
# ``sha256(json.dumps(asdict(settings), sort_keys=True))``): cached models and
# ``model=`` links made before must still resolve.
PREVIOUS_RELEASE_FINGERPRINTS = [
    (TrainSettings(), "6685a6bf4e36c27e2b3f"),
    (TrainSettings(kind="gpm", seed=0, n_centres=300), "06f43743edb53abb664c"),
    (TrainSettings(kind="cgpm", n_centres=40, penalty=1e-3, baseline=True), "5b20fb171eb9e5997ef9"),
    (
        TrainSettings(kind="upm", seed=7, dtype="float32", baseline=False, loss="squared"),
        "5bdd0bb46144a8d2966e",
    ),
    (
        TrainSettings(
            kind="gpm", lengthscales=(0.5, 1.5, 2.0), lengthscale_scales=(1.0, 2.0),
            utility_weights=(0.0, 10.0), utility_weight=1.0, refine_lengthscales=False,
            context_lengthscales=(3.0,), cme_lambda=0.01, context_cme_lambda=0.001,
            lengthscale_scale=2.0, backend="falkon", device="cpu",
        ),
        "c553a9115ce9f6b4eeef",
    ),
]  # fmt: skip


@pytest.mark.parametrize("settings, expected", PREVIOUS_RELEASE_FINGERPRINTS)
def test_fingerprints_are_those_of_the_previous_release(settings, expected) -> None:
    assert settings_fingerprint(settings) == expected
    assert settings_fingerprint(TrainSettings.from_record(settings.as_dict())) == expected


def test_a_parameter_added_later_keys_the_cache_only_when_set(monkeypatch) -> None:
    # As if "penalty" had been added after the first release.
    always = fingerprints.FINGERPRINTED_ALWAYS - {"penalty"}
    monkeypatch.setattr(fingerprints, "FINGERPRINTED_ALWAYS", always)

    def digest(values: dict) -> str:
        return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()[:20]

    at_default = {k: v for k, v in TrainSettings().as_dict().items() if k in always}
    assert settings_fingerprint(TrainSettings()) == digest(at_default)
    assert settings_fingerprint(TrainSettings(penalty=None)) == digest(at_default)
    with_penalty = settings_fingerprint(TrainSettings(penalty=1e-3))
    assert with_penalty == digest({**at_default, "penalty": 1e-3})
    assert with_penalty != settings_fingerprint(TrainSettings(penalty=1e-4))


def _train_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    subparsers = parser.add_subparsers()
    train_command.add_parser(subparsers)
    return subparsers.choices["train"]


REQUIRED = ["--data", "d", "--out", "o.npz"]


def test_every_spec_is_a_train_flag() -> None:
    parser = _train_parser()
    actions = {a.dest: a for a in parser._actions}
    defaults = vars(parser.parse_args(REQUIRED))
    for s in PARAMS:
        action = actions[train_command.flag_dest(s)]
        assert action.option_strings == [s.flag] and action.help == s.help, s.name
        opt_in = s.value == "bool" and not s.flag.startswith("--no-")
        assert defaults[action.dest] == (False if opt_in else s.offered_default), s.name
        assert action.choices == s.choices or (action.choices is None and s.choices is None)
    # Every parameter round-trips from its flag into the settings.
    examples = {"int": ("3", 3), "float": ("0.5", 0.5), "floats": ("0.5,2", (0.5, 2.0))}
    for s in PARAMS:
        if s.value == "bool":
            argv, value = [s.flag], not defaults[s.name]
        elif s.choices:
            argv, value = [s.flag, s.choices[-1]], s.choices[-1]
        elif s.value == "text":
            argv, value = [s.flag, "cuda:1"], "cuda:1"
        else:
            text, value = examples[s.value]
            argv = [s.flag, text]
        settings = train_command.settings_from_flags(parser.parse_args(REQUIRED + argv))
        assert settings.as_dict()[s.name] == value, s.name


# ``prefshap train`` before the flags came from the table: these parse results are the
# previous release's (parsed with its hand-written flags).
PREVIOUS_DEFAULTS = {
    "model": "gpm", "seed": 0, "n_centres": 2000, "lengthscales": None,
    "lengthscale_scale": None, "lengthscale_scales": None, "utility_weight": None,
    "utility_weights": None, "refine_lengthscales": True, "context_lengthscales": None,
    "context_cme_lambda": None, "penalty": None, "loss": "logistic", "cme_lambda": None,
    "dtype": "float64", "device": "cpu", "backend": "torch", "baseline": False,
    "data": "d", "out": "o.npz", "data_dir": None, "lenient": False, "rejected_out": None,
    "use_column": [], "missing_indicators": True, "decimal": "auto", "quiet": False,
}  # fmt: skip
# Changed on purpose since: without --model the product chooses the model.
DEFAULTS_NOW = {**PREVIOUS_DEFAULTS, "model": "auto"}
EVERY_FLAG = [
    "--model", "cgpm", "--seed", "3", "--n-centres", "50", "--lengthscales", "1,2",
    "--lengthscale-scale", "2", "--lengthscale-scales", "1,4", "--utility-weight", "0",
    "--utility-weights", "0,1", "--no-refine-lengthscales", "--context-lengthscales", "0.5",
    "--context-cme-lambda", "0.1", "--penalty", "1e-3", "--loss", "squared",
    "--cme-lambda", "0.2", "--dtype", "float32", "--device", "cuda:1", "--backend", "falkon",
    "--baseline", "--quiet",
]  # fmt: skip
PREVIOUS_EVERY_FLAG = {
    **PREVIOUS_DEFAULTS, "model": "cgpm", "seed": 3, "n_centres": 50, "lengthscales": (1.0, 2.0),
    "lengthscale_scale": 2.0, "lengthscale_scales": (1.0, 4.0), "utility_weight": 0.0,
    "utility_weights": (0.0, 1.0), "refine_lengthscales": False,
    "context_lengthscales": (0.5,), "context_cme_lambda": 0.1, "penalty": 1e-3,
    "loss": "squared", "cme_lambda": 0.2, "dtype": "float32", "device": "cuda:1",
    "backend": "falkon", "baseline": True, "quiet": True,
}  # fmt: skip


@pytest.mark.parametrize("argv, expected", [([], DEFAULTS_NOW), (EVERY_FLAG, PREVIOUS_EVERY_FLAG)])
def test_train_flags_parse_as_before(argv, expected) -> None:
    parsed = vars(_train_parser().parse_args(REQUIRED + argv))
    parsed.pop("run")
    assert {name: parsed[name] for name in expected} == expected
    # Any other flag is a parameter added since (at its default when not given), or a
    # data-reading flag of the files-as-published reader (None when not given).
    data_flags = {"duels", "items", "contexts", *MAPPING_DESTS}
    assert all(parsed[name] is None for name in data_flags)
    added = {train_command.flag_dest(s): s for s in PARAMS}
    others = set(parsed) - set(expected) - data_flags
    assert all(added[name].default == parsed[name] for name in others)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--lengthscales", "1,-2"], "lengthscales must be positive"),
        (["--utility-weights", "1,-2"], "utility weights must be finite numbers >= 0"),
        (["--n-centres", "0"], "n centres must be a whole number >= 1"),
        (["--penalty", "inf"], "penalty must be a positive number"),
        (["--seed", "x"], "expected a whole number, got 'x'"),
    ],
)
def test_a_value_out_of_range_stops_at_parse(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        _train_parser().parse_args(REQUIRED + argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_spec_lookup_names_the_known_parameters() -> None:
    assert spec("n_centres").flag == "--n-centres"
    with pytest.raises(ValueError, match="known: kind, seed, n_centres"):
        spec("n_trees")
