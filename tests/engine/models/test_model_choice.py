"""``kind="auto"``: every candidate fitted, the one with the lowest held-out log loss kept."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data, load_directory
from prefshap_core.data.duel_data import DuelData, split_duels
from prefshap_core.datasets.synthetic import gpm_generated
from prefshap_core.models.estimators import PreferenceModel
from prefshap_core.models.model_file import load_model
from prefshap_core.paths import repo_root
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

# A short search: two scales, the plain GPM, few centres.
QUICK = dict(n_centres=80, lengthscale_scales=(1.0, 2.0), utility_weights=(0.0,))


def utility_duels(n_duels: int, seed: int = 0) -> DuelData:
    """Duels won by the higher utility f(x) = 2 x1 - x2 (plus logistic noise): rankable,
    so the UPM's one score per item is the right model."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(150, 3))
    ids = np.array([f"u{i:03d}" for i in range(150)])
    left = rng.integers(150, size=n_duels)
    right = (left + rng.integers(1, 150, size=n_duels)) % 150
    f = 2.0 * x[:, 0] - x[:, 1]
    left_wins = rng.random(n_duels) < 1.0 / (1.0 + np.exp(-(f[left] - f[right])))
    items = pd.DataFrame(x, columns=["x1", "x2", "x3"]).assign(id=ids)
    duels = pd.DataFrame({"left": ids[left], "right": ids[right], "y": np.where(left_wins, 1, -1)})
    return build_duel_data(
        items, duels, name="utility", numeric=["x1", "x2", "x3"], context_columns=[], seed=seed
    )


def _check_choice(data: DuelData, expected: str) -> None:
    result = train(data, TrainSettings(kind="auto", **QUICK))
    report = result.to_json()
    candidates = {c["model"]: c for c in report["candidates"]}
    assert report["model"] == "auto" and set(candidates) == {"upm", "gpm"}
    losses = {k: c["validation_log_loss"] for k, c in candidates.items()}
    # Never a candidate whose held-out log loss is worse than another's.
    assert report["chosen_model"] == min(losses, key=losses.get) == expected, losses
    assert result.function.kind == expected
    # Each candidate's number is the one its own explicit training reports (an
    # independent fit of that kind), and the UPM candidate is the baseline.
    for kind, candidate in candidates.items():
        alone = train(data, TrainSettings(kind=kind, baseline=False, **QUICK)).to_json()
        assert alone["validation"]["log_loss"] == pytest.approx(candidate["validation_log_loss"])
        assert alone["test"]["roc_auc"] == pytest.approx(candidate["test_roc_auc"])
        assert alone["candidates"] == [alone["candidates"][0]]
        if kind == "upm":
            assert report["upm_test"]["roc_auc"] == pytest.approx(alone["test"]["roc_auc"])
        if kind == expected:
            assert report["test"] == pytest.approx(alone["test"])


@pytest.mark.slow
def test_auto_keeps_the_upm_on_rankable_duels() -> None:
    _check_choice(utility_duels(2600), "upm")  # > 2,000 tuning duels: the validation split


@pytest.mark.slow
def test_auto_keeps_the_gpm_on_duels_no_ranking_explains() -> None:
    _check_choice(gpm_generated(n_items=120, n_duels=2600, d=3, seed=1), "gpm")


@pytest.mark.slow
def test_auto_on_small_data_chooses_by_pooled_cv_log_loss_and_reports_cv_aucs() -> None:
    data = utility_duels(400)
    result = train(data, TrainSettings(kind="auto", **QUICK))
    report = result.to_json()
    assert report["validation"]["selection"] == "5-fold cv"
    losses = {c["model"]: c["validation_log_loss"] for c in report["candidates"]}
    assert report["chosen_model"] == min(losses, key=losses.get)
    # The headline metric of small data and its "vs UPM" partner: both K-fold CV AUCs.
    assert all(c["cv_roc_auc"] is not None for c in report["candidates"])
    upm = next(c for c in report["candidates"] if c["model"] == "upm")
    assert report["upm_cv"]["roc_auc_mean"] == pytest.approx(upm["cv_roc_auc"])
    assert result.model_choice["reason"].startswith(
        {"upm": "UPM", "gpm": "GPM"}[report["chosen_model"]] + ": pooled out-of-fold log loss"
    )


