"""The product's workflows on top of the engine: train and evaluate, explain, select.

The CLI and the dashboard are both thin clients of these functions, so a number
shown in the browser is the number ``prefshap train`` prints.
"""

from __future__ import annotations

import hashlib
import json
import re
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
from prefshap_core.models.hyperparameters import CV_FOLDS, DEFAULT_CONTEXT_CME_LAMBDA
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
    lengthscale_scales: tuple[float, ...] | None = None  # the scales to search (else automatic)
    utility_weight: float | None = None  # GPM / C-GPM sum kernel weight (0: plain GPM)
    utility_weights: tuple[float, ...] | None = None  # the weights to search (else automatic)
    refine_lengthscales: bool = True  # per-group lengthscale search (models.refine)
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
        grid = {} if self.utility_weights is None else {"utility_weights": self.utility_weights}
        return make_model(
            kind or self.kind,
            **grid,
            lengthscale_scales=self.lengthscale_scales,
            utility_weight=None if (kind or self.kind) == "upm" else self.utility_weight,
            refine_lengthscales=self.refine_lengthscales,
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
    # Small data (test split < SMALL_TEST duels): K-fold CV ROC AUC over all duels.
    cv: dict[str, Any] | None = None

    def summary(self) -> str:
        """Exactly which duels trained, tuned and tested the model (and the CV, if any)."""
        selection = self.metrics["validation"].get("selection", "holdout")
        n_train, n_val = len(self.split.train), len(self.split.validation)
        if selection == "holdout":
            tuned = f"hyperparameters chosen on the {n_val} validation duels"
            trained = f"trained on the {n_train} training duels"
        else:
            tuned = (
                f"hyperparameters chosen by {selection} over the {n_train + n_val} "
                "training + validation duels"
            )
            trained = f"then refitted on all {n_train + n_val} of them"
        text = f"{tuned}, {trained}; tested on the {len(self.split.test)} held-out test duels"
        if self.cv is not None:
            text += (
                f". The test split is small, so the ROC AUC is also given as the mean +- sd "
                f"over {self.cv['folds']} folds of all {self.cv['n_duels']} duels (each fold "
                "tested on a model trained on the other folds, at the hyperparameters "
                "chosen above)"
            )
        return text

    # The UPM fitted beside a GPM/C-GPM for comparison (its f(x) ranks items).
    baseline_function: PreferenceFunction | None = None

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
            "utility_weight": meta.get("utility_weight"),
            "lengthscale_factors": meta.get("lengthscale_factors"),
            "context_lengthscale_factors": meta.get("context_lengthscale_factors"),
            "n_centres": len(self.function.alpha),
            **({} if self.cv is None else {"cv": {k: self.cv[k] for k in _CV_KEYS}}),
            "summary": self.summary(),
            "seconds": self.seconds,
        }


LARGE_DUELS = 500_000  # from here on, say before training that it will take a while


def expected_training_minutes(n_duels: int) -> float:
    """A rough training time on a small CPU: measured ~2.5 min per million duels (2 cores,
    benchmarks/bench_large_upload.py); enough to warn, not a promise."""
    return 2.5 * n_duels / 1_000_000


SMALL_TEST = 200  # fewer test duels than this: ROC AUC also as K-fold CV over all duels
_CV_KEYS = ("roc_auc_mean", "roc_auc_sd", "folds")


