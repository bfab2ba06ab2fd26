"""Session links: tokens made by the server only, records that expire, upload deep links.

A ``?session=`` token is adopted only when the server has a record under it, so a
link with a token of someone else's choosing collects nothing the opener uploads; a
session opened from a real link that then uploads other data gets a token of its
own; records expire after ``$PREFSHAP_SESSION_TTL_DAYS`` and are swept; an upload's
``dataset=upload:<digest>`` deep link opens within its own session only.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard import sessions
from tests.dashboard.apptest import (
    APP,
    SAMPLE,
    TIMEOUT_S,
    assert_clean,
    new_app,
    sample_upload,
    settle,
    shown,
)

CHOSEN = "a1" * 16  # a token the attacker picked: well-formed, never made by the server


def _param(at: AppTest, name: str) -> str | None:
    value = at.query_params.get(name)
    return value[0] if isinstance(value, list) else value


def _open(**params: str) -> AppTest:
    """A new browser session opened with these query parameters."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    for name, value in params.items():
        at.query_params[name] = value
    at.run()
    assert_clean(at)
    return at


def _sidebar(at: AppTest) -> str:
    return "\n".join(shown(m.value) for m in at.sidebar.markdown)


def _victim_items(secret: str) -> bytes:
    """The sample items with the victim's own column, to find its bytes on disk."""
    lines = (SAMPLE / "items.csv").read_text().splitlines()
    lines[0] += ",patient"
    lines[1:] = [f"{line},{secret}{k % 3}" for k, line in enumerate(lines[1:])]
    return ("\n".join(lines) + "\n").encode()


def _cache() -> Path:
    return Path(os.environ["PREFSHAP_CACHE_DIR"])  # the dashboard_cache fixture's


def _records_holding(secret: bytes) -> set[str]:
    """The session records whose stored files contain ``secret``."""
    found = (_cache() / "sessions").glob("*/file*")
    return {p.parent.name for p in found if secret in p.read_bytes()}


def test_a_token_the_client_chose_never_collects_an_upload() -> None:
    victim = _open(session=CHOSEN)  # the link the attacker sent
    assert any("expired or never existed" in t.value for t in victim.toast)
    assert _param(victim, "session") is None  # dropped from the URL at once
    victim = sample_upload(victim, items=_victim_items("alpha"), items_name="ward.csv")
    assert_clean(victim)
    own = _param(victim, "session")
    assert own is not None and re.fullmatch(r"[0-9a-f]{32}", own) and own != CHOSEN
    assert not (_cache() / "sessions" / CHOSEN).exists()

    attacker = _open(session=CHOSEN)  # the same link, later
    assert "ward.csv" not in _sidebar(attacker) and "Synthetic clusters" in _sidebar(attacker)
    assert _records_holding(b"alpha") == {own}


def test_an_opened_link_that_uploads_other_data_gets_its_own_token() -> None:
    owner = sample_upload(new_app(), items_name="bait.csv")
    token = _param(owner, "session")
    assert token is not None

    opener = _open(session=token)  # a real link: it restores (a bearer link)
    assert "bait.csv" in _sidebar(opener)
    opener = sample_upload(opener, items=_victim_items("bravo"), items_name="ward.csv")
    assert "ward.csv" in _sidebar(opener)
    mine = _param(opener, "session")
    assert mine not in (None, token)

    again = _open(session=token)
    assert "bait.csv" in _sidebar(again) and "ward.csv" not in _sidebar(again)
    assert _records_holding(b"bravo") == {mine}


def test_the_share_link_says_what_it_shares() -> None:
    at = sample_upload(new_app(), items_name="shared-items.csv")
    at.run()
    token = _param(at, "session")
    popover = next(b for b in _popovers(at) if b.proto.popover.label == "Share link")
    words = " ".join(shown(m.value) for m in popover.markdown)
    assert "shared-items.csv" in words and "duels.csv" in words and "models" in words
    assert any(c.value.endswith(f"?session={token}") for c in popover.get("code"))


def _popovers(at: AppTest):
    stack = [at._tree]
    while stack:
        node = stack.pop()
        if getattr(node, "type", "") == "popover":
            yield node
        stack.extend(getattr(node, "children", {}).values())


