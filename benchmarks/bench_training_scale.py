"""Training time against data size, this checkout against another, in one run.

    python benchmarks/bench_training_scale.py [--baseline DIR] [--cases pokemon,tennis,g3000x1800]
                                              [--models gpm,auto] [--repeats 1]

Each row is one ``prefshap train`` in a fresh process (``PYTHONPATH`` = the checkout),
timed by its own JSON line (``seconds.total``: training, not loading) and by
``/usr/bin/time`` (CPU seconds, peak resident GB). ``--baseline DIR`` runs the same
rows with another checkout's engine (e.g. ``git archive 930cdee | tar -x -C DIR``),
interleaved with this one's, so both see the same load; the ratio column is this
checkout's seconds over the baseline's. Rows:

* ``pokemon``, ``tennis``: the real data sets (``$PREFSHAP_DATA_DIR``).
* ``g<duels>x<items>``: the seeded sample-data generator of ``make_large_duels.py``
  (4 item features: speed, power, stamina, style; a venue context the GPM ignores).
  ``g3000x1800`` is the size of the 2,929-duel stated-preference set that trained
  slower than Pokémon's 50,000 duels.

The load average is printed with every row (the machine is shared: compare ratios
within one run, not seconds across runs). The last lines give each generated set's
time over Pokémon's (the target: the 3,000-duel set in <= 0.3x).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The environment as given, before prefshap_core (imported below) adds its OpenMP
# defaults: each checkout's runs get their own engine's defaults, not this one's.
GIVEN_ENVIRONMENT = dict(os.environ)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_large_duels import write_large_upload  # noqa: E402

HERE = Path(__file__).resolve().parents[1]
DEFAULT_CASES = "pokemon,tennis,g1000x500,g3000x1800,g10000x2000"


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _source(case: str, tmp: Path) -> str:
    match = re.fullmatch(r"g(\d+)x(\d+)", case)
    if match is None:
        return case
    folder = tmp / case
    if not folder.exists():
        write_large_upload(folder, int(match[1]), int(match[2]), seed=0)
    return str(folder)


def _train(code: Path, source: str, model: str, out: Path) -> dict:
    env = {**GIVEN_ENVIRONMENT, "PYTHONPATH": str(code)}
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "prefshap_core.cli", "train",
               "--quiet", "--data", source, "--model", model, "--out", str(out)]  # fmt: skip
    # cwd = the checkout: ``python -m`` puts the working directory before PYTHONPATH.
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=code)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = sum(float(re.search(rf"{kind} time \(seconds\): ([\d.]+)", done.stderr)[1])
              for kind in ("User", "System"))  # fmt: skip
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    return {"report": report, "cpu": cpu, "peak_gb": peak / 1024**2}


def _headline(report: dict) -> str:
    cv = report.get("cv")
    if cv is not None:
        return f"cv {cv['roc_auc_mean']:.4f}"
    return f"test {report['test']['roc_auc']:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, help="another checkout, run interleaved")
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument("--models", default="gpm", help="comma-separated --model values")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    codes = ([("base", args.baseline)] if args.baseline else []) + [("new", HERE)]
    import prefshap_core.malloc_tuning as tuning  # this checkout's rows; absent in old ones
    import prefshap_core.mkl_dispatch as dispatch

    print(f"MKL fast path on AMD CPUs (new rows): {dispatch.STATUS}")
    print(f"malloc thresholds (new rows): {tuning.STATUS}")
    print(f"{'case':<12} {'model':<5} {'code':<5} {'train s':>8} {'CPU s':>7} {'GB':>5} "
          f"{'chosen':<6} {'AUC':<12} {'ratio':>6}  load")  # fmt: skip
    times: dict[tuple[str, str, str], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.cases.split(","):
            source = _source(case, Path(tmp))
            for model in args.models.split(","):
                for _ in range(args.repeats):
                    for name, code in codes:
                        if name == "base" and model == "auto":
                            continue  # the baseline has no auto choice
                        run = _train(code, source, model, Path(tmp) / "model.npz")
                        report = run["report"]
                        seconds = report["seconds"]["total"]
                        key = (case, model, name)
                        times[key] = min(times.get(key, float("inf")), seconds)
                        base = times.get((case, "gpm", "base"))
                        ratio = f"{seconds / base:6.2f}" if name == "new" and base else "     -"
                        chosen = report.get("chosen_model", report["model"])
                        print(
                            f"{case:<12} {model:<5} {name:<5} {seconds:8.1f} {run['cpu']:7.1f} "
                            f"{run['peak_gb']:5.2f} {chosen:<6} {_headline(report):<12} {ratio}"
                            f"  {_load()}",
                            flush=True,
                        )
    for name, _ in codes:
        pokemon = times.get(("pokemon", "gpm", name))
        if not pokemon:
            continue
        for (case, model, who), seconds in times.items():
            if who == name and case.startswith("g"):
                print(f"{name}: {case} {model} / pokemon gpm = {seconds / pokemon:.2f}")


if __name__ == "__main__":
    main()
