"""Scale benchmark (issue 5): the product's CME methods against the paper's algorithm.

    python benchmarks/bench_scale.py                          # all cases, cpu, float64
    python benchmarks/bench_scale.py --cases pokemon --repeats 3
    python benchmarks/bench_scale.py --device cuda --dtype float32   # TF32 row added

Cases (one table row per method; the paper's algorithm, benchmarks/paper_algorithm.py,
runs in the same process as the baseline of every case):

* pokemon: a GPM trained by ``workflow.train`` (cached under ``--cache-dir``), the
  first 1,000 test duels of the seed-0 split, exact over all 2^8 coalitions.
* tennis: a C-GPM trained likewise, all duels of 2017 (ids ``2017-*``); items exact
  (2^6 coalitions) and context exact (2^2), timed together and separately.
* website: synthetic e-commerce size: 20,000 items, 93 one-hot columns in 10 groups
  (Zipf-like category frequencies), 10,000 random duels, a random GPM (M = 2,000
  centres from the pool, random alpha, lengthscales = the product's default: median
  heuristic x sqrt(groups)), ``--website-samples`` paired Shapley-kernel samples.

Columns: median seconds of ``--repeats`` runs (runs over a minute run once), speed-up
over the paper's algorithm, GFLOP/s of the counted work (solves, products, factors;
not kernel exponentials) next to the GEMM rate measured here, peak memory (RSS
growth sampled every 5 ms on CPU, ``torch.cuda.max_memory_allocated`` on CUDA) and
the largest error against the exact method, relative to the largest exact value:
``phi`` = Shapley values; ``v`` = coalition values (where Shapley values cannot be
had exactly). Where the paper's algorithm cannot run in full here it is timed on a
subset (of coalitions, of duel columns, of expanded context rows) and scaled by its
cost model; the note column says how. A second table compares CG preconditioners
(iterations to a 1e-8 relative residual) and warm starts.

Seconds depend on the machine's load, printed with them (OpenMP waits: the package's
defaults, ``prefshap_core.OPENMP_DEFAULTS``).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import math
import os
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

# First, before torch loads OpenMP: the package sets how OpenMP threads wait
# (``prefshap_core.OPENMP_DEFAULTS``), so timings are the product's.
import prefshap_core  # noqa: F401

# isort: split
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paper_algorithm as paper

from prefshap_core.compute import Compute
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.explain import (
    AutoOptions,
    CGOptions,
    CholeskyOptions,
    CMEOptions,
    EngineStats,
    Explainer,
    ExplainOptions,
    NystromOptions,
    Shapley,
)
from prefshap_core.explain.cme.backends import CMEBackend, make_backend
from prefshap_core.explain.cme.cg import available_memory
from prefshap_core.explain.cme.nystrom import nystrom_factor
from prefshap_core.explain.cme.select import ProblemSizes, choose_method
from prefshap_core.explain.games.base import DuelBatch
from prefshap_core.explain.games.items import ItemGame
from prefshap_core.explain.shapley.coalitions import (
    all_coalitions,
    sample_stratified_coalitions,
)
from prefshap_core.kernels.rbf import scaled_gram as kernel
from prefshap_core.models.hyperparameters import median_lengthscales
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.solvers.cg import batched_pcg

# -- measuring -----------------------------------------------------------------------


@contextlib.contextmanager
def exact_rss() -> Iterator[None]:
    """Within the block, freed tensors leave the resident set: RSS growth = the peak.

    glibc raises its mmap threshold after large frees and then keeps freed blocks of up
    to 32 MB in the heap, so a run after another one shows no RSS growth at all. A
    fixed 128 KiB threshold returns them, at a price in page faults: only memory runs
    use it, never timed ones. Afterwards glibc is left as its dynamic rule ends up.
    """
    libc = None
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 17)  # M_MMAP_THRESHOLD
    try:
        yield
    finally:
        if libc is not None:
            libc.mallopt(-3, 32 << 20)
            libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD


class PeakMemory:
    """Peak memory growth of a block: CUDA allocator peak, or sampled RSS on CPU."""

    def __init__(self, device: str) -> None:
        self.cuda = device.startswith("cuda")
        self.peak_mb = 0.0

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def __enter__(self) -> PeakMemory:
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.start = torch.cuda.memory_allocated()
            return self
        self.start = self._rss()
        self.top = self.start
        self.running = True

        def watch() -> None:
            while self.running:
                self.top = max(self.top, self._rss())
                time.sleep(0.005)

        self.thread = threading.Thread(target=watch, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cuda:
            torch.cuda.synchronize()
            self.peak_mb = (torch.cuda.max_memory_allocated() - self.start) / 2**20
            return
        self.running = False
        self.thread.join()
        self.top = max(self.top, self._rss())
        self.peak_mb = (self.top - self.start) / 2**20


def gemm_rate(compute: Compute, n: int = 2000, repeats: int = 5) -> float:
    a = torch.randn(n, n, dtype=compute.torch_dtype, device=compute.torch_device)
    b = torch.randn(n, n, dtype=compute.torch_dtype, device=compute.torch_device)
    best = math.inf
    for _ in range(repeats + 1):
        _sync(compute)
        start = time.perf_counter()
        a @ b
        _sync(compute)
        best = min(best, time.perf_counter() - start)
    return 2.0 * n**3 / best / 1e9


def _sync(compute: Compute) -> None:
    if compute.device.startswith("cuda"):
        torch.cuda.synchronize()


@dataclass
class Run:
    seconds: float
    flops: float
    peak_mb: float
    result: object
    extra: dict = field(default_factory=dict)


def measure(fn: Callable[[EngineStats], object], compute: Compute, repeats: int) -> Run:
    """Median seconds of ``repeats`` plain runs (one if it takes over a minute), then one
    more run for memory (:func:`exact_rss`) and the counted flops."""
    times = []
    for _ in range(max(1, repeats)):
        _sync(compute)
        start = time.perf_counter()
        fn(EngineStats(device=compute.device))
        _sync(compute)
        times.append(time.perf_counter() - start)
        if times[-1] > 60:
            break
    stats = EngineStats(device=compute.device)
    with exact_rss(), PeakMemory(compute.device) as mem:
        result = fn(stats)
    return Run(
        statistics.median(times),
        sum(stats.flops.values()),
        mem.peak_mb,
        result,
        {"runs": len(times)},
    )


# -- the table -------------------------------------------------------------------------
ROWS: list[dict] = []
HEAD = (
    f"{'case':<16}{'method':<18}{'seconds':>10}{'speed-up':>10}{'GFLOP/s':>9}"
    f"{'peak MB':>10}  {'max err':<12}note"
)


def row(
    case: str,
    method: str,
    seconds: float,
    flops: float,
    peak: float,
    err: str,
    note: str = "",
    baseline: float | None = None,
) -> None:
    if baseline:
        ratio = baseline / seconds
        speed = f"{ratio:9.1f}x" if ratio < 1000 else f"{ratio:9.0f}x"
    else:
        speed = f"{'-':>10}"
    gf = f"{flops / max(seconds, 1e-9) / 1e9:9.1f}" if flops > 1e6 else f"{'-':>9}"
    line = f"{case:<16}{method:<18}{seconds:10.2f}{speed}{gf}{peak:10.0f}  {err:<12}{note}"
    ROWS.append({"line": line})
    print(line, flush=True)


def rel_err(got: np.ndarray, ref: np.ndarray, what: str) -> str:
    """Largest error relative to the largest exact value; NaNs counted, not hidden."""
    got = np.asarray(got, dtype=np.float64)
    scale = float(np.abs(ref).max()) or 1.0
    bad = ~np.isfinite(got)
    err = float(np.abs(np.where(bad, ref, got) - ref).max()) / scale
    return f"{err:.1e} {what}" + (f" {int(bad.sum())}NaN" if bad.any() else "")


# -- models and data -----------------------------------------------------------------


def trained(name: str, kind: str, cache: Path) -> PreferenceFunction:
    """The model ``workflow.train`` fits on a real dataset, cached as a model file."""
    from prefshap_core.datasets.registry import load_dataset
    from prefshap_core.models.model_file import load_model, save_model
    from prefshap_core.workflow.settings import TrainSettings
    from prefshap_core.workflow.training import train

    path = cache / f"{name}_{kind}.npz"
    if not path.exists():
        print(f"training a {kind} on {name} (cached at {path}) ...", flush=True)
        result = train(load_dataset(name), TrainSettings(kind=kind, baseline=False))
        cache.mkdir(parents=True, exist_ok=True)
        save_model(result.function, path)
    return load_model(path)


def website_problem(
    n_items: int = 20_000, n_duels: int = 10_000, n_centres: int = 2000, seed: int = 0
) -> tuple[PreferenceFunction, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    widths = [12, 11, 10, 10, 9, 9, 9, 8, 8, 7]  # 93 one-hot columns in 10 groups
    names, groups, cols = [], [], []
    for g, w in enumerate(widths):
        p = 1.0 / np.arange(1, w + 1) ** 1.1
        cols.append(np.eye(w)[rng.choice(w, n_items, p=p / p.sum())])
        groups += [g] * w
        names += [f"g{g}=c{k}" for k in range(w)]
    raw = np.hstack(cols)
    scale = np.where(raw.std(0) > 0, raw.std(0), 1.0)
    space = FeatureSpace(
        tuple(names),
        tuple(f"g{g}" for g in range(len(widths))),
        np.array(groups),
        raw.mean(0),
        scale,
    )
    items = space.standardise(raw)
    cl, cr = rng.integers(0, n_items, n_centres), rng.integers(0, n_items, n_centres)
    fn = PreferenceFunction(
        kind="gpm",
        item_space=space,
        item_ids=np.array([f"i{k}" for k in range(n_items)]),
        items=items,
        lengthscales=median_lengthscales(items) * np.sqrt(len(widths)),
        centres_left=items[cl],
        centres_right=items[cr],
        alpha=rng.normal(size=n_centres),
        cme_lambda=1e-2,
    )
    return fn, rng.integers(0, n_items, n_duels), rng.integers(0, n_items, n_duels)


# -- the paper's algorithm as baseline -----------------------------------------------


def paper_items(fn, left, right, masks, n_run: int, compute: Compute, what: str):
    """Time the paper's algorithm on ``n_run`` evenly spread coalitions; scale to all."""
    pick = np.unique(np.linspace(0, len(masks) - 1, min(n_run, len(masks))).round().astype(int))
    stats = paper.PaperStats()
    with PeakMemory(compute.device) as mem:
        start = time.perf_counter()
        values = paper.item_values(fn, left, right, masks[pick], fn.cme_lambda, compute, stats)
        seconds = time.perf_counter() - start
    setup = stats.seconds.get("preconditioner", 0.0)
    per = (seconds - setup) / len(pick)
    total = setup + per * len(masks)
    note = (
        f"{len(pick)} of {len(masks)} coalitions run, scaled"
        if len(pick) < len(masks)
        else "all coalitions"
    )
    flops = stats.flops * total / seconds
    return total, flops, mem.peak_mb, pick, values, note + f"; {what}"


