"""The ``prefshap`` command: train, explain, cycles, datasets.

Each subcommand lives in its own module with ``add_parser(subparsers)`` and
``run(args) -> int``. User mistakes (bad data, bad model files, bad options) print
one precise line on stderr and exit 2; they never end in a traceback.
"""

from __future__ import annotations

import argparse
import sys

from prefshap_core import __version__
from prefshap_core.cli import cycles_command, datasets_command, explain_command, train_command
from prefshap_core.errors import CancelledError, PrefShapError

COMMANDS = (train_command, explain_command, cycles_command, datasets_command)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="prefshap",
        description="Kernel preference models for duels and their Pref-SHAP explanations.",
    )
    parser.add_argument("--version", action="version", version=f"prefshap {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except CancelledError:  # before PrefShapError: it is one
        print(f"prefshap {args.command}: cancelled", file=sys.stderr)
        return 130
    except (PrefShapError, ValueError, KeyError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"prefshap {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
