"""Model-file limits: crafted model files end in one located error, quickly,
without inflating anything they do not need; results that would be NaN are refused."""

from __future__ import annotations

import io
import json
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from prefshap_core import budget
from prefshap_core.cli import main
from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import ModelFileError
from prefshap_core.models.model_file import DOCUMENTED_ARRAYS, load_model, model_arrays
from prefshap_core.models.preference_function import PreferenceFunction


def _function(
    kind: str = "gpm", groups: tuple[str, ...] = ("h", "w", "hand")
) -> PreferenceFunction:
    rng = np.random.default_rng(0)
    n, m = 20, 8
    space = FeatureSpace(
        ("h", "w", "hand=L", "hand=R"), groups, np.array([0, 1, 2, 2]), np.zeros(4), np.ones(4)
    )
    items = rng.normal(size=(n, 4))
    extra = {}
    if kind == "cgpm":
        ctx = FeatureSpace(("s=a", "s=b"), ("s",), np.array([0, 0]), np.zeros(2), np.ones(2))
        contexts = np.eye(2)
        extra = dict(
            context_space=ctx, contexts=contexts, context_weights=np.array([2.0, 3.0]),
            context_lengthscales=np.ones(2), centres_context=contexts[rng.integers(0, 2, m)],
            context_cme_lambda=0.01,
        )  # fmt: skip
    return PreferenceFunction(
        kind=kind, item_space=space, item_ids=np.array([f"i{k}" for k in range(n)]),
        items=items, lengthscales=np.ones(4), centres_left=items[rng.integers(0, n, m)],
        centres_right=items[rng.integers(0, n, m)], alpha=rng.normal(size=m), cme_lambda=1e-2,
        **extra,
    )  # fmt: skip


def _npz(arrays: dict[str, np.ndarray], **members: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, value in arrays.items():
            payload = io.BytesIO()
            np.save(payload, value, allow_pickle=False)
            archive.writestr(f"{key}.npy", payload.getvalue())
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _with(kind: str = "gpm", **changes: np.ndarray) -> bytes:
    arrays = model_arrays(_function(kind))
    arrays.update(changes)
    return _npz(arrays)


def test_documented_arrays_list_holds_every_written_array() -> None:
    written = set(model_arrays(_function("cgpm")))
    assert written <= set(DOCUMENTED_ARRAYS)
    assert "utility_weight" in DOCUMENTED_ARRAYS  # format 2 (optional here)


def test_undocumented_members_are_never_decompressed() -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for key, value in model_arrays(_function()).items():
            payload = io.BytesIO()
            np.save(payload, value)
            archive.writestr(f"{key}.npy", payload.getvalue())
        # 256 MiB of zeros deflate to ~250 KB: a bomb np.load would inflate.
        with archive.open("junk.npy", "w", force_zip64=True) as junk:
            header = io.BytesIO()
            np.lib.format.write_array_header_1_0(
                header, {"descr": "<f8", "fortran_order": False, "shape": (2**25,)}
            )
            junk.write(header.getvalue())
            chunk = bytes(2**20)
            for _ in range(256):
                junk.write(chunk)
    data = buffer.getvalue()
    assert len(data) < 2 * 2**20
    tracemalloc.start()
    fn = load_model(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert fn.kind == "gpm"
    assert peak < 20 * 2**20


def test_declared_sizes_are_checked_against_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(budget.MEMORY_BUDGET_ENV, "1M")
    big = _with(items=np.zeros((20, 4)), alpha=np.zeros(2**16), centres_left=np.zeros((2**16, 4)))
    with pytest.raises(ModelFileError, match="reduce the model's number of centres"):
        load_model(big)


def _damaged_deflate() -> bytes:
    data = bytearray(_with(items=np.random.default_rng(1).normal(size=(20, 4))))
    archive = zipfile.ZipFile(io.BytesIO(bytes(data)))
    info = archive.getinfo("items.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra) + 20
    data[start : start + 40] = bytes(40)
    return bytes(data)


def _flagged(flag: int = 0, method: int | None = None) -> bytes:
    arrays = model_arrays(_function())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for key, value in arrays.items():
            payload = io.BytesIO()
            np.save(payload, value)
            info = zipfile.ZipInfo(f"{key}.npy")
            archive.writestr(info, payload.getvalue())
            if key == "alpha":
                info.flag_bits |= flag
                if method is not None:
                    info.compress_type = method
    return buffer.getvalue()


def _plain_npy() -> bytes:
    payload = io.BytesIO()
    np.save(payload, np.zeros(3))
    return payload.getvalue()


def _lying_header() -> bytes:
    arrays = model_arrays(_function())
    payload = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        payload, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**4)}
    )
    payload.write(bytes(64))
    return _npz(
        {k: v for k, v in arrays.items() if k != "items"}, **{"items.npy": payload.getvalue()}
    )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (_damaged_deflate, "damaged"),
        (lambda: _flagged(flag=0x1), "encrypted"),
        (lambda: _flagged(method=zipfile.ZIP_BZIP2), "compression method 12"),
        (_plain_npy, "not a readable .npz"),
        (lambda: _npz(model_arrays(_function()), **{"notes.txt": b"hi"}), "not a .npy array"),
        (lambda: _with(metadata=np.array("[" * 100_000 + "]" * 100_000)), "nested too deeply"),
        (lambda: _with(metadata=np.array("[1, 2]")), "JSON object"),
        (_lying_header, "declares shape"),
        (lambda: b"PK\x03\x04" + bytes(100), "not a readable .npz"),
    ],
    ids=[
        "deflate",
        "encrypted",
        "bzip2",
        "plain-npy",
        "non-npy",
        "deep-json",
        "json-list",
        "lying-header",
        "truncated",
    ],
)
def test_malformed_zips_are_one_located_error(make, message: str) -> None:
    with pytest.raises(ModelFileError, match=message) as caught:
        load_model(make())
    assert "allow_pickle" not in str(caught.value)
    assert str(caught.value).startswith("model file: ")


