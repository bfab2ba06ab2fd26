"""``prefshap explain``: Shapley values of any model file for the duels of a CSV.

Contract (scripts call it exactly so):

    prefshap explain --model M.npz --duels DUELS.csv --out OUT.csv
        [--what items|context|sides|interactions] [--exact] [--samples N] [--seed S]
        [--uncertainty] [--dtype float64|float32] [--device cpu|cuda]
        [--cme-method auto|cholesky|cg|nystrom]
        [--scheduler tcp://HOST:8786 | --workers N] [--connect-timeout SECONDS]
        [--allow-extrapolation] [--interaction-groups G [G ...]]

DUELS.csv: ``left``, ``right`` (ids of the model's ``item_ids``), optional ``winner``
(an id, or ``left``/``right``), or any other layout ``prefshap train`` reads (winner /
loser, ``y``, counts, wide choice tables, rankings; the column-mapping flags apply),
and for ``--what context`` the context: either one column per model context column
(``context_names``, raw values, standardised with the model's offset and scale), or
one column per categorical context group holding its category (e.g. ``surface`` =
``Clay`` for columns ``surface=Clay``, ...).
OUT.csv: one row per input duel, in input order: ``left,right``, then ``duel_id`` and
``winner`` when DUELS.csv has them (as given), ``output,base_value``, one column per
player (group name), then for sampled runs ``se:<player>`` (standard errors of the
sampled values); values left-vs-right (positive favours left). ``--uncertainty``:
``output_sd`` after ``base_value`` (and ``base_value_sd`` for context), and one
``sd:<player>`` column per value column after any ``se:`` columns: posterior
standard deviations from the model file's ``posterior_factor`` (model uncertainty).
The two are different errors: ``se:`` is the sampling error of a sampled value
(which coalitions were drawn), ``sd:`` the model's (which coefficients the duels
allow), of the sampled estimate itself for sampled runs; independent, so a sampled
value's total error is ``sqrt(se^2 + sd^2)``. ``--what sides`` and ``interactions``
likewise (``sd:left:<g>``, ``sd:<a>*<b>``).

``--what sides``: each side's item groups are separate players, columns
``left:<group>`` for every group, then ``right:<group>`` (and ``se:left:<group>``,
``se:right:<group>``). ``--what interactions`` (always exact, at most 16 item groups;
C-GPM: the context-averaged model): one column ``<a>*<b>`` per unordered pair of item
groups in the model's group order, the pairwise Shapley interaction index. A model
with more groups: ``--interaction-groups`` names at most 16 of them (the others stay
at each duel's own values); without it such a model is refused before any work.

Covariate values of alternatives outside the pool and ``--what context`` contexts
outside the training range (the observed pool's min/max per column) are refused,
naming column, value and range, unless ``--allow-extrapolation``.

``--scheduler`` runs the coalition batches on a running Dask cluster, ``--workers N``
on a local cluster of N worker processes (loopback only); neither: in this process.
The numbers are the same either way (README, "Running on a cluster").
"""

# The docstring above is also the command's --help. This module parses the arguments
# and runs the explainer; reading DUELS.csv is explain_input, OUT.csv's layout
# explain_output.

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from prefshap_core.cli._output import stderr_progress, write_rejected
from prefshap_core.cli.data_flags import add_mapping_flags, mapping_from_flags
from prefshap_core.cli.explain_input import (
    Duels,
    outside_pool_rows,
    read_contexts,
    read_duels,
    tie_count,
    usable_rows,
)
from prefshap_core.cli.explain_output import explanation_table, interaction_table
from prefshap_core.cli.extrapolation_flag import add_extrapolation_flag, check_extrapolation
from prefshap_core.compute import Compute
from prefshap_core.csv_safety import write_csv
from prefshap_core.data.layouts.explain_rows import explain_duels
from prefshap_core.data.readers import read_any
from prefshap_core.explain import Explainer, ExplainOptions, Shapley, cme_options
from prefshap_core.explain.dask_executor import (
    DEFAULT_CONNECT_TIMEOUT,
    DaskExecutor,
    close_local_cluster,
    local_cluster,
)
from prefshap_core.explain.interaction_explanation import (
    check_interaction_groups,
    chosen_groups,
    explain_interactions,
)
from prefshap_core.explain.options import CME_METHODS
from prefshap_core.explain.scheduler_address import check_scheduler_address
from prefshap_core.explain.uncertainty import interaction_sd
from prefshap_core.models.extrapolation import outside_range
from prefshap_core.models.model_file import load_model
from prefshap_core.models.preference_function import PreferenceFunction

