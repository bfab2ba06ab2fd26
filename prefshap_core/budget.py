"""Memory budgets: every job checks what it will need *before* allocating.

A visitor can ask for 50,000 Nyström centres, upload 200 MB of duels or an items
file with 20,000 columns; each of those used to be discovered by the operating
system's out-of-memory killer. Callers (``workflow.train``, ``workflow.explain_duels``,
the CLI, the model-file reader, the dashboard's upload step) estimate their peak from
the sizes involved and call :func:`reserve` (or :func:`check`), which refuses with a
:class:`~prefshap_core.errors.MemoryBudgetError` that says what to reduce.

Budgets (:class:`MemoryBudget`): per job 25 % and per server (all jobs of this
process together) 60 % of the machine's physical memory, unless
``PREFSHAP_MEMORY_BUDGET`` says otherwise: ``JOB`` or ``JOB,SERVER``, each a number
of bytes with an optional unit (``512M``, ``4G``, ``4GiB``) or a percentage of
physical memory (``25%``). The estimates are deliberately simple upper bounds of the
dominant arrays (documented at each function); they decide refusals, not sizes.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from prefshap_core.errors import MemoryBudgetError

if TYPE_CHECKING:
    pass

MEMORY_BUDGET_ENV = "PREFSHAP_MEMORY_BUDGET"
JOB_FRACTION = 0.25
SERVER_FRACTION = 0.60
# Bytes of memory reading and building touch per byte of CSV (strings become Python
# objects, then columns, then the model-space matrices): a 199 MB duels upload peaked
# at 8 GB (issue 14), about 40 per byte. Revisit when the reader gets leaner.
CSV_BYTES_PER_BYTE = 40
UPLOAD_REDUCE = "the size of the files (fewer duels, fewer or shorter columns)"
# The K_nM cache of the training operator (solvers.operator.DEFAULT_CACHE_BUDGET_BYTES).
_KERNEL_CACHE_BYTES = 2 * 2**30
# m x m matrices alive at the solver's peak (solvers/preconditioner.py, logistic.py):
# K_MM (kept by the operator), T = chol(K_MM + jitter I), the penalty's K_MM + jitter I,
# T T^T, A = chol(T T^T / M + lambda I), and while a Newton step refactors A its input
# and the new factor: 7. The first Cholesky (K_MM, the identity, K_MM + j I, the
# factor: 4), triangular_gram (K_MM, T, the copy, its sum, block product and
# symmetrised result: 6) and the centre Gram's gather (3 scratch) peak lower.
SOLVER_SQUARE_MATRICES = 7
# Blocks, scratch and small arrays of a training, beyond what is counted.
_TRAINING_SLACK = 64 * 2**20
_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def physical_memory_bytes() -> int:
    """The machine's physical memory (a cgroup limit, when lower, wins)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for limit_file in _cgroup_limit_files():
        with contextlib.suppress(OSError, ValueError):
            text = Path(limit_file).read_text(encoding="ascii").strip()
            if text.isdigit() and 0 < int(text) < total:
                total = int(text)
    return int(total)


def _cgroup_limit_files() -> list[str]:
    """Memory limit files of this process's cgroup and its ancestors (v2 and v1).

    The mount's root is not enough: ``systemd-run -p MemoryMax=...`` or a container
    runtime puts the limit on the process's own, nested cgroup.
    """
    files = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":  # v2: the unified hierarchy
                base, name = "/sys/fs/cgroup", "memory.max"
            elif "memory" in controllers.split(","):
                base, name = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
            else:
                continue
            parts = [p for p in path.split("/") if p and p != ".."]
            for depth in range(len(parts), 0, -1):
                files.append("/".join([base, *parts[:depth], name]))
    return files


