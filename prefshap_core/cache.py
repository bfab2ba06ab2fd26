"""A small, pickle-free disk cache for trained models and explanations.

Training and explaining cost seconds to minutes; a reload, a second visitor of the
dashboard, or a restarted server should not pay again. Entries are keyed by the
fingerprints of the data and the settings (``workflow.data_fingerprint`` /
``settings_fingerprint``), so a changed upload or hyperparameter never hits a stale
entry.

Layout under the root (``$PREFSHAP_CACHE_DIR``, default ``<repo>/.prefshap_cache``)::

    models/<key>/model.npz         the model file (docs/model-format.md)
                 split.npz         train / validation / test duel indices
                 result.json       metrics, SpecR, timings, settings
                 integrity.json    checksums of the files, engine version (signature)
    explanations/<key>/arrays.npz  values, outputs, ids, labels, ...
                       meta.json   player names, what, orientation, meta
                       integrity.json

Every key comes from :func:`entry_key`.

Nothing is ever unpickled (``allow_pickle=False``; JSON for the rest), so a cache
directory shared between users cannot execute code. Each entry is written into a
temporary folder and renamed into place in one step, so readers see a whole entry
or none; temporary folders a killed writer left behind are removed once they are
old (:meth:`DiskCache.remove_orphans`, run when a cache is opened). An entry that
cannot be read (truncated, edited, from an older format) is treated as missing and
removed, so the caller recomputes and rewrites it.

Each entry carries a manifest of its files' checksums and the engine version
(:mod:`cache_integrity`): a file that does not match is a miss, and is logged. With
``PREFSHAP_CACHE_SECRET`` set the manifest is HMAC-signed and only validly signed
entries are served (entries written before checksums existed are misses too).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from prefshap_core.cache_integrity import IntegrityError, read_verified, seal
from prefshap_core.data.duel_data import Split
from prefshap_core.explain.explanation import Explanation
from prefshap_core.explain.options import ENGINE_VERSION, ExplainOptions
from prefshap_core.models.model_file import load_model, save_model
from prefshap_core.paths import repo_root
from prefshap_core.workflow.results import TrainingResult
from prefshap_core.workflow.settings import TrainSettings

CACHE_DIR_ENV = "PREFSHAP_CACHE_DIR"
FORMAT_VERSION = 2  # 2: keys from entry_key (names, units and grouping included)
_LOG = logging.getLogger(__name__)
# A temporary entry folder this old cannot belong to a live writer (writes take seconds).
ORPHAN_AGE_S = 600.0

# Explanation fields holding per-duel arrays (saved in arrays.npz). Object arrays of
# strings (labels) are saved as unicode plus a mask of the missing cells.
_ARRAY_FIELDS = (
    "values",
    "base_values",
    "outputs",
    "data",
    "duel_ids",
    "left_ids",
    "right_ids",
    "winners",
    "standard_errors",
    "left_labels",
    "right_labels",
    "data_labels",
    "context_values",
    "sd",  # posterior sds (uncertainty explanations only; absent: None)
    "output_sd",
    "base_value_sd",
)
_TEXT_FIELDS = {"duel_ids", "left_ids", "right_ids", "left_labels", "right_labels", "data_labels"}


def cache_dir() -> Path:
    """``$PREFSHAP_CACHE_DIR`` if set, else ``<repo>/.prefshap_cache``."""
    configured = os.environ.get(CACHE_DIR_ENV, "").strip()
    return Path(configured).expanduser() if configured else repo_root() / ".prefshap_cache"


def entry_key(kind: str, *parts: str, duels: np.ndarray | None = None, **options: Any) -> str:
    """THE key of every cache entry (models and explanations): one place to extend.

    ``parts`` are fingerprints (``workflow.data_fingerprint`` covers everything of the
    data that reaches a number or a label; ``settings_fingerprint`` the settings);
    ``duels`` and ``options`` what an explanation adds. The cache format version is
    part of it, so a format change never reads old entries; explanations add the
    engine's version and their options' key (:func:`explanation_key`).
    """
    h = hashlib.sha256()
    h.update(json.dumps([FORMAT_VERSION, kind, *parts]).encode())
    if duels is not None:
        h.update(b"|duels|")
        h.update(np.ascontiguousarray(np.asarray(duels, dtype=np.int64)).tobytes())
    h.update(b"|options|")
    h.update(json.dumps(options, sort_keys=True, default=str).encode())
    return h.hexdigest()[:32]


def explanation_key(
    data_fp: str,
    settings_fp: str,
    duels: np.ndarray,
    options: ExplainOptions,
    dtype: str = "float64",
    **extra: Any,
) -> str:
    """The key of an explanation of ``duels`` (indices) with these options.

    It holds the engine's version and every option that can change a number, so a
    change of numerics (a bumped :data:`ENGINE_VERSION`) never serves stale entries.
    """
    return entry_key(
        "explanation",
        data_fp,
        settings_fp,
        ENGINE_VERSION,
        options.key(),
        dtype,
        duels=duels,
        **extra,
    )


class DiskCache:
    """Models (as TrainingResults) and Explanations on disk; see the module docstring."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else cache_dir()
        self.remove_orphans()

    # -- models ----------------------------------------------------------------------
    def _model_dir(self, data_fp: str, settings_fp: str) -> Path:
        return self.root / "models" / entry_key("model", data_fp, settings_fp)

    def load_training(self, data_fp: str, settings_fp: str) -> TrainingResult | None:
        """The cached training result, or None (missing or unreadable)."""
        folder = self._model_dir(data_fp, settings_fp)
        if not folder.is_dir():
            return None
        try:
            files = read_verified(folder)  # the bytes parsed below are the checked ones
            info = json.loads(files["result.json"].decode("utf-8"))
            if info.get("format_version") != FORMAT_VERSION:
                raise ValueError("cache format changed")
            settings = TrainSettings.from_record(info["settings"])
            with np.load(io.BytesIO(files["split.npz"]), allow_pickle=False) as npz:
                split = Split(
                    train=npz["train"].astype(np.int64),
                    validation=npz["validation"].astype(np.int64),
                    test=npz["test"].astype(np.int64),
                )
            function = load_model(files["model.npz"])
            baseline_file = files.get("baseline.npz")  # the UPM baseline, when one was fitted
            baseline = load_model(baseline_file) if baseline_file is not None else None
            return TrainingResult(
                data_name=str(info["data_name"]),
                settings=settings,
                function=function,
                split=split,
                metrics=info["metrics"],
                baseline_metrics=info["baseline_metrics"],
                rankability=float(info["rankability"]),
                rankability_items=int(info["rankability_items"]),
                seconds={k: float(v) for k, v in info["seconds"].items()},
                baseline_function=baseline,
                cv=info.get("cv"),
                baseline_cv=info.get("baseline_cv"),
            )
        except IntegrityError as exc:
            self._miss(folder, exc)
            return None
        except Exception:  # any unreadable entry is a cache miss, never an error
            self._discard(folder)
            return None

    def save_training(self, data_fp: str, settings_fp: str, result: TrainingResult) -> Path | None:
        """Store a training result; returns the entry folder (None if not written)."""
        info = {
            "format_version": FORMAT_VERSION,
            "data_name": result.data_name,
            "settings": result.settings.as_dict(),
            "metrics": result.metrics,
            "baseline_metrics": result.baseline_metrics,
            "rankability": float(result.rankability),
            "rankability_items": int(result.rankability_items),
            "seconds": {k: float(v) for k, v in result.seconds.items()},
            "cv": result.cv,
            "baseline_cv": result.baseline_cv,
        }

        def write(tmp: Path) -> None:
            save_model(result.function, tmp / "model.npz")
            if result.baseline_function is not None:
                save_model(result.baseline_function, tmp / "baseline.npz")
            np.savez(
                tmp / "split.npz",
                train=np.asarray(result.split.train, dtype=np.int64),
                validation=np.asarray(result.split.validation, dtype=np.int64),
                test=np.asarray(result.split.test, dtype=np.int64),
            )
            _write_json(tmp / "result.json", info)

        return self._publish(self._model_dir(data_fp, settings_fp), write)

    # -- explanations ------------------------------------------------------------------
    def _explanation_dir(self, key: str) -> Path:
        return self.root / "explanations" / _safe(key)

    def load_explanation(self, key: str) -> Explanation | None:
        folder = self._explanation_dir(key)
        if not folder.is_dir():
            return None
        try:
            files = read_verified(folder)  # the bytes parsed below are the checked ones
            info = json.loads(files["meta.json"].decode("utf-8"))
            if info.get("format_version") != FORMAT_VERSION:
                raise ValueError("cache format changed")
            arrays: dict[str, Any] = {}
            with np.load(io.BytesIO(files["arrays.npz"]), allow_pickle=False) as npz:
                for name in _ARRAY_FIELDS:
                    if name not in npz.files:
                        arrays[name] = None
                    elif name in _TEXT_FIELDS:
                        mask_name = f"{name}__missing"
                        missing = npz[mask_name] if mask_name in npz.files else None
                        arrays[name] = _text_from_npz(
                            npz[name], missing, as_object=name in info["object_fields"]
                        )
                    else:
                        arrays[name] = npz[name]
            return Explanation(
                **arrays,
                player_names=tuple(info["player_names"]),
                # "kind": what entries written before the rename called it
                what=info["what"] if "what" in info else info["kind"],
                orientation=info["orientation"],
                meta=info["meta"],
            )
        except IntegrityError as exc:
            self._miss(folder, exc)
            return None
        except Exception:  # unreadable entry: a miss, and it is rewritten
            self._discard(folder)
            return None

    def save_explanation(self, key: str, expl: Explanation) -> Path | None:
        payload: dict[str, np.ndarray] = {}
        object_fields = []
        for name in _ARRAY_FIELDS:
            value = getattr(expl, name)
            if value is None:
                continue
            if name in _TEXT_FIELDS:
                if np.asarray(value).dtype == object:
                    object_fields.append(name)
                text, missing = _text_to_npz(value)
                payload[name] = text
                if missing is not None:
                    payload[f"{name}__missing"] = missing
            else:
                payload[name] = np.asarray(value)
        info = {
            "format_version": FORMAT_VERSION,
            "player_names": list(expl.player_names),
            "what": expl.what,
            # Also under its former name, so a server of the version before the rename
            # sharing this cache folder reads the entry instead of discarding it.
            "kind": expl.what,
            "orientation": expl.orientation,
            "object_fields": object_fields,  # restored as object arrays (views edit them)
            "meta": _jsonable(expl.meta),
        }

        def write(tmp: Path) -> None:
            np.savez_compressed(tmp / "arrays.npz", **payload)
            _write_json(tmp / "meta.json", info)

        return self._publish(self._explanation_dir(key), write)

    # -- housekeeping ------------------------------------------------------------------
    def forget_training(self, data_fp: str, settings_fp: str) -> None:
        """Remove one model entry (e.g. one that loads but cannot be used)."""
        self._discard(self._model_dir(data_fp, settings_fp))

    def forget_explanation(self, key: str) -> None:
        self._discard(self._explanation_dir(key))

    def clear(self) -> None:
        """Remove every entry (the root folder itself stays)."""
        for part in ("models", "explanations"):
            shutil.rmtree(self.root / part, ignore_errors=True)

    def remove_orphans(self, older_than_s: float = ORPHAN_AGE_S) -> int:
        """Delete temporary folders a killed writer left behind; returns how many.

        Only folders untouched for ``older_than_s`` go: a younger one may belong to
        a writer that is still running (in this or another process).
        """
        now = time.time()
        removed = 0
        for part in ("models", "explanations"):
            folder = self.root / part
            with contextlib.suppress(OSError):
                for leftover in folder.iterdir():
                    name = leftover.name
                    if not (name.startswith(".") and name.endswith((".tmp", ".deleted"))):
                        continue
                    with contextlib.suppress(OSError):
                        if now - leftover.stat().st_mtime > older_than_s:
                            shutil.rmtree(leftover, ignore_errors=True)
                            removed += 1
        return removed

    def _publish(self, target: Path, write: Callable[[Path], None]) -> Path | None:
        """Write an entry into a temporary sibling folder, then rename it into place.

        Caching is an optimisation: a read-only or full disk must not break training,
        so write failures return None instead of raising.
        """
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(
                tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
            )
        except OSError:
            return None
        try:
            write(tmp)
            seal(tmp)  # checksums (and, with PREFSHAP_CACHE_SECRET, a signature)
            if target.exists():  # an older or concurrent copy: replace it
                self._discard(target)
            os.replace(tmp, target)
            return target
        except (OSError, IntegrityError):
            return None
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)

    def _miss(self, folder: Path, reason: IntegrityError) -> None:
        """An entry that fails its integrity check: logged, removed, recomputed by the caller."""
        _LOG.warning("cache entry %s is not used: %s", folder, reason)
        self._discard(folder)

    @staticmethod
    def _discard(folder: Path) -> None:
        # Rename first so a concurrent reader never sees a half-deleted entry.
        with contextlib.suppress(OSError):
            doomed = folder.with_name(f".{folder.name}.{os.getpid()}.deleted")
            os.replace(folder, doomed)
            shutil.rmtree(doomed, ignore_errors=True)


def _safe(name: str) -> str:
    """Keys are hex digests; anything else is hashed so it cannot escape the root."""
    text = str(name)
    if text and all(c.isalnum() or c in "-_" for c in text) and len(text) <= 80:
        return text
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _text_to_npz(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    arr = np.asarray(values, dtype=object)
    missing = np.vectorize(lambda v: v is None, otypes=[bool])(arr) if arr.size else None
    text = np.where(missing, "", arr) if missing is not None else arr
    return np.asarray(text, dtype=str), (missing if missing is not None and missing.any() else None)


def _text_from_npz(text: np.ndarray, missing: np.ndarray | None, *, as_object: bool) -> np.ndarray:
    if not as_object and missing is None:
        return text
    out = text.astype(object)
    if missing is not None:
        out[missing] = None
    return out


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return str(value)


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    path.write_text(json.dumps(payload, default=_json_default, indent=1), encoding="utf-8")
