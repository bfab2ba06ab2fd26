"""Everything a session remembers, in one place: ``st.session_state`` behind accessors.

What lives here survives reruns and page switches: the datasets loaded or uploaded
in this session (with the uploaded bytes, because a file uploader forgets its file
when its page is left), the latest trained model per dataset, background jobs, and
the user's selections (player, duel, subset). Pages never touch ``st.session_state``
keys directly, so the schema is documented once, here.

Widget values: Streamlit drops a widget's state when a run does not draw it (any
page switch) unless the widget is created with ``persist_state="session"``; every
widget whose value matters beyond its page uses that (see :data:`PERSIST`), with a
key that includes the dataset fingerprint where the value belongs to one dataset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import streamlit as st

from dashboard.jobs import SESSION_JOBS, Job
from prefshap_core.data.duel_data import DuelData, Split
from prefshap_core.explain.options import Shapley
from prefshap_core.models.preference_function import PreferenceFunction
from prefshap_core.workflow.results import TrainingResult
from prefshap_core.workflow.settings import TrainSettings

PERSIST = "session"  # persist_state of widgets whose value survives page switches

_DATASETS = "datasets"  # dict[str, LoadedData], by LoadedData.key
_ACTIVE = "active_dataset"  # str | None, a key of _DATASETS
_MODELS = "models"  # dict[str, TrainedModel], by data fingerprint
_JOBS = "jobs"  # dict[str, Job], by job key (shared by the sessions of one token)
_JOBS_TOKEN = "jobs_token"  # str | None: the token _JOBS is bound under (bind_jobs)
_UPLOADS = "uploads"  # dict[str, UploadedFile]: "items" / "duels" -> the file
_UPLOAD_ROUND = "upload_round"  # int: bumped to give the file uploaders fresh, empty keys
_ITEM = "selected_item"  # dict[str, str]: data fingerprint -> item id
_DUEL = "selected_duel"  # dict[str, tuple[int, str | None]]: fingerprint -> (duel, seen from)
_DEMO_READY = "demo_ready"  # bool: the first-screen demo was set up in this session
_UPLOAD_COUNT = "upload_count"  # int: uploads loaded so far (names "Upload 2: ...")
_NOTICE = "data_notice"  # str | None: a message for the next run of the Data page
# dict (reload restore): {"token": str | None (this session's, made by the server),
# "written": str | None (meta.json last written), "files_of": str | None (the dataset
# key whose files the record holds), "adopted": bool (the token came from a URL)}
_RESTORE = "restore"
# dict: {"lenient": bool, "use_columns": tuple[str, ...], "missing_indicators": bool}
_LOAD_OPTIONS = "load_options"


@dataclass(frozen=True, eq=False)
class LoadedData:
    """A dataset this session has loaded: built-in (by name) or uploaded."""

    key: str  # "builtin:<name>" or "upload:<hash of the files and options>"
    title: str  # shown to the user
    data: DuelData
    # workflow.data_fingerprint(data): the cache key part; it covers names, ids, units
    # and grouping too, so two uploads equal in model space never share an entry.
    fingerprint: str
    source: str  # "builtin" | "upload"
    files: tuple[str, ...] = ()  # uploaded file names
    uploaded: tuple[UploadedFile, ...] = ()  # the uploaded files themselves (reload restore)
    lenient: bool = True  # how an upload was read (invalid rows dropped, or an error)
    use_columns: tuple[str, ...] = ()  # id-like columns the user chose to use
    missing_indicators: bool = True  # "<column> (missing)" columns for mostly-missing ones
    mapping: tuple[tuple[str, str], ...] = ()  # column-mapping overrides: (part, column)

    @property
    def has_context(self) -> bool:
        return self.data.has_context


@dataclass(frozen=True, eq=False)
class TrainedModel:
    """A model of this session: what training returned, and its cache keys."""

    result: TrainingResult  # metrics, timings, the UPM baseline
    data_fp: str
    settings_fp: str
    from_cache: bool = False  # loaded from the disk cache instead of trained now

    @property
    def function(self) -> PreferenceFunction:
        """The fitted preference function g (what explanations and analyses evaluate)."""
        return self.result.function

    @property
    def settings(self) -> TrainSettings:
        return self.result.settings

    @property
    def split(self) -> Split:
        """The duels it was trained, tuned and tested on."""
        return self.result.split

    @property
    def kind(self) -> str:
        return self.result.kind  # under auto: the chosen kind


@dataclass(frozen=True, eq=False)
class UploadedFile:
    """An uploaded file, hashed once (hashing 200 MB on every rerun would show)."""

    name: str
    data: bytes
    digest: str  # sha256 of data
    file_id: str  # the uploader's id of this upload, to notice a new one


def init() -> None:
    """Create the session's containers once (a no-op on later runs)."""
    ss = st.session_state
    for key, empty in (
        (_DATASETS, dict),
        (_MODELS, dict),
        (_JOBS, dict),
        (_UPLOADS, dict),
        (_ITEM, dict),
        (_DUEL, dict),
    ):
        if key not in ss:
            ss[key] = empty()
    ss.setdefault(_ACTIVE, None)
    ss.setdefault(_UPLOAD_ROUND, 0)
    ss.setdefault(_DEMO_READY, False)
    ss.setdefault(_UPLOAD_COUNT, 0)
    ss.setdefault(_NOTICE, None)
    ss.setdefault(_RESTORE, {"token": None, "written": None, "files_of": None, "adopted": False})
    ss.setdefault(_LOAD_OPTIONS, {"lenient": True, "use_columns": (), "missing_indicators": True})


