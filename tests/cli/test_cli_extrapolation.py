"""Values outside the training range are refused unless --allow-extrapolation (not ids)."""

import json

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.models.model_file import load_model
from prefshap_core.paths import repo_root

SAMPLE = repo_root() / "sample_data"
FAST = ["--n-centres", "120", "--lengthscale-scale", "2", "--quiet"]


@pytest.fixture(scope="module")
def numeric_context_model(tmp_path_factory):
    """A C-GPM whose context is the numeric column ``temp`` (10 to 30)."""
    folder = tmp_path_factory.mktemp("extrapolation")
    duels = pd.read_csv(SAMPLE / "duels.csv").drop(columns="venue")
    duels["temp"] = np.random.default_rng(0).uniform(10, 30, len(duels)).round(1)
    duels.to_csv(folder / "duels.csv", index=False)
    out = folder / "m.npz"
    assert main(["train", "--duels", str(folder / "duels.csv"), "--items",
                 str(SAMPLE / "items.csv"), "--model", "cgpm", "--seed", "1",
                 "--out", str(out), *FAST]) == 0  # fmt: skip
    return out, duels


def test_cycles_refuses_a_context_value_beyond_the_range(numeric_context_model, capsys):
    path, duels = numeric_context_model
    low, high = duels["temp"].min(), duels["temp"].max()
    capsys.readouterr()
    assert main(["cycles", "--model", str(path), "--context", "temp=45", "--quiet"]) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip() == (
        "prefshap cycles: error: --context: outside the training range, where the model "
        f"extrapolates: context column temp = 45 (training range {low:.6g} to {high:.6g}); "
        "give --allow-extrapolation to evaluate anyway"
    )
    assert main(["cycles", "--model", str(path), "--context", "temp=20", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["cycles", "--model", str(path), "--context", "temp=45",
                 "--allow-extrapolation", "--top", "2"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert "n_items" in json.loads(captured.out)
    assert "extrapolating (--context): context column temp = 45" in captured.err


def test_explain_refuses_context_rows_beyond_the_range(numeric_context_model, tmp_path, capsys):
    path, duels = numeric_context_model
    fn = load_model(path)
    table = duels.head(6).copy()
    table.loc[table.index[2], "temp"] = 99.0
    given = tmp_path / "duels.csv"
    table.to_csv(given, index=False)
    out = tmp_path / "out.csv"
    args = ["explain", "--model", str(path), "--duels", str(given), "--out", str(out),
            "--what", "context", "--exact", "--quiet"]  # fmt: skip
    capsys.readouterr()
    assert main(args) != 0
    err = capsys.readouterr().err
    assert "duels.csv: outside the training range" in err
    assert "context column temp = 99 (training range" in err
    assert not out.exists()
    assert main([*args, "--allow-extrapolation"]) == 0
    assert len(pd.read_csv(out)) == 6
    # ids are never extrapolation: the items output of the same rows runs without the flag
    assert main([*args[:-4], "--quiet"]) == 0
    assert fn.kind == "cgpm"
