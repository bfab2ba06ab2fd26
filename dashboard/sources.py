"""Where data comes from: the built-in datasets and uploaded files; reload restore.

Parsing is cached with ``st.cache_data`` (keyed by the dataset name, or by the
uploaded files' digests, names and reading options), so a rerun or another session
never parses the same files twice. Every engine error (``DataValidationError``:
file, row, column) reaches the caller unchanged, for the page to show.

Reload restore: a session gets a random 128-bit token, made by the server
(:mod:`dashboard.sessions`), shown in the URL as ``?session=<token>``; the active
dataset (the uploaded files themselves, or the built-in's key) and the settings of
its latest model are written to its record. A reload (a new session with that URL)
reads them back, and the model from the disk cache. A URL's token is adopted only
when its record exists: an unknown or expired one starts a fresh session (with a
notice), so a link with a token of someone else's choosing never collects what the
opener uploads. A session opened from a link that then records another dataset
gets a token of its own first: the link's owner never sees data uploaded after it.
An upload's deep link, ``dataset=upload:<digest>``, opens only within the session
whose token is in the same URL (:func:`restore_upload`).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass

import streamlit as st

from dashboard import sessions, state
from prefshap_core import budget
from prefshap_core.data.csv_io import reading_row_names
from prefshap_core.data.duel_data import DuelData
from prefshap_core.data.layouts.loading import build_from_tables
from prefshap_core.data.layouts.mapping import ColumnMapping
from prefshap_core.data.layouts.wide import is_wide_table
from prefshap_core.data.readers import read_any
from prefshap_core.data.upload_limits import upload_need_bytes
from prefshap_core.datasets.registry import available_datasets, load_dataset
from prefshap_core.datasets.synthetic import synthetic_clusters
from prefshap_core.errors import PrefShapError
from prefshap_core.paths import repo_root
from prefshap_core.workflow.fingerprints import data_fingerprint, settings_fingerprint
from prefshap_core.workflow.settings import TrainSettings

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


def uploaded_file(name: str, data: bytes, file_id: str) -> state.UploadedFile:
    """An uploaded table in any upload format (CSV, .xlsx, .parquet), hashed once."""
    return state.UploadedFile(name, data, hashlib.sha256(data).hexdigest(), file_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _uploaded_data(
    digests: tuple[str, ...], names: tuple[str, ...], lenient: bool, use_columns: tuple[str, ...],
    missing_indicators: bool, mapping: tuple[tuple[str, str], ...], parts: tuple[str, ...],
    _files: tuple[bytes, ...],
) -> DuelData:  # fmt: skip
    # Keyed by the files' digests (hashed once, at upload), names and options, not
    # their bytes. The user's own file names go into every error (file, row, column).
    with reading_row_names():  # R row names: the layout reader decides if they are keys
        read = [read_any(raw, file_name=name) for raw, name in zip(_files, names, strict=True)]
    tables, named = dict(zip(parts, read, strict=True)), dict(zip(parts, names, strict=True))
    return build_from_tables(
        tables.get("items"),  # none: a wide choice table, whose rows describe the items
        tables["duels"],
        contexts=tables.get("contexts"),
        name=f"upload ({' + '.join(names)})",
        items_file=named.get("items", "items.csv"),
        duels_file=named["duels"],
        contexts_file=named.get("contexts", "contexts.csv"),
        on_invalid="drop" if lenient else "error",
        use_columns=use_columns,
        missing_indicators=missing_indicators,
        mapping=ColumnMapping.from_texts(dict(mapping)),
    )


def upload_key(
    files: tuple[state.UploadedFile, ...],
    lenient: bool,
    use_columns: tuple[str, ...],
    missing_indicators: bool = True,
    mapping: tuple[tuple[str, str], ...] = (),
    parts: tuple[str, ...] = ("items", "duels", "contexts"),
) -> str:
    options: list = [lenient, sorted(use_columns)]
    if not missing_indicators:  # the default adds nothing: earlier keys stay valid
        options.append("no-missing-indicators")
    if mapping:  # the same: no overrides, the key it always had
        options.append(["mapping", [list(pair) for pair in mapping]])
    if parts[0] != "items":  # no items table (a wide choice table)
        options.append(["parts", list(parts)])
    digest = hashlib.sha256(
        json.dumps([[f.digest, f.name] for f in files] + options).encode()
    ).hexdigest()
    return f"upload:{digest[:32]}"


def load_upload(
    items: state.UploadedFile | None,
    duels: state.UploadedFile,
    contexts: state.UploadedFile | None = None,
    *,
    lenient: bool = True,
    use_columns: tuple[str, ...] = (),
    missing_indicators: bool = True,
    title: str | None = None,
    mapping: tuple[tuple[str, str], ...] = (),
) -> state.LoadedData:
    """Parse and validate an upload; raises DataValidationError naming file/row/column.

    ``lenient``: invalid duel rows are dropped and reported (the dashboard's
    default); otherwise every problem is an error. ``missing_indicators=False``: no
    ``"<column> (missing)"`` columns (``build_duel_data``). ``title`` defaults to the next
    "Upload N: <files> · <digest>" of the session, so uploads are told apart.
    ``mapping``: ``(part, column)`` overrides of the reader's guesses (``ColumnMapping``).
    """
    given = (("items", items), ("duels", duels), ("contexts", contexts))
    parts = tuple(part for part, file in given if file is not None)
    files = tuple(file for _, file in given if file is not None)
    use_columns = tuple(sorted(use_columns))
    mapping = tuple(sorted((part, column.strip()) for part, column in mapping if column.strip()))
    ColumnMapping.from_texts(dict(mapping))  # an unknown part fails here, not in the cache
    key = upload_key(files, lenient, use_columns, missing_indicators, mapping, parts)
    known = state.datasets().get(key)
    if known is not None:
        return known
    need = sum(upload_need_bytes(f.data, f.name) for f in files)  # as declared, not as sent
    with budget.reserve(need, "Reading this upload", budget.UPLOAD_REDUCE):
        data = _uploaded_data(
            tuple(f.digest for f in files), tuple(f.name for f in files), lenient, use_columns,
            missing_indicators, mapping, parts, tuple(f.data for f in files),
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
        mapping=mapping,
    )


def is_wide(duels: state.UploadedFile) -> bool:
    """Whether an uploaded duels table is a wide choice table (it then needs no items)."""
    return _is_wide(duels.digest, duels.name, duels.data)


@st.cache_data(show_spinner=False, max_entries=16)
def _is_wide(digest: str, name: str, _data: bytes) -> bool:
    try:
        return is_wide_table(read_any(_data, file_name=name))
    except PrefShapError:
        return False  # reading it properly reports the problem


def upload_parts(
    loaded: state.LoadedData,
) -> tuple[state.UploadedFile | None, state.UploadedFile, state.UploadedFile | None]:
    """An upload's items (None for a wide choice table), duels and contexts files."""
    files = list(loaded.uploaded)
    if loaded.data.report.layout == "wide" and len(files) < 3:
        files.insert(0, None)  # type: ignore[arg-type]
    return files[0], files[1], files[2] if len(files) > 2 else None


