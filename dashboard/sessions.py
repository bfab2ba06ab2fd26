"""Session records on disk: what a reload (or a shared link) restores, by a server token.

A record lives in ``<disk cache>/sessions/<token>/``: ``meta.json`` (what the session
shows: the dataset, its reading options, its latest model's settings) and, for an
upload, the uploaded files themselves (``file0``, ``file1``, ...). The token is 128
random bits from ``secrets``, made here and nowhere else: a token that arrives in a
URL is only ever *looked up*, so a link whose token the server never made (or whose
record has expired) restores nothing and no record is ever created under it.

Records expire ``$PREFSHAP_SESSION_TTL_DAYS`` days (default 7) after their last use
(a write or a restore; the age is ``meta.json``'s modification time) and are swept
when the first session of the process starts and at most hourly after that.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from prefshap_core.cache import cache_dir

TTL_ENV = "PREFSHAP_SESSION_TTL_DAYS"
DEFAULT_TTL_DAYS = 7.0
SWEEP_EVERY_S = 3600.0
META = "meta.json"
TOKEN = re.compile(r"[0-9a-f]{32}")

_LOG = logging.getLogger("prefshap.dashboard")
_sweep_lock = threading.Lock()
_last_sweep: dict[str, float] = {}  # records folder -> time.time() of its last sweep


def new_token() -> str:
    """A fresh session token: 128 random bits, never derived from any content."""
    return secrets.token_hex(16)


def ttl_seconds() -> float:
    """How long a record lives after its last use (``$PREFSHAP_SESSION_TTL_DAYS``)."""
    text = os.environ.get(TTL_ENV, "").strip()
    try:
        days = float(text) if text else DEFAULT_TTL_DAYS
    except ValueError:
        days = -1.0
    if not days > 0:  # also NaN
        _LOG.warning("%s=%r is not a positive number of days: using %g", TTL_ENV, text,
                     DEFAULT_TTL_DAYS)  # fmt: skip
        days = DEFAULT_TTL_DAYS
    return days * 86400.0


def records_dir() -> Path:
    return cache_dir() / "sessions"


def record_dir(token: str) -> Path:
    if not TOKEN.fullmatch(token):
        raise ValueError("not a session token")
    return records_dir() / token


def _age_s(path: Path, now: float) -> float:
    return now - path.stat().st_mtime


def exists(token: str, *, now: float | None = None) -> bool:
    """Whether ``token`` names a record the server wrote and that has not expired."""
    if not TOKEN.fullmatch(token):
        return False
    try:
        return _age_s(record_dir(token) / META, time.time() if now is None else now) < (
            ttl_seconds()
        )
    except OSError:
        return False


def read_meta(token: str) -> str:
    """The record's ``meta.json`` text; raises OSError when there is none."""
    return (record_dir(token) / META).read_text(encoding="utf-8")


def read_file(token: str, k: int) -> bytes:
    return (record_dir(token) / f"file{k}").read_bytes()


def touch(token: str) -> None:
    """Mark the record as used now (its time to live starts again)."""
    with contextlib.suppress(OSError):
        os.utime(record_dir(token) / META)


def write(token: str, meta_text: str, files: Sequence[bytes] | None = None) -> None:
    """Write (or update) a record; ``files`` replaces the stored uploads when given.

    Every file is written beside its final name and renamed into place, so a reader
    (a reload in another tab, the sweep) never sees half a file. Raises OSError.
    """
    folder = record_dir(token)
    folder.mkdir(parents=True, exist_ok=True)
    if files is not None:
        for k, data in enumerate(files):
            _replace(folder / f"file{k}", data)
    _replace(folder / META, meta_text.encode("utf-8"))


def _replace(path: Path, data: bytes) -> None:
    partial = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    try:
        partial.write_bytes(data)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)


def sweep(*, now: float | None = None) -> int:
    """Delete every expired record (and any folder left without a ``meta.json`` for
    as long); returns how many were deleted."""
    now = time.time() if now is None else now
    ttl = ttl_seconds()
    removed = 0
    try:
        folders = [p for p in records_dir().iterdir() if TOKEN.fullmatch(p.name) and p.is_dir()]
    except OSError:
        return 0
    for folder in folders:
        meta = folder / META
        try:
            age = _age_s(meta if meta.exists() else folder, now)
        except OSError:
            continue
        if age >= ttl:
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
    if removed:
        _LOG.info("removed %d expired session record(s)", removed)
    return removed


def sweep_now_and_then(*, now: float | None = None) -> None:
    """Sweep when this process has not swept this cache in the last hour (the first
    session of a process always sweeps)."""
    now = time.time() if now is None else now
    folder = str(records_dir())
    with _sweep_lock:
        if now - _last_sweep.get(folder, -SWEEP_EVERY_S) < SWEEP_EVERY_S:
            return
        _last_sweep[folder] = now
    sweep(now=now)
