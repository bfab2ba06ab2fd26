"""Where data comes from: the built-in datasets and uploaded files; reload restore.

Parsing is cached with ``st.cache_data`` (keyed by the dataset name, or by the
uploaded files' digests, names and reading options), so a rerun or another session
never parses the same files twice. Every engine error (``DataValidationError``:
file, row, column) reaches the caller unchanged, for the page to show.

Reload restore: a session gets a random 128-bit token (``secrets``), shown in the
URL as ``?session=<token>``; the active dataset (the uploaded files themselves, or
the built-in's key) and the settings of its latest model are written under
``<disk cache>/sessions/<token>/``. A reload (a new session with that URL) reads
them back, and the model from the disk cache. The token is never derived from the
content, so no one can open another visitor's data by guessing.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import streamlit as st

from dashboard import state
from prefshap_core import budget, workflow
from prefshap_core.cache import cache_dir
from prefshap_core.data import DuelData, build_duel_data, read_any
from prefshap_core.data.upload_limits import upload_need_bytes
from prefshap_core.datasets import available_datasets, load_dataset, synthetic_clusters
from prefshap_core.paths import repo_root

# The first screen's data: the paper's clusters game, scaled down to train in seconds.
DEMO_KEY = "builtin:demo"
DEMO_ITEMS, DEMO_DUELS = 400, 3000
SAMPLE_DIR = repo_root() / "sample_data"
# A built-in read without missing indicators is another dataset: its key has this tail.
NO_INDICATORS = ":no-missing-indicators"


@dataclass(frozen=True)
class BuiltinChoice:
    key: str
    name: str  # prefshap_core.datasets name
    title: str
    description: str
    available: bool
    reason: str = ""


def builtin_choices() -> list[BuiltinChoice]:
    """The demo, plus every named dataset with whether it can be loaded here."""
    choices = [
        BuiltinChoice(
            DEMO_KEY,
            "synthetic",
            f"Synthetic clusters (demo: {DEMO_ITEMS} items, {DEMO_DUELS:,} duels)",
            "the paper's clusters game, small enough to train in seconds",
            True,
        )
    ]
    titles = {
        "synthetic": "Synthetic clusters (paper size)",
        "gpm_synthetic": "Synthetic GPM (paper App. B)",
        "chameleons": "Chameleons",
        "pokemon": "Pokémon",
        "tennis": "Tennis (ATP, with court context)",
    }
    for info in available_datasets():
        choices.append(
            BuiltinChoice(
                f"builtin:{info.name}",
                info.name,
                titles.get(info.name, info.name),
                info.description,
                info.available,
                info.reason,
            )
        )
    return choices


@st.cache_data(show_spinner=False, max_entries=8)
def _builtin_data(name: str, demo: bool, missing_indicators: bool) -> DuelData:
    if demo:
        return synthetic_clusters(
            n_items=DEMO_ITEMS, n_duels=DEMO_DUELS, seed=0, missing_indicators=missing_indicators
        )
    return load_dataset(name, seed=0, missing_indicators=missing_indicators)


def builtin_key(choice_key: str, missing_indicators: bool) -> str:
    """The dataset key of a built-in read with or without missing indicators."""
    return choice_key if missing_indicators else choice_key + NO_INDICATORS


def split_builtin_key(key: str) -> tuple[str, bool]:
    """The choice's key and ``missing_indicators`` of a built-in dataset key."""
    if key.endswith(NO_INDICATORS):
        return key.removesuffix(NO_INDICATORS), False
    return key, True


def load_builtin(choice: BuiltinChoice, *, missing_indicators: bool = True) -> state.LoadedData:
    """Load (cached) and describe a built-in dataset; raises the engine's errors."""
    data = _builtin_data(choice.name, choice.key == DEMO_KEY, missing_indicators)
    title = choice.title + ("" if missing_indicators else " (no missing indicators)")
    return state.LoadedData(
        key=builtin_key(choice.key, missing_indicators),
        title=title,
        data=data,
        fingerprint=_fingerprint(data),
        source="builtin",
        missing_indicators=missing_indicators,
    )


