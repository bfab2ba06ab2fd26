"""`prefshap explain --uncertainty` columns and `prefshap cycles`' posterior filter."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from prefshap_core.cli import main
from prefshap_core.data.build import build_duel_data
from prefshap_core.explain import Explainer, ExplainOptions
from prefshap_core.explain.uncertainty import interaction_sd
from prefshap_core.models.estimators import GPM
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.paths import repo_root

SAMPLE = repo_root() / "sample_data"
FAST = ["--n-centres", "120", "--lengthscale-scale", "2", "--penalty", "1e-3", "--quiet"]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    out = {}
    for kind, extra in (("gpm", ["--utility-weight", "1"]), ("cgpm", ["--utility-weight", "1"]),
                        ("squared", ["--loss", "squared"])):  # fmt: skip
        out[kind] = folder / f"{kind}.npz"
        model = "gpm" if kind == "squared" else kind
        assert main(["train", "--data", str(SAMPLE), "--model", model, "--seed", "1",
                     "--out", str(out[kind]), *FAST, *extra]) == 0  # fmt: skip
    return out


@pytest.fixture(scope="module")
def duels_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("duels") / "duels.csv"
    pd.read_csv(SAMPLE / "duels.csv").head(6).to_csv(path, index=False)
    return path


def _explain(model, duels, out, *extra):
    return main(["explain", "--model", str(model), "--duels", str(duels), "--out", str(out),
                 "--quiet", *map(str, extra)])  # fmt: skip


@pytest.mark.parametrize("what", ["items", "context"])
def test_uncertainty_columns_follow_the_contract(model_files, duels_csv, tmp_path, what):
    model = model_files["cgpm"]
    plain, with_sd = tmp_path / "plain.csv", tmp_path / "sd.csv"
    assert _explain(model, duels_csv, plain, "--what", what) == 0
    assert _explain(model, duels_csv, with_sd, "--what", what, "--uncertainty") == 0
    a, b = pd.read_csv(plain), pd.read_csv(with_sd)
    players = [c for c in a.columns if c not in ("left", "right", "winner", "output",
                                                 "base_value")]  # fmt: skip
    extra = ["output_sd"] + (["base_value_sd"] if what == "context" else [])
    at = list(a.columns).index("base_value") + 1
    expected = [*a.columns[:at], *extra, *a.columns[at:], *(f"sd:{p}" for p in players)]
    assert list(b.columns) == expected
    pd.testing.assert_frame_equal(a, b[a.columns])  # the values are unchanged
    # The numbers are the Python API's.
    fn = load_model(model)
    table = pd.read_csv(duels_csv)
    left, right = table["left"].to_numpy(str), table["right"].to_numpy(str)
    contexts = None
    if what == "context":
        indoor = (table["venue"] == "indoor").to_numpy(float)
        raw = np.stack([indoor, 1 - indoor], 1)
        names = list(fn.context_space.feature_names)
        raw = raw[:, [0, 1] if names[0].endswith("indoor") else [1, 0]]
        contexts = fn.context_space.standardise(raw)
    e = Explainer(fn, ExplainOptions(what=what, uncertainty=True))(left, right, contexts=contexts)
    np.testing.assert_allclose(b["output_sd"], e.output_sd, rtol=1e-12)
    np.testing.assert_allclose(b[[f"sd:{p}" for p in players]], e.sd, rtol=1e-12)
    assert (e.output_sd > 0).all()


def test_uncertainty_needs_a_posterior(model_files, duels_csv, tmp_path, capsys):
    assert _explain(model_files["squared"], duels_csv, tmp_path / "o.csv", "--uncertainty") == 2
    assert "squared-loss models have none" in capsys.readouterr().err
    stripped = replace(load_model(model_files["gpm"]), posterior_factor=None)
    save_model(stripped, tmp_path / "old.npz")
    assert _explain(tmp_path / "old.npz", duels_csv, tmp_path / "o.csv", "--uncertainty") == 2
    assert "retrain" in capsys.readouterr().err
    assert _explain(tmp_path / "old.npz", duels_csv, tmp_path / "o.csv") == 0  # as today


def test_sampled_values_get_sd_columns_after_their_se_columns(model_files, duels_csv, tmp_path):
    out = tmp_path / "o.csv"
    assert _explain(model_files["gpm"], duels_csv, out, "--what", "sides", "--samples", 8,
                    "--uncertainty") == 0  # fmt: skip
    b = pd.read_csv(out)
    se = [c for c in b.columns if c.startswith("se:")]
    sd = [c for c in b.columns if c.startswith("sd:")]
    assert se and [c[3:] for c in sd] == [c[3:] for c in se]
    assert list(b.columns).index(sd[0]) == list(b.columns).index(se[-1]) + 1
    fn = load_model(model_files["gpm"])
    options = ExplainOptions(what="sides", shapley="sampled:8", uncertainty=True)
    e = Explainer(fn, options)(b["left"].to_numpy(str), b["right"].to_numpy(str))
    np.testing.assert_allclose(b[sd], e.sd, rtol=1e-12)


def test_side_uncertainty_columns(model_files, duels_csv, tmp_path):
    model = model_files["gpm"]
    plain, with_sd = tmp_path / "plain.csv", tmp_path / "sd.csv"
    assert _explain(model, duels_csv, plain, "--what", "sides") == 0
    assert _explain(model, duels_csv, with_sd, "--what", "sides", "--uncertainty") == 0
    a, b = pd.read_csv(plain), pd.read_csv(with_sd)
    players = [c for c in a.columns if c.startswith(("left:", "right:"))]
    at = list(a.columns).index("base_value") + 1
    assert list(b.columns) == [*a.columns[:at], "output_sd", *a.columns[at:],
                               *(f"sd:{p}" for p in players)]  # fmt: skip
    assert players[0].startswith("left:") and (b[[f"sd:{p}" for p in players]] > 0).all().all()
    pd.testing.assert_frame_equal(a, b[a.columns])


def test_interaction_uncertainty_columns(model_files, duels_csv, tmp_path):
    model = model_files["gpm"]
    plain, with_sd = tmp_path / "plain.csv", tmp_path / "sd.csv"
    assert _explain(model, duels_csv, plain, "--what", "interactions") == 0
    assert _explain(model, duels_csv, with_sd, "--what", "interactions", "--uncertainty") == 0
    a, b = pd.read_csv(plain), pd.read_csv(with_sd)
    pairs = [c for c in a.columns if "*" in c]
    at = list(a.columns).index("base_value") + 1
    assert list(b.columns) == [*a.columns[:at], "output_sd", *a.columns[at:],
                               *(f"sd:{p}" for p in pairs)]  # fmt: skip
    pd.testing.assert_frame_equal(a, b[a.columns])
    fn = load_model(model)
    table = pd.read_csv(duels_csv)
    sd = interaction_sd(Explainer(fn), table["left"].to_numpy(str), table["right"].to_numpy(str))
    np.testing.assert_allclose(b[[f"sd:{p}" for p in pairs]], sd.values, rtol=1e-12)
    np.testing.assert_allclose(b["output_sd"], fn.decision_sd_on_pool(
        fn.items, *[np.searchsorted(fn.item_ids, table[s]) for s in ("left", "right")]
    ), rtol=1e-10)  # fmt: skip


def _cycles(capsys, *args):
    code = main(["cycles", *map(str, args)])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_cycles_without_a_posterior_filter_nothing(model_files, tmp_path, capsys):
    stripped = replace(load_model(model_files["cgpm"]), posterior_factor=None)
    save_model(stripped, tmp_path / "old.npz")
    code, report, err = _cycles(capsys, "--model", tmp_path / "old.npz", "--top", 5)
    assert code == 0 and "no posterior" in err
    assert report["cyclic_share_interval"] is None and report["n_draws"] == 0
    assert len(report["triangles"]) == 5
    assert all(t["p_cycle"] is None for t in report["triangles"])


def test_cycles_draws_are_seeded_and_filtered(model_files, capsys):
    model = model_files["cgpm"]
    # --top 1000: every candidate (the 1,000 strongest cycles) with its p_cycle
    args = ("--model", model, "--top", 1000, "--min-p-cycle", 0, "--n-draws", 200, "--quiet")
    _, first, _ = _cycles(capsys, *args)
    _, again, _ = _cycles(capsys, *args)
    assert first == again and first["n_draws"] == 200
    lo, hi = first["cyclic_share_interval"]
    assert 0 <= lo <= hi <= 1
    p_cycle = [t["p_cycle"] for t in first["triangles"]]
    assert all(0 <= p <= 1 for p in p_cycle)
    cut = sorted(p_cycle)[len(p_cycle) // 2]
    _, filtered, _ = _cycles(capsys, *args[:4], "--min-p-cycle", cut, *args[6:])
    kept = [t for t in first["triangles"] if t["p_cycle"] >= cut]
    assert filtered["triangles"] == kept
    _, top3, _ = _cycles(capsys, *args[:2], "--top", 3, *args[4:6], "--min-p-cycle", cut,
                         *args[6:])  # fmt: skip
    assert top3["triangles"] == kept[:3]  # --top applies after the filter


def _tables(kind: str, seed: int):
    """Items and duels of a utility game (f = x1 + x2) or rock-paper-scissors."""
    rng = np.random.default_rng(seed)
    if kind == "utility":
        x = rng.normal(size=(30, 2))
        items = pd.DataFrame({"id": [f"u{i}" for i in range(30)], "x1": x[:, 0], "x2": x[:, 1]})
        left, right = rng.integers(0, 30, 900), rng.integers(0, 30, 900)
        keep = left != right
        left, right = left[keep], right[keep]
        f = 1.5 * (x[:, 0] + x[:, 1])
        left_wins = rng.random(len(left)) < 1 / (1 + np.exp(-(f[left] - f[right])))
    else:
        kinds = np.repeat(np.arange(3), 4)  # 0 rock, 1 paper, 2 scissors
        items = pd.DataFrame({"id": [f"r{i}" for i in range(12)],
                              "rock": (kinds == 0) * 1.0, "paper": (kinds == 1) * 1.0,
                              "scissors": (kinds == 2) * 1.0,
                              "noise": rng.normal(0, 0.1, 12)})  # fmt: skip
        left, right = rng.integers(0, 12, 1200), rng.integers(0, 12, 1200)
        keep = kinds[left] != kinds[right]
        left, right = left[keep], right[keep]
        beats = (kinds[left] - kinds[right]) % 3 == 1  # paper > rock > scissors > paper
        left_wins = np.where(rng.random(len(left)) < 0.9, beats, ~beats)
    ids = items["id"].to_numpy()
    duels = pd.DataFrame({"left": ids[left], "right": ids[right],
                          "winner": np.where(left_wins, ids[left], ids[right])})  # fmt: skip
    numeric = [c for c in items.columns if c != "id"]
    data = build_duel_data(items, duels, name=kind, numeric=numeric, context_columns=[],
                           seed=seed)  # fmt: skip
    return data, kinds if kind == "rps" else None


def _gpm_file(data, path):
    model = GPM(n_centres=150, utility_weight=0.0, lengthscale_scale=1.0, seed=0).fit(data)
    return save_model(model.function_, path)


def test_a_gpm_of_a_utility_game_has_no_sure_cycle(tmp_path, capsys):
    data, _ = _tables("utility", seed=0)
    path = _gpm_file(data, tmp_path / "utility.npz")
    _, loose, _ = _cycles(capsys, "--model", path, "--min-p-cycle", 0, "--top", 1000, "--quiet")
    assert loose["triangles"]  # the point estimate has (noise) cycles...
    _, sure, _ = _cycles(capsys, "--model", path, "--top", 1000, "--quiet")
    assert sure["triangles"] == []  # ... none of them sure
    assert max(t["p_cycle"] for t in loose["triangles"]) < 0.95


def test_every_true_rock_paper_scissors_cycle_is_sure(tmp_path, capsys):
    data, kinds = _tables("rps", seed=1)
    path = _gpm_file(data, tmp_path / "rps.npz")
    _, report, _ = _cycles(capsys, "--model", path, "--top", 1000, "--quiet")
    fn = load_model(path)
    kind_of = dict(zip(fn.item_ids.tolist(), kinds[[int(i[1:]) for i in fn.item_ids]], strict=True))
    listed = {frozenset(t["items"]) for t in report["triangles"]}
    true_cycles = {
        frozenset((a, b, c))
        for a in fn.item_ids for b in fn.item_ids for c in fn.item_ids
        if (kind_of[a], kind_of[b], kind_of[c]) == (0, 1, 2)
    }  # fmt: skip
    assert len(true_cycles) == 64 and true_cycles <= listed
    assert all(t["p_cycle"] >= 0.95 for t in report["triangles"])
