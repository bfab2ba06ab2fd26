"""Dashboard (AppTest): interactions of a model with more than 16 item groups over a
chosen subset (refused at once before, with no way to pick)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from prefshap_core.explain.interaction_explanation import explain_interactions
from tests.dashboard.apptest import SAMPLE, assert_clean, goto, new_app, sample_upload, settle

N_COLUMNS = 17


def _wide_files() -> tuple[bytes, bytes]:
    """The sample's items with 17 numeric columns, and its duels without context."""
    ids = pd.read_csv(SAMPLE / "items.csv")["id"]
    rng = np.random.default_rng(0)
    items = pd.DataFrame({"id": ids})
    for k in range(N_COLUMNS):
        items[f"f{k}"] = rng.normal(size=len(ids)).round(3)
    duels = pd.read_csv(SAMPLE / "duels.csv").drop(columns="venue")
    out = []
    for table in (items, duels):
        buffer = io.StringIO()
        table.to_csv(buffer, index=False)
        out.append(buffer.getvalue().encode())
    return out[0], out[1]


@pytest.mark.slow
def test_a_chosen_subset_of_more_than_16_groups() -> None:
    items, duels = _wide_files()
    at = goto(sample_upload(new_app(), items, duels), "train")
    fp = at.session_state["datasets"][at.session_state["active_dataset"]].fingerprint
    at.radio(key=f"train:kind:{fp}").set_value("gpm")
    for key, value in (("train:centres", 20), ("train:ls", 1.0), ("train:penalty", 0.001),
                       ("train:utility_weight", 0.0)):  # fmt: skip
        at.number_input(key=key).set_value(value)
    at.checkbox(key="train:refine").set_value(False)
    at.checkbox(key="train:baseline").set_value(False)
    next(b for b in at.button if b.label == "Train").click()
    at = goto(settle(at), "explain")
    at.number_input(key="explain:cap").set_value(10)
    at = settle(at)
    assert_clean(at)
    chosen = ["f2", "f9", "f16"]
    at.session_state[f"explain:interaction-groups:{fp}"] = chosen
    at.toggle(key=f"explain:interactions:{fp}").set_value(True)
    at = settle(at)
    assert_clean(at)
    picker = at.multiselect(key=f"explain:interaction-groups:{fp}")
    assert picker.value == chosen and len(picker.options) == N_COLUMNS
    spec = next(c.proto.spec for c in at.get("plotly_chart") if "mean |SII|" in c.proto.spec)
    assert all(f'"{name}"' in spec for name in chosen) and '"f3"' not in spec
    model = at.session_state["models"][fp].function
    assert model.item_space.n_groups == N_COLUMNS
    data = at.session_state["datasets"][at.session_state["active_dataset"]].data
    one = explain_interactions(model, data.item_ids[data.left[:1]], data.item_ids[data.right[:1]],
                               groups=chosen)  # fmt: skip
    assert one.player_names == tuple(chosen)
