"""``prefshap train``: fit a model, print one JSON line of metrics and timings."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from prefshap_core.cli._output import stderr_progress, write_rejected
from prefshap_core.data.build import load_directory
from prefshap_core.data.encoding.tables import MISSING_INDICATOR_SHARE
from prefshap_core.datasets.registry import DATASET_NAMES, load_dataset
from prefshap_core.models.model_file import save_model
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import LARGE_DUELS, expected_training_minutes, train


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train a GPM, UPM or C-GPM and save it as a model file",
        description="Train on the seeded 80/10/10 split; print one JSON line with held-out "
        "metrics and timings; write the pickle-free model file (docs/model-format.md).",
    )
    parser.add_argument(
        "--data",
        required=True,
        help="dataset name (see `prefshap datasets`) or a folder with items.csv and duels.csv",
    )
    parser.add_argument("--model", choices=("gpm", "upm", "cgpm"), default="gpm")
    parser.add_argument("--seed", type=int, default=0, help="split, orientation and centres")
    parser.add_argument("--out", required=True, help="model file to write (.npz)")
    parser.add_argument("--data-dir", help="real datasets folder (default: $PREFSHAP_DATA_DIR)")
    parser.add_argument("--n-centres", type=int, default=2000, help="Nyström centres (duels)")
    parser.add_argument(
        "--lengthscales",
        type=_floats,
        help="fix every item lengthscale (comma-separated, one per model column, model space)",
    )
    parser.add_argument("--lengthscale-scale", type=float, help="fix the lengthscale scale")
    parser.add_argument(
        "--lengthscale-scales",
        type=_floats,
        help="the lengthscale scales to search (comma-separated; default: sqrt(groups) times "
        "0.25, 0.5, 1, 2, 4)",
    )
    parser.add_argument(
        "--utility-weight",
        type=_weight,
        help="fix the utility weight w of the GPM / C-GPM kernel k_E + w k_UPM (0: plain GPM)",
    )
    parser.add_argument(
        "--utility-weights",
        type=_weights,
        help="the utility weights to search (comma-separated, >= 0; default: 0,1,10,100,1000)",
    )
    parser.add_argument(
        "--no-refine-lengthscales",
        dest="refine_lengthscales",
        action="store_false",
        help="keep one lengthscale scale for every feature group (default: after the grid "
        "search, each group's lengthscales are doubled or halved while the validation loss "
        "falls; not done for fixed --lengthscales or K-fold selection)",
    )
    parser.add_argument(
        "--context-lengthscales",
        type=_floats,
        help="fix the context lengthscales (comma-separated, C-GPM)",
    )
    parser.add_argument(
        "--context-cme-lambda",
        type=float,
        help="regulariser of the context explanations' CMEs (C-GPM)",
    )
    parser.add_argument("--penalty", type=float, help="fix the penalty (else chosen on validation)")
    parser.add_argument("--loss", choices=("logistic", "squared"), default="logistic")
    parser.add_argument("--cme-lambda", type=float, help="regulariser of the explanations' CMEs")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--backend",
        choices=("torch", "falkon"),
        default="torch",
        help="solver: our torch FALKON (default) or the falkon package",
    )
    parser.add_argument("--baseline", action="store_true", help="also fit a UPM and report it")
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
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if str(args.data) not in DATASET_NAMES and Path(args.data).is_dir():
        data = load_directory(
            args.data,
            seed=args.seed,
            on_invalid="drop" if args.lenient else "error",
            use_columns=tuple(args.use_column),
            decimal=args.decimal,
            missing_indicators=args.missing_indicators,
        )
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
    settings = TrainSettings(
        kind=args.model,
        seed=args.seed,
        n_centres=args.n_centres,
        lengthscales=args.lengthscales,
        lengthscale_scale=args.lengthscale_scale,
        lengthscale_scales=args.lengthscale_scales,
        utility_weight=args.utility_weight,
        utility_weights=args.utility_weights,
        refine_lengthscales=args.refine_lengthscales,
        context_lengthscales=args.context_lengthscales,
        context_cme_lambda=args.context_cme_lambda,
        penalty=args.penalty,
        loss=args.loss,
        cme_lambda=args.cme_lambda,
        dtype=args.dtype,
        device=args.device,
        backend=args.backend,
        baseline=args.baseline,
    )
    # stdout holds only the JSON line: anything a backend prints (falkon's own
    # progress) goes to stderr with ours.
    with contextlib.redirect_stdout(sys.stderr):
        result = train(data, settings, stderr_progress(args.quiet))
    save_model(result.function, args.out)
    report = result.to_json()
    report["skipped"] = data.report.skipped_duels + data.report.dropped_duels
    report["ties"] = data.n_ties
    report["seconds"] = {"load": load_seconds, **report["seconds"]}
    report["out"] = str(args.out)
    print(json.dumps(report, sort_keys=False), flush=True)
    return 0


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


def _floats(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers, got {text!r}"
        ) from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError("lengthscales must be positive")
    return values


def _weight(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value >= 0 and value != float("inf")):
        raise argparse.ArgumentTypeError("utility weights must be finite numbers >= 0")
    return value


def _weights(text: str) -> tuple[float, ...]:
    return tuple(_weight(v) for v in text.split(","))
