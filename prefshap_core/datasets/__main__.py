"""``python -m prefshap_core.datasets``: list the datasets, load each, print sizes and times."""

from __future__ import annotations

import sys
import time

from prefshap_core.datasets.registry import available_datasets, load_dataset


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    print(f"{'dataset':<14} {'items':>6} {'duels':>7} {'contexts':>8} {'dropped':>7} {'load s':>7}")
    for info in available_datasets():
        if args and info.name not in args:
            continue
        if not info.available:
            print(f"{info.name:<14} unavailable: {info.reason}")
            continue
        start = time.perf_counter()
        data = load_dataset(info.name)
        seconds = time.perf_counter() - start
        contexts = len(data.contexts) if data.contexts is not None else 0
        print(
            f"{info.name:<14} {data.n_items:>6} {data.n_duels:>7} {contexts:>8} "
            f"{data.report.dropped_duels:>7} {seconds:>7.2f}"
        )


if __name__ == "__main__":
    main()
