"""Pickle-free model files: save and load a PreferenceFunction (docs/model-format.md).

The reader validates every array it needs (presence, dtype, shape, finiteness) and
says precisely what is wrong, because files may come from other programs. Writing
is atomic (temporary file, then rename), so a crash never leaves half a model.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from prefshap_core.data.feature_space import FeatureSpace
from prefshap_core.errors import ModelFileError
from prefshap_core.models.model_checks import check_model_numbers, rename_reserved_players
from prefshap_core.models.preference_function import KINDS, PreferenceFunction
from prefshap_core.models.safe_npz import read_arrays

FORMAT_VERSION = 2  # what the writer writes
READABLE_VERSIONS = (1, 2)  # version 1: no utility_weight, read as 0
# Every array docs/model-format.md defines: the reader reads these and nothing else
# (other members of a file are never decompressed). Optional ones may be absent.
DOCUMENTED_ARRAYS = {
    "format_version": "required",
    "kind": "required",
    "feature_names": "required",
    "group_names": "required",
    "feature_group": "required",
    "item_ids": "required",
    "items": "required",
    "feature_offset": "required",
    "feature_scale": "required",
    "lengthscales": "required",
    "centres_left": "required",
    "centres_right": "required",
    "alpha": "required",
    "cme_lambda": "required",
    "metadata": "optional",
    "utility_weight": "version 2",  # required from version 2 (w >= 0); absent in 1
    "context_names": "cgpm",
    "contexts": "cgpm",
    "context_weights": "cgpm",
    "context_lengthscales": "cgpm",
    "centres_context": "cgpm",
    "context_offset": "cgpm",
    "context_scale": "cgpm",
    "context_cme_lambda": "cgpm",
    "context_group_names": "optional",
    "context_feature_group": "optional",
    "posterior_factor": "optional",  # (M, r) F, Sigma ~= F F^T: the uncertainty
    "item_names": "optional",  # (n,) display names beside item_ids
}
# Longest metadata JSON read (it is informational; a deep or huge one is refused).
_MAX_METADATA_CHARS = 1_000_000


def model_arrays(fn: PreferenceFunction) -> dict[str, np.ndarray]:
    """The arrays of the file, by name (the contract of docs/model-format.md)."""
    space = fn.item_space
    utility_weight = 0.0 if fn.kind == "upm" else float(fn.utility_weight)
    arrays: dict[str, np.ndarray] = {
        "format_version": np.array(FORMAT_VERSION, dtype=np.int64),
        "kind": np.array(fn.kind),
        "feature_names": _str_array(space.feature_names),
        "group_names": _str_array(space.group_names),
        "feature_group": space.feature_group.astype(np.int64),
        "item_ids": _str_array(fn.item_ids),
        "items": np.asarray(fn.items, dtype=np.float64),
        "feature_offset": space.offset,
        "feature_scale": space.scale,
        "lengthscales": np.asarray(fn.lengthscales, dtype=np.float64),
        "centres_left": np.asarray(fn.centres_left, dtype=np.float64),
        "centres_right": np.asarray(fn.centres_right, dtype=np.float64),
        "alpha": np.asarray(fn.alpha, dtype=np.float64),
        "cme_lambda": np.array(float(fn.cme_lambda)),
        "utility_weight": np.array(utility_weight, dtype=np.float64),
        "metadata": np.array(json.dumps(fn.metadata, default=_json_default, sort_keys=True)),
    }
    if fn.kind == "cgpm":
        ctx = fn.context_space
        assert ctx is not None
        arrays.update(
            context_names=_str_array(ctx.feature_names),
            contexts=np.asarray(fn.contexts, dtype=np.float64),
            context_weights=np.asarray(fn.context_weights, dtype=np.float64),
            context_lengthscales=np.asarray(fn.context_lengthscales, dtype=np.float64),
            centres_context=np.asarray(fn.centres_context, dtype=np.float64),
            context_offset=ctx.offset,
            context_scale=ctx.scale,
            context_cme_lambda=np.array(float(fn.context_cme_lambda)),
            context_group_names=_str_array(ctx.group_names),
            context_feature_group=ctx.feature_group.astype(np.int64),
        )
    if fn.posterior_factor is not None:
        arrays["posterior_factor"] = np.asarray(fn.posterior_factor, dtype=np.float64)
    if fn.item_names is not None:
        arrays["item_names"] = _str_array(fn.item_names)
    assert set(arrays) <= set(DOCUMENTED_ARRAYS), "undocumented array"
    return arrays


# Members written without compression: the posterior factor is dense float noise that
# deflate shrinks by 3.5 % at ~30 MB/s (2,000 centres: 32 MB, 1.2 s of every save,
# twice in the dashboard's cache with its baseline). Readers take either method.
STORED_ARRAYS = frozenset({"posterior_factor"})


def model_to_bytes(fn: PreferenceFunction) -> bytes:
    """The ``.npz`` bytes of ``fn``: what ``np.savez_compressed`` writes, except that
    the ``STORED_ARRAYS`` members are stored, not deflated (``np.load`` reads both)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", allowZip64=True) as archive:
        for key, value in model_arrays(fn).items():
            info = zipfile.ZipInfo(f"{key}.npy")  # the fixed 1980 date: same bytes each time
            stored = key in STORED_ARRAYS
            info.compress_type = zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(value), allow_pickle=False)
    return buffer.getvalue()