def parse_size(text: str, physical: int | None = None) -> int:
    """``"512M"``, ``"4GiB"``, ``"2e9"``, ``"25%"`` -> bytes (ValueError if not one)."""
    value = text.strip().lower().replace(" ", "")
    if value.endswith("%"):
        share = float(value[:-1])
        if not 0 < share <= 100:
            raise ValueError(f"{MEMORY_BUDGET_ENV}: a percentage must be in (0, 100], got {text!r}")
        return int(share / 100 * (physical if physical is not None else physical_memory_bytes()))
    match = re.fullmatch(r"([0-9.e+]+)([kmgt]?)(i?b)?", value)
    if not match:
        raise ValueError(f"{MEMORY_BUDGET_ENV}: cannot read {text!r} (e.g. 4G, 512M, 25%)")
    number = float(match.group(1))
    if not number > 0:
        raise ValueError(f"{MEMORY_BUDGET_ENV}: a budget must be positive, got {text!r}")
    return int(number * _UNITS[match.group(2)])


@dataclass(frozen=True)
class MemoryBudget:
    job_bytes: int
    server_bytes: int

    @classmethod
    def from_env(cls) -> MemoryBudget:
        physical = physical_memory_bytes()
        job = int(JOB_FRACTION * physical)
        server = int(SERVER_FRACTION * physical)
        configured = os.environ.get(MEMORY_BUDGET_ENV, "").strip()
        if configured:
            parts = configured.split(",")
            job = parse_size(parts[0], physical)
            server = parse_size(parts[1], physical) if len(parts) > 1 else max(server, job)
        return cls(job_bytes=job, server_bytes=max(server, job))


def current_budget() -> MemoryBudget:
    """Read at every call: the environment may change between jobs (tests do)."""
    return MemoryBudget.from_env()


# -- estimates -------------------------------------------------------------------------
def training_bytes(
    n_train: int,
    n_centres: int,
    n_features: int,
    itemsize: int = 8,
    *,
    kernel_cache_bytes: int = _KERNEL_CACHE_BYTES,
    n_validation: int = 0,
    n_items: int = 0,
    weight_grid: bool = False,
) -> int:
    """Peak of one training, every term an array the solver path holds at once:

    * :data:`SOLVER_SQUARE_MATRICES` m x m matrices (the jittered copy and the
      identity of the Cholesky, ``T T^T`` and both factors of ``A`` included);
    * ``K_nM`` and the validation duels' ``K_vM``, each counted when its operator
      caches it (its size at most ``kernel_cache_bytes``, else it is recomputed by
      blocks). With a grid of utility weights at full size (``weight_grid``) the
      GPM term's cache, the utility term's matrix and their weighted sum (3 K_nM) and
      both terms' ``K_vM`` are alive;
    * the pair-kernel factors ``G[items, centre items]`` of each operator (two, and
      their difference; ``n_items`` rows at most): train and validation, 4 sets with
      the weight grid;
    * the duel matrices and :data:`_TRAINING_SLACK` of blocks and scratch.

    The UPM baseline runs after the main model with the same sizes: no higher peak.
    """
    n_train, n_validation = int(n_train), int(n_validation)
    m = max(0, min(int(n_centres), n_train))
    square = SOLVER_SQUARE_MATRICES * m * m * itemsize
    cache = int(kernel_cache_bytes)
    train_copies, validation_copies, factor_sets = (3, 2, 4) if weight_grid else (1, 1, 2)

    def cached(rows: int) -> int:
        size = rows * m * itemsize
        return size if size <= cache else 0

    kernels = train_copies * cached(n_train) + validation_copies * cached(n_validation)
    item_rows = min(max(0, int(n_items)), 2 * n_train)
    # a, b (and d = a - b) per operator, and the item Gram they are gathered from
    factors = (factor_sets * 3 * m + min(item_rows, 2 * m)) * item_rows * itemsize
    rows = 4 * n_train * max(1, int(n_features)) * 8
    return int(square + kernels + factors + rows + _TRAINING_SLACK)


