"""What an explanation computes and how: small frozen, validated dataclasses (falkon style).

One place holds each default. :class:`ExplainOptions` says *what* is explained
(item or context groups), exact or sampled (:class:`Shapley`: ``auto``, ``exact`` or
``sampled``; :func:`auto_exact_players` and :func:`default_samples` say what ``auto``
and an unsized sample do), and *how* the coalition embeddings are solved
(:data:`CMEOptions`: one dataclass per backend, ``AutoOptions`` choosing among them
from the problem's sizes). ``key()`` is a stable string of every field
that can change a number: caches (dashboard, disk) use it with
:data:`ENGINE_VERSION`. Executors (where the work runs) never change a number and
are excluded from it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, Literal

# Bumped by any change that alters a number an explanation returns; tests pin exact
# outputs of a fixed model (tests/engine/explain/test_engine_version.py), so an
# unbumped change fails.
ENGINE_VERSION = "3"

WHATS = ("items", "context", "sides")
SHAPLEY_MODES = ("auto", "exact", "sampled")
LANDMARK_RULES = ("rpcholesky", "uniform")
CORRECTIONS = ("diagonal", "none")
# Players up to which "auto" enumerates all coalitions, per game. The side game has
# twice the players of the item game, each side's coalitions embedded once, so it
# stays exact further.
_AUTO_EXACT_PLAYERS = {"items": 12, "context": 12, "sides": 16}
# How keys spelled "exact" before the Shapley choice had a field of its own (the
# clients passed max_exact_players=10**9): kept so cached explanations still resolve.
_EXACT_IN_KEYS = 10**9


def auto_exact_players(what: str) -> int:
    """Players up to which ``Shapley("auto")`` enumerates every coalition of a ``what``
    game; beyond, it samples :func:`default_samples` (or its ``n_samples``) coalitions."""
    if what not in _AUTO_EXACT_PLAYERS:
        raise ValueError(f"what must be one of {WHATS}, got {what!r}")
    return _AUTO_EXACT_PLAYERS[what]


def default_samples(n_players: int) -> int:
    """Coalitions sampled when not told: enough for ~1e-2 accuracy on the datasets."""
    return 2 * n_players + 2048


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class Shapley:
    """Exact or sampled Shapley values: ``auto``, ``exact`` or ``sampled(n_samples)``.

    ``"auto"``: every coalition up to :func:`auto_exact_players` players (12; 16 for
    sides), beyond that ``n_samples`` sampled ones; ``"exact"``: every coalition;
    ``"sampled"``: ``n_samples`` stratified, paired samples (all coalitions when the
    sample would hold them all). ``n_samples=None``: :func:`default_samples` of the
    number of players. Strings parse (:meth:`parse`): ``"exact"``, ``"sampled:4000"``.
    """

    mode: Literal["auto", "exact", "sampled"] = "auto"
    n_samples: int | None = None

    def __post_init__(self) -> None:
        _check(self.mode in SHAPLEY_MODES, f"shapley must be one of {SHAPLEY_MODES}")
        _check(self.n_samples is None or self.n_samples >= 2, "n_samples must be >= 2")
        _check(
            self.mode != "exact" or self.n_samples is None,
            "exact Shapley values sample nothing: drop n_samples",
        )

    @classmethod
    def parse(cls, value: Shapley | str) -> Shapley:
        """``"auto"``, ``"exact"``, ``"sampled"`` or ``"<mode>:<n_samples>"``."""
        if isinstance(value, Shapley):
            return value
        mode, _, count = str(value).partition(":")
        _check(mode in SHAPLEY_MODES, f"shapley must be one of {SHAPLEY_MODES}, got {value!r}")
        return cls(mode, int(count) if count else None)  # type: ignore[arg-type]

    def __str__(self) -> str:
        return self.mode if self.n_samples is None else f"{self.mode}:{self.n_samples}"

    def exact_up_to(self, what: str) -> float:
        """Players up to which every coalition is enumerated (``inf``: always)."""
        if self.mode == "exact":
            return math.inf
        return 0 if self.mode == "sampled" else auto_exact_players(what)

    def key_fields(self) -> dict[str, int | None]:
        """The choice as keys have spelled it (the fields it replaced), for old entries."""
        exact_up_to = {"auto": None, "exact": _EXACT_IN_KEYS, "sampled": 0}[self.mode]
        return {"max_exact_players": exact_up_to, "n_samples": self.n_samples}


@dataclass(frozen=True)
class CholeskyOptions:
    """Exact dense Cholesky of every coalition system (factors kept between calls).

    ``batch_equal_sizes``: stack systems of equal size into one batched call
    (``None``: on CUDA only, where one launch for many small systems pays).
    """

    method: ClassVar[str] = "cholesky"
    batch_equal_sizes: bool | None = None


@dataclass(frozen=True)
class CGOptions:
    """Exact to ``tol`` by batched CG with a rank-``preconditioner_rank`` Nyström preconditioner.

    ``tol``: relative residual per column (``None``: 1e-10 in float64, 1e-5 in
    float32); ``max_gram_bytes``: cache a batch's Grams up to this size, else
    recompute blocks in every product (``None``: a quarter of the free memory).
    """

    method: ClassVar[str] = "cg"
    tol: float | None = None
    max_iter: int = 100
    preconditioner_rank: int = 256
    landmarks: str = "rpcholesky"
    seed: int = 0
    max_gram_bytes: int | None = None

    def __post_init__(self) -> None:
        _check(self.tol is None or 0 < self.tol < 1, f"tol must be in (0, 1), got {self.tol}")
        _check(self.max_iter >= 1, f"max_iter must be >= 1, got {self.max_iter}")
        _check(self.preconditioner_rank >= 0, "preconditioner_rank must be >= 0")
        _check(self.landmarks in LANDMARK_RULES, f"landmarks must be one of {LANDMARK_RULES}")


@dataclass(frozen=True)
class NystromOptions:
    """Approximate CMEs through a rank-``n_landmarks`` Nyström factor (very large pools)."""

    method: ClassVar[str] = "nystrom"
    n_landmarks: int = 512
    landmarks: str = "rpcholesky"
    correction: str = "diagonal"
    seed: int = 0

    def __post_init__(self) -> None:
        _check(self.n_landmarks >= 1, f"n_landmarks must be >= 1, got {self.n_landmarks}")
        _check(self.landmarks in LANDMARK_RULES, f"landmarks must be one of {LANDMARK_RULES}")
        _check(self.correction in CORRECTIONS, f"correction must be one of {CORRECTIONS}")


@dataclass(frozen=True)
class AutoOptions:
    """Choose Cholesky, CG or Nyström from the sizes (:mod:`cme.select`), each with these.

    Nyström is taken only when the exact work would exceed ``exact_seconds_budget``
    at the device's nominal rate and Nyström is ``nystrom_min_saving`` times cheaper.
    """

    method: ClassVar[str] = "auto"
    cholesky: CholeskyOptions = field(default_factory=CholeskyOptions)
    cg: CGOptions = field(default_factory=CGOptions)
    nystrom: NystromOptions = field(default_factory=NystromOptions)
    exact_seconds_budget: float = 120.0
    nystrom_min_saving: float = 4.0


CMEOptions = CholeskyOptions | CGOptions | NystromOptions | AutoOptions
CME_METHODS: dict[str, type] = {
    "auto": AutoOptions,
    "cholesky": CholeskyOptions,
    "cg": CGOptions,
    "nystrom": NystromOptions,
}


def cme_options(method: str, **values: Any) -> CMEOptions:
    """The options dataclass of a method by name (the CLI's ``--cme-method``)."""
    if method not in CME_METHODS:
        raise ValueError(f"CME method must be one of {tuple(CME_METHODS)}, got {method!r}")
    return CME_METHODS[method](**values)


@dataclass(frozen=True)
class ExplainOptions:
    """Everything that decides the numbers of an explanation, and where it runs.

    ``what``: ``"items"`` (item feature groups; C-GPM context-averaged) or
    ``"context"`` (a C-GPM's context groups under each duel's context) or ``"sides"``
    (each side's item groups as separate players, ``left:<g>`` then ``right:<g>``).
    ``shapley``: exact or sampled (:class:`Shapley`, or a string it parses), samples
    seeded by ``seed``. ``cme``: how coalition embeddings are solved.
    ``cme_lambda``: override of the model's CME regulariser (of the context CME for
    ``what="context"``). ``coalition_batch``: coalition systems solved per batched
    call (``None``: 8 on CUDA, 1 on CPU). ``task_coalitions``: coalitions per
    executor task, rounded up to even (``None``: ``max(4p, K / 32)``,
    :func:`executor.default_task_coalitions`, one task for ``"sides"``; the same for
    every executor, so a cluster run reduces the same batches as an in-process one).
    ``factor_cache_bytes``: kept coalition factorizations per explainer (LRU).
    ``executor``: where coalition batches run (``None``: in this process).
    """

    what: Literal["items", "context", "sides"] = "items"
    shapley: Shapley = field(default_factory=Shapley)  # or a string (Shapley.parse)
    seed: int = 0
    cme: CMEOptions = field(default_factory=AutoOptions)
    cme_lambda: float | None = None
    coalition_batch: int | None = None
    task_coalitions: int | None = None
    factor_cache_bytes: int = 1 << 30
    executor: Any = field(default=None, compare=False, repr=False)
    # Also the posterior sd of every value and output (explain.uncertainty).
    uncertainty: bool = False

    # The Shapley choice is in the key as key_fields spell it, not under its own name;
    # uncertainty only when asked for (so the keys of plain explanations stay as they were).
    _NOT_IN_KEY: ClassVar[tuple[str, ...]] = (
        "executor",
        "factor_cache_bytes",
        "shapley",
        "uncertainty",
    )

    def __post_init__(self) -> None:
        _check(self.what in WHATS, f"what must be one of {WHATS}, got {self.what!r}")
        object.__setattr__(self, "shapley", Shapley.parse(self.shapley))
        _check(
            isinstance(self.cme, tuple(CME_METHODS.values())), "cme must be a CME options object"
        )
        _check(
            self.cme_lambda is None or self.cme_lambda > 0,
            f"cme_lambda must be positive, got {self.cme_lambda}",
        )
        for name in ("coalition_batch", "task_coalitions"):
            value = getattr(self, name)
            _check(value is None or value >= 1, f"{name} must be >= 1, got {value}")
        _check(self.factor_cache_bytes >= 0, "factor_cache_bytes must be >= 0")

    def exact_limit(self) -> float:
        """Players up to which every coalition is enumerated (``inf``: always)."""
        return self.shapley.exact_up_to(self.what)

    def key(self) -> str:
        """A stable string of every field that can change a number (no executor)."""
        out: dict[str, Any] = {
            f.name: getattr(self, f.name) for f in fields(self) if f.name not in self._NOT_IN_KEY
        }
        out.update(self.shapley.key_fields())
        out["cme"] = {"method": self.cme.method, **asdict(self.cme)}
        if self.uncertainty:  # only when asked: keys of earlier options stay as they were
            out["uncertainty"] = True
        return json.dumps(out, sort_keys=True, default=str)
