"""Per-group lengthscale refinement (models.refine): what it finds, when it runs, overrides."""

import json

import numpy as np
import pytest

from prefshap_core.cli import main
from prefshap_core.compute import Compute
from prefshap_core.data.build import load_directory
from prefshap_core.data.duel_data import split_duels
from prefshap_core.datasets.synthetic import gpm_generated, gpm_generated_tables
from prefshap_core.metrics import roc_auc
from prefshap_core.models.estimators import CGPM, GPM, UPM
from prefshap_core.models.hyperparameters import median_lengthscales
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.models.refine import (
    REFINE_MIN_VALIDATION_DUELS,
    GroupFactors,
    column_factors,
    refine_group_lengthscales,
)
from prefshap_core.models.search import PathFitter
from prefshap_core.paths import repo_root
from prefshap_core.progress import ensure_progress
from prefshap_core.solvers.options import SolverOptions

FAST = dict(n_centres=300, penalty_path=(1e-3, 1e-5, 1e-7), cg_iterations=(10, 15, 20))


@pytest.fixture(scope="module")
def two_relevant():
    """The paper's App. B game: a random GPM on x1, x2; x3..x6 are noise (6,000 duels)."""
    data = gpm_generated(n_items=300, n_duels=6000, d=6, n_relevant=2, seed=0)
    split = split_duels(data.n_duels, 0)
    assert len(split.validation) >= REFINE_MIN_VALIDATION_DUELS
    refined = GPM(seed=0, utility_weight=0.0, **FAST).fit(data, split.train, split.validation)
    plain = GPM(seed=0, utility_weight=0.0, refine_lengthscales=False, **FAST).fit(
        data, split.train, split.validation
    )
    return data, split, refined, plain


def test_refinement_shortens_the_relevant_features_and_lengthens_the_noise(two_relevant):
    _, _, refined, _ = two_relevant
    f = refined.lengthscale_factors_
    assert set(f) == {f"x{j}" for j in range(1, 7)}
    relevant, noise = [f["x1"], f["x2"]], [f[f"x{j}"] for j in range(3, 7)]
    assert max(relevant) < min(noise)
    assert max(relevant) < 1.0 <= min(noise) and np.mean(noise) > 2.0


def test_refinement_predicts_better_on_held_out_duels(two_relevant):
    data, split, refined, plain = two_relevant
    y = data.y[split.test]
    auc_refined = roc_auc(y, refined.decision_function(data, split.test))
    auc_plain = roc_auc(y, plain.decision_function(data, split.test))
    assert auc_refined > auc_plain + 0.01
    assert refined.search_.chosen.validation_log_loss < plain.search_.chosen.validation_log_loss


def test_refined_lengthscales_are_the_heuristic_times_scale_times_group_factor(two_relevant):
    data, _, refined, plain = two_relevant
    base = median_lengthscales(data.items, seed=0)
    factors = np.array([refined.lengthscale_factors_[n] for n in data.item_space.feature_names])
    np.testing.assert_allclose(
        refined.lengthscales_, base * refined.lengthscale_scale_ * factors, rtol=1e-15
    )
    np.testing.assert_array_equal(refined.function_.lengthscales, refined.lengthscales_)
    meta = refined.function_.metadata
    assert meta["lengthscale_factors"] == refined.lengthscale_factors_
    # Off: no refine points, no factors, the grid's lengthscales.
    assert plain.lengthscale_factors_ == {}
    assert not [p for p in plain.search_.points if p.stage == "refine"]
    np.testing.assert_array_equal(plain.lengthscales_, base * plain.lengthscale_scale_)


def test_the_search_record_shows_each_candidate_and_only_accepts_improvements(two_relevant):
    _, _, refined, _ = two_relevant
    tried = [p for p in refined.search_.points if p.stage == "refine"]
    assert tried[0].note == "start" and len(tried) > 1
    assert all(" x" in p.note for p in tried[1:])
    best_tried = min(p.validation_log_loss for p in tried)
    assert best_tried < tried[0].validation_log_loss


