"""`prefshap cycles`: the JSON contract, item choice, contexts, and located errors."""

import json

import numpy as np
import pytest

from prefshap_core.cli import main
from prefshap_core.models.model_file import load_model
from prefshap_core.paths import repo_root

SAMPLE = repo_root() / "sample_data"
FAST = ["--n-centres", "200", "--lengthscale-scale", "2", "--quiet"]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    out = {}
    for kind in ("cgpm", "upm"):
        out[kind] = folder / f"{kind}.npz"
        assert main(["train", "--data", str(SAMPLE), "--model", kind, "--seed", "1",
                     "--out", str(out[kind]), *FAST]) == 0  # fmt: skip
    return out


def _cycles(capsys, *args):
    code = main(["cycles", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_one_json_line_with_the_contract_keys(model_files, capsys):
    # --min-p-cycle 0: the listing itself (none of this small model's cycles is sure)
    code, out, err = _cycles(capsys, "--model", model_files["cgpm"], "--top", 5,
                             "--min-p-cycle", 0)  # fmt: skip
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    report = json.loads(lines[0])
    assert set(report) == {
        "n_items", "cyclic_share", "cyclic_share_interval", "n_draws", "n_cyclic_triangles",
        "n_scored", "n_listed", "triangles",
    }  # fmt: skip
    fn = load_model(model_files["cgpm"])
    assert report["n_items"] == min(500, len(fn.item_ids))
    assert 0.0 < report["cyclic_share"] < 1.0
    assert 0 < len(report["triangles"]) <= 5
    position = {str(i): k for k, i in enumerate(fn.item_ids)}
    strengths = []
    for triangle in report["triangles"]:
        a, b, c = triangle["items"]
        assert position[a] < position[b] and position[a] < position[c]
        g = fn.decision_for_ids(np.array([a, b, c]), np.array([b, c, a]))  # context-averaged
        np.testing.assert_allclose(triangle["p"], 1 / (1 + np.exp(-g)), atol=1e-9)
        assert min(triangle["p"]) > 0.5
        strengths.append(g.sum())
    assert strengths == sorted(strengths, reverse=True)
    assert "Searching cyclic triangles" in err  # progress goes to stderr
    # every count in the JSON line: the brute-force count of cyclic triangles
    g = fn.decision_matrix(fn.items[: report["n_items"]])
    n = len(g)
    brute = sum(
        1
        for a in range(n) for b in range(a + 1, n) for c in range(b + 1, n)
        if (g[a, b] > 0 and g[b, c] > 0 and g[c, a] > 0)
        or (g[a, c] > 0 and g[c, b] > 0 and g[b, a] > 0)
    )  # fmt: skip
    assert report["n_cyclic_triangles"] == brute
    assert report["n_listed"] == len(report["triangles"])
    assert report["n_scored"] >= report["n_listed"]


def test_triangles_carry_the_item_names(model_files, capsys):
    fn = load_model(model_files["cgpm"])
    assert fn.item_names is not None  # sample_data/items.csv has a name column
    name = dict(zip(fn.item_ids.tolist(), fn.item_names.tolist(), strict=True))
    assert any(name[i] != i for i in name)
    _, out, _ = _cycles(capsys, "--model", model_files["cgpm"], "--top", 3,
                        "--min-p-cycle", 0, "--quiet")  # fmt: skip
    triangles = json.loads(out)["triangles"]
    assert triangles
    for triangle in triangles:
        assert triangle["names"] == [name[i] for i in triangle["items"]]


def test_without_item_names_the_names_are_the_ids(model_files, capsys, tmp_path):
    arrays = dict(np.load(model_files["cgpm"]))
    del arrays["item_names"]
    bare = tmp_path / "bare.npz"
    np.savez(bare, **arrays)
    assert load_model(bare).item_names is None
    _, out, _ = _cycles(capsys, "--model", bare, "--top", 3, "--min-p-cycle", 0, "--quiet")
    for triangle in json.loads(out)["triangles"]:
        assert triangle["names"] == triangle["items"]


def test_upm_has_no_cycles(model_files, capsys):
    code, out, _ = _cycles(capsys, "--model", model_files["upm"], "--quiet")
    report = json.loads(out)
    assert code == 0 and report["cyclic_share"] <= 1e-12 and report["triangles"] == []


def test_max_items_items_file_and_context(model_files, capsys, tmp_path):
    path = model_files["cgpm"]
    fn = load_model(path)
    code, out, _ = _cycles(capsys, "--model", path, "--max-items", 7, "--quiet")
    assert code == 0 and json.loads(out)["n_items"] == 7
    ids = [str(i) for i in fn.item_ids[[9, 2, 30, 4]]]
    listed = tmp_path / "items.txt"
    listed.write_text("\n".join(ids) + "\n\n")
    code, out, _ = _cycles(capsys, "--model", path, "--items-file", listed, "--quiet")
    assert code == 0 and json.loads(out)["n_items"] == 4
    for triangle in json.loads(out)["triangles"]:
        assert set(triangle["items"]) <= set(ids)
    # A file in another order gives the same answer: items are taken in pool order.
    shuffled = fn.item_ids[np.random.default_rng(0).permutation(len(fn.item_ids))[:12]]
    listed.write_text("\n".join(map(str, shuffled)))
    code, out, _ = _cycles(capsys, "--model", path, "--items-file", listed, "--quiet",
                           "--min-p-cycle", 0)  # fmt: skip
    position = {str(i): k for k, i in enumerate(fn.item_ids)}
    triangles = json.loads(out)["triangles"]
    assert code == 0 and triangles
    for triangle in triangles:
        first, *rest = (position[i] for i in triangle["items"])
        assert all(first < other for other in rest)
    base = json.loads(_cycles(capsys, "--model", path, "--quiet")[1])
    indoor = json.loads(_cycles(capsys, "--model", path, "--context", "venue=indoor",
                                "--quiet")[1])  # fmt: skip
    assert indoor["n_items"] == base["n_items"] and indoor["cyclic_share"] != base["cyclic_share"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--max-items", "2001"], "at most 2,000 items"),
        (["--max-items", "2"], "at least 3"),
        (["--top", "-1"], "--top must be at least 0"),
        (["--max-items", "5", "--items-file", "x.txt"], "exclude each other"),
        (["--context", "venue=moon"], "unknown category of 'venue' (known: indoor, outdoor)"),
        (["--context", "surface=clay"], "'surface' is not a context group or column"),
        (["--context", "venue"], "expected k=v"),
    ],
)
def test_bad_options_exit_2_with_a_message(model_files, capsys, args, message):
    code, out, err = _cycles(capsys, "--model", model_files["cgpm"], *args)
    assert code == 2 and out == ""
    assert err.startswith("prefshap cycles: error: ") and message in err


def test_bad_items_files_are_located(model_files, capsys, tmp_path):
    path = model_files["cgpm"]
    first = str(load_model(path).item_ids[0])
    cases = {
        "unknown.txt": (f"{first}\nnobody\n", "unknown.txt: line 2: unknown item id 'nobody'"),
        "twice.txt": (f"{first}\n\n{first}\n", f"twice.txt: line 3: item id '{first}' is "
                      "already on line 1"),
        "short.txt": (f"{first}\n", "short.txt: needs at least 3 item ids, found 1"),
    }  # fmt: skip
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        code, _, err = _cycles(capsys, "--model", path, "--items-file", tmp_path / name)
        assert code == 2 and message in err, err
    code, _, err = _cycles(capsys, "--model", path, "--items-file", tmp_path / "absent.txt")
    assert code == 2 and "absent.txt: no such file" in err
    code, _, err = _cycles(capsys, "--model", tmp_path / "none.npz")
    assert code == 2 and "none.npz" in err


def test_context_on_a_model_without_context(model_files, capsys):
    code, _, err = _cycles(capsys, "--model", model_files["upm"], "--context", "venue=indoor")
    assert code == 2 and "needs a C-GPM" in err
