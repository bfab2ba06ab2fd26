"""``prefshap train``: fit a model, print one JSON line of metrics and timings."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from prefshap_core.cli._output import stderr_progress, write_rejected
from prefshap_core.cli.data_flags import add_mapping_flags, mapping_from_flags
from prefshap_core.data.build import load_directory
from prefshap_core.data.duel_data import DuelData
from prefshap_core.data.encoding.tables import MISSING_INDICATOR_SHARE
from prefshap_core.data.layouts.loading import load_files
from prefshap_core.data.layouts.mapping import ColumnMapping
from prefshap_core.datasets.registry import DATASET_NAMES, load_dataset
from prefshap_core.models.model_file import save_model
from prefshap_core.models.params import PARAMS, ParamSpec
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import LARGE_DUELS, expected_training_minutes, train


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a GPM, UPM or C-GPM (or the best of them) and save it as a model file",
        description="Train on the seeded 80/10/10 split; print one JSON line with held-out "
        "metrics and timings; write the pickle-free model file (docs/model-format.md).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--data",
        help="dataset name (see `prefshap datasets`) or a folder with items.csv and duels.csv",
    )
    source.add_argument(
        "--duels",
        help="the duels file (csv/tsv/xlsx/parquet) in any layout: long, counts, wide, rankings",
    )
    parser.add_argument("--items", help="with --duels: the item table (not for wide tables)")
    parser.add_argument("--contexts", help="with --duels: a contexts table keyed by a duels column")
    parser.add_argument("--out", required=True, help="model file to write (.npz)")
    parser.add_argument("--data-dir", help="real datasets folder (default: $PREFSHAP_DATA_DIR)")
    add_param_flags(parser)
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="drop invalid duel rows (unknown ids, self-duels, bad outcomes) instead of "
        "stopping; they are written with their reasons to --rejected-out",
    )
    parser.add_argument(
        "--rejected-out",
        help="CSV of the rejected rows and reasons (default: beside --out, *.rejected.csv)",
    )
    parser.add_argument(
        "--use-column",
        action="append",
        default=[],
        metavar="NAME",
        help="use this id-like column as a covariate anyway (repeatable)",
    )
    parser.add_argument(
        "--no-missing-indicators",
        dest="missing_indicators",
        action="store_false",
        help=f"no '<column> (missing)' indicator columns: a column with >= "
        f"{MISSING_INDICATOR_SHARE:.0%}% of its values missing is only filled (median / most "
        "frequent category), like the others",
    )
    parser.add_argument(
        "--decimal",
        choices=("auto", ".", ","),
        default="auto",
        help="decimal mark of numbers in CSV files (auto: a comma with ; or tab separators)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_mapping_flags(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.data is None or args.items or args.contexts:
        if args.data is not None:
            raise ValueError("--items and --contexts go with --duels, not --data")
        data = load_files(args.duels, args.items, args.contexts, **_reading_options(args))
    elif str(args.data) not in DATASET_NAMES and Path(args.data).is_dir():
        data = load_directory(args.data, **_reading_options(args))
    else:
        data = load_dataset(
            args.data,
            seed=args.seed,
            data_dir=args.data_dir,
            missing_indicators=args.missing_indicators,
        )
    load_seconds = time.perf_counter() - start
    if args.lenient:
        target = args.rejected_out or _beside(args.out, ".rejected.csv")
        write_rejected(data.report.rejected, target, "prefshap train")
    _warn_if_large(data.n_duels, args.quiet)
    settings = settings_from_flags(args)
    # stdout holds only the JSON line: anything a backend prints (falkon's own
    # progress) goes to stderr with ours.
    with contextlib.redirect_stdout(sys.stderr):
        result = train(data, settings, stderr_progress(args.quiet))
    save_model(_with_item_names(result.function, data), args.out)
    report = result.to_json()
    report["skipped"] = data.report.skipped_duels + data.report.dropped_duels
    report["ties"] = data.n_ties
    report["layout"] = data.report.layout
    report["mapping"] = (data.report.mapping or ColumnMapping()).to_json()
    report["seconds"] = {"load": load_seconds, **report["seconds"]}
    report["out"] = str(args.out)
    print(json.dumps(report, sort_keys=False), flush=True)
    return 0


def _with_item_names(fn: PreferenceFunction, data: DuelData) -> PreferenceFunction:
    """The model with the data's item names (the file's optional ``item_names``), if any."""
    if data.item_labels is None:
        return fn
    label = dict(zip(data.item_ids.astype(str), data.item_labels.astype(str), strict=True))
    names = np.array([label.get(str(i), str(i)) for i in fn.item_ids], dtype=str)
    return replace(fn, item_names=names)


def _reading_options(args: argparse.Namespace) -> dict[str, Any]:
    """How a user's files are read, the same for --duels files and a --data folder."""
    return {
        "mapping": mapping_from_flags(args),
        "seed": args.seed,
        "on_invalid": "drop" if args.lenient else "error",
        "use_columns": tuple(args.use_column),
        "decimal": args.decimal,
        "missing_indicators": args.missing_indicators,
    }


def _beside(out: str, suffix: str) -> Path:
    path = Path(out)
    return path.with_name(path.stem + suffix)


def _warn_if_large(n_duels: int, quiet: bool) -> None:
    """Very large data: say so before the long part starts (the ETA then keeps moving)."""
    if quiet or n_duels < LARGE_DUELS:
        return
    minutes = expected_training_minutes(n_duels)
    print(
        f"prefshap train: {n_duels:,} duels is very large data; expect roughly "
        f"{minutes:.0f} min on a small CPU (less with more cores or --device cuda)",
        file=sys.stderr,
        flush=True,
    )


def add_param_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per training parameter of the spec table (``models.params.PARAMS``).

    A "bool" spec is a switch: ``--no-<name>`` turns a default on off, any other flag
    is opt-in (off unless given). Numbers are checked against the spec's range while
    parsing, so a wrong value stops with the usage before any data is read.
    """
    for spec in PARAMS:
        if spec.value == "bool":
            action = "store_false" if spec.flag.startswith("--no-") else "store_true"
            parser.add_argument(spec.flag, dest=spec.name, action=action, help=spec.help)
            continue
        kwargs: dict[str, Any] = {"choices": spec.choices} if spec.choices else {}
        if spec.value in ("int", "float", "floats"):
            kwargs["type"] = _number_reader(spec)
        parser.add_argument(
            spec.flag,
            dest=flag_dest(spec),
            default=spec.offered_default,
            help=spec.help,
            **kwargs,
        )


def flag_dest(spec: ParamSpec) -> str:
    """The ``argparse`` attribute of a spec's flag (``--model`` is ``args.model``)."""
    return spec.name if spec.value == "bool" else spec.flag.removeprefix("--").replace("-", "_")


def settings_from_flags(args: argparse.Namespace) -> TrainSettings:
    return TrainSettings(**{spec.name: getattr(args, flag_dest(spec)) for spec in PARAMS})


_EXPECTED = {"int": "a whole number", "float": "a number", "floats": "comma-separated numbers"}


def _number_reader(spec: ParamSpec) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            if spec.value == "floats":
                value: Any = tuple(float(v) for v in text.split(","))
            else:
                value = int(text) if spec.value == "int" else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {_EXPECTED[spec.value]}, got {text!r}"
            ) from None
        try:
            return spec.check(value)
        except ValueError:
            noun = spec.name.replace("_", " ")
            raise argparse.ArgumentTypeError(f"{noun} must be {spec.bound()}") from None

    read.__name__ = spec.value  # argparse names the type in its messages
    return read
