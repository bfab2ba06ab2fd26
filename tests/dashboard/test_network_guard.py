"""The dashboard serves only this machine unless the network was asked for.

``streamlit run /abs/path/dashboard/app.py`` started from another folder does not read
the repository's ``.streamlit/config.toml`` and listens on every interface; the app
then serves one message and nothing else. Loopback, an address given on purpose
(the Procfile's ``--server.address=0.0.0.0``) or ``PREFSHAP_ALLOW_NETWORK=1`` serve.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from dashboard import network_guard
from dashboard.network_guard import ALLOW_ENV, refusal
from tests.dashboard.apptest import (
    APP,
    ROOT,
    new_app,
    texts,
)


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "unix:///tmp/s.sock"]
)
def test_loopback_addresses_serve(address: str) -> None:
    assert refusal(address, chosen=False, allow=None) is None


@pytest.mark.parametrize("address", [None, ""])
def test_every_interface_by_default_is_refused(address: str | None) -> None:
    message = refusal(address, chosen=address == "", allow=None)
    assert message is not None and "--server.address=127.0.0.1" in message
    assert ALLOW_ENV in message and "--server.address=0.0.0.0" in message
    assert refusal(address, chosen=False, allow="0") == message  # only "1" allows


def test_an_address_given_on_purpose_or_the_variable_serves() -> None:
    # The Procfile: `--server.address=0.0.0.0` on the command line.
    assert refusal("0.0.0.0", chosen=True, allow=None) is None
    assert refusal("10.1.2.3", chosen=True, allow=None) is None
    assert refusal(None, chosen=False, allow="1") is None
    assert refusal("0.0.0.0", chosen=False, allow=None) is not None


def test_the_app_shows_only_the_message_when_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    monkeypatch.setattr(network_guard, "listening", lambda: (None, False))
    at = new_app()
    assert [w.value for w in at.warning] == [network_guard.REFUSAL]
    assert not at.sidebar.markdown and not at.title and not at.get("plotly_chart")
    monkeypatch.setattr(network_guard, "listening", lambda: ("0.0.0.0", True))
    served = new_app()
    assert not served.warning and "Explain" in texts(served)


# -- a real server, started from another folder ----------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def _first_screen(port: int, timeout_s: float) -> list[str]:
    """The Markdown bodies of a new session's first run, read over the app's websocket
    as a browser would (no Origin header: a local client)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect

    bodies: list[str] = []
    deadline = time.monotonic() + timeout_s
    url = f"ws://127.0.0.1:{port}/_stcore/stream"
    with connect(url, subprotocols=["streamlit"], open_timeout=timeout_s) as ws:
        rerun = BackMsg()
        rerun.rerun_script.query_string = ""
        ws.send(rerun.SerializeToString())
        while (left := deadline - time.monotonic()) > 0:
            msg = ForwardMsg()
            msg.ParseFromString(ws.recv(timeout=left))
            if msg.WhichOneof("type") == "script_finished":
                return bodies
            element = msg.delta.new_element
            kind = element.WhichOneof("type")
            if kind in ("alert", "markdown", "heading"):
                bodies.append(getattr(element, kind).body)
    raise AssertionError(f"the first run did not finish within {timeout_s} s: {bodies}")


@pytest.mark.slow
def test_started_from_another_folder_it_serves_only_the_message(tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    env.pop(ALLOW_ENV, None)
    env.update(PREFSHAP_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    command = [
        sys.executable, "-m", "streamlit", "run", str(APP.resolve()),
        "--server.headless", "true", "--server.port", str(port),
        "--browser.gatherUsageStats", "false",
    ]  # fmt: skip
    log = tmp_path / "streamlit.log"
    with log.open("wb") as out:  # cwd: not the repository, so no .streamlit/config.toml
        server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while not _healthy(url):  # generous: a loaded CI machine imports torch slowly
            assert server.poll() is None and time.monotonic() - started < 180, log.read_text()
            time.sleep(0.25)
        bodies = _first_screen(port, timeout_s=180)
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
    assert bodies == [network_guard.REFUSAL], bodies
