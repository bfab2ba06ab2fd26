"""Peak memory and time of reading, and of training on, a 1.7 M-duel upload.

    python benchmarks/bench_large_upload.py [--duels 1700000] [--code DIR] [--skip-train]

Writes the seeded upload of ``make_large_duels.py`` into a temporary folder, then runs,
each in a fresh process under ``/usr/bin/time -v``: (1) loading it (``load_dataset``:
read + validate + encode), (2) ``prefshap train --model gpm`` on it. Prints one table
row per step: wall seconds, CPU seconds (user + system: the fairer time on a shared
machine) and peak resident memory (GB). ``--code DIR`` runs another
checkout's engine (e.g. ``/work/main``, for a before/after table).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_large_duels import write_large_upload

LOAD = (
    "import sys; from prefshap_core.datasets.registry import load_dataset; "
    "d = load_dataset(sys.argv[1]); print(d.n_items, d.n_duels)"
)


def _measured(command: list[str], code: Path) -> tuple[float, float, float, str]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *command], env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", done.stderr)[1])
              for kind in ("User", "System"))  # fmt: skip
    return seconds, cpu, peak_kb / 1024**2, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duels", type=int, default=1_700_000)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--code", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--skip-train", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "large"
        _, duels = write_large_upload(folder, args.duels, args.items, seed=0)
        size = duels.stat().st_size / 1e6
        print(f"code: {args.code}; {args.duels:,} duels, duels.csv {size:.0f} MB")
        print(f"{'step':<28} {'wall s':>8} {'CPU s':>8} {'peak GB':>8}")
        seconds, cpu, peak, _ = _measured([sys.executable, "-c", LOAD, str(folder)], args.code)
        print(
            f"{'load (read+validate+encode)':<28} {seconds:8.1f} {cpu:8.1f} {peak:8.2f}", flush=True
        )
        if not args.skip_train:
            model = str(Path(tmp) / "model.npz")
            train = [sys.executable, "-m", "prefshap_core.cli", "train", "--quiet",
                     "--data", str(folder), "--model", "gpm", "--out", model]  # fmt: skip
            seconds, cpu, peak, line = _measured(train, args.code)
            print(f"{'prefshap train --model gpm':<28} {seconds:8.1f} {cpu:8.1f} {peak:8.2f}")
            print(line)


if __name__ == "__main__":
    main()
