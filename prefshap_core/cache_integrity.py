"""Integrity of disk-cache entries: a checksum over their files, optionally signed.

Every entry folder gets a manifest (:data:`MANIFEST`) when it is written: the SHA-256
of each of its files and the engine version that wrote it. A reader takes the files'
bytes once, checks them against the manifest and parses those same bytes, so an edited,
truncated, added or removed file (or an entry of another engine version) is detected
and the entry is a miss. An entry written before entries had manifests is sealed when
first read (without a secret), so what was cached before still resolves. The checksum
finds corruption (a torn write, a bad disk, a
hand edit), not an attacker: whoever can write the folder can rewrite the manifest.

With ``PREFSHAP_CACHE_SECRET`` set, the manifest also carries an HMAC-SHA256 of its
content under that secret, and only entries with a valid signature are served: an
unsigned entry, or one signed under another secret, is a miss. That protects against
anyone who can write to the cache directory but cannot read the server's environment
(another user of a shared cache folder, a process with write access only).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from pathlib import Path

from prefshap_core.explain.options import ENGINE_VERSION

MANIFEST = "integrity.json"
_log = logging.getLogger("prefshap_core.cache")
CACHE_SECRET_ENV = "PREFSHAP_CACHE_SECRET"
_MANIFEST_VERSION = 1


class IntegrityError(Exception):
    """An entry whose files do not match its manifest (or, with a secret, that has
    none): a cache miss."""


def cache_secret() -> bytes | None:
    """``$PREFSHAP_CACHE_SECRET`` as bytes, or None when unset or empty (read at every call)."""
    secret = os.environ.get(CACHE_SECRET_ENV, "")
    return secret.encode("utf-8") if secret else None


def _content(files: dict[str, str], engine_version: str) -> bytes:
    """The bytes that the checksum describes and the signature covers (canonical JSON)."""
    body = {"manifest": _MANIFEST_VERSION, "engine_version": engine_version, "files": files}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _signature(secret: bytes, content: bytes) -> str:
    return hmac.new(secret, content, hashlib.sha256).hexdigest()


def _entry_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.name != MANIFEST)


def seal(folder: Path, secret: bytes | None = None) -> None:
    """Write the manifest of the entry in ``folder`` (signed when a secret is given;
    default: :func:`cache_secret`)."""
    secret = cache_secret() if secret is None else secret
    files = {}
    for path in _entry_files(folder):
        if not path.is_file():
            raise IntegrityError(f"{path.name} is not a plain file")
        files[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
    content = _content(files, ENGINE_VERSION)
    manifest = {
        "manifest": _MANIFEST_VERSION,
        "engine_version": ENGINE_VERSION,
        "files": files,
        "checksum": hashlib.sha256(content).hexdigest(),
    }
    if secret is not None:
        manifest["signature"] = _signature(secret, content)
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def read_verified(folder: Path, secret: bytes | None = None) -> dict[str, bytes]:
    """Every file of the entry in ``folder`` by name, after checking them against the
    manifest; raises :class:`IntegrityError` saying what does not match.

    ``secret`` (default: :func:`cache_secret`): when set, the manifest's signature
    must be valid under it.
    """
    secret = cache_secret() if secret is None else secret
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError:
        if secret is not None:
            raise IntegrityError(
                f"it has no checksum (written before entries had one), and {CACHE_SECRET_ENV} "
                "is set"
            ) from None
        # Written before entries had checksums: there is nothing to check it against,
        # so it is adopted as it is (sealed now, checked from then on), and what was
        # cached before (models behind model= links, explanations) still resolves.
        # With a secret such an entry is a miss: it cannot be told from a planted one.
        seal(folder)
        _log.info("cache: sealed %s, written before entries had checksums", folder.name)
        return read_verified(folder)
    except (OSError, ValueError) as exc:
        raise IntegrityError(f"its manifest cannot be read ({exc})") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise IntegrityError("its manifest is not one this engine writes")
    expected: dict[str, str] = manifest["files"]
    version = str(manifest.get("engine_version"))
    content = _content(expected, version)
    if not hmac.compare_digest(str(manifest.get("checksum")), hashlib.sha256(content).hexdigest()):
        raise IntegrityError("its manifest does not match its own checksum")
    if secret is not None:
        signature = manifest.get("signature")
        if not isinstance(signature, str):
            raise IntegrityError(f"it is not signed, and {CACHE_SECRET_ENV} is set")
        if not hmac.compare_digest(signature, _signature(secret, content)):
            raise IntegrityError(f"its signature is not valid under {CACHE_SECRET_ENV}")
    if version != ENGINE_VERSION:
        raise IntegrityError(f"it was written by engine version {version}, not {ENGINE_VERSION}")
    present = {p.name: p for p in _entry_files(folder)}
    if set(present) != set(expected):
        extra, missing = sorted(set(present) - set(expected)), sorted(set(expected) - set(present))
        raise IntegrityError(f"its files changed (added: {extra}, missing: {missing})")
    contents = {}
    for name, digest in sorted(expected.items()):
        data = present[name].read_bytes()
        if not hmac.compare_digest(hashlib.sha256(data).hexdigest(), str(digest)):
            raise IntegrityError(f"{name} does not match its checksum (edited or damaged)")
        contents[name] = data
    return contents
