"""The product's workflows on top of the engine: train and evaluate, explain, select.

The CLI and the dashboard are both thin clients of these functions, so a number
shown in the browser is the number ``prefshap train`` prints. This package is their
public entry (``from prefshap_core import workflow``); each job lives in its own
module:

* ``settings``: ``TrainSettings``, what to train;
* ``results``: ``TrainingResult``, what training returns;
* ``training``: ``train`` and evaluation (CV on small data, CME regularisers);
* ``explaining``: ``explain_duels`` and the ``prefshap explain --duels`` table;
* ``selections``: which duels a view shows, and the columns to select on;
* ``items``: one item's record, and finding items by id or name;
* ``fingerprints``: the cache keys of data and settings.
"""

from __future__ import annotations

from prefshap_core.data.duel_data import split_duels
from prefshap_core.workflow.explaining import explain_duels, explain_input_table
from prefshap_core.workflow.fingerprints import data_fingerprint, settings_fingerprint
from prefshap_core.workflow.items import ItemRecord, find_item, item_record, parse_pair
from prefshap_core.workflow.results import TrainingResult
from prefshap_core.workflow.selections import (
    context_columns,
    duels_between_groups,
    duels_in_context,
    duels_of_item,
    group_columns,
    numeric_item_columns,
    sample_duels,
)
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import (
    LARGE_DUELS,
    SMALL_TEST,
    choose_cme_regularisers,
    cross_validated_auc,
    expected_training_minutes,
    train,
)

__all__ = [
    "LARGE_DUELS",
    "SMALL_TEST",
    "ItemRecord",
    "TrainSettings",
    "TrainingResult",
    "choose_cme_regularisers",
    "context_columns",
    "cross_validated_auc",
    "data_fingerprint",
    "duels_between_groups",
    "duels_in_context",
    "duels_of_item",
    "expected_training_minutes",
    "explain_duels",
    "explain_input_table",
    "find_item",
    "group_columns",
    "item_record",
    "numeric_item_columns",
    "parse_pair",
    "sample_duels",
    "settings_fingerprint",
    "split_duels",  # the seeded 80/10/10 split train() uses (data.duel_data)
    "train",
]