def save_model(fn: PreferenceFunction, path: str | Path) -> Path:
    """Write ``fn`` to ``path`` (atomically); returns the path."""
    path = Path(path)
    payload = model_to_bytes(fn)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def load_model(source: str | Path | bytes) -> PreferenceFunction:
    """Read a model file (path or bytes); ModelFileError says what is wrong."""
    name = "model file" if isinstance(source, bytes) else Path(source).name
    arrays = read_arrays(source, name, DOCUMENTED_ARRAYS)
    try:
        fn = _function_from_arrays(arrays, name)
    except ModelFileError:
        raise
    except ValueError as err:  # the arrays disagree in a way the reader did not name
        raise ModelFileError(f"{name}: {err} (see docs/model-format.md)") from None
    check_model_numbers(fn, name)
    return rename_reserved_players(fn)


# -- reading -------------------------------------------------------------------


class _Reader:
    def __init__(self, arrays: dict[str, np.ndarray], name: str) -> None:
        self.arrays = arrays
        self.name = name

    def fail(self, message: str) -> ModelFileError:
        return ModelFileError(f"{self.name}: {message} (see docs/model-format.md)")

    def get(self, key: str) -> np.ndarray:
        if key not in self.arrays:
            raise self.fail(f"missing required array '{key}'")
        return self.arrays[key]

    def floats(self, key: str, shape: tuple[int | None, ...]) -> np.ndarray:
        value = self.get(key)
        if value.dtype.kind not in "fiu":
            raise self.fail(f"'{key}' must be numeric, got dtype {value.dtype}")
        value = value.astype(np.float64)
        if value.ndim != len(shape) or any(
            want is not None and got != want for got, want in zip(value.shape, shape, strict=True)
        ):
            expected = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
            raise self.fail(f"'{key}' has shape {value.shape}, expected {expected}")
        if not np.all(np.isfinite(value)):
            raise self.fail(f"'{key}' contains NaN or infinite values")
        return value

    def scalar(self, key: str) -> float:
        return float(self.floats(key, ()))

    def strings(self, key: str, length: int | None = None) -> np.ndarray:
        value = self.get(key)
        if value.dtype.kind not in "US" or value.ndim != 1:
            raise self.fail(f"'{key}' must be a 1-d string array, got {value.dtype} {value.shape}")
        if length is not None and len(value) != length:
            raise self.fail(f"'{key}' has {len(value)} entries, expected {length}")
        return value.astype(str)

    def text(self, key: str) -> str:
        value = self.get(key)
        if value.dtype.kind not in "US" or value.ndim != 0:
            raise self.fail(f"'{key}' must be a string scalar")
        return str(value)

    def groups(self, names_key: str, index_key: str, n_columns: int) -> tuple[Any, np.ndarray]:
        names = self.strings(names_key)
        index = self.get(index_key)
        if index.dtype.kind not in "iu" or index.shape != (n_columns,):
            raise self.fail(f"'{index_key}' must be {n_columns} integers")
        if n_columns and (index.min() < 0 or index.max() >= len(names)):
            raise self.fail(f"'{index_key}' points outside '{names_key}'")
        if set(index.tolist()) != set(range(len(names))):
            raise self.fail(f"every entry of '{names_key}' needs at least one column")
        return tuple(names.tolist()), index.astype(np.int64)

    def space(
        self, names_key: str, offset_key: str, scale_key: str, groups: tuple[str, str] | None
    ) -> FeatureSpace:
        names = self.strings(names_key)
        d = len(names)
        offset = self.floats(offset_key, (d,))
        scale = self.floats(scale_key, (d,))
        if np.any(scale <= 0):
            raise self.fail(f"'{scale_key}' must be positive")
        if groups is not None and groups[0] in self.arrays:
            group_names, feature_group = self.groups(groups[0], groups[1], d)
        else:  # no groups given: every column is its own player
            group_names, feature_group = tuple(names.tolist()), np.arange(d)
        return FeatureSpace(tuple(names.tolist()), group_names, feature_group, offset, scale)


