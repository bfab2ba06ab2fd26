"""Dashboard (AppTest): training with overrides, progress, cancel, results, cache."""

from __future__ import annotations

import pytest

from tests.dashboard.apptest import (
    assert_clean,
    export_labels,
    goto,
    jobs,
    new_app,
    sample_upload,
    settle,
    shown,
    texts,
)


def model_cv(at, fp: str) -> float:
    return at.session_state["models"][fp].result.cv["roc_auc_mean"]


def _active_fingerprint(at) -> str:
    return at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint


def test_model_choice_depends_on_context() -> None:
    at = goto(new_app(), "train")  # the demo has no context columns
    fp = _active_fingerprint(at)
    assert at.radio(key=f"train:kind:{fp}").options == ["Auto", "GPM", "UPM"]
    assert at.radio(key=f"train:kind:{fp}").value == "auto"  # the product chooses
    assert "C-GPM needs context columns" in texts(at)
    at = sample_upload(at)  # the sample data has a 'venue' context column
    at = goto(at, "train")
    fp = _active_fingerprint(at)
    assert at.radio(key=f"train:kind:{fp}").options == ["Auto", "C-GPM", "GPM", "UPM"]


@pytest.mark.slow
def test_training_shows_auc_next_to_upm_and_specr() -> None:
    at = goto(sample_upload(new_app()), "train")
    fp = _active_fingerprint(at)
    at.radio(key=f"train:kind:{fp}").set_value("cgpm")
    at.number_input(key="train:centres").set_value(120)
    at.number_input(key="train:penalty").set_value(1e-4)  # an advanced override
    next(b for b in at.button if b.label == "Train").click()
    at = settle(at)
    assert_clean(at)
    labels = [m.label for m in at.metric]
    # 800 duels: 80 test duels rank nothing, so the headline is the K-fold CV AUC (+- sd),
    # the UPM's beside it on the same metric.
    cv_label = "C-GPM ROC AUC (5-fold CV)"
    assert cv_label in labels and "UPM ROC AUC (5-fold CV)" in labels
    auc = float(next(m.value for m in at.metric if m.label == cv_label).split(" ± ")[0])
    assert 0.5 < auc <= 1.0
    assert model_cv(at, fp) == pytest.approx(auc, abs=5e-4)
    assert "SpecR" in texts(at) and "ranking" in texts(at)
    assert "Model file (.npz)" in export_labels(at)
    model = at.session_state["models"][fp]
    assert model.result.settings.kind == "cgpm"
    assert model.result.settings.penalty == 1e-4
    assert model.result.function.n_centres == 120
    # Pages switch; the model stays, and explanations now cover items and context.
    at = goto(at, "explain")
    assert_clean(at)
    assert [t.label for t in at.tabs] == ["Item features", "Context features"]
    assert len(at.get("plotly_chart")) == 6  # beehive, bar, dependence per tab
    # The same settings again come from the disk cache, without a job.
    at = goto(at, "train")
    next(b for b in at.button if b.label == "Train").click().run()
    assert "loaded from the cache" in texts(at)
    assert not any(not j.finished for j in jobs(at).values())


@pytest.mark.slow
def test_training_shows_progress_and_can_be_cancelled() -> None:
    at = goto(sample_upload(new_app()), "train")
    at.number_input(key="train:seed").set_value(7)  # settings nothing has cached yet
    next(b for b in at.button if b.label == "Train").click().run()
    # Running: a progress bar labelled with the job, and a Cancel button. The
    # engine checks for cancellation at its first progress checkpoint, so a click
    # right away stops it deterministically.
    progress = at.get("progress")
    assert progress and "Training the best model on Upload" in shown(progress[0].proto.text)
    next(b for b in at.button if b.label == "Cancel").click().run()
    at = settle(at)
    assert_clean(at)
    assert "Training was cancelled" in texts(at)
    assert "No model on this dataset yet" in texts(at)
    # Nothing half-done was kept: training again works and gives a model.
    next(b for b in at.button if b.label == "Train").click()
    at = settle(at)
    assert_clean(at)
    # Auto: every candidate's held-out numbers, and which was chosen and why.
    assert "Chosen automatically" in texts(at) and "log loss" in texts(at)
    model = at.session_state["models"][_active_fingerprint(at)]
    chosen = {"upm": "UPM", "gpm": "GPM", "cgpm": "C-GPM"}[model.kind]
    assert f"{chosen} ROC AUC (5-fold CV)" in [m.label for m in at.metric]
    assert [c["model"] for c in model.result.candidates] == ["upm", "gpm", "cgpm"]