def test_cli_default_is_auto_and_writes_the_chosen_model(tmp_path, capsys) -> None:
    data = utility_duels(300)
    folder = tmp_path / "data"
    folder.mkdir()
    ids = np.asarray(data.item_ids)
    pd.DataFrame(data.items, columns=["x1", "x2", "x3"]).assign(id=ids).to_csv(
        folder / "items.csv", index=False
    )
    pd.DataFrame(
        {"left": ids[data.left], "right": ids[data.right], "y": data.y.astype(int)}
    ).to_csv(folder / "duels.csv", index=False)
    out = tmp_path / "m.npz"
    argv = ["train", "--data", str(folder), "--out", str(out), "--quiet", "--n-centres", "40",
            "--lengthscale-scale", "1", "--penalty", "1e-3"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["model"] == "auto"
    assert [c["model"] for c in report["candidates"]] == ["upm", "gpm"]
    assert load_model(out).kind == report["chosen_model"]
    assert load_model(out).metadata["model_choice"]["chosen"] == report["chosen_model"]
    assert TrainSettings().kind == "gpm"  # Python's default stays the GPM


@pytest.mark.slow
def test_auto_gpm_candidate_takes_the_cgpm_candidates_item_hyperparameters(monkeypatch) -> None:
    """With context columns the GPM candidate is fitted at the C-GPM candidate's chosen
    item lengthscales and utility weight (one item search, not two); only its penalty
    is chosen, on the same criterion as every other candidate's, along the C-GPM's
    path down to the C-GPM's chosen penalty."""
    data = load_directory(repo_root() / "sample_data")
    settings = TrainSettings(kind="auto", **QUICK)
    fitted: dict[str, PreferenceModel] = {}
    real_fit = PreferenceModel.fit

    def recording_fit(self, *args, **kwargs):
        fitted.setdefault(self.kind, self)  # the candidate (later: its CV AUC refits)
        return real_fit(self, *args, **kwargs)

    monkeypatch.setattr(PreferenceModel, "fit", recording_fit)
    report = train(data, settings).to_json()
    monkeypatch.undo()
    # The GPM's path ended at the C-GPM's chosen penalty, where the C-GPM's went on.
    chosen_penalty = fitted["cgpm"].penalty_
    assert min(p.penalty for p in fitted["cgpm"].search_.points) < chosen_penalty
    assert min(p.penalty for p in fitted["gpm"].search_.points) == chosen_penalty
    candidates = {c["model"]: c for c in report["candidates"]}
    assert [c["model"] for c in report["candidates"]] == ["upm", "gpm", "cgpm"]
    assert report["chosen_model"] == min(
        candidates, key=lambda k: candidates[k]["validation_log_loss"]
    )
    # The C-GPM candidate is its own full search; the GPM reuses what it chose.
    cgpm = settings.model("cgpm").set_params(selection="cv")
    split = split_duels(data.n_duels, settings.seed)
    cgpm.fit(data, split.train, split.validation, posterior=False)
    assert cgpm.search_.chosen.validation_log_loss == pytest.approx(
        candidates["cgpm"]["validation_log_loss"]
    )
    gpm = settings.model("gpm").set_params(
        selection="cv",
        lengthscales=tuple(cgpm.lengthscales_),
        lengthscale_scales=None,  # the lengthscales as they are: no scale searched
        utility_weight=cgpm.search_.chosen.utility_weight,
        penalty_path=tuple(p for p in cgpm.path()[0] if p >= cgpm.penalty_),
    )
    gpm.fit(data, split.train, split.validation, posterior=False)
    assert min(p.penalty for p in gpm.search_.points) == cgpm.penalty_
    assert gpm.search_.chosen.validation_log_loss == pytest.approx(
        candidates["gpm"]["validation_log_loss"]
    )
    assert gpm.score(data, split.test)["roc_auc"] == pytest.approx(
        candidates["gpm"]["test_roc_auc"], nan_ok=True
    )