def cross_validated_auc(
    data: DuelData, settings: TrainSettings, progress: Progress | None = None
) -> dict[str, Any]:
    """ROC AUC of each of K seeded folds of all duels, from a model fit on the others.

    Each fold's model is trained on the other folds only, so no fold's score has seen
    its duels in training; ``settings`` should fix the hyperparameters (``train``
    passes the ones it chose), else each fold tunes its own on its training part.
    Ties are left out of each fold's AUC; a fold without both outcomes is skipped.
    """
    progress = ensure_progress(progress)
    order = np.random.default_rng([settings.seed, 3]).permutation(data.n_duels)
    folds = [np.sort(f) for f in np.array_split(order, min(CV_FOLDS, data.n_duels))]
    aucs = []
    for k, fold in enumerate(folds):
        rest = np.setdiff1d(order, fold)
        inner = np.random.default_rng([settings.seed, 4, k]).permutation(rest)
        n_val = max(1, len(rest) // 9)
        model = settings.model().fit(
            data, np.sort(inner[n_val:]), np.sort(inner[:n_val]),
            progress.span(k / len(folds), (k + 1) / len(folds)),
        )  # fmt: skip
        auc = model.score(data, fold)["roc_auc"]
        if np.isfinite(auc):
            aucs.append(float(auc))
    return {
        "roc_auc_mean": float(np.mean(aucs)) if aucs else float("nan"),
        "roc_auc_sd": float(np.std(aucs, ddof=1)) if len(aucs) > 1 else float("nan"),
        "folds": len(aucs),
        "fold_roc_auc": aucs,
        "n_duels": data.n_duels,
    }


def train(
    data: DuelData, settings: TrainSettings, progress: Progress | None = None
) -> TrainingResult:
    """Fit the chosen model (and a UPM baseline) on the seeded 80/10/10 split.

    When the test split is small (< ``SMALL_TEST`` duels), the ROC AUC is also
    estimated by K-fold cross-validation over all duels (``TrainingResult.cv``).
    """
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
    small = len(split.test) < SMALL_TEST
    outer = progress
    if small:  # the CV fits are K more small fits: they get the second half of the bar
        progress, cv_progress = outer.span(0.0, 0.5), outer.span(0.5, 0.95)
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
    baseline_function = None
    if with_baseline:
        upm = settings.model("upm", solver).fit(
            data, split.train, split.validation, progress.span(main_share, 0.95)
        )
        baseline_metrics = upm.score(data, split.test)
        baseline_seconds = upm.fit_seconds_
        baseline_function = upm.function_
    cv = None
    if small:
        # The chosen lengthscales themselves (refined groups included), as fixed ones.
        context_ls = model.context_lengthscales_
        chosen_point = replace(
            settings,
            lengthscales=tuple(model.lengthscales_),
            lengthscale_scale=None,
            lengthscale_scales=None,
            context_lengthscales=None if context_ls is None else tuple(context_ls),
            penalty=chosen.penalty,
            utility_weight=None if settings.kind == "upm" else chosen.utility_weight,
            baseline=False,
        )
        cv = cross_validated_auc(data, chosen_point, cv_progress)
    outer.update("Rankability (SpecR)", 0.96)
    decided = data.decided(split.train)  # ties have no winner: not in the dominance graph
    winners, losers = data.winners()[decided], data.losers()[decided]
    specr, specr_items = duel_rankability(winners, losers, data.n_items)
    outer.update("Choosing the CME regularisers", 0.97)
    function = choose_cme_regularisers(model.function_, settings)
    function.metadata.update(
        cme_lambda=function.cme_lambda,
        test_metrics=metrics["test"],
        upm_test_metrics=baseline_metrics,
        specr=specr,
    )
    outer.update("Done", 1.0)
    return TrainingResult(
        data_name=data.name,
        settings=settings,
        function=function,
        split=split,
        metrics=metrics,
        baseline_metrics=baseline_metrics,
        rankability=specr,
        rankability_items=specr_items,
        cv=cv,
        seconds={
            "fit": fit_seconds,
            "baseline": baseline_seconds,
            "total": time.perf_counter() - start,
        },
        baseline_function=baseline_function,
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
    data: DuelData,
    item_id: str,
    outcome: str = "all",
    within: np.ndarray | None = None,
    opponent: str | None = None,
) -> np.ndarray:
    """Duel indices where ``item_id`` took part (``outcome``: all, wins, losses or ties),
    against ``opponent`` only when given."""
    row = data.item_index(item_id)
    idx = _within(data, within)
    left, right, y = data.left[idx], data.right[idx], data.y[idx]
    mine = (left == row) | (right == row)
    if opponent is not None:
        other = data.item_index(opponent)
        mine &= (left == other) | (right == other)
    won = ((left == row) & (y > 0)) | ((right == row) & (y < 0))
    if outcome == "all":
        keep = mine
    elif outcome == "wins":
        keep = mine & won
    elif outcome == "losses":
        keep = mine & ~won & (y != 0)
    elif outcome == "ties":
        keep = mine & (y == 0)
    else:
        raise ValueError(f"outcome must be all, wins, losses or ties, got {outcome!r}")
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


def numeric_item_columns(data: DuelData) -> list[str]:
    """Numeric columns of the raw item table (for range selections like Speed > 100):
    those the model reads as numbers, with more than two distinct values."""
    if data.raw_items is None:
        return []
    spec_numeric = {
        name
        for g, name in enumerate(data.item_space.group_names)
        if len(data.item_space.group_columns(g)) == 1
        and data.item_space.feature_names[data.item_space.group_columns(g)[0]] == name
    }
    out = []
    for column in data.raw_items.columns:
        if str(column) not in spec_numeric:
            continue
        numbers = pd.to_numeric(data.raw_items[column], errors="coerce")
        if numbers.notna().all() and numbers.nunique() > 2:
            out.append(str(column))
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
    ties: int = 0

    @property
    def wlt(self) -> str:
        """The record as wins-losses-ties, e.g. ``"12-7-3"``."""
        return f"{self.wins}-{self.losses}-{self.ties}"


def item_record(data: DuelData, item_id: str) -> ItemRecord:
    """An item's record: wins, losses and a table of its duels."""
    row = data.item_index(item_id)
    idx = duels_of_item(data, item_id)
    is_left = data.left[idx] == row
    opponent = np.where(is_left, data.right[idx], data.left[idx])
    won = np.where(is_left, data.y[idx] > 0, data.y[idx] < 0)
    tied = data.y[idx] == 0
    table = pd.DataFrame(
        {
            "duel": idx,
            "duel_id": data.duel_ids[idx],
            "opponent_id": data.item_ids[opponent],
            "opponent": np.asarray(data.labels)[opponent],
            "result": np.where(won, "won", np.where(tied, "tie", "lost")),
        }
    )
    if data.has_context and data.context_labels is not None and data.context_index is not None:
        table["context"] = data.context_labels[data.context_index[idx]]
    return ItemRecord(
        item_id=str(item_id),
        label=str(data.labels[row]),
        n_duels=len(idx),
        wins=int(won.sum()),
        losses=int((~won & ~tied).sum()),
        duels=table,
        ties=int(tied.sum()),
    )


def find_item(data: DuelData, text: str) -> str | None:
    """The id of the item named ``text`` (its id, or its label; case-insensitive)."""
    wanted = text.strip().casefold()
    ids = np.asarray(data.item_ids).astype(str)
    for candidates in (ids, np.asarray(data.labels).astype(str)):
        hits = np.flatnonzero(np.char.lower(candidates) == wanted)
        if len(hits):
            return str(ids[hits[0]])
    return None


def parse_pair(data: DuelData, text: str) -> tuple[str, str] | None:
    """``"A vs B"`` (names or ids, any case) -> the two item ids, or None if not a pair.

    Raises KeyError naming a side that matches no item."""
    parts = re.split(r"\s+vs\.?\s+", text.strip(), maxsplit=1, flags=re.IGNORECASE)
    if len(parts) != 2:
        return None
    found = [find_item(data, part) for part in parts]
    for part, item in zip(parts, found, strict=True):
        if item is None:
            raise KeyError(f"no item is named {part.strip()!r}")
    return found[0], found[1]  # type: ignore[return-value]


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
