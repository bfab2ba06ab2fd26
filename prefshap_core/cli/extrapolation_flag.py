"""``--allow-extrapolation``: the CLI refuses covariate and context values outside the
training range (the observed pool's min/max per column) unless it is given.

Applies to rows given as values (a wide table's alternatives outside the pool,
``--what context`` context columns, ``--context column=value``), never to item ids.
"""

from __future__ import annotations

import argparse
import sys

from prefshap_core.models.extrapolation import describe

FLAG = "--allow-extrapolation"


def add_extrapolation_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        FLAG,
        action="store_true",
        help="evaluate covariate or context values outside the training range (the "
        "observed pool's min/max per column) instead of refusing them",
    )


def check_extrapolation(
    problems: list[str], args: argparse.Namespace, command: str, where: str
) -> None:
    """Refuse ``problems`` (lines of ``outside_range``) unless the flag is given; with
    it, say on stderr what is extrapolated."""
    if not problems:
        return
    if not args.allow_extrapolation:
        raise ValueError(
            f"{where}: outside the training range, where the model extrapolates: "
            f"{describe(problems)}; give {FLAG} to evaluate anyway"
        )
    if not getattr(args, "quiet", False):
        print(f"prefshap {command}: note: extrapolating ({where}): {describe(problems)}",
              file=sys.stderr)  # fmt: skip