def test_refinement_is_skipped_for_fixed_lengthscales_and_small_validation():
    data = gpm_generated(n_items=100, n_duels=4000, d=3, n_relevant=2, seed=1)
    split = split_duels(data.n_duels, 1)
    assert len(split.validation) < REFINE_MIN_VALIDATION_DUELS
    small = GPM(seed=1, utility_weight=0.0, **FAST).fit(data, split.train, split.validation)
    assert small.lengthscale_factors_ == {}
    given = np.full(data.item_space.n_features, 0.4)
    big = gpm_generated(n_items=100, n_duels=6000, d=3, n_relevant=2, seed=1)
    big_split = split_duels(big.n_duels, 1)
    fixed = UPM(seed=1, lengthscales=given, **FAST).fit(big, big_split.train, big_split.validation)
    assert fixed.lengthscale_factors_ == {}
    np.testing.assert_array_equal(fixed.lengthscales_, given)


def test_column_factors_give_every_column_of_a_group_its_factor():
    data = load_directory(repo_root() / "sample_data")
    space = data.item_space
    onehot = next(g for g in range(space.n_groups) if len(space.group_columns(g)) > 1)
    name = space.group_names[onehot]
    per_column = column_factors(space, {name: 0.5})
    assert np.all(per_column[space.group_columns(onehot)] == 0.5)
    others = np.setdiff1d(np.arange(space.n_features), space.group_columns(onehot))
    assert np.all(per_column[others] == 1.0)
    factors = GroupFactors.ones(space, None).changed("item", name, 0.5)
    assert not factors.is_identity() and GroupFactors.ones(space, None).is_identity()


@pytest.mark.slow
def test_cgpm_refinement_also_tunes_the_context_groups(tmp_path):
    data = load_directory(repo_root() / "sample_data")
    split = split_duels(data.n_duels, 0)
    fitter = PathFitter(
        kind="cgpm", loss="logistic", data=data,
        base_lengthscales=median_lengthscales(data.items),
        context_lengthscales=median_lengthscales(data.contexts[data.context_index]),
        compute=Compute(), solver=SolverOptions(), seed=0, n_centres=200,
        iterations=dict(zip(FAST["penalty_path"], FAST["cg_iterations"], strict=True)),
    )  # fmt: skip
    refined = refine_group_lengthscales(
        fitter, split.train, split.validation, 2.0, 1.0, list(FAST["penalty_path"]),
        ensure_progress(None),
    )  # fmt: skip
    assert set(refined.factors.contexts) == set(data.context_space.group_names)
    context_notes = {p.note.rsplit(" x", 1)[0] for p in refined.points[1:]}
    assert set(data.context_space.group_names) <= context_notes
    # And the estimator stores what it found in the model file.
    model = CGPM(seed=0, **FAST).fit(data, split.train, split.validation)
    back = load_model(save_model(model.function_, tmp_path / "m.npz"))
    np.testing.assert_array_equal(back.context_lengthscales, model.context_lengthscales_)
    np.testing.assert_array_equal(back.lengthscales, model.lengthscales_)


@pytest.mark.slow
@pytest.mark.parametrize("switch", [[], ["--no-refine-lengthscales"]], ids=["default", "off"])
def test_train_cli_refines_unless_told_not_to(switch, tmp_path, capsys) -> None:
    items, duels, _ = gpm_generated_tables(n_items=300, n_duels=6000, d=6, n_relevant=2, seed=0)
    folder = tmp_path / "data"
    folder.mkdir()
    items.to_csv(folder / "items.csv", index=False)
    duels.to_csv(folder / "duels.csv", index=False)
    out = tmp_path / "m.npz"
    args = ["--n-centres", "300", "--utility-weight", "0", "--cme-lambda", "0.01", "--quiet"]
    code = main(
        ["train", "--model", "gpm", "--data", str(folder), "--out", str(out), *switch, *args]
    )
    assert code == 0, capsys.readouterr().err
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    factors = report["lengthscale_factors"]
    meta = load_model(out).metadata
    assert meta["lengthscale_factors"] == factors
    if switch:
        assert factors == {}
    else:
        assert set(factors) == {f"x{j}" for j in range(1, 7)} and factors["x1"] < 1.0
