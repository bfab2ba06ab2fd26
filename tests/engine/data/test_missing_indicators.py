"""Missing indicators: a mostly-missing column gets '<column> (missing)' in its group."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from prefshap_core.data.csv_io import read_table
from prefshap_core.data.encoding.spec import EncodingSpec
from prefshap_core.data.encoding.tables import encode_rows, encode_table, row_labels
from prefshap_core.errors import DataValidationError

# h: 2 of 5 missing (40%), hand: 3 of 5 (60%), w: 0 missing, k: 1 of 10 below
ITEMS = "id,h,hand,w\na,180,L,70\nb,,,80\nc,190,,75\nd,170,R,60\ne,,,65\n"


def encode(text: str, **options: object):
    raw = read_table(text.encode(), file_name="items.csv")
    columns = [c for c in raw.columns if c != "id"]
    return raw, encode_table(raw, file_name="items.csv", columns=columns, **options)


def test_mostly_missing_columns_get_an_indicator_in_their_group() -> None:
    _, encoded = encode(ITEMS)
    space = encoded.space
    assert space.feature_names == (
        "h", "h (missing)", "hand=L", "hand=R", "hand (missing)", "w",
    )  # fmt: skip
    assert space.group_names == ("h", "hand", "w")
    assert space.feature_group.tolist() == [0, 0, 1, 1, 1, 2]
    missing_h = np.array([0, 1, 0, 0, 1], dtype=float)
    missing_hand = np.array([0, 1, 1, 0, 1], dtype=float)
    np.testing.assert_array_equal(encoded.raw[:, 1], missing_h)
    np.testing.assert_array_equal(encoded.raw[:, 4], missing_hand)
    # numeric: the mean of the present values (= the offset: model-space 0)
    np.testing.assert_allclose(encoded.raw[[1, 4], 0], np.mean([180, 190, 170]))
    np.testing.assert_allclose(encoded.model[[1, 4], 0], 0.0, atol=1e-12)
    # categorical: no category at all
    np.testing.assert_array_equal(encoded.raw[[1, 2, 4], 2:4], 0.0)
    notes = {note.column: note for note in encoded.notes}
    assert notes["h"].n_missing == 2 and notes["h"].filled_with.startswith("mean 180")
    assert "'h (missing)'" in notes["h"].filled_with
    assert notes["hand"].filled_with == "no category, marked in 'hand (missing)'"
    # unknown players are no longer identical to the typical one
    assert not np.allclose(encoded.model[1], encoded.model[0])


def test_below_the_share_or_switched_off_the_old_fills_stay() -> None:
    text = "id,k\n" + "".join(f"i{j},{'' if j == 0 else j}\n" for j in range(10))
    _, few = encode(text)  # 10% missing: median fill, no indicator
    assert few.space.feature_names == ("k",) and few.notes[0].filled_with == "median 5"
    _, off = encode(ITEMS, missing_indicator_share=None)
    assert off.space.feature_names == ("h", "hand=L", "hand=R", "w")
    assert off.notes[0].filled_with == "median 180"


def test_an_empty_cell_given_later_sets_the_indicator_from_the_feature_space_alone() -> None:
    """What `prefshap explain` does with a model file: the spec rebuilt from names."""
    raw, encoded = encode(ITEMS)
    rebuilt = EncodingSpec.from_feature_space(encoded.space, "items")
    assert [g.missing_indicator for g in rebuilt.groups] == [True, True, False]
    again = encode_rows(raw, rebuilt)
    np.testing.assert_allclose(again.model, encoded.model, atol=1e-12)
    new = encode_rows(
        pd.DataFrame({"h": [None, 200.0], "hand": [None, "R"], "w": [70.0, 70.0]}), rebuilt
    )
    np.testing.assert_allclose(new.model[0, :5], encoded.model[1, :5], atol=1e-12)
    assert new.raw[0, 1] == 1.0 and new.raw[1, 1] == 0.0 and new.raw[0, 4] == 1.0
    labels = row_labels(new.raw, rebuilt)
    assert labels[0].startswith("h ? / hand ?") and labels[1].startswith("h 200 / R")


def test_a_column_without_an_indicator_still_needs_a_fill() -> None:
    _, encoded = encode(ITEMS)
    rebuilt = EncodingSpec.from_feature_space(encoded.space, "items")
    with pytest.raises(DataValidationError, match="no fill value"):
        encode_rows(pd.DataFrame({"h": [1.0], "hand": ["L"], "w": [None]}), rebuilt)
