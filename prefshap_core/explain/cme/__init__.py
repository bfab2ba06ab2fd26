"""Conditional mean embeddings over coalitions and the backends that solve them.

``base`` (the problem, the solver seam, bookkeeping), ``classes`` (rows a coalition
cannot tell apart), ``embedding`` (exact: Cholesky or CG), ``nystrom`` (low rank),
``cg`` (batched preconditioned CG solver), ``cache`` (kept factorizations),
``select`` (which method ``auto`` picks), ``backends`` (the seam: options -> backend),
``regulariser`` (choosing ``lam`` by held-out CME error).
"""