def explain(fn, left, right, cme: CMEOptions, compute, stats=None, contexts=None, **options):
    """One explanation by a fresh explainer (no kept factorizations) with these CME options."""
    what = "items" if contexts is None else "context"
    explainer = Explainer(
        fn, ExplainOptions(what=what, cme=cme, **options), compute=compute, stats=stats
    )
    return explainer(left, right, contexts=contexts)


def game_values(
    fn, left, right, masks, compute: Compute, cme: CMEOptions
) -> tuple[np.ndarray, CMEBackend]:
    """(K, D) item-game ``v(S)`` for pool rows ``left``/``right``, and the backend used."""
    query, index = np.unique(np.concatenate([left, right]), return_inverse=True)
    game = ItemGame(fn, compute, fn.cme_lambda)
    backend = make_backend(cme, game.problem, len(query), len(masks), compute, 0)
    game.use(backend)
    batch = DuelBatch(fn.items[query], index[: len(left)], index[len(left) :])
    return game.bind(batch).values(masks, coalition_batch=1), backend


def exact_values(fn, left, right, masks, compute: Compute) -> np.ndarray:
    return game_values(fn, left, right, masks, compute, CholeskyOptions())[0]


# -- cases -----------------------------------------------------------------------------


def method_rows(
    case: str, run_one, compute: Compute, repeats: int, reference, baseline, methods
) -> None:
    """One row per (label, CME options, compute) of ``methods``."""
    for label, cme, comp in methods:
        tf32 = label.endswith("tf32")
        torch.backends.cuda.matmul.allow_tf32 = tf32  # TF32 only where the row says so
        run = measure(lambda st, o=cme, c=comp: run_one(o, c, st), comp, repeats)
        torch.backends.cuda.matmul.allow_tf32 = False
        expl = run.result
        err = rel_err(expl.values, reference, "phi") if reference is not None else "-"
        cme = expl.meta["cme"]
        note = cme["method"]
        if "cg" in cme:
            cg = cme["cg"]
            note += f" it<={cg['max_iterations']} res<={cg['worst_relative_residual']:.0e}"
        if "nystrom" in cme:
            note += f" m={cme['nystrom']['n_landmarks']}"
        row(case, label, run.seconds, run.flops, run.peak_mb, err, note, baseline)


