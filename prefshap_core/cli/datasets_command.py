"""``prefshap datasets``: what can be loaded, and from where."""

from __future__ import annotations

import argparse

from prefshap_core.datasets.registry import available_datasets
from prefshap_core.paths import data_dir


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("datasets", help="list the datasets that can be loaded")
    parser.add_argument("--data-dir", help="real datasets folder (default: $PREFSHAP_DATA_DIR)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = args.data_dir or data_dir()
    print(f"data directory: {root}")
    for info in available_datasets(args.data_dir):
        status = "available" if info.available else f"unavailable: {info.reason}"
        print(f"  {info.name:<14} {status}\n  {'':<14} {info.description}")
    print("  <directory>    any folder with items.csv and duels.csv (see sample_data/README.md)")
    return 0
