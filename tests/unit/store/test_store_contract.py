"""One contract for every session-store backend (see docs/api/store.md#api-stores).

Each test runs against the JSONL backend (plain and zstd) and the SQLite backend: what
a store writes, a fresh store over the same place reads back, unchanged.
"""

from __future__ import annotations

import itertools
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay import SessionForkError, SessionStoreError, load_scenario
from pytest_dsh_replay._format.chunk_rows import SQLITE_MAX_MEMBERS
from pytest_dsh_replay._scripts.scenario import write_scenario
from pytest_dsh_replay._store.backends.base import SessionBackend
from pytest_dsh_replay._store.backends.jsonl import JsonlBackend
from pytest_dsh_replay._store.backends.sqlite import SqliteBackend
from pytest_dsh_replay._store.store import SessionStore

T0 = 1_785_000_000_000


def fake_clock(start: int = T0) -> Callable[[], int]:
    counter = itertools.count(start)
    return lambda: next(counter)


# --- the backends --------------------------------------------------------------------------


def _tear_jsonl(root: Path, session_id: str, next_seq: int) -> None:
    path = JsonlBackend(root).locate(session_id)
    assert path is not None
    with open(path, "ab") as f:  # a crash in the middle of writing a record
        f.write(b'{"type":"assistant/chunk","seq":%d,"time":1,"data":{"tu' % next_seq)