# -- datasets ----------------------------------------------------------------------
def datasets() -> dict[str, LoadedData]:
    return st.session_state[_DATASETS]


def add_dataset(loaded: LoadedData, *, activate: bool = True) -> None:
    datasets()[loaded.key] = loaded
    if activate:
        st.session_state[_ACTIVE] = loaded.key


def active() -> LoadedData | None:
    key = st.session_state.get(_ACTIVE)
    return datasets().get(key) if key else None


def uploads() -> dict[str, UploadedFile]:
    return st.session_state[_UPLOADS]


def upload_round() -> int:
    return int(st.session_state[_UPLOAD_ROUND])


def forget_uploads() -> None:
    """Drop the kept files and empty the uploaders (new widget keys)."""
    uploads().clear()
    st.session_state[_UPLOAD_ROUND] = upload_round() + 1


def next_upload_number() -> int:
    """1, 2, ...: each new upload's number in this session (its name tells it apart)."""
    st.session_state[_UPLOAD_COUNT] += 1
    return int(st.session_state[_UPLOAD_COUNT])


def load_options() -> dict:
    """How data is read: ``lenient`` (drop invalid rows), ``use_columns`` (uploads) and
    ``missing_indicators`` (uploads and built-ins)."""
    return st.session_state[_LOAD_OPTIONS]


def set_notice(message: str | None) -> None:
    st.session_state[_NOTICE] = message


def pop_notice() -> str | None:
    message = st.session_state.get(_NOTICE)
    st.session_state[_NOTICE] = None
    return message


def restore_record() -> dict:
    """The session's reload-restore record: its URL token and what was last written."""
    return st.session_state[_RESTORE]


# -- models ------------------------------------------------------------------------
def model_for(loaded: LoadedData | None) -> TrainedModel | None:
    if loaded is None:
        return None
    return st.session_state[_MODELS].get(loaded.fingerprint)


def set_model(model: TrainedModel) -> None:
    st.session_state[_MODELS][model.data_fp] = model


# -- jobs ----------------------------------------------------------------------------
def jobs() -> dict[str, Job]:
    return st.session_state[_JOBS]


def job(key: str) -> Job | None:
    return jobs().get(key)


def bind_jobs() -> None:
    """Share this session's jobs under its token (once it has one): a reload of the
    session (a new Streamlit session adopting the token) gets the same jobs back.

    A session whose token changes (a link's session that then shows other data gets
    a token of its own, see ``sources``) keeps only the jobs of its new token: the
    link's owner never sees them, nor does the session keep the owner's.
    """
    ss = st.session_state
    token = ss[_RESTORE]["token"]
    if token is None:
        return
    mine = jobs()
    if ss.get(_JOBS_TOKEN) not in (None, token):
        mine = {key: j for key, j in list(mine.items()) if j.token in (None, token)}
    for j in list(mine.values()):
        if j.token is None:
            j.token = token
    ss[_JOBS] = SESSION_JOBS.bind(token, mine)
    ss[_JOBS_TOKEN] = token


# Finished jobs kept per session (their outcome is shown until then); older ones are
# dropped so a long session does not keep every result it ever computed.
MAX_FINISHED_JOBS = 8


def add_job(job_: Job) -> Job:
    kept = jobs()
    kept[job_.key] = job_
    finished = sorted(
        (j for j in list(kept.values()) if j is not job_ and j.finished and not _unpublished(j)),
        key=lambda j: j.finished_at or 0.0,
    )
    for old in finished[: max(0, len(finished) - MAX_FINISHED_JOBS)]:
        kept.pop(old.key, None)
    return job_


