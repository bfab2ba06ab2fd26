"""Pref-SHAP Studio engine: duel data, kernel preference models, Shapley explanations.

No Streamlit here: the dashboard is a client of this package like the CLI is.
"""

import os

# How OpenMP threads wait between parallel regions; read once, when torch loads its
# OpenMP runtime (libgomp), so importing this package first is what makes them count.
# Set either variable yourself to override.
# - Threads that spin for long (libgomp's default, 300,000 spins, about 7 ms here)
#   make every small torch operation many times slower when the cores are shared (a
#   busy laptop, a server with several sessions): 24 s -> 97 s for one explanation
#   at load 5.
# - Threads that sleep at once (PASSIVE alone) pay a wake-up at every region of the
#   many small products of the solvers: 2-core CPU, idle, the 10,000-duel training
#   took 13.4-14.7 s against 9.9-10.3 s with a short spin, and the exact Pokémon
#   explanation 6.5 s against 5.65 s.
# - So: passive, after 10,000 spins (about 0.25 ms). At load 5 that explanation took
#   24.3 s against 23.7 s fully passive (2026-12-05).
OPENMP_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}
for _name, _value in OPENMP_DEFAULTS.items():
    os.environ.setdefault(_name, _value)

# MKL's vectorised kernels on AMD CPUs too (2x faster GEMM, 2.5x faster Cholesky and
# triangular solves on the 2-core AMD VM); also only before torch loads. See the module.
from prefshap_core import mkl_dispatch  # noqa: E402

mkl_dispatch.enable()

# Freed multi-megabyte work arrays reused from the heap, not fresh pages from the
# kernel each time (a third of the page faults of a training). See the module.
from prefshap_core import malloc_tuning  # noqa: E402

malloc_tuning.enable()

__version__ = "0.1.0"