def case_pokemon(args, compute: Compute) -> None:
    from prefshap_core.data.duel_data import split_duels
    from prefshap_core.datasets.registry import load_dataset

    data = load_dataset("pokemon")
    fn = trained("pokemon", "gpm", args.cache_dir)
    test = split_duels(data.n_duels, 0).test[:1000]
    left, right = data.left[test], data.right[test]
    masks = all_coalitions(fn.item_space.n_groups).masks[1:-1]
    n_base = args.baseline_coalitions or 8
    base_s, base_f, base_mb, pick, base_v, note = paper_items(
        fn, left, right, masks, n_base, compute, "10 CG its"
    )
    exact_v = exact_values(fn, left, right, masks[pick], ref64(compute))
    row("pokemon", "paper (Alg. 3)", base_s, base_f, base_mb, rel_err(base_v, exact_v, "v"), note)

    def run_one(cme, comp, stats):
        return explain(fn, left, right, cme, comp, stats)

    exact = explain(fn, left, right, CholeskyOptions(), ref64(compute)).values
    method_rows(
        "pokemon",
        run_one,
        compute,
        args.repeats,
        exact,
        base_s,
        [
            ("auto", AutoOptions(), compute),
            ("cg", CGOptions(), compute),
            ("nystrom m=256", NystromOptions(n_landmarks=256), compute),
            ("nystrom m=512", NystromOptions(n_landmarks=512), compute),
            *other_precision(compute),
        ],
    )
    convergence("pokemon", fn, left, right, compute, masks)


