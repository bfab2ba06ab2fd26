"""The paper's findings, reproduced end to end (train -> explain), and Djokovic's losses.

These train real models (about a minute in all): they are the product's acceptance
checks, not unit tests.
"""

import numpy as np
import pytest

from prefshap_core.datasets.registry import load_dataset
from prefshap_core.datasets.synthetic import synthetic_clusters
from prefshap_core.explain import ExplainOptions
from prefshap_core.workflow.explaining import explain_duels
from prefshap_core.workflow.selections import duels_between_groups, duels_of_item
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clusters_model():
    data = synthetic_clusters(seed=0)  # the paper's 1,000 items and 40,000 duels
    result = train(data, TrainSettings(kind="gpm", seed=0, n_centres=1000, baseline=False))
    assert result.metrics["test"]["roc_auc"] > 0.98
    return data, result


def test_synthetic_global_explanation(clusters_model):
    data, result = clusters_model
    # 1,000 duels: in 300 the three cluster pairs' counts differ by ~15 % (76 AC vs 66
    # BC duels on seed 0), which alone moves the between-feature ratio past 1.25.
    expl = explain_duels(result.function, data, result.split.test[:1000]).oriented_to_winner()
    importance = dict(zip(expl.player_names, expl.mean_abs(), strict=True))
    assert max(importance, key=importance.get) == "x0"
    between = [importance[name] for name in ("x_AB", "x_AC", "x_BC")]
    assert max(between) / min(between) < 1.25


def test_synthetic_a_versus_b_duels(clusters_model):
    data, result = clusters_model
    ab = duels_between_groups(data, "cluster", "A", "B", within=result.split.test)[:300]
    expl = explain_duels(result.function, data, ab).oriented_to_winner()
    importance = dict(zip(expl.player_names, expl.mean_abs(), strict=True))
    assert max(importance, key=importance.get) == "x_AB"
    j = expl.player_names.index("x_AB")
    phi, diff = expl.values[:, j], expl.data[:, j]  # diff = x_AB(winner) - x_AB(loser)
    large = phi > np.quantile(phi, 0.8)
    assert np.all(phi[large] > 0)
    assert np.mean(diff[large] > 0) > 0.95  # large positive values are red


@pytest.mark.realdata
def test_djokovic_losses_items_and_context(data_dir):
    data = load_dataset("tennis", seed=0, data_dir=data_dir)
    result = train(data, TrainSettings(kind="cgpm", seed=0, n_centres=1000, baseline=False))
    assert result.metrics["test"]["roc_auc"] > 0.58
    losses = duels_of_item(data, "d643", "losses")
    assert len(losses) == 154
    items = explain_duels(result.function, data, losses).losses_of("d643")
    in_context = ExplainOptions(what="context")
    context = explain_duels(result.function, data, losses, in_context).losses_of("d643")
    assert items.n_duels == context.n_duels == 154
    assert np.all(items.winners < 0) and set(items.left_ids) == {"d643"}
    assert items.efficiency_gap() < 1e-9 and context.efficiency_gap() < 1e-9
    # the context game starts where the item game ends (the context-averaged g)
    np.testing.assert_allclose(context.base_values, items.outputs, atol=1e-12)
    assert items.player_names == data.item_space.group_names
    assert context.player_names == data.context_space.group_names
