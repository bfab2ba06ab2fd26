"""Reserved names: no player may be named like an export column."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from prefshap_core.data.build import build_duel_data
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.data.reserved_names import rename_reserved, reserved_reason
from prefshap_core.errors import DataValidationError
from prefshap_core.workflow.settings import TrainSettings
from prefshap_core.workflow.training import train

ITEMS = pd.DataFrame({"id": ["a", "b", "c"], "speed": ["1", "2", "3"]})
DUELS = pd.DataFrame({"left": ["a", "b", "c"], "right": ["b", "c", "a"], "winner": ["a", "c", "c"]})


@pytest.mark.parametrize(
    "column", ["left", "right", "output", "base_value", "duel_id", "winner", "se:speed",
               "left:x", "right:y", "a*b"],
)  # fmt: skip
def test_reserved_item_covariates_are_refused_at_upload(column: str) -> None:
    items = ITEMS.assign(**{column: ["4", "5", "7"]})
    opt_in = {}
    if column == "duel_id":  # an identifier-like name is set aside unless opted in
        assert column not in build_duel_data(items, DUELS, name="t").item_space.feature_names
        opt_in = {"use_columns": (column,)}
    with pytest.raises(DataValidationError) as caught:
        build_duel_data(items, DUELS, name="t", **opt_in)
    assert caught.value.column == column and caught.value.file == "items.csv"


@pytest.mark.parametrize("column", ["output", "base_value", "se:venue", "x*"])
def test_reserved_context_covariates_are_refused_at_upload(column: str) -> None:
    duels = DUELS.assign(**{column: ["in", "out", "in"]})
    with pytest.raises(DataValidationError) as caught:
        build_duel_data(ITEMS, duels, name="t")
    assert caught.value.column == column and caught.value.file == "duels.csv"


def test_ordinary_names_pass_and_duplicate_groups_are_refused_at_training() -> None:
    data = build_duel_data(ITEMS.assign(power=["3", "1", "2"]), DUELS, name="t")
    space = data.item_space
    duplicated = replace(
        data,
        item_space=FeatureSpace(
            space.feature_names, ("speed", "speed"), space.feature_group, space.offset, space.scale
        ),
    )
    with pytest.raises(DataValidationError, match="two covariates are called 'speed'"):
        train(duplicated, TrainSettings(n_centres=3))


def test_renaming_gives_distinct_safe_export_columns() -> None:
    names = ["output", "a", "a", "se:a", "x*y", "winner (group)", "winner"]
    renamed, report = rename_reserved(names)
    assert len(set(renamed)) == len(renamed)
    columns = ["duel_id", "left", "right", "winner", "output", "base_value", *renamed]
    columns += [f"se:{n}" for n in renamed]
    assert len(set(columns)) == len(columns)
    assert all(reserved_reason(n) is None or n.startswith(("se:", "left:", "right:"))
               for n in renamed)  # fmt: skip
    assert report["output"] == "output (group)" and report["x*y"] == "x_y (group)"
    assert renamed[1] == "a" and np.sum([n == "a" for n in renamed]) == 1