def other_precision(compute: Compute) -> list[tuple]:
    """float32 (and TF32 on CUDA) runs of auto; every error is against float64 exact."""
    f32 = Compute(compute.device, "float32")
    rows = [] if compute.dtype == "float32" else [("auto float32", AutoOptions(), f32)]
    if compute.device.startswith("cuda"):
        rows.append(("auto tf32", AutoOptions(), f32))
    return rows


def ref64(compute: Compute) -> Compute:
    """References are exact and float64, whatever precision is being measured."""
    return Compute(compute.device, "float64")


def case_tennis(args, compute: Compute) -> None:
    from prefshap_core.datasets.registry import load_dataset

    data = load_dataset("tennis")
    fn = trained("tennis", "cgpm", args.cache_dir)
    duels = np.flatnonzero(np.char.startswith(data.duel_ids.astype(str), "2017-"))
    left, right = data.left[duels], data.right[duels]
    contexts = data.contexts[data.context_index[duels]]
    masks = all_coalitions(fn.item_space.n_groups).masks[1:-1]
    cmasks = all_coalitions(fn.context_space.n_groups).masks[1:-1]
    n_base = args.baseline_coalitions or 2
    base_s, base_f, base_mb, pick, base_v, note = paper_items(
        fn, left, right, masks, n_base, compute, f"{len(duels)} duels"
    )
    exact_v = exact_values(fn, left, right, masks[pick], ref64(compute))
    row(
        "tennis items",
        "paper (Alg. 3)",
        base_s,
        base_f,
        base_mb,
        rel_err(base_v, exact_v, "v"),
        note,
    )
    ctx_s, ctx_f, ctx_mb, ctx_note = paper_context(
        fn, left, right, contexts, cmasks, compute, args.context_rows
    )
    row("tennis context", "paper (Alg. 3)", ctx_s, ctx_f, ctx_mb, "-", ctx_note)

    def items_one(cme, comp, stats):
        return explain(fn, left, right, cme, comp, stats)

    def context_one(cme, comp, stats):
        return explain(fn, left, right, cme, comp, stats, contexts=contexts)

    exact = explain(fn, left, right, CholeskyOptions(), ref64(compute)).values
    exact_c = explain(fn, left, right, CholeskyOptions(), ref64(compute), contexts=contexts)
    methods = [
        ("auto", AutoOptions(), compute),
        ("cg", CGOptions(), compute),
        ("nystrom m=512", NystromOptions(n_landmarks=512), compute),
        *other_precision(compute),
    ]
    method_rows("tennis items", items_one, compute, args.repeats, exact, base_s, methods)
    method_rows(
        "tennis context", context_one, compute, args.repeats, exact_c.values, ctx_s, methods
    )
    both = measure(
        lambda st: (items_one(AutoOptions(), compute, st), context_one(AutoOptions(), compute, st)),
        compute,
        args.repeats,
    )
    row(
        "tennis both",
        "auto",
        both.seconds,
        both.flops,
        both.peak_mb,
        "-",
        "items + context",
        base_s + ctx_s,
    )
    convergence("tennis", fn, left, right, compute, masks)


