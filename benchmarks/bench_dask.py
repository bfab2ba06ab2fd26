"""Dask benchmark (issue 13): the website case in-process and on 1 and 2 local workers,
the bytes each worker receives and returns, and a cost model for 8 / 32 / 128 workers.

    python benchmarks/bench_dask.py                                  # full website case
    python benchmarks/bench_dask.py --items 5000 --duels 20000 --centres 500   # reduced

The website case is benchmarks/bench_scale.py's: ``--items`` items with 93 one-hot
columns in 10 groups (Zipf-like categories), a random GPM of ``--centres`` centres,
``--duels`` random duels, ``--samples`` sampled coalitions (SampledShapley, two passes:
the workers send back statistics, never the coalition values). Every run is checked
to give exactly (``==``) the in-process numbers.

Cost model, calibrated on these runs, for W workers each on its own cores:

    T(W) = T_client + LPT_W(t_batch) + tasks * t_task + (W * S + R) * t_byte

``T_client``: the client's own work (boundary values, sampling, the estimator's
solve), measured in-process as total minus batch time; ``t_batch``: each batch's
compute on a worker (the 1-worker run's task stream), and ``LPT_W`` the finish time of the
longest-first schedule of those batches on W workers (batches differ: a large
coalition has more pool classes); ``S``: bytes scattered to each worker
(the game once, each duel group once, the reducers), ``R``: bytes returned (statistics);
``t_byte``: seconds per byte moved, measured by scattering and gathering a large array
on the local cluster; ``t_task``: the scheduler's overhead per task, the part of the
1-worker run that neither compute nor transfer explains. The client uploads ``S`` to
every worker (``W * S`` grows with W) and the batches are whole tasks, so the
scaling stops at ``W = tasks`` at the latest, earlier where ``W * S * t_byte``
overtakes the compute saved. On a 2-core machine 2 workers cannot beat the in-process
run, which already uses both cores through torch's threads.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so workers inherit the product's settings.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch
from bench_scale import website_problem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prefshap_core.explain import Explainer, ExplainOptions, LocalExecutor, Shapley
from prefshap_core.explain.dask_executor import close_local_cluster, local_cluster
from prefshap_core.explain.executor import coalition_slices, default_task_coalitions


class TimedLocalExecutor(LocalExecutor):
    """The in-process executor, timing each batch's values."""

    def __init__(self) -> None:
        self.batch_seconds: list[float] = []

    def map(self, work, batches, on_done=None):
        out = []
        for rows in batches:
            start = time.perf_counter()
            out.append(work(rows))
            if work.phi is None:  # a second pass reuses the first pass's values
                self.batch_seconds.append(time.perf_counter() - start)
        return out


def longest_first(seconds: np.ndarray, n_workers: int) -> float:
    """Finish time of the batches on n_workers, longest first, each to the least loaded."""
    loads = np.zeros(n_workers)
    for t in np.sort(seconds)[::-1]:
        loads[np.argmin(loads)] += t
    return float(loads.max())