def uploaded_csv(name: str, data: bytes, file_id: str) -> state.UploadedCsv:
    return state.UploadedCsv(name, data, hashlib.sha256(data).hexdigest(), file_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _uploaded_data(
    digests: tuple[str, ...], names: tuple[str, ...], lenient: bool, use_columns: tuple[str, ...],
    missing_indicators: bool, _files: tuple[bytes, ...],
) -> DuelData:  # fmt: skip
    # Keyed by the files' digests (hashed once, at upload), names and options, not
    # their bytes. The user's own file names go into every error (file, row, column).
    tables = [read_any(raw, file_name=name) for raw, name in zip(_files, names, strict=True)]
    return build_duel_data(
        tables[0],
        tables[1],
        contexts=tables[2] if len(tables) > 2 else None,
        name=f"upload ({' + '.join(names)})",
        items_file=names[0],
        duels_file=names[1],
        contexts_file=names[2] if len(names) > 2 else "contexts.csv",
        on_invalid="drop" if lenient else "error",
        use_columns=use_columns,
        missing_indicators=missing_indicators,
    )


def upload_key(
    files: tuple[state.UploadedCsv, ...],
    lenient: bool,
    use_columns: tuple[str, ...],
    missing_indicators: bool = True,
) -> str:
    options: list = [lenient, sorted(use_columns)]
    if not missing_indicators:  # the default adds nothing: earlier keys stay valid
        options.append("no-missing-indicators")
    digest = hashlib.sha256(
        json.dumps([[f.digest, f.name] for f in files] + options).encode()
    ).hexdigest()
    return f"upload:{digest[:32]}"


def load_upload(
    items: state.UploadedCsv,
    duels: state.UploadedCsv,
    contexts: state.UploadedCsv | None = None,
    *,
    lenient: bool = True,
    use_columns: tuple[str, ...] = (),
    missing_indicators: bool = True,
    title: str | None = None,
) -> state.LoadedData:
    """Parse and validate an upload; raises DataValidationError naming file/row/column.

    ``lenient``: invalid duel rows are dropped and reported (the dashboard's
    default); otherwise every problem is an error. ``missing_indicators=False``: no
    ``"<column> (missing)"`` columns (``build_duel_data``). ``title`` defaults to the next
    "Upload N: <files> · <digest>" of the session, so uploads are told apart.
    """
    files = (items, duels) + ((contexts,) if contexts is not None else ())
    use_columns = tuple(sorted(use_columns))
    key = upload_key(files, lenient, use_columns, missing_indicators)
    known = state.datasets().get(key)
    if known is not None:
        return known
    need = sum(upload_need_bytes(f.data, f.name) for f in files)  # as declared, not as sent
    with budget.reserve(need, "Reading this upload", budget.UPLOAD_REDUCE):
        data = _uploaded_data(
            tuple(f.digest for f in files), tuple(f.name for f in files), lenient, use_columns,
            missing_indicators, tuple(f.data for f in files),
        )  # fmt: skip
    names = " + ".join(f.name for f in files)
    if title is None:
        title = f"Upload {state.next_upload_number()}: {names} · {key[7:13]}"
    return state.LoadedData(
        key=key,
        title=title,
        data=data,
        fingerprint=_fingerprint(data),
        source="upload",
        files=tuple(f.name for f in files),
        uploaded=files,
        lenient=lenient,
        use_columns=use_columns,
        missing_indicators=missing_indicators,
    )


# -- reload restore ------------------------------------------------------------------
_TOKEN = re.compile(r"[0-9a-f]{32}")
URL_PARAM = "session"


def _record_dir(token: str) -> Path:
    return cache_dir() / "sessions" / token


def restore_from_url() -> bool:
    """A new session opened with ``?session=<token>``: reload its dataset and model.

    Returns whether a dataset was restored. An unknown or malformed token restores
    nothing (the demo then opens, as on a first visit).
    """
    record = state.restore_record()
    if record["token"] is not None:
        return False  # this session has its own token already
    token = str(st.query_params.get(URL_PARAM, ""))
    if not _TOKEN.fullmatch(token):
        return False
    record["token"] = token
    try:
        meta = json.loads((_record_dir(token) / "meta.json").read_text(encoding="utf-8"))
        loaded = _restore_dataset(token, meta)
    except Exception:  # a missing or damaged record: nothing to restore, never an error
        return False
    state.add_dataset(loaded)
    state.load_options()["missing_indicators"] = loaded.missing_indicators  # its checkbox
    model = _restore_model(loaded, meta.get("settings"))
    if model is not None:
        state.set_model(model)
    record["written"] = json.dumps(meta, sort_keys=True)
    record["files_of"] = loaded.key
    return True


def _restore_dataset(token: str, meta: dict) -> state.LoadedData:
    # Records written before the switch existed have no "missing_indicators": on.
    missing_indicators = bool(meta.get("missing_indicators", True))
    if meta["source"] == "builtin":
        choice_key = split_builtin_key(meta["key"])[0]
        choice = next(c for c in builtin_choices() if c.key == choice_key)
        return load_builtin(choice, missing_indicators=missing_indicators)
    folder = _record_dir(token)
    files = []
    for k, name in enumerate(meta["files"]):
        raw = (folder / f"file{k}").read_bytes()
        files.append(uploaded_csv(name, raw, file_id=f"restored:{token}:{k}"))
    return load_upload(
        *files, lenient=bool(meta["lenient"]), use_columns=tuple(meta["use_columns"]),
        missing_indicators=missing_indicators, title=meta["title"],
    )  # fmt: skip


def _restore_model(loaded: state.LoadedData, settings: dict | None) -> state.TrainedModel | None:
    if not settings:
        return None
    from dashboard import services  # services imports this module

    known = {f.name for f in fields(workflow.TrainSettings)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in settings.items() if k in known}
    return services.cached_model(loaded, workflow.TrainSettings(**values))


def remember_session() -> None:
    """Write the active dataset (and its latest model's settings) for a reload; set the URL.

    Cheap when nothing changed: the record is compared with what was last written.
    The demo alone is not recorded (a reload shows it anyway).
    """
    loaded = state.active()
    record = state.restore_record()
    if loaded is None or (loaded.key == DEMO_KEY and record["token"] is None):
        return
    model = state.model_for(loaded)
    meta: dict = {
        "source": loaded.source,
        "key": loaded.key,
        "title": loaded.title,
        "missing_indicators": loaded.missing_indicators,
    }
    if loaded.source == "upload":
        meta.update(
            files=list(loaded.files), lenient=loaded.lenient, use_columns=list(loaded.use_columns)
        )
    meta["settings"] = asdict(model.result.settings) if model is not None else None
    text = json.dumps(meta, sort_keys=True)
    if record["token"] is None:
        record["token"] = secrets.token_hex(16)  # 128 random bits, never a content hash
    if text != record["written"]:
        folder = _record_dir(record["token"])
        try:
            folder.mkdir(parents=True, exist_ok=True)
            if record.get("files_of") != loaded.key:  # the files change with the dataset
                for k, file in enumerate(loaded.uploaded):
                    (folder / f"file{k}").write_bytes(file.data)
                record["files_of"] = loaded.key
            (folder / "meta.json").write_text(text, encoding="utf-8")
        except OSError:
            return  # no disk cache here: a reload then falls back to the demo
        record["written"] = text
    if st.query_params.get(URL_PARAM) != record["token"]:
        st.query_params[URL_PARAM] = record["token"]


def _fingerprint(data: DuelData) -> str:
    # Computed once per load and kept in LoadedData: every cache key starts with it.
    return workflow.data_fingerprint(data)


def sample_file(name: str) -> bytes:
    """A file of sample_data/ (the upload templates)."""
    return (SAMPLE_DIR / name).read_bytes()


def upload_format() -> str:
    """sample_data/README.md, the upload format, to show on the Data page itself."""
    return (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