@pytest.mark.parametrize(
    ("kind", "changes", "message"),
    [
        ("gpm", {"lengthscales": np.full(4, 1e-200)}, "below the smallest"),
        ("gpm", {"items": np.full((20, 4), 1e200) * np.arange(20)[:, None]}, "overflow"),
        ("gpm", {"alpha": np.full(8, 1e308)}, "alpha"),
        ("cgpm", {"contexts": np.zeros((0, 2)), "context_weights": np.zeros(0)}, "empty"),
        ("cgpm", {"context_scale": np.full(2, 1e-300)}, "context_scale"),
    ],
    ids=["tiny-lengthscale", "huge-items", "huge-alpha", "no-contexts", "tiny-context-scale"],
)
def test_models_whose_results_would_be_nan_are_refused(kind, changes, message) -> None:
    with pytest.raises(ModelFileError, match=message):
        load_model(_with(kind, **changes))


def test_cli_refuses_a_crafted_model_with_exit_2(tmp_path: Path, capsys) -> None:
    model = tmp_path / "crafted.npz"
    model.write_bytes(_with(lengthscales=np.full(4, 1e-200)))
    duels = tmp_path / "duels.csv"
    pd.DataFrame({"left": ["i0"], "right": ["i1"]}).to_csv(duels, index=False)
    code = main(["explain", "--model", str(model), "--duels", str(duels),
                 "--out", str(tmp_path / "out.csv"), "--quiet"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "crafted.npz" in err and "lengthscales" in err and str(tmp_path) not in err


def test_reserved_player_names_of_a_foreign_model_are_renamed(tmp_path: Path, capsys) -> None:
    fn = _function(groups=("output", "se:w", "output"))
    model = tmp_path / "foreign.npz"
    model.write_bytes(_npz(model_arrays(fn)))
    back = load_model(model)
    assert back.item_space.group_names == ("output (group)", "se:w (group)", "output (group 2)")
    assert back.metadata["renamed_players"]["output"] == "output (group)"
    duels = tmp_path / "duels.csv"
    pd.DataFrame({"left": ["i0", "i2"], "right": ["i1", "i3"]}).to_csv(duels, index=False)
    out = tmp_path / "out.csv"
    assert main(["explain", "--model", str(model), "--duels", str(duels),
                 "--out", str(out)]) == 0  # fmt: skip
    header = pd.read_csv(out).columns.tolist()
    assert header == ["left", "right", "output", "base_value", *back.item_space.group_names]
    captured = capsys.readouterr()
    assert "output (group)" in captured.err
    assert len(captured.out.strip().splitlines()) <= 1
    json.loads(captured.err.strip().splitlines()[-1])  # the summary stays parseable
