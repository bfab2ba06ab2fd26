"""`prefshap explain --what interactions --interaction-groups`: a chosen subset of groups."""

from __future__ import annotations

import numpy as np
import pandas as pd

from prefshap_core.cli import main
from prefshap_core.explain.interaction_explanation import explain_interactions
from prefshap_core.explain.reference import random_preference_function
from prefshap_core.models.model_file import save_model


def _wide(tmp_path):
    groups = [(f"g{k}", 1) for k in range(17)]
    fn = random_preference_function("gpm", n_items=6, n_centres=4, groups=groups, seed=1)
    save_model(fn, tmp_path / "wide.npz")
    ids = np.asarray(fn.item_ids)
    table = pd.DataFrame({"left": ids[[0, 1, 2]], "right": ids[[3, 4, 5]]})
    table.to_csv(tmp_path / "duels.csv", index=False)
    return fn, table


def _explain(tmp_path, *extra):
    return main(["explain", "--model", str(tmp_path / "wide.npz"), "--duels",
                 str(tmp_path / "duels.csv"), "--out", str(tmp_path / "out.csv"), "--quiet",
                 "--what", "interactions", *extra])  # fmt: skip


def test_a_chosen_subset_of_a_wide_model(tmp_path):
    fn, table = _wide(tmp_path)
    assert _explain(tmp_path, "--interaction-groups", "g16", "g0", "g3") == 0
    out = pd.read_csv(tmp_path / "out.csv")
    pairs = ["g0*g3", "g0*g16", "g3*g16"]
    assert list(out.columns) == ["left", "right", "output", "base_value", *pairs]
    want = explain_interactions(fn, table["left"], table["right"], groups=["g0", "g3", "g16"])
    np.testing.assert_allclose(out[pairs].to_numpy(), want.values, atol=1e-12)
    np.testing.assert_allclose(
        out["output"], fn.decision_for_ids(table["left"], table["right"]), atol=1e-12
    )


def test_choices_are_checked_before_any_work(tmp_path, capsys):
    _wide(tmp_path)
    capsys.readouterr()
    assert _explain(tmp_path, "--interaction-groups", "g0", "nope") == 2
    err = capsys.readouterr().err
    assert "not item groups of this model: nope" in err
    assert _explain(tmp_path) == 2
    assert "choose at most 16 of them" in capsys.readouterr().err
    many = [f"g{k}" for k in range(17)]
    assert _explain(tmp_path, "--interaction-groups", *many) == 2
    assert "2 to 16 chosen item groups, got 17" in capsys.readouterr().err
    code = main(["explain", "--model", str(tmp_path / "wide.npz"), "--duels",
                 str(tmp_path / "duels.csv"), "--out", str(tmp_path / "o.csv"), "--quiet",
                 "--interaction-groups", "g0", "g1"])  # fmt: skip
    assert code == 2 and "goes with --what interactions" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()