def paper_context(fn, left, right, contexts, masks, compute, n_rows: int):
    """The paper's context CME over expanded rows: run on ``n_rows`` of them, scaled.

    Its cost per coalition grows with the square of the rows (kernel, CG products),
    the preconditioner's with the cube; the full set (one row per training duel) needs
    an (m x m) kernel that does not fit in memory here.
    """
    m_full = int(np.round(fn.context_weights).sum())
    m_run = min(n_rows, m_full)
    stats = paper.PaperStats()
    with PeakMemory(compute.device) as mem:
        start = time.perf_counter()
        paper.context_values(
            fn, left, right, contexts, masks, fn.context_cme_lambda, compute, stats, max_rows=m_run
        )
        seconds = time.perf_counter() - start
    setup = stats.seconds.get("preconditioner", 0.0)
    ratio = m_full / m_run
    total = setup * ratio**3 + (seconds - setup) * ratio**2
    note = f"run on {m_run} of {m_full} context rows, scaled (m^2; m^3 preconditioner; est. MB)"
    return total, stats.flops * total / seconds, mem.peak_mb * ratio**2, note


def case_website(args, compute: Compute) -> None:
    fn, left, right = website_problem(args.website_items, args.website_duels)
    p = fn.item_space.n_groups
    masks = sample_stratified_coalitions(p, args.website_samples, seed=0).masks
    query = np.unique(np.concatenate([left, right]))
    n_unique = len(np.unique(fn.items, axis=0))
    n_centre_rows = len(np.unique(np.vstack([fn.centres_left, fn.centres_right]), axis=0))
    nystrom = NystromOptions(n_landmarks=args.website_landmarks)
    auto = AutoOptions(nystrom=nystrom)
    runs = [("auto", compute), *[(label, c) for label, _, c in other_precision(compute)]]
    chosen = {}
    for label, comp in runs:
        sizes = ProblemSizes(n_unique, fn.items.shape[1], n_centre_rows, len(query), len(masks))
        choice = choose_method(sizes, comp.device, comp.dtype, options=auto)
        chosen[label] = choice.method
        print(
            f"website {label}: {n_unique} distinct items, {n_centre_rows} centre rows, "
            f"{len(query)} queried items, {len(masks)} sampled coalitions -> {choice.method} "
            f"({choice.reason}); estimated s {choice.as_dict()['estimated_seconds']}",
            flush=True,
        )
    errors = website_errors(fn, left, right, masks, args, runs, chosen, nystrom)
    base_s, base_f, base_mb, base_note = paper_website(fn, left, right, masks, compute, args)
    row("website", "paper (Alg. 3)", base_s, base_f, base_mb, "-", base_note)

    def run_one(comp, stats):
        return explain(fn, left, right, auto, comp, stats, shapley=Shapley("sampled", len(masks)))

    for label, comp in runs:
        torch.backends.cuda.matmul.allow_tf32 = label.endswith("tf32")
        run = measure(lambda st, c=comp: run_one(c, st), comp, 1)
        torch.backends.cuda.matmul.allow_tf32 = False
        cme = run.result.meta["cme"]
        note = f"{cme['method']}, {len(masks)} coalitions"
        if "nystrom" in cme:
            note += f", m={cme['nystrom']['n_landmarks']}"
        note += "; err: v(S) vs exact CG on a subset, below"
        row("website", label, run.seconds, run.flops, run.peak_mb, errors[label], note, base_s)
    convergence("website", fn, left, right, compute, masks, max_rows=3000)


