"""How long a job will take, roughly: small ones (``jobs.SMALL_JOB_S``) get the small lane.

An explanation's estimate is the engine's own cost model (``explain.cme.select``:
flops per coalition of each CME method at the device's nominal rate, the cheapest
method) times the coalitions the Shapley choice enumerates or samples, times
:data:`SLOWDOWN` for a machine busier than nominal. It ignores the explainer's kept
factorizations, so it only errs towards "heavy".
"""

from __future__ import annotations

from dashboard.services.explain_requests import ExplainRequest
from prefshap_core.explain.cme.select import ProblemSizes, choose_method
from prefshap_core.explain.options import auto_exact_players, default_samples

# Measured on a shared 2-core host: explanations ran 2-3x below the nominal rate.
SLOWDOWN = 3.0


def n_players(req: ExplainRequest) -> int:
    """The players of the request's game: item groups, context groups, or both sides'."""
    data = req.loaded.data
    if req.what == "context":
        return data.context_space.n_groups if data.context_space is not None else 1
    groups = data.item_space.n_groups
    return 2 * groups if req.what == "sides" else groups


def n_coalitions(req: ExplainRequest) -> int:
    players = n_players(req)
    shapley = req.options.shapley
    everyone = 2**players
    if shapley.mode == "exact" or (
        shapley.mode == "auto" and players <= auto_exact_players(req.what)
    ):
        return everyone
    return min(everyone, shapley.n_samples or default_samples(players))


def explain_estimate_s(req: ExplainRequest) -> float:
    """Seconds the request's explanation should take here (an upper-side guess)."""
    data = req.loaded.data
    if req.what == "context" and data.contexts is not None:
        rows, columns = data.contexts.shape
    else:
        rows, columns = data.items.shape
    queries = min(rows, 2 * req.n_duels)
    sizes = ProblemSizes(rows, columns, req.model.function.n_centres, queries, n_coalitions(req))
    choice = choose_method(sizes, memory_bytes=float(2**34))  # the memory does not matter here
    return SLOWDOWN * min(choice.seconds.values())
