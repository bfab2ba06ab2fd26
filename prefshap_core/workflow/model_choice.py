"""Which model kind to keep (``kind="auto"``): the candidates that fit the data, fitted
on the same split, the best by held-out log loss.

The criterion is the validation log loss of each candidate's chosen point; on small
data (K-fold selection) it is the pooled out-of-fold log loss of its hyperparameter
cross-validation over the training + validation duels, the same folds for every
candidate. The test duels are never looked at. Strict argmin; an exact tie goes to
the UPM (the simpler model: one score per item).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from prefshap_core.models.estimators import PreferenceModel

AUTO = "auto"
TITLES = {"gpm": "GPM", "cgpm": "C-GPM", "upm": "UPM"}


def candidate_kinds(kind: str, has_context: bool) -> list[str]:
    """The kinds to fit: ``kind`` itself, or under auto the UPM (first: it wins exact
    ties), the GPM, and the C-GPM when the duels have context columns."""
    if kind != AUTO:
        return [kind]
    return ["upm", "gpm"] + (["cgpm"] if has_context else [])


# Under auto, the GPM candidate takes the C-GPM candidate's item hyperparameters (its
# searched scale, refined groups, learned columns and utility weight) and chooses only
# its penalty. A C-GPM whose context lengthscales grow without bound is the GPM, so the
# two searches would look for the same item lengthscales twice: on tennis the shared
# ones fit the GPM better (validation log loss 0.6181 against its own search's 0.6229,
# test ROC AUC 0.7107 against 0.7043) in 27 s instead of 68 s. Its penalty path ends
# at the C-GPM's chosen penalty: the steps past it are the dearest (most CG
# iterations), and on tennis seeds 0-4 the GPM's own path chose that same penalty.
SHARED_SEARCH = {"gpm": "cgpm"}


def fitting_order(kinds: list[str]) -> list[str]:
    """``kinds`` in the order they are fitted: a kind whose search is shared after the
    kind it shares."""
    first = [k for k in kinds if SHARED_SEARCH.get(k) not in kinds]
    return first + [k for k in kinds if k not in first]


@dataclass
class Candidate:
    """One fitted candidate and its held-out numbers."""

    kind: str
    model: PreferenceModel
    test: dict[str, float]  # metrics on the test duels
    seconds: float
    cv: dict[str, Any] | None = None  # K-fold CV ROC AUC over all duels (small data)

    @property
    def validation_log_loss(self) -> float:
        """What the choice minimises: the chosen point's (pooled out-of-fold) log loss."""
        chosen = self.model.search_.chosen
        assert chosen is not None
        return float(chosen.validation_log_loss)

    def as_json(self) -> dict[str, Any]:
        return {
            "model": self.kind,
            "validation_log_loss": _finite_or_none(self.validation_log_loss),
            "test_roc_auc": _finite_or_none(self.test.get("roc_auc", math.nan)),
            "cv_roc_auc": None if self.cv is None else _finite_or_none(self.cv["roc_auc_mean"]),
            "seconds": self.seconds,
        }


def _finite_or_none(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


def choose_candidate(candidates: list[Candidate]) -> int:
    """Index of the candidate with the lowest validation log loss (NaN: never chosen
    while another is finite); an exact tie goes to the UPM, else to the first."""
    losses = [c.validation_log_loss for c in candidates]
    losses = [loss if math.isfinite(loss) else math.inf for loss in losses]
    best = min(losses)
    tied = [k for k, loss in enumerate(losses) if loss == best]
    return next((k for k in tied if candidates[k].kind == "upm"), tied[0])


def criterion_name(selection: str) -> str:
    """What the log loss of the choice was measured on, in words."""
    if selection == "holdout":
        return "validation log loss"
    return f"pooled out-of-fold log loss ({selection} over training + validation)"


def choice_reason(candidates: list[Candidate], chosen: int, selection: str) -> str:
    """E.g. "UPM: validation log loss 0.512 vs GPM 0.531"."""
    best = candidates[chosen]
    others = ", ".join(
        f"{TITLES[c.kind]} {c.validation_log_loss:.3f}"
        for k, c in enumerate(candidates)
        if k != chosen
    )
    text = f"{TITLES[best.kind]}: {criterion_name(selection)} {best.validation_log_loss:.3f}"
    return f"{text} vs {others}" if others else text


def model_choice(
    requested: str, candidates: list[Candidate], chosen: int, selection: str
) -> dict[str, Any]:
    """The record of the choice (the model file's ``metadata["model_choice"]``)."""
    return {
        "requested": requested,
        "chosen": candidates[chosen].kind,
        "criterion": criterion_name(selection),
        "reason": choice_reason(candidates, chosen, selection) if requested == AUTO else "",
        "candidates": [c.as_json() for c in candidates],
    }