def website_errors(
    fn, left, right, masks, args, runs, chosen, nystrom: NystromOptions
) -> dict[str, str]:
    """v(S) of each run's method against exact CG, on a few duels, one coalition per size.

    Exact over all 64 coalitions and 10,000 duels would take hours here; the subset has
    the same pool, so each coalition's CME is the full-size one.
    """
    n = args.website_error_duels
    if n <= 0:
        return {label: "-" for label, _ in runs}
    sizes = masks.sum(1)
    pick = [int(np.flatnonzero(sizes == s)[0]) for s in sorted(set(sizes.tolist()))]
    sub = masks[pick]
    ref = Compute(runs[0][1].device, "float64")
    start = time.perf_counter()
    cg = CGOptions(max_gram_bytes=args.cg_gram_bytes)
    exact, backend = game_values(fn, left[:n], right[:n], sub, ref, cg)
    cgr = backend.report()["cg"]
    print(
        f"website exact reference: CG on {n} duels x {len(sub)} coalitions (sizes "
        f"{sizes[pick].tolist()}): {time.perf_counter() - start:.1f} s, max "
        f"{cgr['max_iterations']} iterations, worst residual "
        f"{cgr['worst_relative_residual']:.1e}",
        flush=True,
    )
    out = {}
    for label, comp in runs:
        method = chosen[label]
        torch.backends.cuda.matmul.allow_tf32 = label.endswith("tf32")
        cme = {"nystrom": nystrom, "cg": CGOptions(), "cholesky": CholeskyOptions()}[method]
        v, _ = game_values(fn, left[:n], right[:n], sub, comp, cme)
        torch.backends.cuda.matmul.allow_tf32 = False
        per_size = np.abs(v - exact).max(1) / np.abs(exact).max(1)
        print(
            f"  {label} ({method}): v(S) error / max|v| by coalition size: "
            + ", ".join(f"{s}:{e:.1e}" for s, e in zip(sizes[pick], per_size, strict=True)),
            flush=True,
        )
        out[label] = rel_err(v, exact, "v")
    return out


def paper_website(fn, left, right, masks, compute, args):
    """One coalition, a subset of duels, the real n = 20,000 systems; scaled up.

    The full run (an n x n kernel and ten n x n x 20,000 products per coalition) takes
    hours here. Setup (the explicit preconditioner) is timed once; a coalition's kernel
    build is independent of the duels, its CG and Gamma parts are linear in them.
    """
    n_run = args.website_baseline_duels
    mask = masks[np.argsort(np.abs(masks.sum(1) - masks.shape[1] / 2))[0]][None, :]
    n = len(fn.items)
    itemsize = 8 if compute.dtype == "float64" else 4
    needed = 3 * n * n * itemsize
    available = available_memory(compute.torch_device)
    stats = paper.PaperStats()
    if needed > 0.8 * available:
        rate = gemm_rate(compute) * 1e9
        flops = _paper_item_flops(n, fn.n_centres, len(left), fn.items.shape[1])
        total = (n**3 + len(masks) * flops) / rate
        return (
            total,
            0.0,
            0.0,
            f"estimated from flops at the GEMM rate (needs {needed / 2**30:.0f} GB)",
        )
    with PeakMemory(compute.device) as mem:
        paper.item_values(fn, left[:n_run], right[:n_run], mask, fn.cme_lambda, compute, stats)
    s = stats.seconds
    per_coalition = s.get("kernel", 0.0) + (s.get("cg", 0.0) + s.get("gamma", 0.0)) * (
        len(left) / n_run
    )
    total = s.get("preconditioner", 0.0) + len(masks) * per_coalition
    note = (
        f"1 coalition x {n_run} duels run ({sum(s.values()):.0f} s), scaled to "
        f"{len(masks)} x {len(left)}"
    )
    return total, 0.0, mem.peak_mb, note