def kernel_cache_allowance(
    n_train: int,
    n_centres: int,
    n_features: int,
    itemsize: int = 8,
    *,
    n_validation: int = 0,
    n_items: int = 0,
    weight_grid: bool = False,
) -> int:
    """How large a ``K_nM`` one training may cache within the job budget, each of its
    cached copies counted (a larger one is recomputed by blocks: slower, bounded)."""
    sizes = {"n_validation": n_validation, "n_items": n_items, "weight_grid": weight_grid}
    without = training_bytes(
        n_train, n_centres, n_features, itemsize, kernel_cache_bytes=0, **sizes
    )
    copies = (
        (3 + 2 * n_validation / max(1, n_train))
        if weight_grid
        else (1 + n_validation / max(1, n_train))
    )
    room = (current_budget().job_bytes - without) / copies
    return int(max(0, min(_KERNEL_CACHE_BYTES, room)))


def explain_bytes(
    n_duels: int,
    n_players: int,
    n_coalitions: int,
    cme_bytes: int,
    n_features: int,
) -> int:
    """Peak of one explanation: coalition masks and the Kernel-SHAP design (K x p,
    float64, about four copies: masks, Z, X, the pseudo-inverse), the coalition values
    (K x duels, held in groups of at most 2^25), the CME backend's workspace and kept
    factorizations (``cme_bytes``, from the backend), and the per-duel player data."""
    k, p = int(n_coalitions), max(1, int(n_players))
    design = 4 * k * p * 8
    values = min(k * max(1, int(n_duels)), 1 << 25) * 8 * 2
    duels = 4 * int(n_duels) * max(1, int(n_features)) * 8
    return int(design + values + int(cme_bytes) + duels)


def coalition_table_bytes(n_unique: int, n_duels: int, n_coalitions: int) -> int:
    """The whole coalition table of an exact run (interactions, other games): every
    batch's values and their stacked copy (K x distinct duels, twice), the table per
    duel (K x duels) and, for side players, its swapped copies (twice more)."""
    return (2 * int(n_unique) + 3 * int(n_duels)) * int(n_coalitions) * 8


def interaction_bytes(n_players: int, n_duels: int) -> int:
    """Pairwise interactions from a coalition table: the coefficient matrix (pairs x
    2^p) and the values (duels x pairs, with the product's transpose)."""
    pairs = n_players * (n_players - 1) // 2
    return (pairs * 2**n_players + 3 * pairs * int(n_duels)) * 8


# Side-aware contraction: per-side embeddings gathered at once (sides._MAX_GATHERED_ELEMENTS
# each for left, right, B R and the grid) bound its workspace.
_SIDE_GATHERED_ELEMENTS = 1 << 25


def side_values_bytes(n_codes: int, n_rows: int, n_queries: int, n_masks: int, n_duels: int) -> int:
    """Side-aware values of one batch: every distinct side coalition's embedding
    (centre rows x query columns, at most one column per query), the values
    (coalitions x duels) and the contraction's gathered blocks."""
    embeddings = int(n_codes) * int(n_rows) * max(1, int(n_queries)) * 8
    values = int(n_masks) * int(n_duels) * 8
    return embeddings + values + 4 * _SIDE_GATHERED_ELEMENTS * 8


# -- checking and reserving --------------------------------------------------------------
_LOCK = threading.Lock()
_RESERVED = {"bytes": 0}


def reserved_bytes() -> int:
    """Bytes reserved right now by running jobs of this process."""
    return _RESERVED["bytes"]


def check(need_bytes: int, what: str, reduce: str) -> None:
    """Refuse ``what`` if it needs more than one job's budget.

    ``reduce`` names what the user can lower, e.g. "the number of Nyström centres".
    """
    budget = current_budget()
    if need_bytes > budget.job_bytes:
        raise MemoryBudgetError(
            f"{what} would need about {_gib(need_bytes)} of memory, more than the "
            f"{_gib(budget.job_bytes)} one job may use here: reduce {reduce} "
            f"(or raise {MEMORY_BUDGET_ENV})"
        )


