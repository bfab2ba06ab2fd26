"""Scheduler addresses are checked before anything connects, with a clear error."""

from __future__ import annotations

import time

import pytest

from prefshap_core.cli import main
from prefshap_core.errors import PrefShapError
from prefshap_core.explain import dask_executor
from prefshap_core.explain.dask_executor import DaskExecutor
from prefshap_core.explain.scheduler_address import (
    SchedulerAddressError,
    check_scheduler_address,
)

ACCEPTED = [
    "tcp://127.0.0.1:8786",
    "tcp://scheduler.example.org:8786",
    "tls://scheduler:8786",
    "TCP://Scheduler:1",
    "tcp://[::1]:8786",
    "inproc://10.0.0.5/1234/1",
    "scheduler:8786",
    "  10.1.2.3:65535  ",
]
REFUSED = [
    "file:///etc/passwd",
    "http://scheduler:8786",
    "ucx://scheduler:8786",
    "scheduler",
    "tcp://scheduler",
    "tcp://:8786",
    "tcp://scheduler:0",
    "tcp://scheduler:65536",
    "tcp://scheduler:87a6",
    "tcp://sched uler:8786",
    "tcp://scheduler:8786/path",
    "tcp://-bad-:8786",
    "inproc://",
    "",
    "   ",
]


@pytest.mark.parametrize("address", ACCEPTED)
def test_cluster_addresses_are_accepted(address: str) -> None:
    assert check_scheduler_address(address) == address.strip()


@pytest.mark.parametrize("address", REFUSED)
def test_other_addresses_are_refused_naming_the_accepted_forms(address: str) -> None:
    with pytest.raises(SchedulerAddressError, match="tcp://HOST:PORT") as caught:
        check_scheduler_address(address)
    assert isinstance(caught.value, PrefShapError)


def test_the_executor_refuses_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_connection(*args, **kwargs):
        raise AssertionError("connected to a refused address")

    monkeypatch.setattr(dask_executor, "connect", no_connection)
    start = time.perf_counter()
    with pytest.raises(SchedulerAddressError, match="'file'"):
        DaskExecutor("file:///etc/passwd", connect_timeout=20)
    with pytest.raises(SchedulerAddressError):
        DaskExecutor("http://scheduler:8786").connect()
    assert time.perf_counter() - start < 1.0


def test_module_connect_refuses_before_importing_a_client() -> None:
    start = time.perf_counter()
    with pytest.raises(SchedulerAddressError):
        dask_executor.connect("file:///etc/passwd", timeout=20)
    assert time.perf_counter() - start < 1.0


def test_cli_refuses_the_address_first_in_one_line(tmp_path, capsys) -> None:
    start = time.perf_counter()
    code = main(
        [
            "explain",
            "--model", str(tmp_path / "no-such-model.npz"),  # never read: the address is first
            "--duels", str(tmp_path / "no-such-duels.csv"),
            "--out", str(tmp_path / "values.csv"),
            "--scheduler", "file:///etc/passwd",
            "--connect-timeout", "20",
        ]
    )  # fmt: skip
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 2.0
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "'file:///etc/passwd' is not a Dask scheduler address" in err