WHATS = ("items", "context", "sides", "interactions")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="Pref-SHAP values for duels, from any model file",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="model file (.npz, docs/model-format.md)")
    parser.add_argument(
        "--duels",
        required=True,
        help="CSV (or tsv/xlsx/parquet) of duels in any layout prefshap train reads",
    )
    parser.add_argument("--out", required=True, help="CSV to write")
    parser.add_argument("--what", choices=WHATS, default="items")
    parser.add_argument("--exact", action="store_true", help="enumerate every coalition")
    parser.add_argument("--samples", type=int, help="sampled coalitions (paired kernel sampling)")
    parser.add_argument("--seed", type=int, default=0, help="coalition sampling seed")
    parser.add_argument(
        "--uncertainty",
        action="store_true",
        help="also the posterior sd of the output and of every value (output_sd, "
        "sd:<player>: model uncertainty, beside the sampling se:<player> of sampled "
        "values; needs a model file with a posterior)",
    )
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument(
        "--cme-method",
        choices=tuple(CME_METHODS),
        default="auto",
        help="how the coalition CMEs are solved: exact Cholesky, preconditioned CG (exact "
        "to its tolerance), Nyström (approximate, very large pools), or auto (default)",
    )
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="skip duels with unknown or missing ids or a bad winner instead of stopping; "
        "they are written with their reasons to --rejected-out",
    )
    parser.add_argument(
        "--rejected-out", help="CSV of the skipped rows (default: beside --out, *.rejected.csv)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--scheduler", help="run on the Dask cluster of this scheduler (tcp://HOST:8786)"
    )
    where.add_argument(
        "--workers", type=int, help="run on a local Dask cluster of N worker processes"
    )
    parser.add_argument(
        "--connect-timeout",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT,
        help=f"seconds to reach --scheduler (default {DEFAULT_CONNECT_TIMEOUT:g})",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--interaction-groups",
        nargs="+",
        metavar="G",
        help="--what interactions: the item groups (2 to 16) whose interactions to compute; "
        "the other groups stay at each duel's own values (default: all groups)",
    )
    add_extrapolation_flag(parser)
    add_mapping_flags(parser)
    parser.set_defaults(run=run)


@contextlib.contextmanager
def _executor(args: argparse.Namespace) -> Iterator[DaskExecutor | None]:
    """Where the batches run: a cluster's executor (closed afterwards), or None."""
    if args.scheduler is not None:
        # connected now: an unreachable scheduler fails before any work
        executor = DaskExecutor(args.scheduler, connect_timeout=args.connect_timeout).connect()
        try:
            yield executor
        finally:
            executor.close()
    elif args.workers is not None:
        if args.workers < 1:
            raise ValueError("--workers must be at least 1")
        cluster, executor = local_cluster(args.workers)
        try:
            yield executor
        finally:
            close_local_cluster(cluster, executor)
    else:
        yield None


# One call per process: nothing to keep factorizations for, so each coalition takes its
# cheapest solve (a kept factorization is solved for every centre, worth it only when
# later calls reuse it, as in the dashboard).
ONE_SHOT = 0


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    if args.exact and args.samples is not None:
        raise ValueError("--exact and --samples exclude each other")
    if args.samples is not None and args.samples < 1:
        raise ValueError("--samples must be at least 1")
    if args.what == "interactions" and args.samples is not None:
        raise ValueError("--what interactions is always exact: drop --samples")
    if args.scheduler is not None:  # before any work, as the connection itself is
        check_scheduler_address(args.scheduler)
    fn = load_model(args.model)
    if args.interaction_groups is not None and args.what != "interactions":
        raise ValueError("--interaction-groups goes with --what interactions")
    if args.what == "interactions":
        if args.interaction_groups is None:
            check_interaction_groups(fn.item_space.n_groups)
        elif chosen_groups(fn, args.interaction_groups) is not None and args.uncertainty:
            raise ValueError("--uncertainty is for all item groups: drop --interaction-groups")
    if args.what == "context" and fn.kind != "cgpm":
        raise ValueError(f"--what context needs a C-GPM model file, this one is {fn.kind!r}")
    if args.uncertainty:
        _check_uncertainty(args, fn)
    for old, new in fn.metadata.get("renamed_players", {}).items():
        print(
            f"prefshap explain: note: player '{old}' is called '{new}' in {args.out}: "
            "its name is an export column",
            file=sys.stderr,
        )
    file_name = Path(args.duels).name
    given = explain_duels(
        read_any(Path(args.duels), file_name=file_name),
        mapping_from_flags(args),
        file_name,
        item_ids=fn.item_ids,
    )
    table = given.table
    skipped = 0
    outside = outside_pool_rows(given, fn, file_name)  # a wide table's unseen alternatives
    if outside is not None:
        check_extrapolation(fn.outside_training_range(*outside), args, "explain", file_name)
    if args.lenient and outside is None:
        table, rejected = usable_rows(table, fn, file_name)
        target = args.rejected_out or Path(args.out).with_name(
            Path(args.out).stem + ".rejected.csv"
        )
        write_rejected(rejected, target, "prefshap explain")
        skipped = len(rejected)
    duels = read_duels(table, fn, file_name, rows=outside)
    compute = Compute(device=args.device, dtype=args.dtype)
    with _executor(args) as executor:
        if args.what == "interactions":
            out, summary = _interactions(args, fn, duels, table, compute, executor)
        else:
            out, summary = _explanation(args, fn, duels, table, compute, executor)
    if outside is not None:  # alternatives outside the pool: named by their values
        out["left"], out["right"] = table["left"].to_numpy(), table["right"].to_numpy()
    summary["executor"] = "in-process" if executor is None else repr(executor)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_csv(out, args.out, float_format="%.17g")  # ids and headers formula-safe
    summary = {
        "duels": len(out),
        "what": args.what,
        "skipped": skipped,
        "ties": tie_count(table, duels.winners),
        **summary,
        "seconds": time.perf_counter() - start,
        "out": str(args.out),
    }
    if not args.quiet:
        print(json.dumps(summary), file=sys.stderr)
    return 0