def _function_from_arrays(arrays: dict[str, np.ndarray], name: str) -> PreferenceFunction:
    r = _Reader(arrays, name)
    version = r.scalar("format_version")
    if version not in READABLE_VERSIONS:
        known = " and ".join(str(v) for v in READABLE_VERSIONS)
        raise r.fail(f"format_version {version:g} is not supported (this reader knows {known})")
    kind = r.text("kind")
    if kind not in KINDS:
        raise r.fail(f"kind must be one of {', '.join(KINDS)}, got '{kind}'")
    utility_weight = 0.0  # version 1 files: the plain GPM / C-GPM
    if version >= 2:
        utility_weight = r.scalar("utility_weight")
        if utility_weight < 0:
            raise r.fail("'utility_weight' must be >= 0")
        if kind == "upm":
            utility_weight = 0.0  # ignored: a UPM is all utility
    space = r.space(
        "feature_names", "feature_offset", "feature_scale", ("group_names", "feature_group")
    )
    if "group_names" not in arrays:
        raise r.fail("missing required array 'group_names'")
    d = space.n_features
    item_ids = r.strings("item_ids")
    n = len(item_ids)
    if len(set(item_ids.tolist())) != n:
        raise r.fail("'item_ids' contains duplicates")
    alpha = r.floats("alpha", (None,))
    m = len(alpha)
    lengthscales = r.floats("lengthscales", (d,))
    if np.any(lengthscales <= 0):
        raise r.fail("'lengthscales' must be positive")
    cme_lambda = r.scalar("cme_lambda")
    if cme_lambda <= 0:
        raise r.fail("'cme_lambda' must be positive")
    metadata: dict[str, Any] = {}
    if "metadata" in arrays:
        text = r.text("metadata")
        if len(text) > _MAX_METADATA_CHARS:
            raise r.fail(f"'metadata' is longer than {_MAX_METADATA_CHARS:,} characters")
        try:
            metadata = json.loads(text)
        except json.JSONDecodeError as err:
            raise r.fail(f"'metadata' is not valid JSON ({err})") from None
        except RecursionError:
            raise r.fail("'metadata' is nested too deeply") from None
        if not isinstance(metadata, dict):
            raise r.fail("'metadata' must be a JSON object")
    fields: dict[str, Any] = dict(
        kind=kind,
        item_space=space,
        item_ids=item_ids,
        items=r.floats("items", (n, d)),
        lengthscales=lengthscales,
        centres_left=r.floats("centres_left", (m, d)),
        centres_right=r.floats("centres_right", (m, d)),
        alpha=alpha,
        cme_lambda=cme_lambda,
        utility_weight=utility_weight,
        metadata=metadata,
    )
    if "posterior_factor" in arrays:
        fields["posterior_factor"] = _posterior_factor(r, m)
    if "item_names" in arrays:
        fields["item_names"] = r.strings("item_names", n)
    if kind == "cgpm":
        ctx_space = r.space(
            "context_names",
            "context_offset",
            "context_scale",
            ("context_group_names", "context_feature_group"),
        )
        dc = ctx_space.n_features
        contexts = r.floats("contexts", (None, dc))
        weights = r.floats("context_weights", (len(contexts),))
        if np.any(weights <= 0):
            raise r.fail("'context_weights' must be positive")
        context_lengthscales = r.floats("context_lengthscales", (dc,))
        if np.any(context_lengthscales <= 0):
            raise r.fail("'context_lengthscales' must be positive")
        context_cme_lambda = r.scalar("context_cme_lambda")
        if context_cme_lambda <= 0:
            raise r.fail("'context_cme_lambda' must be positive")
        fields.update(
            context_space=ctx_space,
            contexts=contexts,
            context_weights=weights,
            context_lengthscales=context_lengthscales,
            centres_context=r.floats("centres_context", (m, dc)),
            context_cme_lambda=context_cme_lambda,
        )
    return PreferenceFunction(**fields)


def _posterior_factor(r: _Reader, m: int) -> np.ndarray:
    """The optional (M, r) posterior factor: float, 1 <= r <= M columns, finite."""
    if r.get("posterior_factor").dtype.kind != "f":
        raise r.fail("'posterior_factor' must be a float array")
    factor = r.floats("posterior_factor", (m, None))
    if not 1 <= factor.shape[1] <= m:
        raise r.fail(f"'posterior_factor' has {factor.shape[1]} columns, expected 1 to {m}")
    return factor


def _str_array(values: Any) -> np.ndarray:
    return np.array([str(v) for v in values], dtype=str)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"cannot store {type(value).__name__} in model metadata")
