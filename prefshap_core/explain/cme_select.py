"""Which CME method an explanation uses: exact Cholesky, preconditioned CG, or Nyström.

``method="auto"`` estimates the floating-point work of one coalition for each
method from the problem's sizes (upper bounds: every pool row its own class) and
the device, and picks

* an **exact** method (``"cholesky"`` or ``"cg"``, whichever costs fewer flops; CG
  also when the ``r x r`` Cholesky would not fit in memory) unless that is too slow;
* **Nyström** when the exact work over all coalitions would exceed
  :data:`EXACT_SECONDS_BUDGET` at the device's nominal rate *and* Nyström is at
  least :data:`NYSTROM_MIN_SAVING` times cheaper: it approximates, so it must buy
  a lot.

The flop models (per coalition, ``r`` pool classes, ``k`` columns, ``t`` centre
classes, ``q`` query classes, ``m`` landmarks, ``i`` CG iterations; ``r``, ``t``,
``q`` are bounded by the distinct pool, centre and query rows):

    gram       r^2 (k + 10)                        (10: an exp, in multiply-adds)
    cholesky   r^3/3 + min(2 r^2 t, 2 r^2 q + 2 r t q)
    cg         3 r m^2 + i (2 r^2 c + 4 r m c) + [2 r t q if c = q],  c = min(t, q)
    nystrom    3 r m^2 + 2 r t (m + k) + 2 t m q + t q k

The user forces a method with ``method=``; :class:`CMEPlan` then builds the
embeddings and solver, and collects their report for ``Explanation.meta["cme"]``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.explain.cme import CholeskySolver, CMESolver, CoalitionEmbedding
from prefshap_core.explain.cme_cg import DEFAULT_CG_LANDMARKS, CGSolver
from prefshap_core.explain.cme_nystrom import (
    DEFAULT_LANDMARKS,
    NystromEmbedding,
    NystromReport,
)

METHODS = ("auto", "cholesky", "cg", "nystrom")
# Exact work per explanation, at the nominal rate, that auto accepts before it
# trades exactness for Nyström's speed.
EXACT_SECONDS_BUDGET = 120.0
NYSTROM_MIN_SAVING = 4.0
# CG iterations assumed by the cost model (Nyström-preconditioned: measured 5-30).
CG_ITERATIONS_ESTIMATE = 15
# Nominal sustained flop rates (GEMM-like work) per device and precision: only the
# ratios between methods and the order of magnitude of the budget matter.
_RATES = {
    ("cpu", "float64"): 3e10,
    ("cpu", "float32"): 6e10,
    ("cuda", "float64"): 3e13,
    ("cuda", "float32"): 1e14,
}
# Share of the device's memory one coalition's dense r x r matrices may take.
_MEMORY_SHARE = 0.25
_OPTIONS: dict[str, set[str]] = {
    "cholesky": set(),
    "cg": {"tol", "max_iter", "n_landmarks", "landmarks", "seed", "max_gram_bytes"},
    "nystrom": {"n_landmarks", "landmarks", "correction", "seed"},
}


def _device_memory(device: str) -> float:
    if device.startswith("cuda"):
        return float(torch.cuda.mem_get_info(torch.device(device))[1])
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8e9


@dataclass(frozen=True)
class MethodChoice:
    method: str
    reason: str
    flops: dict[str, float]  # per coalition, each method
    seconds: dict[str, float]  # all coalitions, at the nominal rate

    def as_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "reason": self.reason,
            "estimated_seconds": {k: float(f"{v:.3g}") for k, v in self.seconds.items()},
        }


def estimate_flops(
    n_rows: int,
    n_columns: int,
    n_centres: int,
    n_queries: int,
    n_landmarks: int = DEFAULT_LANDMARKS,
    cg_landmarks: int = DEFAULT_CG_LANDMARKS,
) -> dict[str, float]:
    """Per-coalition flops of each method (see the module docstring)."""
    r, k, t, q = (float(max(1, v)) for v in (n_rows, n_columns, n_centres, n_queries))
    m, mc = min(float(n_landmarks), r), min(float(cg_landmarks), r)
    gram = r * r * (k + 10.0)
    by_centres = 2 * r * r * t
    by_queries = 2 * r * r * q + 2 * r * t * q
    c = min(t, q)
    cg_finish = 2 * r * t * q if q <= t else 0.0
    return {
        "cholesky": gram + r**3 / 3 + min(by_centres, by_queries),
        "cg": gram
        + 3 * r * mc * mc
        + CG_ITERATIONS_ESTIMATE * (2 * r * r * c + 4 * r * mc * c)
        + cg_finish,
        "nystrom": 3 * r * m * m + 2 * r * t * (m + k) + 2 * t * m * q + t * q * k,
    }


def choose_method(
    n_rows: int,
    n_columns: int,
    n_centres: int,
    n_queries: int,
    n_coalitions: int,
    device: str = "cpu",
    dtype: str = "float64",
    *,
    n_landmarks: int = DEFAULT_LANDMARKS,
    memory_bytes: float | None = None,
) -> MethodChoice:
    """The method ``auto`` picks for these sizes on ``device`` (see the module docstring).

    ``n_rows``: distinct pool rows (an upper bound on any coalition's classes);
    ``n_columns``: model-space columns; ``n_centres``: distinct centre rows;
    ``n_queries``: distinct queried rows; ``memory_bytes``: the device's memory
    (default: measured).
    """
    flops = estimate_flops(n_rows, n_columns, n_centres, n_queries, n_landmarks)
    kind = "cuda" if device.startswith("cuda") else "cpu"
    rate = _RATES[(kind, dtype)]
    seconds = {name: n_coalitions * f / rate for name, f in flops.items()}
    memory = _device_memory(device) if memory_bytes is None else memory_bytes
    itemsize = 8 if dtype == "float64" else 4
    # The Cholesky holds the Gram and its factor (2 r^2); CG can go blockwise.
    fits = 2.0 * n_rows * n_rows * itemsize <= _MEMORY_SHARE * memory
    exact = "cholesky" if fits and flops["cholesky"] <= flops["cg"] else "cg"
    if seconds[exact] > EXACT_SECONDS_BUDGET and (
        flops[exact] > NYSTROM_MIN_SAVING * flops["nystrom"]
    ):
        reason = (
            f"exact {exact} estimated at {seconds[exact]:.0f} s > {EXACT_SECONDS_BUDGET:.0f} s "
            f"and {flops[exact] / flops['nystrom']:.0f}x the Nyström work"
        )
        return MethodChoice("nystrom", reason, flops, seconds)
    if exact == "cg":
        reason = (
            "the r x r Cholesky would not fit in memory"
            if not fits
            else f"CG needs {flops['cholesky'] / flops['cg']:.1f}x fewer flops than Cholesky"
        )
    else:
        reason = "exact Cholesky is the cheapest"
    return MethodChoice(exact, reason, flops, seconds)


@dataclass
class CMEPlan:
    """A chosen method, its options, the objects that carry it out, and their report.

    ``options`` go to the solver / embedding: CG ``tol``, ``max_iter``,
    ``n_landmarks`` (preconditioner rank), ``landmarks``, ``seed``,
    ``max_gram_bytes``; Nyström ``n_landmarks``, ``landmarks``, ``correction``,
    ``seed``; none for Cholesky.
    """

    method: str
    choice: MethodChoice | None = None
    options: dict[str, Any] = field(default_factory=dict)
    solver: CMESolver | None = None
    nystrom_report: NystromReport | None = None

    def __post_init__(self) -> None:
        if self.solver is None and self.method not in METHODS[1:]:
            raise ValueError(f"CME method must be one of {METHODS}, got {self.method!r}")
        unknown = set(self.options) - _OPTIONS.get(self.method, set())
        if unknown and self.solver is None:
            raise ValueError(
                f"CME options {sorted(unknown)} do not apply to method {self.method!r} "
                f"(it takes {sorted(_OPTIONS[self.method]) or 'none'})"
            )
        if self.method == "cg" and self.solver is None:
            self.solver = CGSolver(**self.options)
        elif self.method == "cholesky" and self.solver is None:
            self.solver = CholeskySolver()
        elif self.method == "nystrom":
            self.nystrom_report = NystromReport(
                int(self.options.get("n_landmarks", DEFAULT_LANDMARKS)),
                str(self.options.get("landmarks", "rpcholesky")),
            )

    def embedding(self, **kwargs: Any) -> CoalitionEmbedding:
        """A :class:`CoalitionEmbedding` (keywords as its) that uses this plan's method."""
        if self.method == "nystrom":
            kwargs.pop("solver", None)
            return NystromEmbedding(**kwargs, report=self.nystrom_report, **self.options)
        kwargs["solver"] = kwargs.get("solver") or self.solver
        return CoalitionEmbedding(**kwargs)

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"method": self.method}
        if self.choice is not None:
            out.update(self.choice.as_dict())
            out["method"] = self.method
        if isinstance(self.solver, CGSolver):
            out["cg"] = self.solver.report.as_dict()
        if self.nystrom_report is not None:
            out["nystrom"] = self.nystrom_report.as_dict()
        return out