def _tear_zstd(root: Path, session_id: str, next_seq: int) -> None:
    import zstandard

    path = JsonlBackend(root, compression="zstd").locate(session_id)
    assert path is not None
    record = b'{"type":"log/note","seq":%d,"time":1,"data":{"text":"%s"}}\n' % (
        next_seq,
        b"y" * 5000,
    )
    frame = zstandard.ZstdCompressor(level=3, write_checksum=True).compress(record)
    with open(path, "ab") as f:  # a frame cut off before its end
        f.write(frame[: len(frame) // 2])


def _tear_sqlite(root: Path, session_id: str, next_seq: int) -> None:
    conn = sqlite3.connect(root / "store.sqlite", isolation_level=None)
    try:  # a row that does not decode, after the last turn/end: a torn tail
        conn.execute(
            "INSERT INTO events (session_id, seq, type, time, data) VALUES (?, ?, ?, ?, ?)",
            (session_id, next_seq, "assistant/chunk", 1, "{not json"),
        )
    finally:
        conn.close()


@dataclass(frozen=True)
class Kind:
    name: str
    make: Callable[[Path], SessionBackend]
    tear: Callable[[Path, str, int], None]


KINDS = [
    Kind("jsonl", lambda root: JsonlBackend(root), _tear_jsonl),
    Kind("jsonl-zstd", lambda root: JsonlBackend(root, compression="zstd"), _tear_zstd),
    Kind("sqlite", lambda root: SqliteBackend(root / "store.sqlite"), _tear_sqlite),
]


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    k: Kind = request.param
    return k


def reopen(kind: Kind, root: Path) -> SessionStore:
    return SessionStore(kind.make(root), clock=fake_clock(T0 + 10_000_000))


# --- event helpers ---------------------------------------------------------------------------


def model_call(s: Any, turn: int, step: int, text: list[str]) -> None:
    """Append one model call: block-start, deltas, block-end, finish."""
    d = {"turn": turn, "step": step}
    s.append(
        "assistant/chunk", {**d, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}}
    )
    for t in text:
        s.append("assistant/chunk", {**d, "chunk": {"type": "text-delta", "index": 0, "text": t}})
    s.append(
        "assistant/chunk",
        {
            **d,
            "chunk": {
                "type": "block-end",
                "index": 0,
                "block": {"type": "text", "text": "".join(text)},
            },
        },
    )
    s.append("assistant/chunk", {**d, "chunk": {"type": "finish", "reason": {"kind": "stop"}}})


def user_message(s: Any, text: str, msg_id: str) -> None:
    s.append(
        "user/message",
        {
            "id": msg_id,
            "role": "user",
            "source": {"kind": "user"},
            "content": [{"type": "text", "text": text}],
        },
        surfaceOp="append",
    )


def full_turn(s: Any, turn: int, text: list[str]) -> None:
    s.append("turn/start", {"turn": turn})
    user_message(s, f"prompt {turn}", f"m-{s.id}-{turn}")
    s.append("step/start", {"turn": turn, "step": 1})
    model_call(s, turn, 1, text)
    s.append("step/end", {"turn": turn, "step": 1})
    s.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


# --- the contract ------------------------------------------------------------------------------


def test_create_append_reload(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    s = store.create("s-1", meta={"cwd": "/work/proj", "delegationDepth": 0})
    assert s.events == []
    assert not kind.make(tmp_path).exists("s-1")
    full_turn(s, 1, ["Hel", "lo", " wor", "ld"])
    with s.batch():
        full_turn(s, 2, ["a", "b", "c", "d", "e"])
    assert [e["seq"] for e in s.events] == list(range(len(s.events)))
    assert s.events[0] == {"type": "turn/start", "seq": 0, "time": T0 + 1, "data": {"turn": 1}}
    expected = list(s.events)
    header = s.header
    store.close()

    again = reopen(kind, tmp_path)
    assert again.stored_ids() == ["s-1"]
    loaded = again.load("s-1")
    assert list(loaded.events) == expected
    assert loaded.header.to_json() == header.to_json()
    assert loaded.header.created_at == T0
    assert loaded.header.cwd == "/work/proj"
    loaded.append("log/note", {"after": "reload"})
    assert loaded.events[-1]["seq"] == len(expected)
    again.close()
    third = reopen(kind, tmp_path)
    assert len(third.load("s-1").events) == len(expected) + 1
    third.close()


@pytest.mark.parametrize("chunks", ["append_chunk", "chunk_run"])
def test_a_batch_mixing_appends_and_chunks_is_written_in_seq_order(
    kind: Kind, tmp_path: Path, chunks: str
) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    s = store.create("s-1", meta={"cwd": "/work/proj"})
    s.append("turn/start", {"turn": 1})
    text = {"type": "text-delta", "index": 0, "text": "hello"}
    with s.batch():
        s.append("step/start", {"turn": 1, "step": 1})
        if chunks == "append_chunk":
            s.append_chunk(1, 1, text)
        else:
            s.chunk_run(1, 1).add(text)
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    expected = [(e["seq"], e["type"]) for e in s.events]
    assert expected == [
        (0, "turn/start"),
        (1, "step/start"),
        (2, "assistant/chunk"),
        (3, "step/end"),
        (4, "turn/end"),
    ]
    store.close()
    again = reopen(kind, tmp_path)
    assert [(e["seq"], e["type"]) for e in again.load("s-1").events] == expected
    again.close()


def test_an_event_too_large_to_read_back_is_refused_and_nothing_is_written(
    kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_dsh_replay._store import log_rules
    from pytest_dsh_replay._store.backends import jsonl, sqlite_rows

    for module in (log_rules, jsonl, sqlite_rows):  # the 64 MiB limit, made small
        monkeypatch.setattr(module, "MAX_LINE_BYTES", 1000)
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    s = store.create("s-1", meta={"cwd": "/work/proj"})
    s.append("turn/start", {"turn": 1})
    with pytest.raises(SessionStoreError, match=r"log/big at seq 1 is \d+ bytes serialized, over"):
        s.append("log/big", {"blob": "y" * 2000}, ignorable=True)
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close()
    again = reopen(kind, tmp_path)
    assert [e["type"] for e in again.load("s-1").events] == ["turn/start", "turn/end"]
    again.close()


def test_a_lone_surrogate_in_an_id_a_header_or_a_key_is_the_stores_error(
    kind: Kind, tmp_path: Path
) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    with pytest.raises(SessionStoreError, match="holds a lone surrogate"):
        store.create("a\ud800b")
    with pytest.raises(SessionStoreError, match="cwd holds a lone surrogate"):
        store.create("m", meta={"cwd": "/x\ud800"})
    ok = store.create("ok")
    ok.append("turn/start", {"turn": 1})
    ok.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    with pytest.raises(SessionStoreError, match="holds a lone surrogate"):
        store.fork(ok, None, "c\udfffd")
    with pytest.raises(SessionStoreError, match="object key.*lone surrogate"):
        ok.append("log/x", {"\ud83dk": 1}, ignorable=True)
    store.close()
    again = reopen(kind, tmp_path)
    assert again.stored_ids() == ["ok"]
    again.close()


def test_seed_and_parent_round_trip(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    parent = store.create("p", meta={"cwd": "/work/proj"})
    full_turn(parent, 1, ["x", "y", "z"])
    parent.append("log/note", {"between": "turns"})
    child = store.fork(parent, child_session_id="c")
    n = len(parent.events)
    assert child.seed_length == n
    assert child.header.parent_session == "p"
    assert child.events[n]["type"] == "session/end-seed"
    assert len(child.events) == n + 1
    empty_seed = store.create("e", seed=[], meta={"parentSession": "p", "seedLength": 0})
    spawn = store.create(
        "sp", meta={"parentSession": "p", "origin": "subagent", "delegationDepth": 1}
    )
    spawn.append("turn/start", {"turn": 1})
    spawn.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    headers = {s.id: s.header.to_json() for s in (parent, child, empty_seed, spawn)}
    events = {s.id: list(s.events) for s in (parent, child, empty_seed, spawn)}
    store.close()

    again = reopen(kind, tmp_path)
    for sid in ("p", "c", "e", "sp"):
        s = again.load(sid)
        assert list(s.events) == events[sid], sid
        expected_header = dict(headers[sid])
        if kind.name == "sqlite" and sid != "sp":  # SQLite keeps an absent depth absent
            assert s.header.delegation_depth is None
        assert s.header.to_json() == expected_header, sid
    c = again.get("c")
    assert c is not None
    assert c.seed_length == n
    assert c.header.parent_session == "p"
    e = again.get("e")
    assert e is not None
    assert e.seed_length == 0
    assert "seedLength" in e.header.to_json()
    assert [ev["type"] for ev in e.events] == ["session/end-seed"]
    sp = again.get("sp")
    assert sp is not None
    assert "seedLength" not in sp.header.to_json()
    assert sp.header.origin == "subagent"
    assert sp.header.delegation_depth == 1
    # seedLength is the stored value, not the length of the reloaded log
    c.append("turn/start", {"turn": 2})
    c.append("turn/end", {"turn": 2, "reason": {"kind": "completed"}})
    again.close()
    third = reopen(kind, tmp_path)
    assert third.load("c").seed_length == n
    third.close()


def test_fork_in_store_and_after_reload(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    parent = store.create("p", meta={"cwd": "/work/proj"})
    full_turn(parent, 1, ["x", "y", "z"])
    with pytest.raises(SessionForkError) as info:
        store.fork(parent, child_session_id="p")
    assert info.value.code == "SESSION_ALREADY_EXISTS"
    store.close()
    again = reopen(kind, tmp_path)
    with pytest.raises(SessionForkError) as info:
        again.fork("p")  # stored but not live
    assert info.value.code == "SESSION_NOT_FOUND"
    p = again.load("p")
    with pytest.raises(SessionForkError) as info:
        again.fork(p, 3, "c")  # inside turn 1
    assert info.value.code == "OPEN_TURN"
    boundary = len(p.events)
    p.append("log/note", {"after": "turn 1"})
    child = again.fork(p, boundary, "c")
    assert child.seed_length == boundary + 1
    assert child.header.cwd == "/work/proj"
    with pytest.raises(SessionForkError) as info:
        again.fork(p, 0, "c")
    assert info.value.code == "SESSION_ALREADY_EXISTS"
    again.close()
    third = reopen(kind, tmp_path)
    assert third.load("c").seed_length == boundary + 1
    third.close()


@pytest.mark.parametrize("bad_id", [5, b"kid", ["kid"], ""], ids=["int", "bytes", "list", "empty"])
def test_an_id_that_is_no_string_is_refused_alike(kind: Kind, tmp_path: Path, bad_id: Any) -> None:
    # One check for every backend (docs/scenarios.md#store-fork): the store's error,
    # never a TypeError from inside a backend, and nothing written.
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    parent = store.create("p", meta={"cwd": "/w"})
    full_turn(parent, 1, ["x"])
    message = f"a session id must be a non-empty string, got {bad_id!r}"
    calls: list[Callable[[], object]] = [
        lambda: store.create(bad_id, meta={"cwd": "/w"}),
        lambda: store.fork(parent, child_session_id=bad_id),
        lambda: store.fork("missing", child_session_id=bad_id),
    ]
    for call in calls:
        with pytest.raises(SessionStoreError) as info:
            call()
        assert str(info.value) == message
        assert not isinstance(info.value, SessionForkError)
    assert [s.id for s in store.sessions()] == ["p"]
    assert store.stored_ids() == ["p"]
    store.close()


def test_fork_of_a_source_never_written_stores_the_source_first(kind: Kind, tmp_path: Path) -> None:
    # docs/scenarios.md#store-fork: a child's parentSession names a stored session, so
    # a store written only through the API loads as a scenario.
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    main = store.create("main", meta={"cwd": "/w"})
    full_turn(main, 1, ["x"])
    helper = store.create("helper", meta={"cwd": "/w", "parentSession": "main"})
    assert not kind.make(tmp_path).exists("helper")
    kid = store.fork(helper, child_session_id="kid")  # an empty source
    assert [(e["type"], e["seq"]) for e in kid.events] == [("session/end-seed", 0)]
    assert kind.make(tmp_path).exists("helper")
    helper.append("turn/start", {"turn": 1})  # later writes continue the stored header
    helper.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close()
    again = reopen(kind, tmp_path)
    assert sorted(again.stored_ids()) == ["helper", "kid", "main"]
    loaded = again.load("helper")
    assert loaded.header.parent_session == "main"
    assert [e["type"] for e in loaded.events] == ["turn/start", "turn/end"]
    assert again.load("kid").header.parent_session == "helper"
    again.close()
    if kind.name == "sqlite":
        scenario = load_scenario(tmp_path / "store.sqlite")
    elif kind.name == "jsonl":
        scenario = load_scenario(tmp_path, session_id="main")
    else:
        return
    assert [s.recorded_id for s in scenario.scripts] == ["main", "helper", "kid"]


def test_torn_tail_is_cut_and_the_open_turn_closed(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    s = store.create("s-1", meta={"cwd": "/work/proj"})
    full_turn(s, 1, ["a", "b", "c"])
    s.append("turn/start", {"turn": 2})
    s.append("step/start", {"turn": 2, "step": 1})
    model_call(s, 2, 1, ["d", "e", "f"])
    call = {"type": "tool-call", "id": "call-1", "name": "bash", "arguments": "{}"}
    s.append(
        "assistant/message",
        {"turn": 2, "step": 1, "message": {"id": "a-1", "role": "assistant", "content": [call]}},
        surfaceOp="append",
    )
    s.append("tool/call", {"turn": 2, "step": 1, "callId": "call-1", "name": "bash"})
    committed = list(s.events)
    store.close()
    kind.tear(tmp_path, "s-1", len(committed))

    again = reopen(kind, tmp_path)
    loaded = again.load("s-1")
    n = len(committed)
    assert list(loaded.events[:n]) == committed
    closers = list(loaded.events[n:])
    assert [e["type"] for e in closers] == ["tool/result", "step/end", "turn/end"]
    assert [e["seq"] for e in closers] == [n, n + 1, n + 2]
    assert all(e["time"] == committed[-1]["time"] for e in closers)
    result = closers[0]
    assert result["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert result["sourceEventSeqs"] == [n - 1]
    assert result["surfaceOp"] == "append"
    assert result["data"]["message"]["source"] == {"kind": "tool", "callId": "call-1"}
    assert result["data"]["message"]["id"] == f"interrupted-tool-result-call-1-{n}"
    assert closers[2]["data"] == {"turn": 2, "reason": {"kind": "interrupted"}}
    repaired = list(loaded.events)
    again.close()
    # The repair was persisted: a second load finds a balanced log and adds nothing.
    third = reopen(kind, tmp_path)
    assert list(third.load("s-1").events) == repaired
    third.close()


def test_concurrent_appends_from_two_threads(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    shared = store.create("shared", meta={"cwd": "/work/proj"})
    others = [store.create(f"own-{k}") for k in range(2)]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            barrier.wait()
            for i in range(150):
                shared.append("log/note", {"thread": k, "i": i})
                others[k].append("log/note", {"i": i})
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    events = list(shared.events)
    assert [e["seq"] for e in events] == list(range(300))
    for k in range(2):
        assert [e["data"]["i"] for e in events if e["data"]["thread"] == k] == list(range(150))
    store.close()
    again = reopen(kind, tmp_path)
    assert list(again.load("shared").events) == events
    assert [e["data"]["i"] for e in again.load("own-1").events] == list(range(150))
    again.close()


UNICODE = [
    "line\u2028sep\u2029para",
    "emoji 🎉🧪👩‍👩‍👧",
    "漢字かなカナ한국어",
    "nul\x00 tab\t bidi\u202e",
    "\x1e",
]


def test_unicode_round_trips(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    sid = "séance-🎉-漢字\u2028"
    s = store.create(sid, meta={"cwd": "/home/用户/my proj 🎉"})
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    model_call(s, 1, 1, UNICODE)
    s.append("log/note", {t: t for t in UNICODE})
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    events = list(s.events)
    store.close()
    again = reopen(kind, tmp_path)
    assert again.stored_ids() == [sid]
    loaded = again.load(sid)
    assert list(loaded.events) == events
    assert loaded.header.cwd == "/home/用户/my proj 🎉"
    again.close()


def test_large_events(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    s = store.create("big")
    huge = "0123456789abcdef" * (2 * 65536)  # 2 MiB
    s.append("log/note", {"text": huge, "nested": [{"k": huge[:5000]}] * 3})
    s.append("turn/start", {"turn": 1})
    s.append("step/start", {"turn": 1, "step": 1})
    with s.batch():  # one batch: a run longer than one SQLite row may hold
        model_call(s, 1, 1, [f"t{i}-" + "x" * 400 for i in range(3 * SQLITE_MAX_MEMBERS)])
    s.append("step/end", {"turn": 1, "step": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    events = list(s.events)
    store.close()
    again = reopen(kind, tmp_path)
    assert list(again.load("big").events) == events
    again.close()


def test_fork_child_replays_only_its_own_calls(kind: Kind, tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = SessionStore(kind.make(root), clock=fake_clock())
    parent = store.create("parent", meta={"cwd": "/work/proj"})
    full_turn(parent, 1, ["parent ", "call ", "one"])
    child = store.fork(parent, child_session_id="child")
    full_turn(child, 2, ["child ", "call ", "one"])
    store.close()

    again = reopen(kind, root)
    sessions = [again.load("parent"), again.load("child")]
    out = write_scenario(tmp_path / "scenario", sessions)
    assert [p.name for p in out] == ["session.jsonl", "session.1.jsonl"]
    again.close()
    scenarios = [load_scenario(tmp_path / "scenario")]
    if kind.name == "sqlite":
        scenarios.append(load_scenario(root / "store.sqlite"))
    for scenario in scenarios:
        primary, kid = scenario.scripts
        assert (primary.recorded_id, kid.recorded_id) == ("parent", "child")
        assert kid.seed_length == len(parent.events)
        assert kid.parent_session == "parent"
        assert [len(e.chunks) for e in primary.entries] == [6]
        assert len(kid.entries) == 1
        texts = [c["text"] for c in kid.entries[0].chunks if c["type"] == "text-delta"]
        assert texts == ["child ", "call ", "one"]


# --- a property: whatever goes in comes back ------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0 or str(f)[0] != "-")
    | st.text(UTF8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(UTF8, max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_delta = st.builds(
    lambda kind, index, text: (
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": kind, "index": index, "text": text}},
    ),
    st.sampled_from(["text-delta", "reasoning-delta"]),
    st.integers(0, 1),
    st.text(UTF8, max_size=6),
)
_other = st.builds(
    lambda t, d: (t, d), st.sampled_from(["log/note", "request/context", "x/y"]), _json
)
_batches = st.lists(st.lists(_delta | _other, min_size=1, max_size=12), min_size=1, max_size=4)


@pytest.mark.parametrize("make", [k.make for k in KINDS], ids=[k.name for k in KINDS])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=_batches)
def test_any_batches_round_trip(
    make: Callable[[Path], SessionBackend], batches: list[list[tuple[str, Any]]]
) -> None:
    with tempfile.TemporaryDirectory() as d:
        store = SessionStore(make(Path(d)), clock=fake_clock())
        s = store.create("s")
        for batch in batches:
            with s.batch():
                for kind, data in batch:
                    s.append(kind, data)
        events = list(s.events)
        store.close()
        again = SessionStore(make(Path(d)))
        assert list(again.load("s").events) == events
        again.close()


def test_a_stored_log_is_built_and_read_as_before_and_is_one_log() -> None:
    # StoredLog is public: a backend of one's own builds it from a header and events.
    from pytest_dsh_replay import SessionHeader, StoredLog

    header = SessionHeader(id="s", created_at=1)
    events = [{"type": "user/message", "seq": 0, "time": 1, "data": {}}]
    stored = StoredLog(header, events, "<mine>#s")
    assert (stored.header, stored.events, stored.source, stored.repaired) == (
        header,
        events,
        "<mine>#s",
        False,
    )
    log_header, log_events = stored.log
    assert (log_header, log_events) == (header, events)


def test_a_closed_store_refuses_fork_as_create_and_load_do(kind: Kind, tmp_path: Path) -> None:
    store = SessionStore(kind.make(tmp_path), clock=fake_clock())
    full_turn(store.create("a"), 1, ["x"])
    store.close()
    calls: list[Callable[[], object]] = [
        lambda: store.create("b"),
        lambda: store.load("a"),
        lambda: store.fork("a"),
    ]
    for call in calls:
        with pytest.raises(SessionStoreError, match="this session store is closed"):
            call()
