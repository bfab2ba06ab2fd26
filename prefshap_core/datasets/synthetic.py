"""Synthetic duel data with a known mechanism: the paper's Sec. 4 clusters and App. B GPM.

Each generator draws from its own seeded stream (``default_rng([seed, k])``), apart
from the stream ``build_duel_data`` uses for the orientation coin, so the coin never
correlates with the features.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.data.build import build_duel_data
from prefshap_core.data.duel_data import DuelData

CLUSTERS = ("A", "B", "C")
CLUSTER_FEATURES = ("x0", "x_AB", "x_AC", "x_BC")
_CLUSTERS_STREAM, _GPM_STREAM = 1, 2


@dataclass(frozen=True)
class GPMTruth:
    """The GPM behind :func:`gpm_generated`: ``g`` per duel (source order) and its terms.

    ``g = sum_j alpha_j [k(x_cl_j, x_l) k(x_cr_j, x_r) - k(x_cl_j, x_r) k(x_cr_j, x_l)]``
    with ``k`` the RBF on the first ``n_relevant`` raw features, lengthscale ``sqrt(0.1)``.
    """

    g: np.ndarray  # (n_duels,)
    centre_left: np.ndarray  # item rows
    centre_right: np.ndarray
    alpha: np.ndarray


def synthetic_clusters(
    n_items: int = 1000, n_duels: int = 40000, seed: int = 0, missing_indicators: bool = True
) -> DuelData:
    """The clusters game of the paper's Sec. 4 (the paper, Sec. 4; docs/method.md).

    Items: ``[x0, x_AB, x_AC, x_BC] ~ N(0, I_4)`` and a cluster uniform in {A, B, C}
    as its one-hot columns ``cluster_A, cluster_B, cluster_C``: three binary
    features, each its own player, as in the paper (Table 2: 4 continuous and 3
    binary features), which is what its finding "x0 is the most important feature"
    refers to. Duels between random distinct pairs: from different clusters X, Y the
    higher ``x_XY`` wins; from the same cluster the higher ``x0`` wins. ``raw_items``
    keeps the ``cluster`` label column for "A vs B" selections; it is not a feature.
    """
    items, duels = synthetic_clusters_tables(n_items, n_duels, seed)
    indicators = [f"cluster_{c}" for c in CLUSTERS]
    for name, cluster in zip(indicators, CLUSTERS, strict=True):
        items[name] = (items["cluster"] == cluster).astype(np.int64)
    return build_duel_data(
        items,
        duels,
        name="synthetic",
        item_columns=[*CLUSTER_FEATURES, *indicators],
        numeric=[*CLUSTER_FEATURES, *indicators],
        context_columns=[],
        seed=seed,
        missing_indicators=missing_indicators,
        items_file="synthetic items",
        duels_file="synthetic duels",
    )


def synthetic_clusters_tables(
    n_items: int = 1000, n_duels: int = 40000, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The raw items and duels tables behind :func:`synthetic_clusters` (upload format)."""
    if n_items < 2 or n_duels < 1:
        raise ValueError("need at least 2 items and 1 duel")
    rng = np.random.default_rng([seed, _CLUSTERS_STREAM])
    features = rng.standard_normal((n_items, len(CLUSTER_FEATURES)))
    cluster = rng.integers(len(CLUSTERS), size=n_items)
    left, right = _distinct_pairs(rng, n_items, n_duels)
    # With A=0, B=1, C=2 the column of x_XY is X + Y: AB -> 1, AC -> 2, BC -> 3.
    deciding = np.where(cluster[left] == cluster[right], 0, cluster[left] + cluster[right])
    left_wins = features[left, deciding] > features[right, deciding]

    ids = np.array([f"s{i:04d}" for i in range(n_items)])
    items = pd.DataFrame(features, columns=list(CLUSTER_FEATURES))
    items.insert(0, "id", ids)
    items["cluster"] = np.array(CLUSTERS)[cluster]
    duels = pd.DataFrame(
        {"left": ids[left], "right": ids[right], "winner": ids[np.where(left_wins, left, right)]}
    )
    return items, duels


def gpm_generated(
    n_items: int = 300,
    n_duels: int = 6000,
    d: int = 10,
    n_relevant: int = 2,
    seed: int = 0,
    logit_scale: float = 3.0,
    missing_indicators: bool = True,
) -> DuelData:
    """Duels drawn from a random GPM on the first ``n_relevant`` features (paper App. B).

    Items ``x ~ N(0, 0.1 I_d)``; ``g`` is a random expansion over 20 random item
    pairs of the GPM kernel (ARD RBF on the relevant features only, lengthscale
    ``sqrt(0.1)``, the features' standard deviation), scaled so that its standard
    deviation over the duels is ``logit_scale`` (3: outcomes clearly learnable);
    ``y ~ Bernoulli(sigmoid(g))``. The other ``d - n_relevant`` features are noise.
    """
    items, duels, _ = gpm_generated_tables(n_items, n_duels, d, n_relevant, seed, logit_scale)
    return build_duel_data(
        items,
        duels,
        name="gpm_synthetic",
        numeric=[c for c in items.columns if c != "id"],
        context_columns=[],
        seed=seed,
        missing_indicators=missing_indicators,
        items_file="gpm items",
        duels_file="gpm duels",
    )


def gpm_generated_tables(
    n_items: int = 300,
    n_duels: int = 6000,
    d: int = 10,
    n_relevant: int = 2,
    seed: int = 0,
    logit_scale: float = 3.0,
) -> tuple[pd.DataFrame, pd.DataFrame, GPMTruth]:
    """Items and duels tables of :func:`gpm_generated`, and the GPM that drew the outcomes."""
    if not 1 <= n_relevant <= d or n_items < 2 or n_duels < 1:
        raise ValueError("need 1 <= n_relevant <= d, at least 2 items and 1 duel")
    rng = np.random.default_rng([seed, _GPM_STREAM])
    x = rng.normal(0.0, np.sqrt(0.1), size=(n_items, d))
    centre_left, centre_right = _distinct_pairs(rng, n_items, 20)
    alpha = rng.standard_normal(20)
    left, right = _distinct_pairs(rng, n_items, n_duels)

    relevant = x[:, :n_relevant] / np.sqrt(0.1)
    gram = np.exp(-0.5 * ((relevant[:, None, :] - relevant[None, :, :]) ** 2).sum(-1))
    pair = (
        gram[centre_left][:, left] * gram[centre_right][:, right]
        - gram[centre_left][:, right] * gram[centre_right][:, left]
    )
    alpha *= logit_scale / max(float((alpha @ pair).std()), 1e-12)
    g = alpha @ pair
    left_wins = rng.random(n_duels) < 1.0 / (1.0 + np.exp(-g))

    ids = np.array([f"g{i:03d}" for i in range(n_items)])
    items = pd.DataFrame(x, columns=[f"x{j + 1}" for j in range(d)])
    items.insert(0, "id", ids)
    duels = pd.DataFrame({"left": ids[left], "right": ids[right], "y": np.where(left_wins, 1, -1)})
    return items, duels, GPMTruth(g, centre_left, centre_right, alpha)


def _distinct_pairs(
    rng: np.random.Generator, n_items: int, n_pairs: int
) -> tuple[np.ndarray, np.ndarray]:
    """Uniform random ordered pairs of distinct items."""
    first = rng.integers(n_items, size=n_pairs)
    second = (first + rng.integers(1, n_items, size=n_pairs)) % n_items
    return first, second
