"""Rankings: items by model-implied mean win probability against the pool.

An item's strength here is the mean of P(item beats j) over the other items j of
the pool (a seeded random sample of ``max_opponents`` of them for large pools, the
same sample for every item), under the observed context mix and under each observed
context value (:mod:`contexts`). Beside it: the record (duels, wins, losses) and a
utility score: a UPM's f(x) (centred) when a UPM is at hand, otherwise a
Bradley-Terry maximum-likelihood score of the record (:mod:`bradley_terry`).
Nothing is trained here beyond that Bradley-Terry fit (milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from prefshap_core.analysis.bradley_terry import bradley_terry
from prefshap_core.analysis.contexts import context_slices
from prefshap_core.analysis.pairwise import preference_matrices, utility, win_probability
from prefshap_core.analysis.ranking_uncertainty import rank_intervals, utility_sd
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData
from prefshap_core.models.preference_function import PreferenceFunction

MAX_OPPONENTS = 500
UPM_SCORE = "UPM utility f(x)"
BT_SCORE = "Bradley-Terry score"


def sampled_opponents(n: int, max_opponents: int, seed: int) -> np.ndarray:
    """The opponents each item's mean win probability is taken over: all ``n`` items,
    or a seeded sorted sample of ``max_opponents`` of them (large pools)."""
    if n <= max_opponents:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_opponents, replace=False))


@dataclass(frozen=True)
class Rankings:
    # rank, item_id, item, p_mean, p_mean[<slice>]..., record, score; with a posterior
    # also p_mean_sd, rank_low, rank_high (the mix's) and score_sd (a UPM score's)
    table: pd.DataFrame
    context_columns: tuple[str, ...]  # the per-context probability columns, in order
    score_name: str  # UPM_SCORE or BT_SCORE
    n_opponents: int  # opponents each item's mean is over
    sampled: bool  # opponents are a sample of the pool


def mean_win_probability(g: np.ndarray, self_mask: np.ndarray | None) -> np.ndarray:
    """Row means of sigmoid(g), leaving out each item's duel with itself."""
    p = win_probability(g)
    if self_mask is None:
        return p.mean(axis=1)
    keep = ~self_mask
    return (p * keep).sum(axis=1) / np.maximum(keep.sum(axis=1), 1)


def rankings(
    fn: PreferenceFunction,
    data: DuelData,
    *,
    upm: PreferenceFunction | None = None,
    max_opponents: int = MAX_OPPONENTS,
    seed: int = 0,
    compute: Compute | None = None,
    uncertainty: bool = True,
) -> Rankings:
    """The ranking table of ``data``'s items under ``fn`` (trained on ``data``).

    With a posterior (and ``uncertainty``): ``p_mean_sd`` and the 90 % rank interval
    ``rank_low``..``rank_high`` from posterior draws, and ``score_sd`` beside a UPM
    score (:mod:`ranking_uncertainty`)."""
    n = len(fn.items)
    opponents = sampled_opponents(n, max_opponents, seed)
    sampled = len(opponents) < n
    self_mask = np.arange(n)[:, None] == opponents[None, :]
    slices = (
        context_slices(fn.context_space, fn.contexts, fn.context_weights)
        if fn.kind == "cgpm" and fn.context_space is not None and fn.contexts is not None
        and fn.context_weights is not None
        else []
    )  # fmt: skip
    weight_sets = [None] + [s.weights for s in slices]
    matrices = preference_matrices(fn, fn.items, fn.items[opponents], weight_sets, compute=compute)
    rows = _pool_rows_in_data(fn, data)
    table = pd.DataFrame(
        {"item_id": np.asarray(fn.item_ids).astype(str), "item": np.asarray(data.labels)[rows]}
    )
    table["p_mean"] = mean_win_probability(matrices[0], self_mask)
    context_columns = []
    for piece, g in zip(slices, matrices[1:], strict=True):
        column = f"p_mean[{piece.label}]"
        table[column] = mean_win_probability(g, self_mask)
        context_columns.append(column)
    if fn.posterior_factor is not None and uncertainty:
        drawn = rank_intervals(fn, opponents, self_mask, seed=seed, compute=compute)
        table["p_mean_sd"] = drawn.strength_sd
        table["rank_low"], table["rank_high"] = drawn.rank_low, drawn.rank_high
    wins, losses = _record(data)
    table["duels"] = (wins + losses)[rows]
    table["wins"] = wins[rows]
    table["losses"] = losses[rows]
    score_source = fn if fn.kind == "upm" else upm
    if score_source is not None:
        f = utility(score_source, score_source.items, compute)
        by_id = dict(zip(np.asarray(score_source.item_ids).astype(str), f - f.mean(), strict=True))
        table["score"] = [by_id.get(i, np.nan) for i in table["item_id"]]
        if score_source.posterior_factor is not None:
            sd = utility_sd(score_source, score_source.items, compute)
            sd_by_id = dict(zip(np.asarray(score_source.item_ids).astype(str), sd, strict=True))
            table["score_sd"] = [sd_by_id.get(i, np.nan) for i in table["item_id"]]
        score_name = UPM_SCORE
    else:
        fit = bradley_terry(data.winners(), data.losers(), data.n_items)
        table["score"] = fit.scores[rows]
        score_name = BT_SCORE
    table = table.sort_values(["p_mean", "item_id"], ascending=[False, True], kind="stable")
    table.insert(0, "rank", np.arange(1, n + 1))
    return Rankings(
        table.reset_index(drop=True), tuple(context_columns), score_name, len(opponents), sampled
    )


def _pool_rows_in_data(fn: PreferenceFunction, data: DuelData) -> np.ndarray:
    index = {str(i): k for k, i in enumerate(data.item_ids)}
    return np.array([index[str(i)] for i in fn.item_ids], dtype=np.int64)


def _record(data: DuelData) -> tuple[np.ndarray, np.ndarray]:
    """(wins, losses) per data item row."""
    n = data.n_items
    wins = np.bincount(data.winners(), minlength=n)
    losses = np.bincount(data.losers(), minlength=n)
    return wins, losses
