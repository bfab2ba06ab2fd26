"""The product's workflows on top of the engine: train and evaluate, explain, select.

The CLI and the dashboard are both thin clients of these functions, so a number
shown in the browser is the number ``prefshap train`` prints.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from prefshap_core import budget
from prefshap_core.compute import Compute
from prefshap_core.data.duel_data import DuelData, Split, split_duels
from prefshap_core.data.reserved_names import check_dataset_names
from prefshap_core.errors import DataValidationError
from prefshap_core.explain.cme.regulariser import LambdaSearch, choose_cme_lambda
from prefshap_core.explain.explainer import Explainer
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.options import ExplainOptions
from prefshap_core.metrics import duel_rankability
from prefshap_core.models.estimators import PreferenceModel, make_model
from prefshap_core.models.hyperparameters import DEFAULT_CONTEXT_CME_LAMBDA
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.progress import Progress, ensure_progress
from prefshap_core.solvers.options import SolverOptions


@dataclass(frozen=True)
class TrainSettings:
    """What to train; ``None`` hyperparameters are chosen automatically."""

    kind: str = "gpm"
    seed: int = 0
    n_centres: int = 2000
    lengthscales: tuple[float, ...] | None = None  # one per item column (model space)
    lengthscale_scale: float | None = None
    context_lengthscales: tuple[float, ...] | None = None  # one per context column
    penalty: float | None = None
    loss: str = "logistic"
    cme_lambda: float | None = None
    context_cme_lambda: float | None = None
    dtype: str = "float64"
    device: str = "cpu"
    backend: str = "torch"  # "falkon": the optional falkon package, if installed
    baseline: bool = True  # also fit a UPM on the same split, for comparison

    def model(
        self, kind: str | None = None, solver: SolverOptions | None = None
    ) -> PreferenceModel:
        return make_model(
            kind or self.kind,
            n_centres=self.n_centres,
            lengthscales=None if self.lengthscales is None else np.asarray(self.lengthscales),
            lengthscale_scale=self.lengthscale_scale,
            context_lengthscales=(
                None if self.context_lengthscales is None else np.asarray(self.context_lengthscales)
            ),
            penalty=self.penalty,
            loss=self.loss,
            cme_lambda=self.cme_lambda,
            context_cme_lambda=self.context_cme_lambda,
            seed=self.seed,
            backend=self.backend,
            compute=Compute(device=self.device, dtype=self.dtype),
            solver=solver,
        )


@dataclass
class TrainingResult:
    data_name: str
    settings: TrainSettings
    function: PreferenceFunction
    split: Split
    metrics: dict[str, dict[str, Any]]  # "validation" / "test" -> metric -> value
    baseline_metrics: dict[str, float] | None
    rankability: float
    rankability_items: int
    seconds: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        meta = self.function.metadata
        return {
            "dataset": self.data_name,
            "model": self.settings.kind,
            "seed": self.settings.seed,
            "n_train": len(self.split.train),
            "n_validation": len(self.split.validation),
            "n_test": len(self.split.test),
            "test": self.metrics["test"],
            "validation": self.metrics["validation"],
            "upm_test": self.baseline_metrics,
            "specr": self.rankability,
            "specr_items": self.rankability_items,
            "lengthscale_scale": meta.get("lengthscale_scale"),
            "penalty": meta.get("penalty"),
            "n_centres": len(self.function.alpha),
            "seconds": self.seconds,
        }


def train(
    data: DuelData, settings: TrainSettings, progress: Progress | None = None
) -> TrainingResult:
    """Fit the chosen model (and a UPM baseline) on the seeded 80/10/10 split."""
    start = time.perf_counter()
    progress = ensure_progress(progress)
    check_dataset_names(data.item_space, data.context_space)  # export columns stay unique
    split = split_duels(data.n_duels, settings.seed)
    with_baseline = settings.baseline and settings.kind != "upm"
    main_share = 0.7 if with_baseline else 0.95
    n_features = data.item_space.n_features + (
        data.context_space.n_features if data.context_space is not None else 0
    )
    itemsize = 4 if settings.dtype == "float32" else 8
    sizes = (len(split.train), settings.n_centres, n_features, itemsize)
    cache = budget.kernel_cache_allowance(*sizes)  # K_nM beyond it is chunked
    need = budget.training_bytes(*sizes, kernel_cache_bytes=cache)
    with budget.reserve(
        need,
        f"Training with {settings.n_centres:,} centres on {len(split.train):,} duels",
        budget.TRAIN_REDUCE,
    ):
        return _train_within_budget(
            data, settings, progress, split, with_baseline, main_share, start, cache
        )


def _train_within_budget(
    data: DuelData,
    settings: TrainSettings,
    progress: Progress,
    split: Split,
    with_baseline: bool,
    main_share: float,
    start: float,
    kernel_cache_bytes: int,
) -> TrainingResult:
    solver = SolverOptions(cache_budget_bytes=kernel_cache_bytes)
    model = settings.model(solver=solver).fit(
        data, split.train, split.validation, progress.span(0.0, main_share)
    )
    fit_seconds = model.fit_seconds_
    chosen = model.search_.chosen
    assert chosen is not None
    # Under cross-validation the validation duels were trained on: report the
    # pooled out-of-fold scores the choice was made on instead.
    validation: dict[str, Any] = (
        model.score(data, split.validation)
        if model.search_.selection == "holdout"
        else {"roc_auc": chosen.validation_auc, "log_loss": chosen.validation_log_loss}
    )
    validation["selection"] = model.search_.selection
    metrics = {"validation": validation, "test": model.score(data, split.test)}
    baseline_metrics = None
    baseline_seconds = 0.0
    if with_baseline:
        upm = settings.model("upm", solver).fit(
            data, split.train, split.validation, progress.span(main_share, 0.95)
        )
        baseline_metrics = upm.score(data, split.test)
        baseline_seconds = upm.fit_seconds_
    progress.update("Rankability (SpecR)", 0.96)
    train_y = data.y[split.train]
    winners = np.where(train_y > 0, data.left[split.train], data.right[split.train])
    losers = np.where(train_y > 0, data.right[split.train], data.left[split.train])
    specr, specr_items = duel_rankability(winners, losers, data.n_items)
    progress.update("Choosing the CME regularisers", 0.97)
    function = choose_cme_regularisers(model.function_, settings)
    function.metadata.update(
        cme_lambda=function.cme_lambda,
        test_metrics=metrics["test"],
        upm_test_metrics=baseline_metrics,
        specr=specr,
    )
    progress.update("Done", 1.0)
    return TrainingResult(
        data_name=data.name,
        settings=settings,
        function=function,
        split=split,
        metrics=metrics,
        baseline_metrics=baseline_metrics,
        rankability=specr,
        rankability_items=specr_items,
        seconds={
            "fit": fit_seconds,
            "baseline": baseline_seconds,
            "total": time.perf_counter() - start,
        },
    )


def choose_cme_regularisers(fn: PreferenceFunction, settings: TrainSettings) -> PreferenceFunction:
    """``fn`` with its explanations' CME regularisers chosen by held-out CME error.

    Values the user set in ``settings`` are kept; the model file stores the result.
    """
    search = LambdaSearch(seed=settings.seed)
    changes: dict[str, float] = {}
    if settings.cme_lambda is None:
        compute = Compute(device=settings.device, dtype=settings.dtype)
        changes["cme_lambda"] = choose_cme_lambda(
            fn.items, fn.lengthscales, fn.item_space.feature_group, search=search, compute=compute
        )
    if fn.kind == "cgpm" and settings.context_cme_lambda is None:
        assert fn.contexts is not None and fn.context_space is not None
        assert fn.context_lengthscales is not None
        changes["context_cme_lambda"] = choose_cme_lambda(
            fn.contexts,
            fn.context_lengthscales,
            fn.context_space.feature_group,
            weights=fn.context_weights,
            search=search,
            fallback=DEFAULT_CONTEXT_CME_LAMBDA,
        )
    return replace(fn, **changes) if changes else fn


# -- explanations ------------------------------------------------------------------


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


# -- selections --------------------------------------------------------------------


def sample_duels(duels: np.ndarray, max_duels: int | None, seed: int = 0) -> np.ndarray:
    """The distinct duels, capped to a seeded random sample of ``max_duels`` (sorted).

    Explaining costs grow with the number of distinct items queried; views of large
    subsets explain a reproducible sample and say so.
    """
    duels = np.unique(np.asarray(duels, dtype=np.int64))
    if max_duels is not None and len(duels) > max_duels:
        duels = np.sort(np.random.default_rng(seed).choice(duels, size=max_duels, replace=False))
    return duels


def _within(data: DuelData, within: np.ndarray | None) -> np.ndarray:
    return np.arange(data.n_duels) if within is None else np.asarray(within, dtype=np.int64)


def duels_of_item(
    data: DuelData, item_id: str, outcome: str = "all", within: np.ndarray | None = None
) -> np.ndarray:
    """Duel indices where ``item_id`` took part (``outcome``: all, wins or losses)."""
    row = data.item_index(item_id)
    idx = _within(data, within)
    left, right, y = data.left[idx], data.right[idx], data.y[idx]
    mine = (left == row) | (right == row)
    won = ((left == row) & (y > 0)) | ((right == row) & (y < 0))
    if outcome == "all":
        keep = mine
    elif outcome == "wins":
        keep = mine & won
    elif outcome == "losses":
        keep = mine & ~won
    else:
        raise ValueError(f"outcome must be all, wins or losses, got {outcome!r}")
    return idx[keep]


def group_columns(data: DuelData, max_values: int = 50) -> dict[str, list[str]]:
    """Categorical columns of the raw item table usable for "A vs B" selections."""
    if data.raw_items is None:
        return {}
    out: dict[str, list[str]] = {}
    for column in data.raw_items.columns:
        values = data.raw_items[column].dropna().astype(str)
        n_unique = values.nunique()
        numeric = pd.to_numeric(values, errors="coerce").notna().mean() > 0.8
        if 1 < n_unique <= max_values and not numeric:
            out[str(column)] = sorted(values.unique().tolist())
    return out


def _item_values(data: DuelData, column: str) -> np.ndarray:
    if data.raw_items is None or column not in data.raw_items.columns:
        raise KeyError(f"no item column {column!r}")
    return data.raw_items[column].astype(str).to_numpy()


def duels_between_groups(
    data: DuelData, column: str, value_a: str, value_b: str, within: np.ndarray | None = None
) -> np.ndarray:
    """Duels between an item with ``column == value_a`` and one with ``value_b``."""
    values = _item_values(data, column)
    idx = _within(data, within)
    vl, vr = values[data.left[idx]], values[data.right[idx]]
    keep = ((vl == value_a) & (vr == value_b)) | ((vl == value_b) & (vr == value_a))
    return idx[keep]


def context_columns(data: DuelData) -> dict[str, list[str]]:
    """Context columns of the duels table and their values (for "under context" views)."""
    if not data.has_context or data.raw_duels is None or data.context_encoding is None:
        return {}
    sources = dict.fromkeys(s for g in data.context_encoding.groups for s in g.sources)
    names = [c for c in sources if c in data.raw_duels.columns]
    return {c: sorted(data.raw_duels[c].dropna().astype(str).unique().tolist()) for c in names}


def duels_in_context(
    data: DuelData, column: str, value: str, within: np.ndarray | None = None
) -> np.ndarray:
    """Duels whose context column ``column`` equals ``value``."""
    if data.raw_duels is None or column not in data.raw_duels.columns:
        raise KeyError(f"no context column {column!r}")
    idx = _within(data, within)
    values = data.raw_duels[column].astype(str).to_numpy()
    return idx[values[idx] == str(value)]


@dataclass(frozen=True)
class ItemRecord:
    item_id: str
    label: str
    n_duels: int
    wins: int
    losses: int
    duels: pd.DataFrame  # one row per duel: duel index, opponent, result, context


def item_record(data: DuelData, item_id: str) -> ItemRecord:
    """An item's record: wins, losses and a table of its duels."""
    row = data.item_index(item_id)
    idx = duels_of_item(data, item_id)
    is_left = data.left[idx] == row
    opponent = np.where(is_left, data.right[idx], data.left[idx])
    won = np.where(is_left, data.y[idx] > 0, data.y[idx] < 0)
    table = pd.DataFrame(
        {
            "duel": idx,
            "duel_id": data.duel_ids[idx],
            "opponent_id": data.item_ids[opponent],
            "opponent": np.asarray(data.labels)[opponent],
            "result": np.where(won, "won", "lost"),
        }
    )
    if data.has_context and data.context_labels is not None and data.context_index is not None:
        table["context"] = data.context_labels[data.context_index[idx]]
    return ItemRecord(
        item_id=str(item_id),
        label=str(data.labels[row]),
        n_duels=len(idx),
        wins=int(won.sum()),
        losses=int((~won).sum()),
        duels=table,
    )


# -- fingerprints (cache keys) -------------------------------------------------------


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


def settings_fingerprint(settings: TrainSettings) -> str:
    return hashlib.sha256(json.dumps(asdict(settings), sort_keys=True).encode()).hexdigest()[:20]
