"""Reading an ``.npz`` from an untrusted source: only the arrays asked for, sizes first.

``np.load`` decompresses every member it is asked about and trusts each member's
header, so a 3 MB file could declare (and inflate to) gigabytes, and a malformed zip
surfaces as whatever exception the zip module raises ("allow_pickle" hints
included). Here each documented member is checked before a byte is inflated: a
plain or deflated ``.npy`` (no encryption, no other compression), a header that
parses with a numeric or text dtype, a declared size that matches the header, and
a total within the memory budget. Undocumented members are never decompressed.
Every problem is a :class:`~prefshap_core.errors.ModelFileError` naming the file and
the member.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import Collection
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

from prefshap_core import budget
from prefshap_core.errors import MemoryBudgetError, ModelFileError

_SUPPORTED_COMPRESSION = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate"}
_MAX_HEADER_BYTES = 10_000
# Loading and then evaluating a model touches its arrays a few times over.
_WORKING_COPIES = 4


def read_arrays(
    source: str | Path | bytes, name: str, documented: Collection[str]
) -> dict[str, np.ndarray]:
    """The documented arrays present in the ``.npz`` ``source`` (path or bytes)."""
    try:
        handle = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115
    except FileNotFoundError:
        raise ModelFileError(f"{name}: no such file") from None
    except OSError as err:
        raise ModelFileError(f"{name}: cannot be opened ({err.strerror or err})") from None
    with handle:
        try:
            archive = zipfile.ZipFile(handle)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
            raise ModelFileError(
                f"{name}: not a readable .npz model file (not a zip archive; a model file "
                "is the zip of .npy arrays np.savez writes, see docs/model-format.md)"
            ) from None
        with archive:
            members = _documented_members(archive, name, documented)
            return {key: _read_member(archive, info, name) for key, info in members.items()}


def _documented_members(
    archive: zipfile.ZipFile, name: str, documented: Collection[str]
) -> dict[str, zipfile.ZipInfo]:
    members: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        if info.is_dir():
            continue
        if not info.filename.endswith(".npy"):
            raise ModelFileError(
                f"{name}: member '{info.filename}' is not a .npy array (a model file holds "
                "only .npy arrays, see docs/model-format.md)"
            )
        key = info.filename[: -len(".npy")]
        if key not in documented:
            continue  # never decompressed: only documented arrays are read
        if key in members:
            raise ModelFileError(f"{name}: array '{key}' appears twice")
        if info.flag_bits & 0x1:
            raise ModelFileError(f"{name}: array '{key}' is encrypted")
        if info.compress_type not in _SUPPORTED_COMPRESSION:
            raise ModelFileError(
                f"{name}: array '{key}' uses zip compression method {info.compress_type}; "
                "only stored and deflate are read"
            )
        members[key] = info
    declared = sum(info.file_size for info in members.values())
    try:
        budget.check(
            declared * _WORKING_COPIES,
            f"Loading {name} ({declared / 2**20:,.0f} MiB of arrays)",
            "the model's number of centres, items or features",
        )
    except MemoryBudgetError as err:
        raise ModelFileError(str(err)) from None
    return members


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, name: str) -> np.ndarray:
    key = info.filename[: -len(".npy")]

    def fail(message: str) -> ModelFileError:
        return ModelFileError(f"{name}: array '{key}' {message} (see docs/model-format.md)")

    try:
        with archive.open(info) as stream:
            version = npy_format.read_magic(stream)
            if version == (1, 0):
                shape, fortran, dtype = npy_format.read_array_header_1_0(
                    stream, max_header_size=_MAX_HEADER_BYTES
                )
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = npy_format.read_array_header_2_0(
                    stream, max_header_size=_MAX_HEADER_BYTES
                )
            else:
                raise fail(f"has an unknown .npy version {version}")
            if dtype.hasobject or dtype.kind not in "biufUS" or dtype.fields is not None:
                raise fail(f"has dtype {dtype}, not a number or text")
            n_values = int(np.prod(shape, dtype=object)) if shape else 1
            n_bytes = n_values * dtype.itemsize
            header_bytes = stream.tell()
            if header_bytes + n_bytes != info.file_size:
                raise fail(
                    f"declares shape {shape} ({n_bytes:,} bytes) but the member holds "
                    f"{max(0, info.file_size - header_bytes):,}"
                )
            data = stream.read(n_bytes)
            if len(data) != n_bytes:
                raise fail("is truncated")
    except ModelFileError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as err:
        raise fail(f"cannot be read: the zip data is damaged ({_short(err)})") from None
    except (RuntimeError, NotImplementedError) as err:  # encrypted, unsupported feature
        raise fail(f"cannot be read ({_short(err)})") from None
    array = np.frombuffer(data, dtype=dtype, count=n_values)
    order = "F" if fortran else "C"
    return array.reshape(shape, order=order).copy()


def _short(err: BaseException) -> str:
    text = str(err) or type(err).__name__
    return text if len(text) <= 120 else text[:117] + "..."
