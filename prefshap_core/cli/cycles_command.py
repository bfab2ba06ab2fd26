"""``prefshap cycles``: how intransitive a model is, and its strongest cycles.

Contract (scripts call it exactly so):

    prefshap cycles --model M.npz [--max-items N] [--items-file F]
        [--context k=v ...] [--top K] [--min-p-cycle P] [--n-draws T] [--seed S]
        [--allow-extrapolation]

Items: the model's items in pool order, the first N (default 500), or the ids listed
in F (one per line); at most 2,000. ``--context`` (C-GPM): ``k`` a context group and
``v`` one of its categories, or ``k`` a numeric context column and ``v`` its raw
value; groups not given are averaged over the observed contexts (none given: the
context-averaged model); a numeric value outside the training range (the observed
contexts' min/max) is refused unless ``--allow-extrapolation``. Prints one JSON line on stdout:
``{"n_items": n, "cyclic_share": x, "cyclic_share_interval": [lo, hi], "n_draws": T,
"n_cyclic_triangles": N, "n_scored": S, "n_listed": L, "triangles": [{"items": [a, b, c],
"names": [..], "p": [P(a>b), P(b>c), P(c>a)], "p_cycle": q}, ...]}``:
the HodgeRank cyclic share of the preference matrix with its 90 % posterior interval,
every count (``n_cyclic_triangles``: all cyclic triangles among the items;
``n_scored``: the cycles scored against the posterior, 0 without one; ``n_listed``:
the triangles below), each triangle's item ids and ``names`` (the model file's
optional ``item_names``; without them the ids),
and the K (default 20) strongest cycles a > b > c > a, each from its
smallest-pool-index item, among those whose posterior probability ``p_cycle`` of
keeping all three edges is at least ``--min-p-cycle`` (default 0.95; the strongest
1,000 cycles are scored, from T posterior draws seeded by ``--seed``). A model file
without a posterior: ``p_cycle`` null, interval null, ``n_draws`` 0, nothing filtered
(stderr says so). Progress and a summary go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from prefshap_core.analysis.context_condition import condition_on_context, parse_context_assignments
from prefshap_core.analysis.cycle_uncertainty import (
    DEFAULT_DRAWS,
    DEFAULT_MIN_P_CYCLE,
    sure_cycles,
)
from prefshap_core.analysis.intransitivity import MAX_ITEMS, analyse
from prefshap_core.cli._output import stderr_progress
from prefshap_core.cli.extrapolation_flag import add_extrapolation_flag, check_extrapolation
from prefshap_core.compute import Compute
from prefshap_core.errors import DataValidationError
from prefshap_core.models.extrapolation import outside_range
from prefshap_core.models.model_file import load_model
from prefshap_core.models.preference_function import PreferenceFunction

DEFAULT_MAX_ITEMS = 500


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cycles",
        help="cyclic share and strongest cycles of a model (intransitivity)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="model file (.npz, docs/model-format.md)")
    parser.add_argument(
        "--max-items",
        type=int,
        help=f"the first N items in pool order (default {DEFAULT_MAX_ITEMS})",
    )
    parser.add_argument("--items-file", help="file with one item id per line")
    parser.add_argument(
        "--context",
        nargs="+",
        action="extend",
        default=[],
        metavar="k=v",
        help="C-GPM: fix context groups (group=category or column=raw value)",
    )
    parser.add_argument("--top", type=int, default=20, help="cycles to list (default 20)")
    parser.add_argument(
        "--min-p-cycle",
        type=float,
        default=DEFAULT_MIN_P_CYCLE,
        help="list only triangles whose posterior probability of keeping all three edges "
        f"is at least this (default {DEFAULT_MIN_P_CYCLE:g}; 0: all)",
    )
    parser.add_argument(
        "--n-draws",
        type=int,
        default=DEFAULT_DRAWS,
        help=f"posterior draws for p_cycle and the interval (default {DEFAULT_DRAWS})",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the posterior draws")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_extrapolation_flag(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.top < 0:
        raise ValueError(f"--top must be at least 0, got {args.top}")
    if args.items_file is not None and args.max_items is not None:
        raise ValueError("--max-items and --items-file exclude each other")
    fn = load_model(args.model)
    if args.items_file is not None:
        rows = _rows_from_file(Path(args.items_file), fn)
    else:
        rows = _first_rows(fn, DEFAULT_MAX_ITEMS if args.max_items is None else args.max_items)
    if not 0.0 <= args.min_p_cycle <= 1.0:
        raise ValueError(f"--min-p-cycle must be in [0, 1], got {args.min_p_cycle}")
    if args.n_draws < 1:
        raise ValueError(f"--n-draws must be at least 1, got {args.n_draws}")
    conditioned = condition_on_context(fn, parse_context_assignments(args.context))
    if conditioned is not fn:
        assert fn.context_space is not None
        problems = outside_range(fn.context_space, fn.contexts, conditioned.contexts, "context")
        check_extrapolation(problems, args, "cycles", "--context")
    compute = Compute(device=args.device, dtype=args.dtype)
    progress = stderr_progress(args.quiet)
    with_posterior = fn.posterior_factor is not None
    report = analyse(conditioned, rows, top=args.top, compute=compute, progress=progress)
    interval = None
    n_scored = 0
    if with_posterior:
        sure = sure_cycles(
            conditioned, report, min_p_cycle=args.min_p_cycle, top=args.top,
            n_draws=args.n_draws, seed=args.seed, compute=compute, progress=progress,
        )  # fmt: skip
        triangles, interval = sure.triangles, sure.share_interval
        n_scored = sure.n_candidates
    else:
        triangles = report.triangles()
        for triangle in triangles:
            triangle["p_cycle"] = None
        print(
            f"prefshap cycles: {Path(args.model).name} has no posterior: p_cycle is null "
            "and no triangle is filtered (retrain it to get one)",
            file=sys.stderr,
        )
    result = {
        "n_items": report.n_items,
        "cyclic_share": report.cyclic_share,
        "cyclic_share_interval": interval,
        "n_draws": args.n_draws if with_posterior else 0,
        "n_cyclic_triangles": report.n_cyclic_triangles,
        "n_scored": n_scored,
        "n_listed": len(triangles),
        "triangles": triangles,
    }
    print(json.dumps(result))
    if not args.quiet:
        summary = {
            "n_cyclic_triangles": report.n_cyclic_triangles,
            "context": parse_context_assignments(args.context),
            "seconds": time.perf_counter() - start,
        }
        print(json.dumps(summary), file=sys.stderr)
    return 0


def _first_rows(fn: PreferenceFunction, max_items: int) -> np.ndarray:
    if max_items < 3:
        raise ValueError(f"--max-items must be at least 3, got {max_items}")
    if max_items > MAX_ITEMS:
        raise ValueError(f"--max-items: at most {MAX_ITEMS:,} items, got {max_items:,}")
    return np.arange(min(max_items, len(fn.item_ids)))


def _rows_from_file(path: Path, fn: PreferenceFunction) -> np.ndarray:
    name = path.name
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise DataValidationError("no such file", file=name) from None
    except (OSError, UnicodeDecodeError) as err:
        raise DataValidationError(f"not a readable text file ({err})", file=name) from None
    index = {str(i): k for k, i in enumerate(fn.item_ids)}
    rows: list[int] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        item = line.strip()
        if not item:
            continue  # blank lines (a trailing newline) carry no id
        if item not in index:
            raise DataValidationError(
                f"line {number}: unknown item id '{item}' (not among the model's "
                f"{len(index):,} item_ids)",
                file=name,
            )
        if item in seen:
            raise DataValidationError(
                f"line {number}: item id '{item}' is already on line {seen[item]}", file=name
            )
        seen[item] = number
        rows.append(index[item])
    if len(rows) < 3:
        raise DataValidationError(f"needs at least 3 item ids, found {len(rows)}", file=name)
    if len(rows) > MAX_ITEMS:
        raise DataValidationError(f"at most {MAX_ITEMS:,} item ids, found {len(rows):,}", file=name)
    return np.asarray(rows, dtype=np.int64)
