"""MKL's fast path on AMD CPUs (prefshap_core/mkl_dispatch.py): when it applies, the
stub it builds, and that ``import prefshap_core`` puts it before torch's own copy."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

from prefshap_core import mkl_dispatch
from prefshap_core.paths import repo_root

needs_compiler = pytest.mark.skipif(mkl_dispatch._compiler() is None, reason="no C compiler")


def test_cpu_vendor_reads_the_first_vendor_id(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n\nvendor_id\t: Other\n")
    assert mkl_dispatch.cpu_vendor(cpuinfo) == "AuthenticAMD"
    assert mkl_dispatch.cpu_vendor(tmp_path / "missing") is None
    (tmp_path / "empty").write_text("processor\t: 0\n")
    assert mkl_dispatch.cpu_vendor(tmp_path / "empty") is None


@pytest.mark.parametrize("value", ["0", "off", "false", "No"])
def test_the_environment_switch_turns_it_off(monkeypatch, value: str) -> None:
    monkeypatch.setenv(mkl_dispatch.DISABLE_ENV, value)
    monkeypatch.setattr(mkl_dispatch, "stub_library", _must_not_build)
    assert mkl_dispatch._enable() == f"off: {mkl_dispatch.DISABLE_ENV}={value}"


def test_other_cpu_vendors_keep_mkls_choice(monkeypatch) -> None:
    _on_linux_x86_64(monkeypatch, vendor="GenuineIntel")
    assert mkl_dispatch._enable().startswith("off: CPU vendor GenuineIntel")


def test_too_late_once_torch_is_loaded(monkeypatch) -> None:
    import torch  # noqa: F401  (this process has it; the point is to be sure)

    _on_linux_x86_64(monkeypatch, vendor="AuthenticAMD")
    assert mkl_dispatch._enable().startswith("off: torch was imported before")


def _on_linux_x86_64(monkeypatch, vendor: str) -> None:
    """Linux x86-64 with ``vendor``'s CPU, the switch unset, and no stub to build."""
    monkeypatch.delenv(mkl_dispatch.DISABLE_ENV, raising=False)
    monkeypatch.setattr(mkl_dispatch.sys, "platform", "linux")
    monkeypatch.setattr(mkl_dispatch.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(mkl_dispatch, "cpu_vendor", lambda: vendor)
    monkeypatch.setattr(mkl_dispatch, "stub_library", _must_not_build)


def test_no_compiler_is_a_reason_not_an_error(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(mkl_dispatch, "_compiler", lambda: None)
    with pytest.raises(OSError, match="no C compiler"):
        mkl_dispatch.stub_library(tmp_path / "cache")


@needs_compiler
def test_the_stub_answers_one_and_is_built_once(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    library = mkl_dispatch.stub_library(folder)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not library.stat().st_mode & 0o022
    # RTLD_LOCAL: this process's MKL keeps its own answer; only the stub is asked.
    function = getattr(ctypes.CDLL(str(library)), mkl_dispatch.SYMBOL)
    assert function() == 1
    built_at = library.stat().st_mtime_ns
    assert mkl_dispatch.stub_library(folder) == library
    assert library.stat().st_mtime_ns == built_at
    assert [p.name for p in folder.iterdir()] == [library.name]  # no build leftovers


@needs_compiler
def test_a_folder_others_may_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(OSError, match="may be written by other users"):
        mkl_dispatch.stub_library(folder)
    folder.chmod(0o700)
    library = mkl_dispatch.stub_library(folder)
    library.chmod(0o777)  # replaced by someone else's file, say
    with pytest.raises(OSError, match="may be written by other users"):
        mkl_dispatch.stub_library(folder)


def _probe(tmp_path: Path, **env: str) -> list[str]:
    """STATUS and the answer the process's global symbol scope gives, in a fresh process."""
    code = (
        "import ctypes, prefshap_core, torch\n"
        "from prefshap_core import mkl_dispatch as m\n"
        "print(m.STATUS)\n"
        "print(getattr(ctypes.CDLL(None), m.SYMBOL, lambda: 'absent')())\n"
    )
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    environment.pop(mkl_dispatch.DISABLE_ENV, None)
    environment.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], env=environment, capture_output=True, text=True,
        cwd=repo_root(), timeout=300, check=True,
    )  # fmt: skip
    return done.stdout.splitlines()


@needs_compiler
@pytest.mark.skipif(
    mkl_dispatch.cpu_vendor() != "AuthenticAMD" or sys.platform != "linux",
    reason="the stub applies to AMD CPUs on Linux only",
)
def test_import_prefshap_core_puts_the_stub_before_torchs_copy(tmp_path: Path) -> None:
    # MKL calls the function through the same global scope: the first definition wins.
    assert _probe(tmp_path) == ["on", "1"]
    # Switched off, only libtorch's own copy (in its local scope) remains.
    assert _probe(tmp_path, **{mkl_dispatch.DISABLE_ENV: "0"}) == [
        f"off: {mkl_dispatch.DISABLE_ENV}=0",
        "absent",
    ]


def _must_not_build(folder: Path) -> Path:
    raise AssertionError(f"the stub must not be built or loaded here ({folder})")
