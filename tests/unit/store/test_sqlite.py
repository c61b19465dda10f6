"""The SQLite store: the harness's real stores, schema identity, row encoding.

See docs/format.md#sqlite-store.

``../shared/corpus/dsh-sqlite`` holds stores written by the harness's own SQLite backend
from recorded scenarios, each with the events the harness read back
(``<name>.expected.json``), plus two stores it must refuse. They are read in place,
read-only: nothing may appear beside them.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.corpus_support import HARNESS, SQLITE, corpus_params, require_corpus

from pytest_dsh_replay import (
    ScenarioError,
    SchemaVersionError,
    SessionLogError,
    SessionStoreError,
    load_scenario,
)
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._format.json_values import MAX_SAFE_INTEGER
from pytest_dsh_replay._scripts.loading import scenario_files
from pytest_dsh_replay._scripts.scenario import load_session_script, locale_sort_key
from pytest_dsh_replay._store.backends.sqlite import SqliteBackend
from pytest_dsh_replay._store.backends.sqlite_rows import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    decode_source_event_seqs,
    encode_source_event_seqs,
    normalize_sql,
)
from pytest_dsh_replay._store.store import SessionStore


def iter_store_sessions(path: Path) -> Iterator[tuple[SessionHeader, list[dict[str, Any]]]]:
    with SqliteBackend(path, read_only=True) as backend:
        yield from backend.logs()


def _stores(bad: bool) -> list[Path]:
    if not SQLITE.is_dir():
        return []
    return sorted(p for p in SQLITE.glob("*.sqlite") if p.name.startswith("bad-") == bad)


GOOD = _stores(bad=False)
BAD = _stores(bad=True)


def _expected(store: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(store.with_suffix(".expected.json").read_text("utf-8"))
    return data


def _file_state(directory: Path) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir())


def _identity(path: Path) -> tuple[int, int, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?immutable=1", uri=True)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name")
        schema = [(t, n, tb, normalize_sql(s)) for t, n, tb, s in rows]
        return version, app_id, schema
    finally:
        conn.close()


# --- the harness's stores ----------------------------------------------------------------


def test_corpus_is_complete() -> None:
    require_corpus(SQLITE)
    assert (len(GOOD), len(BAD)) == (13, 2)
    assert sum(len(_expected(p)["sessions"]) for p in GOOD) == 18


@pytest.mark.parametrize("store", corpus_params(GOOD))
def test_store_decodes_as_the_harness_read_it(store: Path | None) -> None:
    require_corpus(SQLITE)
    assert store is not None
    before = _file_state(store.parent)
    expected = _expected(store)["sessions"]
    got = list(iter_store_sessions(store))
    # delegationDepth is optional in a stored row; a header writes 0 for it.
    assert [h.to_json() for h, _ in got] == [
        {"type": "session", "delegationDepth": 0, **s["header"]} for s in expected
    ]
    assert [h.delegation_depth for h, _ in got] == [
        s["header"].get("delegationDepth") for s in expected
    ]
    for (header, events), want in zip(got, expected, strict=True):
        assert events == want["events"], header.id
        assert len(events) == want["eventCount"]
    assert _file_state(store.parent) == before  # no -wal, no -shm, nothing touched


def _jsonl_scripts(directory: Path) -> list[dict[str, Any]]:
    """The scripts of a corpus scenario's logs, as derived from the logs alone.

    A store holds logs, never a ``replay.override.json`` sidecar; a scenario that has
    one is compared with its logs' own derivation.
    """
    if not list(directory.glob("replay*.override.json")):
        scripts = list(load_scenario(directory).scripts)
    else:
        primary, children, _ = scenario_files(directory)
        kids = [load_session_script(directory / c, primary=False) for c in children]
        kids.sort(key=lambda s: (s.created_at, locale_sort_key(s.recorded_id)))
        scripts = [load_session_script(directory / primary), *kids]
    return [{k: v for k, v in s.to_json().items() if k != "file"} for s in scripts]


@pytest.mark.parametrize("store", corpus_params(GOOD))
def test_store_scenario_matches_its_jsonl_scenario(store: Path | None) -> None:
    require_corpus(SQLITE)
    assert store is not None
    scenario = load_scenario(store)
    assert scenario.path == store
    ids = [s["header"]["id"] for s in _expected(store)["sessions"]]
    assert [s.file for s in scenario.scripts] == [f"{store.name}#{i}" for i in ids]
    assert scenario.primary.parent_session is None
    got = [{k: v for k, v in s.to_json().items() if k != "file"} for s in scenario.scripts]
    assert got == _jsonl_scripts(HARNESS / store.stem)


@pytest.mark.parametrize("store", corpus_params(GOOD))
def test_store_loads_through_the_session_store(store: Path | None, tmp_path: Path) -> None:
    require_corpus(SQLITE)
    assert store is not None
    copy = tmp_path / store.name
    shutil.copyfile(store, copy)
    sessions = SessionStore(SqliteBackend(copy))
    for want in _expected(store)["sessions"]:
        session = sessions.load(want["header"]["id"])
        assert list(session.events) == want["events"]  # every log ends closed: no closers
        assert session.header.created_at == want["header"]["createdAt"]
        assert session.seed_length == want["header"].get("seedLength", 0)
    sessions.close()


@pytest.mark.parametrize("store", corpus_params(BAD))
def test_bad_stores_are_refused(store: Path | None, tmp_path: Path) -> None:
    require_corpus(SQLITE)
    assert store is not None
    found, required = (
        (17, SCHEMA_VERSION) if "old-version" in store.name else (12345, APPLICATION_ID)
    )
    for attempt in (
        lambda: load_scenario(store),
        lambda: load_scenario(store),
        lambda: SqliteBackend(store, read_only=True),
    ):
        with pytest.raises(SchemaVersionError) as info:
            attempt()
        err = info.value
        assert (err.path, err.found, err.required) == (str(store), found, required)
        assert str(store) in str(err)
        assert str(found) in str(err)
        assert str(required) in str(err)
    copy = tmp_path / store.name
    shutil.copyfile(store, copy)
    data = copy.read_bytes()
    with pytest.raises(SchemaVersionError):
        SqliteBackend(copy)  # a writable open refuses too, and leaves the file as it was
    assert copy.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == [store.name]


def test_our_store_has_the_harness_identity(tmp_path: Path) -> None:
    ours = tmp_path / "ours.sqlite"
    store = SessionStore(SqliteBackend(ours))
    store.create("s").append("turn/start", {"turn": 1})
    store.close()
    assert _identity(ours)[:2] == (18, 1146308688)
    assert ours.read_bytes()[18:20] == b"\x02\x02"  # WAL, kept in the file header
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.sqlite"]
    require_corpus(SQLITE)
    for theirs in GOOD:
        assert _identity(ours) == _identity(theirs), theirs.name


# --- source_event_seqs varints ---------------------------------------------------------------


def test_varint_examples() -> None:
    assert encode_source_event_seqs([9, 10, 11]) == b"\x09\x02\x02"
    assert decode_source_event_seqs(b"\x09\x02\x02") == [9, 10, 11]
    assert encode_source_event_seqs([]) == b""
    assert decode_source_event_seqs(b"") == []
    assert encode_source_event_seqs([300, 4]) == b"\xac\x02\xcf\x04"
    assert decode_source_event_seqs(b"\xac\x02\xcf\x04") == [300, 4]


@given(st.lists(st.integers(0, MAX_SAFE_INTEGER), max_size=20))
def test_varint_round_trip(seqs: list[int]) -> None:
    assert decode_source_event_seqs(encode_source_event_seqs(seqs)) == seqs


@pytest.mark.parametrize(
    ("blob", "reason"),
    [
        (b"\x80\x00", "non-canonical varint"),
        (b"\x05\x82\x00", "non-canonical varint"),
        (b"\x80", "truncated varint"),
        (b"\xff" * 10 + b"\x01", "varint is out of range"),
        (b"\x00\x01", "decoded seq is out of range"),  # 0, then -1
        (b"\x80\x80\x80\x80\x80\x80\x80\x10", "decoded seq is out of range"),  # 2**53
    ],
)
def test_varint_rejections(blob: bytes, reason: str) -> None:
    with pytest.raises(ValueError, match=f"malformed source_event_seqs storage value: {reason}"):
        decode_source_event_seqs(blob)


@pytest.mark.parametrize("bad", [[-1], [2**53], [True], [1.0]])
def test_varint_encoder_rejects_non_seqs(bad: list[Any]) -> None:
    with pytest.raises(ValueError, match="not a non-negative safe integer"):
        encode_source_event_seqs(bad)


# --- our rows -------------------------------------------------------------------------------------


def _rows(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def _delta(s: Any, text: str, index: int = 0) -> None:
    s.append(
        "assistant/chunk",
        {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": index, "text": text}},
    )


def test_row_encoding(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SessionStore(SqliteBackend(path), clock=lambda: 7)
    s = store.create("s", meta={"cwd": "/w"})
    s.append(
        "user/message",
        {"id": "m", "role": "user", "source": {"kind": "user"}, "content": []},
        surfaceOp="append",
    )
    with s.batch():
        for i in range(5):
            _delta(s, str(i))
        s.append("log/big", {"text": "abc" * 3000})
        s.append("log/small", {"text": "abc"})
        s.append(
            "assistant/message",
            {"turn": 1, "message": {}},
            surfaceOp="append",
            sourceEventSeqs=[0, 1, 5],
        )
    store.close()
    rows = _rows(
        path,
        "SELECT seq, type, typeof(data), hex(source_event_seqs), surface_op, ignorable "
        "FROM events ORDER BY seq",
    )
    assert rows == [
        (0, "user/message", "text", "", '"append"', None),
        (1, "text-chunks", "text", "", None, 0),
        (6, "log/big", "blob", "", None, None),
        (7, "log/small", "text", "", None, None),
        (8, "assistant/message", "text", "000208", '"append"', None),
    ]
    blob = _rows(path, "SELECT data FROM events WHERE seq = 6")[0][0]
    assert blob[:4] == b"\x28\xb5\x2f\xfd"
    assert _rows(path, "SELECT data FROM events WHERE seq = 1")[0][0] == (
        '{"turn":1,"step":1,"index":0,"dt":[0,0,0,0],"texts":["0","1","2","3","4"]}'
    )
    session = _rows(path, "SELECT * FROM sessions")[0]
    assert session[:11][:10] == ("s", 0, 7, "/w", None, None, None, None, None, None)
    assert session[11] == 2  # two transactions: the first append, then the batch
    assert len(_rows(path, "SELECT store_id FROM persistence_state")) == 1
    again = SessionStore(SqliteBackend(path))
    assert [e["seq"] for e in again.load("s").events] == list(range(9))
    again.close()


def test_long_runs_are_split_into_rows_of_at_most_1024(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = SessionStore(SqliteBackend(path))
    s = store.create("s")
    with s.batch():
        for i in range(2050):
            _delta(s, f"{i} ")
    events = list(s.events)
    store.close()
    rows = _rows(path, "SELECT seq, ignorable FROM events ORDER BY seq")
    assert rows == [(0, 0), (1024, 0), (2048, None), (2049, None)]
    assert next(iter_store_sessions(path))[1] == events


def test_append_must_continue_the_stored_log(tmp_path: Path) -> None:
    backend = SqliteBackend(tmp_path / "s.sqlite")
    store = SessionStore(backend)
    s = store.create("s")
    s.append("turn/start", {"turn": 1})
    with pytest.raises(
        SessionStoreError, match="session s append starts at seq 5, stored next seq is 1"
    ):
        backend.append(s.header, [{"type": "x", "seq": 5, "time": 0, "data": {}}], create=False)
    with pytest.raises(SessionStoreError, match="already exists"):
        backend.append(s.header, [], create=True)
    store.close()
    read_only = SqliteBackend(tmp_path / "s.sqlite", read_only=True)
    with pytest.raises(SessionStoreError, match="read-only"):
        read_only.append(s.header, [], create=False)
    read_only.close()


def _store_with_turn(path: Path) -> None:
    store = SessionStore(SqliteBackend(path))
    s = store.create("s")
    s.append("turn/start", {"turn": 1})
    s.append("log/note", {"n": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close()


@pytest.mark.parametrize(
    ("update", "reason"),
    [
        ("UPDATE events SET data = '{oops' WHERE seq = 1", "data is not valid JSON"),
        (
            "UPDATE events SET ignorable = 0 WHERE seq = 1",
            "packed discriminator requires a chunk tag",
        ),
        ("UPDATE events SET source_event_seqs = x'8000' WHERE seq = 1", "non-canonical varint"),
        ("UPDATE events SET source_event_seqs = 'text' WHERE seq = 1", "expected a BLOB"),
        ("UPDATE events SET data = x'0102' WHERE seq = 1", "not a zstd frame"),
        ("UPDATE events SET seq = 5 WHERE seq = 1", "expected seq 1"),
        (
            "UPDATE events SET type = 'text-chunks', ignorable = 0, "
            """data = '{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}' WHERE seq = 1""",
            r"texts must contain 3..1024 strings",
        ),
    ],
)
def test_damage_before_the_last_turn_end_is_fatal(tmp_path: Path, update: str, reason: str) -> None:
    path = tmp_path / "s.sqlite"
    _store_with_turn(path)
    conn = sqlite3.connect(path)
    conn.execute(update)
    conn.commit()
    conn.close()
    with pytest.raises(
        SessionLogError, match=f"invalid committed physical row at seq \\d+ .*{reason}"
    ):
        load_scenario(path)
    with pytest.raises(SessionLogError, match=reason):
        SessionStore(SqliteBackend(path)).load("s")


def test_a_torn_tail_is_skipped_read_only_and_removed_on_load(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    _store_with_turn(path)
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO events (session_id, seq, type, time, data) VALUES ('s', 3, 'x', 0, '{')"
    )
    conn.commit()
    conn.close()
    assert len(next(iter_store_sessions(path))[1]) == 3
    store = SessionStore(SqliteBackend(path))
    assert len(store.load("s").events) == 3
    store.close()
    assert _rows(path, "SELECT count(*) FROM events")[0][0] == 3


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("CREATE TABLE extra (x)", "does not contain the required schema objects"),
        (
            "ALTER TABLE sessions ADD COLUMN colour TEXT",
            "does not contain the required schema objects",
        ),
        ("PRAGMA user_version = 0", "unversioned schema or application identity"),
        ("PRAGMA user_version = 19", "schema version 19, incompatible with this build"),
        ("PRAGMA application_id = 1", "application id 1, expected 1146308688"),
    ],
)
def test_changed_stores_are_refused(tmp_path: Path, change: str, message: str) -> None:
    path = tmp_path / "s.sqlite"
    _store_with_turn(path)
    conn = sqlite3.connect(path)
    conn.execute(change)
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match=message):
        SqliteBackend(path)
    with pytest.raises(SchemaVersionError, match=message):
        load_scenario(path)


def test_foreign_databases_and_files(tmp_path: Path) -> None:
    foreign = tmp_path / "other.sqlite"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(SchemaVersionError, match="unversioned") as info:
        SqliteBackend(foreign)
    assert info.value.found == 0
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(SessionLogError, match="not a SQLite session store") as err:
        load_scenario(junk)
    assert err.value.path == str(junk)
    with pytest.raises(SessionLogError, match="no SQLite session store here"):
        SqliteBackend(tmp_path / "missing.sqlite", read_only=True)


def test_store_scenarios_need_one_primary(tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    SqliteBackend(empty).close()
    with pytest.raises(ScenarioError, match="has 0 session"):
        load_scenario(empty)
    two = tmp_path / "two.sqlite"
    store = SessionStore(SqliteBackend(two))
    for sid in ("a", "b"):
        store.create(sid).append("log/note", {})
    store.close()
    with pytest.raises(ScenarioError, match="2 primary: 'a', 'b'"):
        load_scenario(two)


def test_read_only_sees_what_a_live_writer_committed(tmp_path: Path) -> None:
    path = tmp_path / "live.sqlite"
    store = SessionStore(SqliteBackend(path))
    s = store.create("s")
    s.append("log/note", {"n": 1})
    assert (tmp_path / "live.sqlite-wal").stat().st_size > 0  # not checkpointed yet
    (scenario_session,) = (h.id for h, _ in iter_store_sessions(path))
    assert scenario_session == "s"
    assert [e["data"] for e in next(iter_store_sessions(path))[1]] == [{"n": 1}]
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.sqlite"]