@contextlib.contextmanager
def reserve(need_bytes: int, what: str, reduce: str) -> Iterator[None]:
    """:func:`check`, then hold ``need_bytes`` of the server budget while the block runs.

    Refuses when the jobs already running leave too little, so that several
    visitors together cannot exhaust the machine either. An allocation that still
    fails inside the block (the machine is shared, an estimate is only an estimate)
    ends as a :class:`MemoryBudgetError` saying what to reduce, not as the
    allocator's traceback.
    """
    check(need_bytes, what, reduce)
    budget = current_budget()
    with _LOCK:
        in_use = _RESERVED["bytes"]
        if in_use + need_bytes > budget.server_bytes:
            raise MemoryBudgetError(
                f"{what} would need about {_gib(need_bytes)} of memory, but other jobs on "
                f"this server already hold {_gib(in_use)} of its {_gib(budget.server_bytes)}: "
                f"try again when they finish, or reduce {reduce}"
            )
        _RESERVED["bytes"] = in_use + need_bytes
    try:
        yield
    except MemoryBudgetError:
        raise
    except (MemoryError, RuntimeError) as exc:
        if not is_allocation_failure(exc):
            raise
        raise MemoryBudgetError(
            f"{what} ran out of memory ({_allocation_detail(exc)}) although its estimate, "
            f"about {_gib(need_bytes)}, fit the {_gib(budget.job_bytes)} one job may use: "
            f"the machine has less free memory than that (other programs?); reduce "
            f"{reduce} (or lower {MEMORY_BUDGET_ENV})"
        ) from exc
    finally:
        with _LOCK:
            _RESERVED["bytes"] -= need_bytes


# What the allocators say when they fail: torch's CPU allocator raises RuntimeError
# ("DefaultCPUAllocator: can't allocate memory: you tried to allocate ..."), its CUDA
# one torch.OutOfMemoryError (a RuntimeError), numpy and Python MemoryError.
_ALLOCATION_FAILURES = ("can't allocate memory", "cannot allocate memory", "out of memory")


def is_allocation_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is an allocator that could not get memory (not a budget refusal)."""
    if isinstance(exc, MemoryBudgetError):
        return False
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and any(f in text for f in _ALLOCATION_FAILURES)


def _allocation_detail(exc: BaseException) -> str:
    found = re.search(r"allocate (\d+) bytes", str(exc))
    if found:
        return f"an allocation of {_gib(int(found.group(1)))} failed"
    return type(exc).__name__


def _gib(n_bytes: int) -> str:
    if n_bytes >= 2**30:
        return f"{n_bytes / 2**30:.1f} GiB"
    return f"{n_bytes / 2**20:.0f} MiB"


EXPLAIN_REDUCE = "the number of duels, the coalition samples or the number of feature columns"
TRAIN_REDUCE = "the number of Nyström centres (or the number of duels)"


_M_ARENA_MAX = -8  # glibc mallopt parameter


def return_freed_memory() -> bool:
    """Give memory that finished work freed back to the system (glibc ``malloc_trim``).

    Freed blocks otherwise stay in the process's heaps, and which allocation lands where
    varies from run to run: a server's resident size then steps up by tens of MB at
    random rounds although nothing is held. Costs about a millisecond; a no-op (False)
    off glibc.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        return bool(ctypes.CDLL(name).malloc_trim(0))
    except (OSError, AttributeError):
        return False


def limit_malloc_arenas(n_arenas: int) -> bool:
    """Cap glibc's malloc arenas (a long-running server's memory, returned per round).

    glibc gives every new thread its own arena, up to 8 per core, and memory freed in
    one is rarely returned to the system: a server that runs each job in a fresh thread
    grew ~20 MB per train/explain round that way. With a few shared arenas the freed
    memory is reused. Call before the first worker thread; a no-op (False) off glibc.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        return bool(ctypes.CDLL(name).mallopt(_M_ARENA_MAX, max(1, int(n_arenas))))
    except (OSError, AttributeError):
        return False