# -- reload restore ------------------------------------------------------------------
URL_PARAM = "session"
UPLOAD_KEY = re.compile(r"upload:[0-9a-f]{32}")
EXPIRED_NOTICE = (
    "That session link has expired or never existed: this is a new session. "
    "Links keep a session's data for {days:g} days after its last use."
)
UNREADABLE_NOTICE = "That session link could not be restored: this is a new session."


def restore_from_url() -> bool:
    """A new session opened with ``?session=<token>``: reload its dataset and model.

    Returns whether a dataset was restored. The token is adopted only when the
    server has a record under it; otherwise (unknown, expired, malformed, damaged)
    it is removed from the URL, a notice says so, and the demo opens as on a first
    visit. Expired records are swept here, when sessions start.
    """
    record = state.restore_record()
    if record["token"] is not None:
        return False  # this session has its own token already
    sessions.sweep_now_and_then()
    if URL_PARAM not in st.query_params:
        return False
    token = str(st.query_params.get(URL_PARAM, ""))
    if not sessions.exists(token):
        _refuse(EXPIRED_NOTICE.format(days=sessions.ttl_seconds() / 86400))
        return False
    try:
        text = sessions.read_meta(token)
        meta = json.loads(text)
        loaded = _restore_dataset(token, meta)
    except Exception:  # a damaged record: nothing to restore, never an error
        _refuse(UNREADABLE_NOTICE)
        return False
    record.update(token=token, adopted=True, files_of=loaded.key)
    sessions.touch(token)  # in use: its time to live starts again
    state.add_dataset(loaded)
    state.load_options()["missing_indicators"] = loaded.missing_indicators  # its checkbox
    model = _restore_model(loaded, meta.get("settings"))
    if model is not None:
        state.set_model(model)
    record["written"] = json.dumps(meta, sort_keys=True)
    return True


