"""What training returns: the fitted function, its split, metrics and timings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from prefshap_core.data.duel_data import Split
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.workflow.settings import TrainSettings

_CV_KEYS = ("roc_auc_mean", "roc_auc_sd", "folds")


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
    # Small data: the baseline UPM's K-fold CV ROC AUC ("vs UPM" compares the same metric).
    baseline_cv: dict[str, Any] | None = None

    @property
    def kind(self) -> str:
        """The kind of the model written (under ``auto``: the chosen one)."""
        return self.function.kind

    @property
    def model_choice(self) -> dict[str, Any]:
        """How the kind was chosen: what was asked, every candidate's held-out numbers
        and, under auto, why (``workflow.model_choice``); empty for older results."""
        return dict(self.function.metadata.get("model_choice") or {})

    @property
    def candidates(self) -> list[dict[str, Any]]:
        return list(self.model_choice.get("candidates", []))

    def to_json(self) -> dict[str, Any]:
        meta = self.function.metadata
        return {
            "dataset": self.data_name,
            "model": self.settings.kind,
            "chosen_model": self.kind,
            "candidates": self.candidates,
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
            **(
                {}
                if self.baseline_cv is None
                else {"upm_cv": {k: self.baseline_cv[k] for k in _CV_KEYS}}
            ),
            "summary": self.summary(),
            "seconds": self.seconds,
        }
