"""Which CME method an explanation uses: exact Cholesky, preconditioned CG, or Nyström.

``method="auto"`` estimates the floating-point work of one coalition for each
method from the problem's sizes (upper bounds: every pool row its own class) and
the device, and picks

* an **exact** method (``"cholesky"`` or ``"cg"``, whichever costs fewer flops; CG
  also when the ``r x r`` Cholesky would not fit in memory) unless that is too slow;
* **Nyström** when the exact work over all coalitions would exceed
  ``AutoOptions.exact_seconds_budget`` at the device's nominal rate *and* Nyström is
  at least ``AutoOptions.nystrom_min_saving`` times cheaper: it approximates, so it
  must buy a lot.

The flop models (per coalition, ``r`` pool classes, ``k`` columns, ``t`` centre
classes, ``q`` query classes, ``m`` landmarks, ``i`` CG iterations; ``r``, ``t``,
``q`` are bounded by the distinct pool, centre and query rows):

    gram       r^2 (k + 10)                        (10: an exp, in multiply-adds)
    cholesky   r^3/3 + min(2 r^2 t, 2 r^2 q + 2 r t q)
    cg         3 r m^2 + i (2 r^2 c + 4 r m c) + [2 r t q if c = q],  c = min(t, q)
    nystrom    3 r m^2 + 2 r t (m + k) + 2 t m q + t q k

The user forces a method by passing that method's options (``CGOptions()``, ...);
:mod:`backends` builds the chosen backend.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from prefshap_core.explain.options import AutoOptions

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
    n_landmarks: int = 512,
    cg_landmarks: int = 256,
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


@dataclass(frozen=True)
class ProblemSizes:
    """What the cost models need: distinct pool rows (an upper bound on any coalition's
    classes), model-space columns, distinct centre rows, distinct queried rows, and
    the number of coalitions to embed."""

    n_rows: int
    n_columns: int
    n_centres: int
    n_queries: int
    n_coalitions: int


def choose_method(
    sizes: ProblemSizes,
    device: str = "cpu",
    dtype: str = "float64",
    *,
    options: AutoOptions | None = None,
    memory_bytes: float | None = None,
) -> MethodChoice:
    """The method ``auto`` picks for these sizes on ``device`` (see the module docstring).

    ``memory_bytes``: the device's memory (default: measured); ``options``: the
    landmarks assumed and the budget.
    """
    n_rows, n_columns, n_centres = sizes.n_rows, sizes.n_columns, sizes.n_centres
    n_queries, n_coalitions = sizes.n_queries, sizes.n_coalitions
    options = options or AutoOptions()
    budget, saving = options.exact_seconds_budget, options.nystrom_min_saving
    flops = estimate_flops(
        n_rows,
        n_columns,
        n_centres,
        n_queries,
        options.nystrom.n_landmarks,
        options.cg.preconditioner_rank,
    )
    kind = "cuda" if device.startswith("cuda") else "cpu"
    rate = _RATES[(kind, dtype)]
    seconds = {name: n_coalitions * f / rate for name, f in flops.items()}
    memory = _device_memory(device) if memory_bytes is None else memory_bytes
    itemsize = 8 if dtype == "float64" else 4
    # The Cholesky holds the Gram and its factor (2 r^2); CG can go blockwise.
    fits = 2.0 * n_rows * n_rows * itemsize <= _MEMORY_SHARE * memory
    exact = "cholesky" if fits and flops["cholesky"] <= flops["cg"] else "cg"
    if seconds[exact] > budget and flops[exact] > saving * flops["nystrom"]:
        reason = (
            f"exact {exact} estimated at {seconds[exact]:.0f} s > {budget:.0f} s "
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
