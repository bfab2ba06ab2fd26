"""Fingerprints (cache keys): stable hashes of a dataset and of training settings."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from prefshap_core.data.duel_data import DuelData
from prefshap_core.models.params import spec
from prefshap_core.workflow.settings import TrainSettings


def data_fingerprint(data: DuelData) -> str:
    """A stable hash of everything that reaches a number or a label.

    Not only what the model learns from (model-space items, duels, contexts) but
    also what turns its numbers into what a user reads: the dataset name, item ids
    and labels, duel ids, every column's raw offset and scale (the units), feature
    group and context names and memberships (the Shapley players). Two uploads equal
    in model space but with other names, units or grouping get different entries.
    """
    h = hashlib.sha256()
    _hash_part(h, "name", data.name)
    for label in ("item_ids", "items", "left", "right", "y", "duel_ids", "item_labels"):
        _hash_part(h, label, getattr(data, label))
    _hash_space(h, "items", data.item_space)
    if data.context_space is not None:
        _hash_space(h, "context", data.context_space)
    for label in ("contexts", "context_index", "context_labels"):
        _hash_part(h, label, getattr(data, label))
    if data.duel_groups is not None:  # only then: data without groups keeps its value
        _hash_part(h, "duel_groups", data.duel_groups)
    return h.hexdigest()[:20]


def _hash_space(h: Any, label: str, space: Any) -> None:
    _hash_part(h, f"{label}.feature_names", list(space.feature_names))
    _hash_part(h, f"{label}.group_names", list(space.group_names))
    for part in ("feature_group", "offset", "scale"):
        _hash_part(h, f"{label}.{part}", getattr(space, part))


def _hash_part(h: Any, label: str, value: Any) -> None:
    """Label, type and shape before the bytes, so no two parts can run together."""
    if value is None:
        h.update(f"{label}:none;".encode())
        return
    if isinstance(value, str | list):
        payload = json.dumps(value).encode()
        h.update(f"{label}:json:{len(payload)};".encode() + payload)
        return
    array = np.asarray(value)
    if array.dtype.kind == "O":  # mixed text and None: JSON
        _hash_part(h, label, [None if v is None else str(v) for v in array.ravel().tolist()])
        return
    array = np.ascontiguousarray(array)
    h.update(f"{label}:{array.dtype.str}:{array.shape};".encode())
    h.update(array.tobytes())


# The settings every fingerprint has held, at any value, since the first release. A
# parameter added since keys the cache only when set away from its default: a model
# trained before it existed (so, at its default) keeps its fingerprint and still resolves.
FINGERPRINTED_ALWAYS = frozenset(
    {
        "kind", "seed", "n_centres", "lengthscales", "lengthscale_scale", "lengthscale_scales",
        "utility_weight", "utility_weights", "refine_lengthscales", "context_lengthscales",
        "penalty", "loss", "cme_lambda", "context_cme_lambda", "dtype", "device", "backend",
        "baseline",
    }
)  # fmt: skip


def settings_fingerprint(settings: TrainSettings) -> str:
    keyed = {
        name: value
        for name, value in settings.as_dict().items()
        if name in FINGERPRINTED_ALWAYS or value != spec(name).default
    }
    return hashlib.sha256(json.dumps(keyed, sort_keys=True).encode()).hexdigest()[:20]
