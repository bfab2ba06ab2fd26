"""A C-GPM under a partly given context: some context groups fixed, the rest averaged.

``condition_on_context(fn, {"surface": "Clay"})`` is the model

    g(a, b | surface = Clay) = E_U[ g(U with surface := Clay, a, b) ]

over the observed contexts ``U`` (with their multiplicities): the fixed groups are
overwritten in every observed context and the unspecified ones keep their observed
distribution. It is again a :class:`PreferenceFunction` whose context-averaged
evaluation (no ``u``) is exactly that average, because the averaged alpha
``alpha_j * mean_i k_U(u_i, cu_j)`` is linear in the observed contexts' weights.
With every group fixed it is the model under that one context.

A group is given as ``group=category`` (categorical context groups) or as
``column=raw value`` (numeric context columns, in their own units).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from prefshap_core.models.preference_function import PreferenceFunction


def parse_context_assignments(texts: Sequence[str]) -> dict[str, str]:
    """``["surface=Clay", "indoor=Outdoor"]`` -> ``{"surface": "Clay", ...}``."""
    out: dict[str, str] = {}
    for text in texts:
        key, sep, value = str(text).partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ValueError(f"--context {text!r}: expected k=v (a context group and its value)")
        if key in out:
            raise ValueError(f"--context {key!r} given twice")
        out[key] = value
    return out


def condition_on_context(
    fn: PreferenceFunction, assignments: Mapping[str, str]
) -> PreferenceFunction:
    """The model with the given context groups fixed (see module doc); ``fn`` if none."""
    if not assignments:
        return fn
    if fn.kind != "cgpm":
        raise ValueError(f"a context needs a C-GPM model file, this one is {fn.kind!r}")
    space = fn.context_space
    assert space is not None and fn.contexts is not None
    raw = space.to_raw(fn.contexts)
    for key, value in assignments.items():
        columns, raw_values = _raw_columns(space, key, value)
        raw[:, columns] = raw_values[None, :]
    # Overwriting can merge observed contexts: merge them (with their weights summed)
    # so the conditioned model stays as small as the data allows.
    model = space.standardise(raw)
    unique, inverse = np.unique(model, axis=0, return_inverse=True)
    weights = np.bincount(inverse.reshape(-1), weights=np.asarray(fn.context_weights, float))
    metadata = {**fn.metadata, "context_condition": dict(assignments)}
    return replace(fn, contexts=unique, context_weights=weights, metadata=metadata)


def _raw_columns(space, key: str, value: str) -> tuple[np.ndarray, np.ndarray]:
    """Columns of the group or numeric column ``key`` and their raw values for ``value``."""
    names = list(space.feature_names)
    if key in space.group_names:
        columns = space.group_columns(key)
        column_names = [names[j] for j in columns]
        if column_names == [key]:  # a numeric group: one column named like it
            return columns, np.array([_number(key, value)])
        categories = [name.removeprefix(f"{key}=") for name in column_names]
        if value not in categories:
            raise ValueError(
                f"--context {key}={value}: unknown category of {key!r} "
                f"(known: {', '.join(categories)})"
            )
        return columns, (np.array(categories) == value).astype(np.float64)
    if key in names:  # a numeric column of a larger group
        return np.array([names.index(key)]), np.array([_number(key, value)])
    raise ValueError(
        f"--context {key}={value}: {key!r} is not a context group or column of this model "
        f"(groups: {', '.join(space.group_names)})"
    )


def _number(key: str, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise ValueError(
            f"--context {key}={value}: {key!r} is numeric, {value!r} is not a number"
        ) from None
    if not np.isfinite(number):
        raise ValueError(f"--context {key}={value}: not a finite number")
    return number


def categorical_context_groups(fn: PreferenceFunction) -> dict[str, list[str]]:
    """The C-GPM's categorical context groups and their categories (for pickers)."""
    if fn.kind != "cgpm" or fn.context_space is None:
        return {}
    space = fn.context_space
    out = {}
    for group in space.group_names:
        names = [space.feature_names[j] for j in space.group_columns(group)]
        if names != [group] and all(name.startswith(f"{group}=") for name in names):
            out[group] = [name.removeprefix(f"{group}=") for name in names]
    return out
