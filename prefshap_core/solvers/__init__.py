"""FALKON solvers on a K_nM operator: squared loss (CG) and logistic loss (Newton path).

The optional ``falkon`` package is reached only through
:mod:`prefshap_core.solvers.falkon_backend`, which imports it when called.
"""

from prefshap_core.kernels.operator import KernelOperator
from prefshap_core.solvers.falkon import fit_squared
from prefshap_core.solvers.logistic import fit_logistic
from prefshap_core.solvers.options import SolverOptions
from prefshap_core.solvers.result import NewtonStep, SolverError, SolveResult

__all__ = [
    "KernelOperator",
    "NewtonStep",
    "SolveResult",
    "SolverError",
    "SolverOptions",
    "fit_logistic",
    "fit_squared",
]
