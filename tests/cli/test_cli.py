"""The `prefshap` command: train / explain / datasets, as scripts call them."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.models.model_file import load_model
from prefshap_core.paths import repo_root

SAMPLE = repo_root() / "sample_data"
FAST = ["--n-centres", "200", "--lengthscale-scale", "2", "--quiet"]


@pytest.fixture(scope="module")
def cgpm_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "sample.npz"
    assert main(["train", "--data", str(SAMPLE), "--model", "cgpm", "--seed", "1",
                 "--out", str(out), *FAST]) == 0  # fmt: skip
    return out


def test_train_prints_one_json_line_and_writes_the_model(tmp_path, capsys):
    out = tmp_path / "m.npz"
    code = main(["train", "--data", str(SAMPLE), "--model", "gpm", "--seed", "0",
                 "--out", str(out), *FAST])  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert report["model"] == "gpm" and report["out"] == str(out)
    assert 0.5 < report["test"]["roc_auc"] <= 1.0
    assert {"load", "fit", "total"} <= set(report["seconds"])
    assert load_model(out).kind == "gpm"


def _duels_csv(tmp_path, fn, n=25, seed=0, **extra):
    rng = np.random.default_rng(seed)
    ids = np.asarray(fn.item_ids)
    left, right = rng.choice(ids, n), rng.choice(ids, n)
    table = pd.DataFrame({"left": left, "right": right, **extra})
    path = tmp_path / f"duels{seed}.csv"
    table.to_csv(path, index=False)
    return path, table


def test_explain_items_contract_and_exact_antisymmetry(tmp_path, cgpm_file):
    fn = load_model(cgpm_file)
    path, table = _duels_csv(tmp_path, fn)
    swapped = tmp_path / "swapped.csv"
    table.rename(columns={"left": "right", "right": "left"})[["left", "right"]].to_csv(
        swapped, index=False
    )
    for duels, out in ((path, tmp_path / "a.csv"), (swapped, tmp_path / "b.csv")):
        assert main(["explain", "--model", str(cgpm_file), "--duels", str(duels),
                     "--out", str(out), "--quiet"]) == 0  # fmt: skip
    a, b = pd.read_csv(tmp_path / "a.csv"), pd.read_csv(tmp_path / "b.csv")
    players = list(fn.item_space.group_names)
    assert list(a.columns) == ["left", "right", "output", "base_value", *players]
    assert list(a["left"]) == list(table["left"])  # input order kept
    values = a[players].to_numpy()
    np.testing.assert_allclose(values.sum(1) + a["base_value"], a["output"], atol=1e-10)
    assert np.array_equal(b[players].to_numpy(), -values)
    # the items output of a C-GPM is the context-averaged g
    expected = fn.decision_for_ids(table["left"], table["right"])
    np.testing.assert_allclose(a["output"], expected, atol=1e-12)


def test_explain_context_accepts_group_columns_or_model_columns(tmp_path, cgpm_file):
    fn = load_model(cgpm_file)
    space = fn.context_space
    group = space.group_names[0]
    categories = [name.split("=", 1)[1] for name in space.feature_names]
    rng = np.random.default_rng(1)
    chosen = rng.choice(categories, 12)
    by_group, _ = _duels_csv(tmp_path, fn, n=12, seed=1, **{group: chosen})
    raw = {name: (chosen == name.split("=", 1)[1]).astype(int) for name in space.feature_names}
    by_columns, _ = _duels_csv(tmp_path, fn, n=12, seed=1, **raw)
    outs = []
    for duels in (by_group, by_columns):
        out = tmp_path / f"ctx_{duels.stem}_{len(outs)}.csv"
        assert main(["explain", "--model", str(cgpm_file), "--duels", str(duels),
                     "--out", str(out), "--what", "context", "--quiet"]) == 0  # fmt: skip
        outs.append(pd.read_csv(out))
    pd.testing.assert_frame_equal(outs[0], outs[1])
    items_out = tmp_path / "items.csv"
    main(["explain", "--model", str(cgpm_file), "--duels", str(by_group), "--out",
          str(items_out), "--quiet"])  # fmt: skip
    # context base value = items output (the context-averaged g)
    np.testing.assert_allclose(outs[0]["base_value"], pd.read_csv(items_out)["output"])


def test_explain_errors_name_file_row_and_column(tmp_path, cgpm_file, capsys):
    fn = load_model(cgpm_file)
    path, table = _duels_csv(tmp_path, fn, n=5)
    table.loc[3, "right"] = "nobody"
    table.to_csv(path, index=False)
    code = main(["explain", "--model", str(cgpm_file), "--duels", str(path),
                 "--out", str(tmp_path / "o.csv")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "duels0.csv, row 4 (line 5), column 'right'" in err and "nobody" in err
    code = main(["explain", "--model", str(tmp_path / "missing.npz"), "--duels", str(path),
                 "--out", str(tmp_path / "o.csv")])  # fmt: skip
    assert code == 2 and "no such file" in capsys.readouterr().err


def test_sampling_options_and_gpm_context_refusal(tmp_path, cgpm_file, capsys):
    fn = load_model(cgpm_file)
    path, _ = _duels_csv(tmp_path, fn, n=6)
    out = tmp_path / "s.csv"
    assert main(["explain", "--model", str(cgpm_file), "--duels", str(path), "--out", str(out),
                 "--samples", "6", "--seed", "3", "--quiet"]) == 0  # fmt: skip
    frame = pd.read_csv(out)
    players = list(fn.item_space.group_names)
    np.testing.assert_allclose(frame[players].sum(axis=1) + frame["base_value"], frame["output"],
                               atol=1e-10)  # fmt: skip
    assert main(["explain", "--model", str(cgpm_file), "--duels", str(path), "--out", str(out),
                 "--exact", "--samples", "5"]) == 2  # fmt: skip
    assert "exclude each other" in capsys.readouterr().err


def test_datasets_command_and_module_entry_point():
    result = subprocess.run(
        [sys.executable, "-m", "prefshap_core.cli", "datasets"],
        capture_output=True, text=True, timeout=120, cwd=repo_root(),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "synthetic" in result.stdout and "<directory>" in result.stdout


def test_train_takes_explicit_lengthscales_as_they_are(tmp_path, capsys):
    out = tmp_path / "ls.npz"
    given = [0.5, 1.5, 2.5, 3.0, 3.0, 3.0]  # sample_data: speed, power, stamina, style x3
    code = main(["train", "--data", str(SAMPLE), "--model", "cgpm", "--out", str(out),
                 "--n-centres", "100", "--penalty", "1e-4", "--quiet",
                 "--lengthscales", ",".join(map(str, given)),
                 "--context-lengthscales", "2,2", "--context-cme-lambda", "0.01"])  # fmt: skip
    assert code == 0
    fn = load_model(out)
    assert fn.lengthscales.tolist() == given
    assert fn.context_lengthscales.tolist() == [2.0, 2.0]
    assert fn.context_cme_lambda == 0.01
    json.loads(capsys.readouterr().out)
    with pytest.raises(SystemExit) as exit_info:  # argparse refuses it, with usage
        main(["train", "--data", str(SAMPLE), "--out", str(out), "--lengthscales", "1,-2"])
    assert exit_info.value.code == 2
    assert "lengthscales must be positive" in capsys.readouterr().err


def test_train_takes_the_utility_weight_and_the_search_grids(tmp_path, capsys):
    out = tmp_path / "w.npz"
    code = main(["train", "--data", str(SAMPLE), "--model", "gpm", "--out", str(out),
                 "--n-centres", "100", "--penalty", "1e-4", "--quiet",
                 "--utility-weight", "5", "--lengthscale-scales", "1.5,3"])  # fmt: skip
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["utility_weight"] == 5.0 and report["lengthscale_scale"] in (1.5, 3.0)
    assert load_model(out).utility_weight == 5.0
    code = main(["train", "--data", str(SAMPLE), "--model", "gpm", "--out", str(out),
                 "--n-centres", "100", "--penalty", "1e-4", "--lengthscale-scale", "2",
                 "--quiet", "--utility-weights", "0,50"])  # fmt: skip
    assert code == 0
    assert json.loads(capsys.readouterr().out)["utility_weight"] in (0.0, 50.0)
    with pytest.raises(SystemExit) as exit_info:
        main(["train", "--data", str(SAMPLE), "--out", str(out), "--utility-weights", "1,-2"])
    assert exit_info.value.code == 2
    assert "utility weights must be finite numbers >= 0" in capsys.readouterr().err
