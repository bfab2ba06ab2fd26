"""FALKON solvers on a K_nM operator: squared loss (CG) and logistic loss (Newton path).

The optional ``falkon`` package is reached only through
:mod:`prefshap_core.solvers.falkon_backend`, which imports it when called.
"""
