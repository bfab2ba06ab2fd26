"""The CLI's refusals (unknown device, over the memory budget) end in one line and exit 2;
stdout holds only the JSON line."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from prefshap_core import budget
from prefshap_core.cli import main
from prefshap_core.paths import repo_root
from prefshap_core.workflow.training import train

SAMPLE = repo_root() / "sample_data"


@pytest.mark.parametrize("command", ["train", "explain"])
def test_unknown_device_is_a_clear_error(tmp_path, capsys, command: str) -> None:
    if command == "train":
        argv = ["train", "--data", str(SAMPLE), "--out", str(tmp_path / "m.npz"),
                "--device", "tpu", "--quiet"]  # fmt: skip
    else:
        model = tmp_path / "m.npz"
        assert main(["train", "--model", "gpm", "--data", str(SAMPLE), "--out", str(model),
                     "--n-centres", "50",
                     "--lengthscale-scale", "1", "--penalty", "1e-3", "--quiet"]) == 0  # fmt: skip
        duels = tmp_path / "d.csv"
        pd.DataFrame({"left": ["c01"], "right": ["c02"]}).to_csv(duels, index=False)
        argv = ["explain", "--model", str(model), "--duels", str(duels),
                "--out", str(tmp_path / "o.csv"), "--device", "tpu", "--quiet"]  # fmt: skip
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "device must be 'cpu' or 'cuda'" in err and "Traceback" not in err


def test_train_stdout_holds_only_the_json_line(tmp_path, capsys, monkeypatch) -> None:
    real_train = train

    def chatty_train(*args, **kwargs):  # what the falkon backend does
        print("Iteration 1 - Elapsed 0.1s - training loss 0.5")
        return real_train(*args, **kwargs)

    monkeypatch.setattr("prefshap_core.cli.train_command.train", chatty_train)
    out = tmp_path / "m.npz"
    assert main(["train", "--model", "gpm", "--data", str(SAMPLE), "--out", str(out),
                 "--n-centres", "50",
                 "--lengthscale-scale", "1", "--penalty", "1e-3", "--quiet"]) == 0  # fmt: skip
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["out"] == str(out)
    assert "Iteration 1" in captured.err


def test_over_budget_training_is_refused_with_what_to_reduce(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "1M")
    code = main(["train", "--model", "gpm", "--data", str(SAMPLE), "--out", str(tmp_path / "m.npz"),
                 "--n-centres", "600", "--quiet"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "reduce the number of Nyström centres" in err and "PREFSHAP_MEMORY_BUDGET" in err