def _shapley(args: argparse.Namespace) -> Shapley:
    """``--exact``: every coalition; ``--samples N``: N sampled; neither: the default."""
    if args.exact:
        return Shapley("exact")
    return Shapley() if args.samples is None else Shapley("sampled", args.samples)


def _explanation(
    args: argparse.Namespace,
    fn: PreferenceFunction,
    duels: Duels,
    table: pd.DataFrame,
    compute: Compute,
    executor: DaskExecutor | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    options = ExplainOptions(
        what=args.what,
        shapley=_shapley(args),
        seed=args.seed,
        cme=cme_options(args.cme_method),
        factor_cache_bytes=ONE_SHOT,
        executor=executor,
        uncertainty=args.uncertainty,
    )
    contexts = read_contexts(table, fn, Path(args.duels).name) if args.what == "context" else None
    if contexts is not None:
        assert fn.context_space is not None
        problems = outside_range(fn.context_space, fn.contexts, contexts, "context")
        check_extrapolation(problems, args, "explain", Path(args.duels).name)
    expl = Explainer(fn, options, compute=compute)(
        duels.left,
        duels.right,
        contexts=contexts,
        winners=duels.winners,
        duel_ids=duels.ids,
        progress=stderr_progress(args.quiet),
    )
    return explanation_table(expl, table), {
        "players": list(expl.player_names),
        "shapley": expl.meta.get("shapley"),
        "n_coalitions": expl.meta.get("n_coalitions"),
        "cme_method": expl.meta.get("cme", {}).get("method"),
        "max_efficiency_gap": expl.efficiency_gap(),
    }


def _check_uncertainty(args: argparse.Namespace, fn: PreferenceFunction) -> None:
    """--uncertainty's conditions, checked before any work."""
    if fn.posterior_factor is None:
        loss = fn.metadata.get("loss")
        why = " (squared-loss models have none)" if loss == "squared" else ""
        raise ValueError(
            f"--uncertainty: {Path(args.model).name} has no posterior{why}; "
            "retrain it with the logistic loss to get one"
        )


def _interactions(
    args: argparse.Namespace,
    fn: PreferenceFunction,
    duels: Duels,
    table: pd.DataFrame,
    compute: Compute,
    executor: DaskExecutor | None = None,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    options = ExplainOptions(
        what="items",
        shapley="exact",  # interaction values are exact (check_interaction_groups)
        cme=cme_options(args.cme_method),
        factor_cache_bytes=ONE_SHOT,
        executor=executor,
    )
    explainer = Explainer(fn, options, compute=compute)
    inter = explain_interactions(
        fn,
        duels.left,
        duels.right,
        winners=duels.winners,
        duel_ids=duels.ids,
        explainer=explainer,
        progress=stderr_progress(args.quiet),
        groups=args.interaction_groups,
    )
    out = interaction_table(inter, table)
    if args.uncertainty:
        sd = interaction_sd(explainer, duels.left, duels.right)
        out.insert(out.columns.get_loc("base_value") + 1, "output_sd", sd.outputs)
        for k, name in enumerate(inter.pair_names):
            out[f"sd:{name}"] = sd.values[:, k]
    return out, {
        "players": list(inter.player_names),
        "pairs": inter.pair_names,
        "shapley": "exact",
    }
