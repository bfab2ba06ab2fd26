"""Explanation requests: explain chosen duels of a dataset, or write them as explain input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.errors import DataValidationError
from prefshap_core.explain.explainer import Explainer
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.options import ExplainOptions
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress


def explain_duels(
    fn: PreferenceFunction,
    data: DuelData,
    duels: np.ndarray,
    options: ExplainOptions | None = None,
    *,
    explainer: Explainer | None = None,
    compute: Compute | None = None,
    progress: Progress | None = None,
) -> Explanation:
    """Explain duels of ``data`` (indices) with ``fn``; ids, labels and winners filled in.

    ``options.what="items"``: item feature groups (C-GPM: the context-averaged model);
    ``"context"``: a C-GPM's context groups under each duel's own context. Pass an
    ``explainer`` (of ``fn``, with these options) to reuse its kept factorizations.
    """
    duels = np.asarray(duels, dtype=np.int64)
    explainer = explainer or Explainer(fn, options, compute=compute)
    what = explainer.options.what
    contexts = None
    if what == "context":
        if not data.has_context or fn.kind != "cgpm":
            raise DataValidationError("context explanations need a C-GPM and duels with context")
        assert data.contexts is not None and data.context_index is not None
        contexts = data.contexts[data.context_index[duels]]
    expl = explainer(
        data.item_ids[data.left[duels]],
        data.item_ids[data.right[duels]],
        contexts=contexts,
        winners=data.y[duels],
        duel_ids=data.duel_ids[duels],
        progress=progress,
    )
    labels = data.labels
    return replace(
        expl,
        left_labels=np.asarray(labels[data.left[duels]]).astype(str),
        right_labels=np.asarray(labels[data.right[duels]]).astype(str),
    )


def explain_input_table(data: DuelData, duels: np.ndarray) -> pd.DataFrame:
    """Duels in ``prefshap explain --duels`` format: ``left, right, winner`` (ids), the
    model's context columns in raw units (C-GPM data), then ``duel_id``."""
    duels = np.asarray(duels, dtype=np.int64)
    ids = np.asarray(data.item_ids).astype(str)
    table = pd.DataFrame(
        {
            "left": ids[data.left[duels]],
            "right": ids[data.right[duels]],
            "winner": ids[data.winners()[duels]],
        }
    )
    if data.contexts is not None and data.context_index is not None:
        assert data.context_space is not None
        raw = data.context_space.to_raw(data.contexts[data.context_index[duels]])
        for j, name in enumerate(data.context_space.feature_names):
            table[name] = raw[:, j]
    table["duel_id"] = data.duel_ids[duels]
    return table