def seconds_per_byte(client, n_bytes: int = 64 << 20) -> float:
    """Scatter an array to one worker and gather it back: seconds per byte moved."""
    payload = np.random.default_rng(0).random(n_bytes // 8)
    best = math.inf
    for _ in range(3):
        start = time.perf_counter()
        future = client.scatter(payload, hash=False)
        client.gather(future)
        best = min(best, time.perf_counter() - start)
        client.cancel(future)
    return best / (2 * payload.nbytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000)
    parser.add_argument("--duels", type=int, default=85_000)
    parser.add_argument("--centres", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--task-coalitions", type=int, default=None)
    parser.add_argument("--workers", default="1,2")
    args = parser.parse_args()

    fn, left, right = website_problem(args.items, args.duels, args.centres)
    base = {
        "shapley": Shapley("sampled", args.samples),
        "task_coalitions": args.task_coalitions,
    }
    threads = torch.get_num_threads()
    print(
        f"website case: {args.items} items, 93 columns in 10 groups, {args.centres} centres, "
        f"{args.duels} duels, {args.samples} sampled coalitions; torch threads {threads}; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
        f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}"
    )
    timed = TimedLocalExecutor()
    start = time.perf_counter()
    here = Explainer(fn, ExplainOptions(executor=timed, **base))(left, right)
    t_here = time.perf_counter() - start
    n_coalitions = here.meta["n_coalitions"]
    per_task = args.task_coalitions or default_task_coalitions(n_coalitions, 10)
    tasks = len(coalition_slices(n_coalitions, per_task))
    t_batch = np.array(timed.batch_seconds)
    t_client = t_here - sum(timed.batch_seconds)
    print(
        f"{here.meta['n_unique_duels']} distinct duels, {n_coalitions} coalitions, "
        f"{len(timed.batch_seconds)} batches of {per_task}; CME: {here.meta['cme']['method']}"
    )

    rows = [("in-process", t_here, 0, 0, 0, True)]
    calibration = {}
    for n_workers in [int(w) for w in args.workers.split(",")]:
        cluster, executor = local_cluster(n_workers, torch_threads=threads)
        try:
            executor.client.wait_for_workers(n_workers)
            executor.client.run(lambda: __import__("prefshap_core.explain"))  # warm imports
            from distributed import get_task_stream

            start = time.perf_counter()
            with get_task_stream(executor.client) as stream:
                there = Explainer(fn, ExplainOptions(executor=executor, **base))(left, right)
            seconds = time.perf_counter() - start
            worker_s = {"compute": 0.0, "transfer": 0.0, "deserialize": 0.0}
            value_tasks, reduce_s = [], 0.0
            for task in stream.data:
                for part in task.get("startstops", ()):
                    if part["action"] in worker_s:
                        worker_s[part["action"]] += part["stop"] - part["start"]
                    if part["action"] == "compute":
                        if "coalition-values" in str(task["key"]):
                            value_tasks.append(part["stop"] - part["start"])
                        else:
                            reduce_s += part["stop"] - part["start"]
            print(
                f"  {n_workers} worker(s), seconds summed over tasks on the workers: "
                + ", ".join(f"{k} {v:.1f}" for k, v in worker_s.items())
            )
            same = bool(
                np.array_equal(here.values, there.values)
                and np.array_equal(here.standard_errors, there.standard_errors, equal_nan=True)
            )
            if not same:
                d_phi = np.abs(here.values - there.values).max()
                d_se = np.nanmax(np.abs(here.standard_errors - there.standard_errors))
                print(f"  {n_workers} workers: max |dphi| {d_phi:.3g}, max |dse| {d_se:.3g}")
            tr = executor.transfer
            rows.append(
                (f"dask, {n_workers} worker{'s' * (n_workers > 1)}", seconds,
                 tr.scattered_bytes_per_worker, tr.returned_bytes, tr.tasks, same)
            )  # fmt: skip
            if n_workers == 1:
                calibration = {
                    "seconds": seconds,
                    "S": tr.scattered_bytes_per_worker,
                    "R": tr.returned_bytes,
                    "dask_tasks": tr.tasks,
                    "t_byte": seconds_per_byte(executor.client),
                    "worker_batches": np.array(value_tasks),
                    "worker_reduce": reduce_s,
                }
        finally:
            close_local_cluster(cluster, executor)

    print(f"\n{'run':<18}{'seconds':>9}{'MB to each worker':>19}{'MB returned':>13}"
          f"{'tasks':>7}  same numbers")  # fmt: skip
    for name, seconds, scattered, returned, n_tasks, same in rows:
        print(
            f"{name:<18}{seconds:>9.1f}{scattered / 1e6:>19.1f}{returned / 1e6:>13.2f}"
            f"{n_tasks:>7}  {'==' if same else 'DIFFERENT'}"
        )
    values_mb = n_coalitions * here.meta["n_unique_duels"] * 8 / 1e6
    print(f"(the coalition values themselves would be {values_mb:.1f} MB)")
    if not calibration:
        return
    c = calibration
    moved = c["S"] + c["R"]
    # Compute per batch as a worker runs it (the 1-worker run's task stream): workers
    # measured slower per batch than this process here (cause not isolated), and a
    # cluster's batches run on workers.
    t_batch = c["worker_batches"] if len(c["worker_batches"]) else t_batch
    t_client -= c["worker_reduce"] if len(c["worker_batches"]) else 0.0  # moved to workers
    t_client = max(0.0, t_client)
    unexplained = c["seconds"] - t_client - t_batch.sum() - c["worker_reduce"] - moved * c["t_byte"]
    t_task = max(0.0, unexplained) / max(1, c["dask_tasks"])
    print(
        f"\ncalibration: t_batch {t_batch.min():.2f} .. {t_batch.max():.2f} s "
        f"(sum {t_batch.sum():.1f} s over {len(t_batch)} batches, on the worker), "
        f"reductions {c['worker_reduce']:.1f} s, "
        f"T_client {t_client:.2f} s, t_byte {c['t_byte'] * 1e9:.2f} ns/byte "
        f"({1e-9 / c['t_byte']:.2f} GB/s); the 1-worker run left {unexplained:+.1f} s "
        f"unexplained -> t_task {t_task * 1e3:.0f} ms ({c['dask_tasks']} Dask tasks "
        "per run: values + two reductions; load noise can make it negative)"
    )
    per_dask_task = c["dask_tasks"] / tasks
    print(f"\n{'workers':>8}{'batches/worker':>16}{'compute s':>11}{'transfer s':>12}"
          f"{'total s':>9}{'speed-up':>10}")  # fmt: skip
    for w in (1, 2, 8, 32, 128):
        compute = longest_first(t_batch, w)
        transfer = (w * c["S"] + c["R"]) * c["t_byte"]
        compute += c["worker_reduce"] / min(w, tasks)
        total = t_client + compute + transfer + tasks * per_dask_task * t_task
        print(
            f"{w:>8}{math.ceil(tasks / w):>16}{compute:>11.1f}{transfer:>12.2f}"
            f"{total:>9.1f}{t_here / total:>10.2f}"
        )
    print(
        f"\nScaling stops at {tasks} workers here (one batch each); past it only the "
        f"upload of {c['S'] / 1e6:.0f} MB per worker grows. Finer batches "
        "(--task-coalitions) raise that limit and the bytes returned (statistics per "
        "batch). These 2 cores are shared: 2 local workers cannot beat the in-process "
        "run, which already uses both."
    )


if __name__ == "__main__":
    main()
