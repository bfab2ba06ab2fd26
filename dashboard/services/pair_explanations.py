"""Explaining any pair, observed or not (Head-to-head, what-if edits)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dashboard.services.explain_requests import ExplainRequest
from dashboard.services.explanation_cache import explanation_cache
from prefshap_core.explain.explanation import Explanation


def explain_pair(
    req: ExplainRequest, labels: tuple[str, str], *, ids: tuple[str, str] | None = None
) -> Explanation:
    """The explanation of an inline request's one duel (:func:`inline_request`), shown
    with ``labels`` as display names and ``ids`` as the ids. In the calling thread,
    through the cache: the same duel again (a rerun of the page) is a memory hit, and
    the kept explainer of this model and options makes each what-if edit fast."""
    assert req.inline is not None, "explain_pair takes an inline request"
    expl = explanation_cache().compute(req)
    shown_ids = ids or (str(expl.left_ids[0]), str(expl.right_ids[0]))
    return replace(
        expl,
        duel_ids=np.array(["head-to-head"]),
        left_ids=np.array([shown_ids[0]]),
        right_ids=np.array([shown_ids[1]]),
        left_labels=np.array([labels[0]]),
        right_labels=np.array([labels[1]]),
    )