def _unpublished(job_: Job) -> bool:
    """A finished training whose model the script has not yet put into the session."""
    return job_.key.startswith("train:") and not job_.collected


def drop_job(key: str) -> None:
    jobs().pop(key, None)


def running_jobs() -> list[Job]:
    return [j for j in list(jobs().values()) if not j.finished]


# -- selections ------------------------------------------------------------------------
def selected_item(loaded: LoadedData) -> str | None:
    return st.session_state[_ITEM].get(loaded.fingerprint)


def select_item(loaded: LoadedData, item_id: str) -> None:
    st.session_state[_ITEM][loaded.fingerprint] = str(item_id)


def selected_duel(loaded: LoadedData) -> tuple[int, str | None] | None:
    """(duel index, id of the item it is seen from, or None for its winner)."""
    chosen = st.session_state[_DUEL].get(loaded.fingerprint)
    if chosen is None or not 0 <= chosen[0] < loaded.data.n_duels:
        return None
    return chosen


def select_duel(loaded: LoadedData, duel: int | np.integer, seen_from: str | None = None) -> None:
    st.session_state[_DUEL][loaded.fingerprint] = (int(duel), seen_from)


def demo_ready() -> bool:
    return bool(st.session_state[_DEMO_READY])


def mark_demo_ready() -> None:
    st.session_state[_DEMO_READY] = True


# -- the analyst's views (head-to-head, deep links) ----------------------------------
# Kept apart from the sections above so that other work on them merges cleanly.
_PAIR = "selected_pair"  # dict[str, tuple[str, str]]: data fingerprint -> (item A, item B)
_CONTEXT = "selected_context"  # dict[str, str]: fingerprint -> context slice label
_LINK = "link_applied"  # dict[str, str]: the query parameters last applied or written


def selected_pair(loaded: LoadedData) -> tuple[str, str] | None:
    return st.session_state.setdefault(_PAIR, {}).get(loaded.fingerprint)


def select_pair(loaded: LoadedData, a: str, b: str) -> None:
    st.session_state.setdefault(_PAIR, {})[loaded.fingerprint] = (str(a), str(b))


def selected_context(loaded: LoadedData) -> str | None:
    return st.session_state.setdefault(_CONTEXT, {}).get(loaded.fingerprint)


def select_context(loaded: LoadedData, label: str | None) -> None:
    chosen = st.session_state.setdefault(_CONTEXT, {})
    if label is None:
        chosen.pop(loaded.fingerprint, None)
    else:
        chosen[loaded.fingerprint] = str(label)


def link_seen() -> dict[str, str]:
    """The query parameters this session last applied or wrote (to spot a new URL)."""
    return st.session_state.setdefault(_LINK, {})


def remember_link(params: dict[str, str]) -> None:
    st.session_state[_LINK] = dict(params)


_LINK_REPLACED = "link_replaced"  # dict[str, str]: the URL this session's last write replaced


def replaced_link() -> dict[str, str] | None:
    """The browser's URL before this session's last change of it, until a run shows
    that the browser has the new one (None then)."""
    return st.session_state.get(_LINK_REPLACED)


def set_replaced_link(params: dict[str, str] | None) -> None:
    st.session_state[_LINK_REPLACED] = None if params is None else dict(params)


_LINK_PENDING = "link_pending"  # dict[str, str]: a new URL's parameters not yet used


def set_link_pending(params: dict[str, str]) -> None:
    st.session_state[_LINK_PENDING] = dict(params)


def pop_link_pending(name: str) -> str | None:
    return st.session_state.setdefault(_LINK_PENDING, {}).pop(name, None)


_PRECISION = "explain_precision"  # (mode, n_samples): how explanations choose coalitions


@dataclass(frozen=True)
class Precision:
    """How this session's explanations choose coalitions (the precision control):
    ``"auto"`` (the engine's choice), ``"exact"``, or ``n_samples`` sampled ones. The
    number is kept while another mode is chosen: the control still shows it."""

    mode: str = "auto"  # "auto" | "exact" | "sampled"
    n_samples: int = 512

    @property
    def shapley(self) -> Shapley:
        return Shapley("sampled", self.n_samples) if self.mode == "sampled" else Shapley(self.mode)  # type: ignore[arg-type]


def precision() -> Precision:
    """This session's choice (the default until the control is used)."""
    default = Precision()
    mode, n_samples = st.session_state.setdefault(_PRECISION, (default.mode, default.n_samples))
    return Precision(mode, n_samples)


def set_precision(chosen: Precision) -> None:
    st.session_state[_PRECISION] = (str(chosen.mode), int(chosen.n_samples))
