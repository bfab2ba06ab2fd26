"""MKL's vectorised kernels on AMD CPUs, as on Intel ones.

torch's x86 wheels do their BLAS and LAPACK work in Intel MKL (2024.2 in the pinned
torch). MKL chooses its kernels after asking its own ``mkl_serv_intel_cpu_true()``:
on an AMD CPU that answers 0, and MKL then runs generic kernels for most routines
whatever the CPU's vector units. Measured on the 2-core AMD EPYC VM (AVX-512,
2026-12-06), float64: GEMM 117 -> 245 GFLOP/s, Cholesky (r = 700) 60 -> 154,
triangular solves 89 -> 225 with the stub below; the exact Pokémon explanation took
4.76 -> 2.84 s and Pokémon's ``--model gpm`` training 17.8 -> 13.0 s, the same AUC.

The stub is a one-line C function of that name that answers 1. Loaded into the
process's global symbol scope *before* torch loads, it is found before libtorch's own
copy, and MKL then chooses its kernels by the CPU's feature flags (AVX2, AVX-512), as
it does on Intel CPUs. This is a well-known workaround (ECMWF's ecbuild offers it as
``MKL_FAKE_INTEL_CPU``; pytorch/builder#504 measures it on Zen). The numbers differ
from the generic kernels' in the last bits only, as any two BLAS do; the test suite's
exactness checks (brute-force oracles to 1e-13) run on whichever path the machine
takes, and passed on this one with the stub.

It applies only on Linux x86-64 with an AMD CPU, when ``import prefshap_core`` comes
before ``import torch`` (the CLI, the dashboard and the tests do so), and when a C
compiler (``$CC``, ``cc``, ``gcc`` or ``clang``) can build the stub once into
``$XDG_CACHE_HOME/prefshap`` (default ``~/.cache/prefshap``, a folder only its owner
may write). Otherwise nothing changes and :data:`STATUS` says why. Set
``PREFSHAP_MKL_FAST_PATH=0`` to keep MKL's own choice. (MKL 2025 and later decide
differently; with a newer torch the stub would do nothing, it would not do harm.)
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from prefshap_core.env_switch import turned_off

DISABLE_ENV = "PREFSHAP_MKL_FAST_PATH"
SYMBOL = "mkl_serv_intel_cpu_true"
STUB_SOURCE = f"int {SYMBOL}(void) {{ return 1; }}\n"

# What :func:`enable` did, for benchmarks and bug reports: "on" or "off: <reason>".
STATUS = "off: not tried"


def cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    """The ``vendor_id`` of the first CPU (``AuthenticAMD``, ``GenuineIntel``), if known."""
    try:
        with cpuinfo.open(encoding="ascii", errors="replace") as lines:
            for line in lines:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "prefshap"


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def _only_owner_writes(path: Path) -> bool:
    """True when ``path`` is this user's and no one else may write it: a shared library
    that others could replace would run their code in this process."""
    info = path.stat()
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def stub_library(folder: Path) -> Path:
    """The compiled stub in ``folder``, built there once (atomically) if missing.

    Raises ``OSError`` (no compiler, a failed build, a folder or file others may write).
    """
    digest = hashlib.sha256(f"{STUB_SOURCE}{platform.machine()}".encode()).hexdigest()[:16]
    target = folder / f"mkl-intel-cpu-true-{digest}.so"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not _only_owner_writes(folder):
        raise OSError(f"{folder} may be written by other users")
    if not target.exists():
        compiler = _compiler()
        if compiler is None:
            raise OSError("no C compiler ($CC, cc, gcc, clang) to build the stub")
        with tempfile.TemporaryDirectory(dir=folder) as work:
            source, built = Path(work) / "stub.c", Path(work) / "stub.so"
            source.write_text(STUB_SOURCE, encoding="ascii")
            done = subprocess.run(
                [compiler, "-shared", "-fPIC", "-O2", "-o", str(built), str(source)],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if done.returncode != 0:
                raise OSError(f"{compiler} failed: {done.stderr.strip()[:300]}")
            built.chmod(0o755)
            os.replace(built, target)  # atomic: a concurrent build loses nothing
    if not _only_owner_writes(target):
        raise OSError(f"{target} may be written by other users")
    return target


def enable() -> str:
    """Load the stub before torch when it applies; returns and records :data:`STATUS`."""
    global STATUS
    STATUS = _enable()
    return STATUS


def _enable() -> str:
    switched = turned_off(DISABLE_ENV)
    if switched:
        return switched
    if sys.platform != "linux" or platform.machine() not in {"x86_64", "AMD64"}:
        return f"off: not Linux x86-64 ({sys.platform}, {platform.machine()})"
    vendor = cpu_vendor()
    if vendor != "AuthenticAMD":
        return f"off: CPU vendor {vendor or 'unknown'} (MKL's own choice is right there)"
    if "torch" in sys.modules:
        return "off: torch was imported before prefshap_core (MKL has its answer already)"
    try:
        library = stub_library(cache_dir())
        ctypes.CDLL(str(library), mode=os.RTLD_NOW | os.RTLD_GLOBAL)
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        # RuntimeError: Path.home() without a home directory
        return f"off: {error}"
    return "on"