def test_an_upload_deep_link_opens_within_its_own_session_only() -> None:
    at = sample_upload(new_app())
    at.switch_page("views/train.py").run()
    at.number_input(key="train:centres").set_value(60)
    next(b for b in at.button if b.label == "Train").click().run()
    at = settle(at)
    at.switch_page("views/players.py").run()
    dataset, token = _param(at, "dataset"), _param(at, "session")
    assert dataset is not None and re.fullmatch(r"upload:[0-9a-f]{32}", dataset)
    player = _param(at, "player")

    reopened = _open(session=token, dataset=dataset, player=player)
    assert not reopened.toast
    assert "Upload 1: items.csv + duels.csv" in _sidebar(reopened)
    assert any("test ROC AUC" in str(c.value) for c in reopened.sidebar.caption)

    elsewhere = _open(dataset=dataset)  # no session, or another one: not opened
    assert any("belongs to another session" in t.value for t in elsewhere.toast)
    assert "Synthetic clusters" in _sidebar(elsewhere)
    other = _open(session=_param(sample_upload(new_app(), items_name="x.csv"), "session"),
                  dataset=dataset)  # fmt: skip
    assert any("belongs to another session" in t.value for t in other.toast)
    assert "x.csv" in _sidebar(other)


# -- expiry and sweeping (a fake clock: records' modification times) ---------------------
@pytest.fixture
def records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PREFSHAP_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(sessions.TTL_ENV, raising=False)
    return tmp_path / "sessions"


def _age(token: str, days: float) -> None:
    then = time.time() - days * 86400
    os.utime(sessions.record_dir(token) / sessions.META, (then, then))


def test_records_expire_after_seven_days_by_default(records: Path) -> None:
    fresh, old = sessions.new_token(), sessions.new_token()
    for token in (fresh, old):
        sessions.write(token, "{}", [b"data"])
    _age(old, 7.01)
    _age(fresh, 6.9)
    assert sessions.exists(fresh) and not sessions.exists(old)
    assert sessions.sweep() == 1
    assert sorted(p.name for p in records.iterdir()) == [fresh]
    assert sessions.sweep(now=time.time() + 0.2 * 86400) == 1  # a day later: gone too
    assert not any(records.iterdir())


def test_the_time_to_live_is_configurable(records: Path, monkeypatch) -> None:
    token = sessions.new_token()
    sessions.write(token, "{}")
    _age(token, 0.75)
    assert sessions.exists(token)
    monkeypatch.setenv(sessions.TTL_ENV, "0.5")
    assert not sessions.exists(token) and sessions.sweep() == 1
    monkeypatch.setenv(sessions.TTL_ENV, "soon")  # not a number: the default, logged
    assert sessions.ttl_seconds() == sessions.DEFAULT_TTL_DAYS * 86400


def test_a_sweep_spares_what_is_not_a_record_and_runs_hourly(records: Path) -> None:
    records.mkdir(parents=True)
    (records / "notes").mkdir()
    half = records / sessions.new_token()  # a record cut short before its meta.json
    half.mkdir()
    then = time.time() - 8 * 86400
    for path in (records / "notes", half):
        os.utime(path, (then, then))
    start = time.time()
    sessions.sweep_now_and_then(now=start)  # the first sweep of this cache folder
    assert not half.exists() and (records / "notes").exists()
    late = sessions.new_token()
    sessions.write(late, "{}")
    _age(late, 30)
    sessions.sweep_now_and_then(now=start + 60)  # within the hour: no sweep
    assert (records / late).exists()
    sessions.sweep_now_and_then(now=start + 3601)
    assert not (records / late).exists()


def test_an_expired_link_restores_nothing_and_says_so() -> None:
    owner = sample_upload(new_app(), items_name="old.csv")
    token = _param(owner, "session")
    assert token is not None
    then = time.time() - 8 * 86400
    os.utime(_cache() / "sessions" / token / sessions.META, (then, then))
    late = _open(session=token)
    assert any("expired or never existed" in t.value for t in late.toast)
    assert "old.csv" not in _sidebar(late)
