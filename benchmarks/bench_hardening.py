"""Issue 14's attacks, before and after: outcome, seconds and peak memory of each.

    git archive <old commit> | tar -x -C /tmp/before         # the code to compare with
    python benchmarks/bench_hardening.py --before /tmp/before [--only bomb,tiny_ls]

Each attack runs in its own subprocess with its address space capped (``--cap-gib``,
default 4) and a time limit (``--timeout``, default 120 s), once with ``PYTHONPATH``
on the old tree and once on this one, so a machine shared with others never runs out
of memory. Crafted inputs (a 2 MB model file inflating to 2 GiB, a ~200 MB duels
upload, models that overflow the kernel) are generated into a temporary folder,
never committed. Seconds include importing torch (~1-7 s depending on load).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ATTACKS = ("centres50k", "cols20k", "upload199", "bomb", "tiny_ls", "huge_items", "cancel_pre",
           "cache4")  # fmt: skip

ATTACK_CODE = r"""
import json, os, resource, sys, threading, time
import numpy as np
name, folder = sys.argv[1], sys.argv[2]
t0 = time.time()

def done(outcome):
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"outcome": outcome[:150], "seconds": round(time.time() - t0, 2),
                      "peak_mb": round(peak)}), flush=True)

def workflow_api():
    # This tree has one module per workflow job; an older tree (--before) exports them
    # from the package.
    try:
        from prefshap_core.workflow import explaining, fingerprints, settings, training
    except ImportError:
        from prefshap_core import workflow
        return workflow
    from types import SimpleNamespace
    return SimpleNamespace(train=training.train, TrainSettings=settings.TrainSettings,
                           explain_duels=explaining.explain_duels,
                           data_fingerprint=fingerprints.data_fingerprint)

def duel_data(n_duels, n_items=40, n_features=2):
    from prefshap_core.data.duel_data import DuelData
    from prefshap_core.data.feature_space import FeatureSpace
    rng = np.random.default_rng(0)
    names = tuple(f"c{j}" for j in range(n_features))
    space = FeatureSpace(names, names, np.arange(n_features), np.zeros(n_features),
                         np.ones(n_features))
    left = rng.integers(0, n_items, n_duels)
    right = (left + 1 + rng.integers(0, n_items - 1, n_duels)) % n_items
    return DuelData(name="big", item_ids=np.array([f"i{k}" for k in range(n_items)]),
                    items=np.zeros((n_items, n_features)) if n_features > 100
                    else rng.normal(size=(n_items, n_features)),
                    item_space=space, left=left, right=right,
                    y=np.where(rng.random(n_duels) < 0.5, 1, -1).astype(np.int8),
                    duel_ids=np.array([str(k) for k in range(n_duels)]))

try:
    if name == "centres50k":  # the Train form's maximum on a 70,000-duel dataset
        workflow = workflow_api()
        workflow.train(duel_data(70_000), workflow.TrainSettings(
            n_centres=50_000, penalty=1.0, lengthscale_scale=1.0, cme_lambda=1e-2,
            baseline=False))
        done("trained")
    elif name == "cols20k":  # an items file with 20,000 columns, explained
        workflow = workflow_api()
        from prefshap_core.models.preference_function import PreferenceFunction
        data = duel_data(10, n_items=3, n_features=20_000)
        fn = PreferenceFunction(kind="gpm", item_space=data.item_space,
                                item_ids=data.item_ids, items=data.items,
                                lengthscales=np.ones(20_000), centres_left=data.items[:1],
                                centres_right=data.items[1:2], alpha=np.ones(1),
                                cme_lambda=0.01)
        workflow.explain_duels(fn, data, np.arange(10))
        done("explained")
    elif name == "upload199":  # what dashboard.sources.load_upload does with the bytes
        duels_bytes = open(os.path.join(folder, "big_duels.csv"), "rb").read()
        items_bytes = open(os.path.join(folder, "items.csv"), "rb").read()
        try:
            from prefshap_core import budget
            budget.check((len(duels_bytes) + len(items_bytes)) * budget.CSV_BYTES_PER_BYTE,
                         "Reading this upload", budget.UPLOAD_REDUCE)
        except ImportError:
            pass  # before: no budget
        try:
            from prefshap_core.data.build import build_duel_data
            from prefshap_core.data.csv_io import read_table
        except ImportError:  # an older tree
            from prefshap_core.data import build_duel_data, read_table
        data = build_duel_data(read_table(items_bytes, file_name="items.csv"),
                               read_table(duels_bytes, file_name="duels.csv"), name="big")
        done(f"parsed {data.n_duels} duels")
    elif name == "bomb":
        from prefshap_core.models.model_file import load_model
        load_model(os.path.join(folder, "bomb.npz"))
        done("loaded")
    elif name in ("tiny_ls", "huge_items"):
        from prefshap_core.cli import main
        code = main(["explain", "--model", os.path.join(folder, name + ".npz"),
                     "--duels", os.path.join(folder, "two_duels.csv"),
                     "--out", os.path.join(folder, "out.csv"), "--quiet"])
        done(f"exit {code}")
    elif name == "cancel_pre":  # cancel 0.5 s into a preconditioner product (M = 5000)
        import torch
        from prefshap_core.solvers.preconditioner import triangular_gram
        lower = torch.tril(torch.rand(5000, 5000, dtype=torch.float64))
        flag = threading.Event()
        threading.Timer(0.5, flag.set).start()
        start = time.time()
        try:
            from prefshap_core.progress import cancel_scope
        except ImportError:
            triangular_gram(lower)
            done(f"cannot be cancelled: ended {time.time() - start - 0.5:.1f} s after the cancel")
        else:
            try:
                with cancel_scope(flag.is_set):
                    triangular_gram(lower)
                done("finished before the cancel")
            except Exception as err:
                done(f"{type(err).__name__}: stopped {time.time() - start - 0.5:.2f} s after")
    elif name == "cache4":  # base upload + other names, units, grouping (equal in model space)
        sys.path.insert(0, os.environ["PREFSHAP_REPO"])
        sys.path.insert(0, os.path.join(os.environ["PREFSHAP_REPO"], "tests"))
        try:  # the tests by unit, or an older tree's flat tests/
            from tests.engine.test_cache_isolation import variants
        except ImportError:
            from test_hardening_cache import variants
        workflow = workflow_api()
        fps = {workflow.data_fingerprint(d) for d in variants.__wrapped__()}
        done(f"{len(fps)} distinct cache entries for 4 uploads")
