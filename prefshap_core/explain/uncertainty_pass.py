"""The sds of exact values from the explanation's own pass (no second CME solve).

:func:`uncertainty.exact_value_sd` embeds every coalition again; solving the CMEs is
most of an explanation's cost, so an in-process run instead watches the embeddings
the values are computed from. :class:`SdTracker` wraps the game (to learn which
duel group each bound universe belongs to) and its embedding (to see each
coalition's ``Gamma``), and accumulates ``Phi = sum_S A[:, S] beta_S`` per duel
group from them (the same brackets as ``exact_value_sd``, so the same numbers up
to the order of the sums). The game itself is untouched: the wrappers delegate.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from prefshap_core.compute import Compute
from prefshap_core.explain.games.base import DuelBatch
from prefshap_core.explain.shapley.coalitions import bits_from_masks
from prefshap_core.explain.shapley.exact import exact_shapley_matrix
from prefshap_core.explain.shapley.stratified import SampledCoalitions
from prefshap_core.explain.uncertainty import (
    BRACKETS,
    ValueSD,
    exact_value_sd,
    output_sd_of,
    sampled_shapley_map,
    value_sd_of,
)

_FLUSH_ELEMENTS = 1 << 24  # brackets buffered before one GEMM into Phi


class _WatchedEmbedding:
    def __init__(self, inner: Any, tracker: SdTracker) -> None:
        self._inner, self._tracker = inner, tracker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def gammas(self, masks: np.ndarray, universe: Any) -> list[Any]:
        out = self._inner.gammas(masks, universe)
        self._tracker.seen(masks, universe, out)
        return out


class _WatchedGame:
    def __init__(self, inner: Any, tracker: SdTracker) -> None:
        self._inner, self._tracker = inner, tracker

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def bind(self, batch: DuelBatch) -> Any:
        bound = self._inner.bind(batch)
        self._tracker.bound(bound.universe, batch)
        return bound


class _Group:
    """Phi (p, M, duels) of one duel group, filled as its coalitions are embedded.

    The coalitions' brackets are written into a buffer of ``slots`` coalitions and
    added to Phi by one GEMM when it is full.
    """

    def __init__(self, tracker: SdTracker, batch: DuelBatch) -> None:
        self.brackets = BRACKETS[tracker.game.what](tracker.game, batch)
        self.rows = np.arange(batch.n_duels)
        m = tracker.game.fn.n_centres
        c = tracker.compute
        size = batch.n_duels * m
        self.phi = torch.zeros((tracker.matrix.shape[0], size), dtype=c.torch_dtype,
                               device=c.torch_device)  # fmt: skip
        self.slots = max(1, min(64, _FLUSH_ELEMENTS // max(1, size)))
        self.buffer = torch.empty((self.slots, m, batch.n_duels), dtype=c.torch_dtype,
                                  device=c.torch_device)  # fmt: skip
        self.codes: list[int] = []


class SdTracker:
    """Collects the sds of an exact item or context explanation from its own pass."""

    def __init__(self, game: Any, compute: Compute, n_players: int) -> None:
        self.game, self.compute = game, compute
        self.matrix = compute.tensor(exact_shapley_matrix(n_players))
        self.n_players = n_players
        self._groups: dict[int, _Group] = {}
        self._order: list[_Group] = []
        self._keep: list[Any] = []

    def watch(self) -> _WatchedGame:
        """The game to run the pass with (its embedding watched until :meth:`finish`)."""
        self._embedding = self.game.embedding
        self.game.embedding = _WatchedEmbedding(self._embedding, self)
        return _WatchedGame(self.game, self)

    def bound(self, universe: Any, batch: DuelBatch) -> None:
        group = _Group(self, batch)
        self._groups[id(universe)] = group
        self._order.append(group)
        self._keep.append(universe)  # ids stay unique while the universes are kept

    def seen(self, masks: np.ndarray, universe: Any, gammas: list[Any]) -> None:
        group = self._groups.get(id(universe))
        if group is None:  # not a pass of this explanation
            return
        codes = bits_from_masks(np.asarray(masks, dtype=bool)).tolist()
        for start in range(0, len(gammas), group.slots):
            chunk = gammas[start : start + group.slots]
            if len(group.codes) + len(chunk) > group.slots:
                self._flush(group)
            used = len(group.codes)
            group.brackets.from_gammas(chunk, group.rows, group.buffer[used : used + len(chunk)])
            group.codes.extend(codes[start : start + len(chunk)])

    def _flush(self, group: _Group) -> None:
        if not group.codes:
            return
        k = len(group.codes)
        columns = self.matrix[:, self.compute.index(np.asarray(group.codes))]
        group.phi.addmm_(columns, group.buffer[:k].reshape(k, -1))
        group.codes = []

    def finish(self, n_duels: int) -> ValueSD | None:
        """Restore the game's embedding; the sds of the distinct duels, in group order.

        None when the pass bound no game for some duels (one player: no proper
        coalition to embed); the caller then computes them from the boundaries.
        """
        self.game.embedding = self._embedding
        if sum(len(g.rows) for g in self._order) != n_duels:
            self._keep = []
            return None
        fn, c = self.game.fn, self.compute
        factor = c.tensor(fn.require_posterior())
        m, p, full_code = fn.n_centres, self.matrix.shape[0], 2**self.n_players - 1
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for group in self._order:
            self._flush(group)
            empty, full = group.brackets.boundary(group.rows)
            phi = group.phi.reshape(p, m, len(group.rows))
            phi += self.matrix[:, 0, None, None] * empty.T[None] + (
                self.matrix[:, full_code, None, None] * full.T[None]
            )
            sd = value_sd_of(phi, factor)
            parts.append((sd, output_sd_of(full, factor), output_sd_of(empty, factor)))
        self._keep = []
        values, outputs, bases = (np.concatenate(x) for x in zip(*parts, strict=True))
        return ValueSD(values, outputs, bases)


def start_tracking(explainer: Any, coalitions: Any) -> SdTracker | None:
    """A tracker watching ``explainer``'s game for this call (exact items / context in
    this process), or None where :func:`explanation_sds` makes its own pass."""
    from prefshap_core.explain.shapley.coalitions import CoalitionSet

    explainer.function.require_posterior()
    if not isinstance(coalitions, CoalitionSet):
        return None  # sampled: explanation_sds embeds the sampled coalitions again
    if explainer.options.executor is not None or explainer.options.what == "sides":
        return None  # exact_value_sd embeds the coalitions again
    tracker = SdTracker(explainer._game, explainer.compute, coalitions.n_players)
    explainer._game = tracker.watch()
    return tracker


def explanation_sds(
    explainer: Any, canon: Any, coalitions: Any, watched: ValueSD | None
) -> dict[str, np.ndarray]:
    """The Explanation's sd fields per input duel (sds have no sign; a swapped side
    duel exchanges its sides' players)."""
    game = explainer._game
    if isinstance(coalitions, SampledCoalitions):
        masks, linear_map = sampled_shapley_map(coalitions)
        sd = exact_value_sd(game, canon.batch, masks, explainer.compute, linear_map)
    else:
        sd = watched or exact_value_sd(game, canon.batch, coalitions.masks, explainer.compute)
    values = sd.values[canon.inverse]
    swap = getattr(game, "side_swap", None)
    if swap is not None:
        flip = canon.sign < 0
        values[flip] = values[flip][:, swap]
    return {
        "sd": values,
        "output_sd": sd.outputs[canon.inverse],
        "base_value_sd": sd.base_values[canon.inverse],
    }