def plan_cme(
    method: str,
    pool: np.ndarray,
    n_centre_rows: int,
    n_queries: int,
    n_coalitions: int,
    compute: Compute,
    options: dict[str, Any] | None = None,
    solver: CMESolver | None = None,
) -> CMEPlan:
    """Resolve ``method`` (``"auto"`` included) for a pool and build its :class:`CMEPlan`.

    An explicit ``solver`` (the engine's older seam) means an exact solve with it.
    """
    options = dict(options or {})
    if method not in METHODS:
        raise ValueError(f"CME method must be one of {METHODS}, got {method!r}")
    if solver is not None:
        if method not in ("auto", "cholesky", "cg"):
            raise ValueError(f"a solver was given, which excludes method={method!r}")
        label = getattr(solver, "name", "cholesky") if method == "auto" else method
        return CMEPlan(label, None, options, solver)
    choice = None
    if method == "auto":
        n_rows = len(np.unique(np.asarray(pool, dtype=np.float64), axis=0))
        choice = choose_method(
            n_rows,
            np.shape(pool)[1],
            n_centre_rows,
            n_queries,
            n_coalitions,
            compute.device,
            compute.dtype,
            n_landmarks=int(options.get("n_landmarks", DEFAULT_LANDMARKS)),
        )
        method = choice.method
        # Options name what to do *if* a method is used; drop the others.
        options = {k: v for k, v in options.items() if k in _OPTIONS[method]}
    return CMEPlan(method, choice, options)