except Exception as err:
    done(f"{type(err).__name__}: {err}")
"""


def make_inputs(folder: Path) -> None:
    """The crafted files (a few MB, plus one ~200 MB CSV), into ``folder``."""
    sys.path.insert(0, str(ROOT))
    from prefshap_core.models.model_file import model_arrays
    from tests.engine.models.test_model_file_limits import _function, _with

    (folder / "tiny_ls.npz").write_bytes(_with(lengthscales=np.full(4, 1e-200)))
    huge = np.full((20, 4), 1e200) * np.arange(20)[:, None]
    (folder / "huge_items.npz").write_bytes(_with(items=huge))
    (folder / "two_duels.csv").write_text("left,right\ni0,i1\ni2,i3\n")
    with zipfile.ZipFile(folder / "bomb.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        for key, value in model_arrays(_function()).items():
            payload = io.BytesIO()
            np.save(payload, value)
            archive.writestr(f"{key}.npy", payload.getvalue())
        with archive.open("junk.npy", "w", force_zip64=True) as junk:
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": "<f8", "fortran_order": False, "shape": (2**28,)}
            )
            junk.write(header.getvalue())
            for _ in range(128):
                junk.write(bytes(2**24))
    (folder / "items.csv").write_bytes((ROOT / "sample_data" / "items.csv").read_bytes())
    rng = np.random.default_rng(0)
    ids = np.array([f"c{k:02d}" for k in range(1, 61)])
    with open(folder / "big_duels.csv", "w") as out:
        out.write("left,right,winner,venue\n")
        for _ in range(11):
            a = rng.integers(0, 60, 950_000)
            b = (a + 1 + rng.integers(0, 59, len(a))) % 60
            w = np.where(rng.random(len(a)) < 0.5, a, b)
            venue = np.where(rng.random(len(a)) < 0.5, "indoor", "outdoor")
            rows = [",".join(r) for r in zip(ids[a], ids[b], ids[w], venue, strict=True)]
            out.write("\n".join(rows) + "\n")


def run(attack: str, tree: Path, folder: Path, cap: int, timeout: float) -> dict:
    cache = str(folder / f"cache-{tree.name}")
    env = dict(os.environ, PYTHONPATH=str(tree), PREFSHAP_REPO=str(ROOT),
               OMP_WAIT_POLICY="PASSIVE", PREFSHAP_CACHE_DIR=cache)  # fmt: skip
    env.pop("PREFSHAP_MEMORY_BUDGET", None)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    start = time.time()
    try:
        done = subprocess.run(
            [sys.executable, "-c", ATTACK_CODE, attack, str(folder)], env=env, cwd=folder,
            preexec_fn=limit, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        lines = done.stdout.strip().splitlines()
        if lines and lines[-1].startswith("{"):
            return json.loads(lines[-1])
        last = (done.stderr.strip().splitlines() or [""])[-1]
        return {"outcome": f"exit {done.returncode}: {last[:120]}",
                "seconds": round(time.time() - start, 1), "peak_mb": None}  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"outcome": f"still running after {timeout:.0f} s (killed)", "seconds": timeout,
                "peak_mb": None}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the code to compare with")
    parser.add_argument("--only", help="comma-separated attacks (default: all)")
    parser.add_argument("--cap-gib", type=float, default=4.0)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()
    attacks = args.only.split(",") if args.only else list(ATTACKS)
    trees = ([("before", args.before)] if args.before else []) + [("after", ROOT)]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        make_inputs(folder)
        print("| attack | code | outcome | seconds | peak MB |\n|---|---|---|---|---|")
        for attack in attacks:
            for label, tree in trees:
                r = run(attack, tree, folder, int(args.cap_gib * 2**30), args.timeout)
                peak = "—" if r["peak_mb"] is None else r["peak_mb"]
                print(
                    f"| {attack} | {label} | {r['outcome']} | {r['seconds']} | {peak} |", flush=True
                )


if __name__ == "__main__":
    main()
