"""Checks a model from another program must pass before anything is computed with it.

A file can be well-formed and still make every result NaN or infinite: lengthscales
of 1e-200 or items at 1e200 overflow the kernel's exponent, ``alpha`` of 1e308
overflows the sum, a C-GPM without contexts averages over nothing, a scale of
1e-300 turns every raw value into infinity. Such files are refused at load with a
message naming the array (the CLI exits 2), instead of hanging or printing NaN later.
Player names that are export columns are renamed (reported in ``metadata``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.data.reserved_names import rename_reserved
from prefshap_core.errors import ModelFileError
from prefshap_core.models.preference_function import PreferenceFunction

# Smallest lengthscale or column scale accepted: below it the squared distances of
# ordinary values overflow a float.
MIN_LENGTH = 1e-100
# Largest sum of |alpha| accepted: g is a sum of alpha times kernel differences in
# [-1, 1], and the explanations multiply it further.
MAX_ALPHA_SUM = 1e100


def check_model_numbers(fn: PreferenceFunction, name: str) -> None:
    """ModelFileError when ``fn``'s numbers would make its outputs NaN or infinite."""

    def fail(message: str) -> ModelFileError:
        return ModelFileError(f"{name}: {message} (see docs/model-format.md)")

    _check_lengths(fn.lengthscales, "lengthscales", fail)
    _check_lengths(fn.item_space.scale, "feature_scale", fail)
    _check_exponent(
        (fn.items, fn.centres_left, fn.centres_right),
        fn.lengthscales,
        "items",
        "lengthscales",
        fail,
    )
    with np.errstate(over="ignore"):
        alpha_sum = float(np.sum(np.abs(fn.alpha)))
    if not alpha_sum <= MAX_ALPHA_SUM:
        raise fail(f"'alpha' sums to {alpha_sum:.3g} in absolute value: g would overflow")
    if fn.kind != "cgpm":
        return
    assert fn.contexts is not None and fn.context_lengthscales is not None
    assert fn.context_space is not None and fn.context_weights is not None
    if len(fn.contexts) == 0:
        raise fail("'contexts' is empty: a C-GPM averages over its observed contexts")
    if not np.isfinite(fn.context_weights.sum()):
        raise fail("'context_weights' sum to infinity")
    _check_lengths(fn.context_lengthscales, "context_lengthscales", fail)
    _check_lengths(fn.context_space.scale, "context_scale", fail)
    assert fn.centres_context is not None
    _check_exponent(
        (fn.contexts, fn.centres_context),
        fn.context_lengthscales,
        "contexts",
        "context_lengthscales",
        fail,
    )


def _check_lengths(values: np.ndarray, key: str, fail) -> None:
    small = np.flatnonzero(np.asarray(values) < MIN_LENGTH)
    if len(small):
        raise fail(
            f"'{key}' has {values[small[0]]:.3g}, below the smallest accepted {MIN_LENGTH:g}"
        )


def _check_exponent(
    blocks: tuple[np.ndarray, ...], lengthscales: np.ndarray, what: str, key: str, fail
) -> None:
    """The kernel exponent sum_j ((a_j - b_j) / l_j)^2 is at most sum_j (range_j / l_j)^2
    over every point the model compares: that bound must be a finite number."""
    points = np.vstack([np.asarray(b, dtype=np.float64) for b in blocks if len(b)])
    if not len(points):
        return
    with np.errstate(over="ignore", invalid="ignore"):
        spread = (points.max(0) - points.min(0)) / lengthscales
        bound = float(np.sum(spread**2))
    if not np.isfinite(bound):
        raise fail(
            f"'{what}' and '{key}' overflow the kernel: the largest squared distance "
            "between points, divided by the lengthscales, is not a finite number"
        )


def rename_reserved_players(fn: PreferenceFunction) -> PreferenceFunction:
    """Player names that are export columns (or repeated) renamed ``'<name> (group)'``;
    the renames are reported in ``metadata["renamed_players"]``."""
    item_space, renamed = _renamed_space(fn.item_space)
    context_space, context_renamed = (
        _renamed_space(fn.context_space) if fn.context_space is not None else (None, {})
    )
    if not renamed and not context_renamed:
        return fn
    report = {**renamed, **{f"context {k}": v for k, v in context_renamed.items()}}
    return replace(
        fn,
        item_space=item_space,
        context_space=context_space,
        metadata={**fn.metadata, "renamed_players": report},
    )


def _renamed_space(space: FeatureSpace) -> tuple[FeatureSpace, dict[str, str]]:
    names, renamed = rename_reserved(space.group_names)
    if not renamed:
        return space, {}
    return (
        FeatureSpace(space.feature_names, names, space.feature_group, space.offset, space.scale),
        renamed,
    )