def _paper_item_flops(n: int, m_c: int, d: int, k: int) -> float:
    its = paper.PAPER_MAX_ITERATIONS
    return n * n * (2 * k + 10) + its * 4.0 * n * n * 2 * d + 8.0 * m_c * n * d


# -- CG preconditioners and warm starts ------------------------------------------------


def convergence(
    case: str,
    fn,
    left,
    right,
    compute: Compute,
    masks,
    n_queries: int = 64,
    max_rows: int = 4000,
    tol: float = 1e-8,
) -> None:
    """Iterations of CG to ``tol`` on the unmerged systems over the distinct pool rows.

    Unmerged (no per-coalition classes) so that the paper's shared preconditioner, the
    Cholesky of the full-feature system, acts on the same rows as every coalition's.
    """
    rng = np.random.default_rng(0)
    rows, counts = np.unique(fn.items, axis=0, return_counts=True)
    if len(rows) > max_rows:
        keep = rng.choice(len(rows), max_rows, replace=False)
        rows, counts = rows[keep], counts[keep]
    c = Compute(compute.device, "float64")
    pts = c.tensor(rows / fn.lengthscales)
    w = c.tensor(counts.astype(float))
    ridge = fn.cme_lambda * float(counts.sum())
    root = w.sqrt()
    queries = pts[c.index(rng.choice(len(pts), min(n_queries, len(pts)), replace=False))]
    groups = fn.item_space.feature_group
    chain = _chain(masks.shape[1], rng)  # S_1 < S_2 < ...: neighbours for warm starts
    picks = [m for m in chain if 0 < m.sum() < len(m)]

    def system(mask):
        cols = c.index(np.flatnonzero(mask[groups]))
        k = kernel(pts[:, cols], pts[:, cols])
        a = root[:, None] * k * root[None, :]
        a.diagonal().add_(ridge)
        return a, root[:, None] * kernel(pts[:, cols], queries[:, cols])

    full = kernel(pts, pts)
    a_full = root[:, None] * full * root[None, :]
    a_full.diagonal().add_(ridge)
    chol_full = torch.linalg.cholesky(a_full)
    shared = nystrom_factor(pts, w, 256, seed=0).factor
    pre = {
        "none": lambda a: lambda v: v,
        "paper: full-feature Cholesky (shared)": lambda a: (
            lambda v: torch.cholesky_solve(v[0], chol_full)[None]
        ),
        "Nystrom of full Gram r=256 (shared)": lambda a: _woodbury(shared, root, ridge),
        "per coalition Nystrom r=256 rpchol": lambda a: None,
        "per coalition Nystrom r=256 uniform": lambda a: None,
    }
    results: dict[str, list[int]] = {k: [] for k in pre}
    seconds: dict[str, float] = dict.fromkeys(pre, 0.0)
    warm: list[tuple[int, int]] = []
    previous = None
    for mask in picks:
        a, b = system(mask)
        cols = c.index(np.flatnonzero(mask[groups]))
        for name, make in pre.items():
            start = time.perf_counter()
            if name.startswith("per coalition"):
                method = "uniform" if name.endswith("uniform") else "rpcholesky"
                f = nystrom_factor(pts[:, cols], w, 256, method=method, seed=0).factor
                apply_p = _woodbury(f, root, ridge)
            else:
                apply_p = make(a)
            res = batched_pcg(lambda v, a=a: a @ v, b[None], tol=tol, max_iter=500, apply_p=apply_p)
            seconds[name] += time.perf_counter() - start
            results[name].append(int(res.iterations.max()))
            if name == "per coalition Nystrom r=256 rpchol":
                cold = res
        if previous is not None:
            f = nystrom_factor(pts[:, cols], w, 256, seed=0).factor
            hot = batched_pcg(
                lambda v, a=a: a @ v,
                b[None],
                tol=tol,
                max_iter=500,
                apply_p=_woodbury(f, root, ridge),
                x0=previous,
            )
            warm.append((int(cold.iterations.max()), int(hot.iterations.max())))
        previous = cold.x
    print(
        f"\nCG to relative residual {tol:g} on {case} ({len(pts)} distinct rows, "
        f"{queries.shape[0]} query columns; coalitions of sizes "
        f"{[int(m.sum()) for m in picks]}): iterations per coalition, seconds",
        flush=True,
    )
    for name in pre:
        its = results[name]
        print(
            f"  {name:<40} median {statistics.median(its):5.0f}  max {max(its):4d}  "
            f"{seconds[name]:6.2f} s   {its}",
            flush=True,
        )
    if warm:
        print(
            f"  warm start from the neighbour S - {{i}} (rpchol preconditioner): cold "
            f"{[c0 for c0, _ in warm]} -> warm {[h for _, h in warm]}\n",
            flush=True,
        )