def _refuse(notice: str) -> None:
    del st.query_params[URL_PARAM]  # never kept, so never written under
    st.toast(notice, icon=":material/link_off:")


def restore_upload(key: str) -> state.LoadedData | None:
    """The upload a deep link's ``dataset=upload:<digest>`` names, if it is this
    session's: loaded in it, or the dataset of its own record (None otherwise)."""
    if not UPLOAD_KEY.fullmatch(key):
        return None
    known = state.datasets().get(key)
    if known is not None:
        return known
    token = state.restore_record()["token"]
    if token is None or not sessions.exists(token):
        return None
    try:
        meta = json.loads(sessions.read_meta(token))
    except (OSError, ValueError):
        return None
    return _restore_dataset(token, meta) if meta.get("key") == key else None


def _restore_dataset(token: str, meta: dict) -> state.LoadedData:
    # Records written before the switch existed have no "missing_indicators": on.
    missing_indicators = bool(meta.get("missing_indicators", True))
    if meta["source"] == "builtin":
        choice_key = split_builtin_key(meta["key"])[0]
        choice = next(c for c in builtin_choices() if c.key == choice_key)
        return load_builtin(choice, missing_indicators=missing_indicators)
    files = []
    for k, name in enumerate(meta["files"]):
        raw = sessions.read_file(token, k)
        files.append(uploaded_file(name, raw, file_id=f"restored:{token}:{k}"))
    if meta.get("parts", ["items"])[0] != "items":
        files.insert(0, None)  # type: ignore[arg-type]  # no items table
    return load_upload(
        *files, lenient=bool(meta["lenient"]), use_columns=tuple(meta["use_columns"]),
        missing_indicators=missing_indicators, title=meta["title"],
        mapping=tuple((str(p), str(c)) for p, c in meta.get("mapping", [])),
    )  # fmt: skip


def _restore_model(loaded: state.LoadedData, settings: dict | None) -> state.TrainedModel | None:
    if not settings:
        return None
    from dashboard.services.training import cached_model  # services.demo imports this module

    try:
        train_settings = TrainSettings.from_record(settings)
    except ValueError:  # a damaged record: no model to restore, never an error
        return None
    return cached_model(loaded, settings_fingerprint(train_settings))


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
        if loaded.mapping:  # only then: records without overrides read as before
            meta["mapping"] = [list(pair) for pair in loaded.mapping]
        if upload_parts(loaded)[0] is None:
            meta["parts"] = ["duels", "contexts"][: len(loaded.files)]
    meta["settings"] = model.settings.as_dict() if model is not None else None
    text = json.dumps(meta, sort_keys=True)
    if record.get("adopted") and record.get("files_of") != loaded.key:
        # Opened from a link, now showing other data: that data gets a record of its
        # own, which the link's owner cannot open.
        record.update(token=None, adopted=False, written=None, files_of=None)
    if record["token"] is None:
        record["token"] = sessions.new_token()
    if text != record["written"]:
        files = None
        if record.get("files_of") != loaded.key:  # the files change with the dataset
            files = [file.data for file in loaded.uploaded]
        try:
            sessions.write(record["token"], text, files)
        except OSError:
            return  # no disk cache here: a reload then falls back to the demo
        record["files_of"] = loaded.key
        record["written"] = text
    if st.query_params.get(URL_PARAM) != record["token"]:
        st.query_params[URL_PARAM] = record["token"]


def _fingerprint(data: DuelData) -> str:
    # Computed once per load and kept in LoadedData: every cache key starts with it.
    return data_fingerprint(data)


def sample_file(name: str) -> bytes:
    """A file of sample_data/ (the upload templates)."""
    return (SAMPLE_DIR / name).read_bytes()


def upload_format() -> str:
    """sample_data/README.md, the upload format, to show on the Data page itself."""
    return (SAMPLE_DIR / "README.md").read_text(encoding="utf-8")