def _chain(p: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(p)
    out, mask = [], np.zeros(p, dtype=bool)
    for i in order:
        mask = mask.copy()
        mask[i] = True
        out.append(mask)
    return out


def _woodbury(f: torch.Tensor, root: torch.Tensor, ridge: float):
    """The product's preconditioner: (Phi Phi' + W D + c I)^-1 with Phi = W^1/2 F."""
    phi = root[:, None] * f
    missed = (1.0 - (f * f).sum(1)).clamp_min(0.0)
    lam_inv = 1.0 / (root * root * missed + ridge)
    core = phi.T @ (lam_inv[:, None] * phi)
    core.diagonal().add_(1.0)
    chol = torch.linalg.cholesky(core)

    def apply(v: torch.Tensor) -> torch.Tensor:
        lv = lam_inv[None, :, None] * v
        return lv - lam_inv[None, :, None] * (phi @ torch.cholesky_solve(phi.T @ lv[0], chol))

    return apply


# -- main ------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="pokemon,tennis,website")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=Path("/tmp/prefshap_scale"))
    parser.add_argument(
        "--baseline-coalitions",
        type=int,
        default=0,
        help="coalitions the paper's algorithm runs (default: 8 pokemon, "
        "2 tennis); the rest is scaled",
    )
    parser.add_argument(
        "--context-rows",
        type=int,
        default=4000,
        help="expanded context rows the paper's context CME runs on",
    )
    parser.add_argument("--website-samples", type=int, default=64)
    parser.add_argument("--website-items", type=int, default=20_000)
    parser.add_argument("--website-duels", type=int, default=10_000)
    parser.add_argument("--website-landmarks", type=int, default=512)
    parser.add_argument("--website-error-duels", type=int, default=30)
    parser.add_argument("--website-baseline-duels", type=int, default=50)
    parser.add_argument(
        "--cg-gram-bytes",
        type=int,
        default=4 << 30,
        help="Gram cache of the exact CG reference on the website case",
    )
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    compute = Compute(args.device, args.dtype)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device "
        f"{args.device}, dtype {args.dtype}, load {os.getloadavg()}"
    )
    print(f"measured GEMM GFLOP/s: {args.dtype} {gemm_rate(compute):.1f}", end="")
    if args.dtype == "float64":
        print(f", float32 {gemm_rate(Compute(args.device, 'float32')):.1f}", end="")
    print("\n" + HEAD, flush=True)
    cases = {"pokemon": case_pokemon, "tennis": case_tennis, "website": case_website}
    for name in args.cases.split(","):
        cases[name.strip()](args, compute)
    print(f"\nload after: {os.getloadavg()}; GEMM GFLOP/s now: {gemm_rate(compute):.1f}")
    print(HEAD)
    for r in ROWS:
        print(r["line"])


if __name__ == "__main__":
    main()
