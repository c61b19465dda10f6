"""SessionStore semantics and the JSONL backend's layout and repair.

See docs/format.md#envelopes, docs/scenarios.md#store-fork and docs/format.md#jsonl-store.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.values import UTF8, same_values

from pytest_dsh_replay import SessionForkError, SessionLogError, SessionStoreError
from pytest_dsh_replay._format.events import SessionLog
from pytest_dsh_replay._format.jsonl import parse_session_log
from pytest_dsh_replay._store.backends.base import SessionBackend
from pytest_dsh_replay._store.backends.jsonl import (
    JsonlBackend,
    decode_segment,
    encode_segment,
    project_key,
)
from pytest_dsh_replay._store.log_rules import completed_turn_prefix, interrupted_turn_closers
from pytest_dsh_replay._store.store import Session, SessionStore

T0 = 1_785_000_000_000


def fake_clock(start: int = T0) -> Callable[[], int]:
    counter = itertools.count(start)
    return lambda: next(counter)


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(JsonlBackend(tmp_path / "root"), clock=fake_clock())


def turn(s: Session, n: int, *, close: bool = True, reason: str = "completed") -> None:
    s.append("turn/start", {"turn": n})
    s.append("step/start", {"turn": n, "step": 1})
    s.append("step/end", {"turn": n, "step": 1})
    if close:
        s.append("turn/end", {"turn": n, "reason": {"kind": reason}})


def msg(text: str, mid: str = "m-1") -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "source": {"kind": "user"},
        "content": [{"type": "text", "text": text}],
    }


def tool_result(call_id: str, text: str) -> dict[str, Any]:
    return {
        "turn": 1,
        "step": 1,
        "message": {
            "id": f"r-{call_id}-{text}",
            "role": "user",
            "source": {"kind": "tool", "callId": call_id},
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                }
            ],
        },
    }


# --- create and seeds (see docs/scenarios.md#seeds) --------------------------------------


def test_create_mints_a_fresh_id_and_uses_the_clock(store: SessionStore) -> None:
    s = store.create()
    uuid.UUID(s.id)
    assert s.header.created_at == T0
    assert s.header.version == 0
    assert s.seed_length == 0
    assert store.get(s.id) is s
    assert store.get("nope") is None
    assert store.sessions() == [s]
    event = s.append("turn/start", {"turn": 1})
    assert event == {"type": "turn/start", "seq": 0, "time": T0 + 1, "data": {"turn": 1}}


def test_duplicate_and_invalid_ids_are_refused(store: SessionStore, tmp_path: Path) -> None:
    s = store.create("a")
    with pytest.raises(SessionStoreError, match='session "a" already exists'):
        store.create("a")
    s.append("turn/start", {"turn": 1})
    other = SessionStore(JsonlBackend(tmp_path / "root"))
    with pytest.raises(SessionStoreError, match='session "a" already exists'):
        other.create("a")  # stored, though not live in this store
    with pytest.raises(SessionStoreError, match="non-empty string"):
        store.create("")


def test_seed_is_followed_by_end_seed_once(store: SessionStore) -> None:
    seed: list[dict[str, Any]] = [
        {"type": "turn/start", "seq": 0, "time": 5, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 6,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    s = store.create("s", seed=seed)
    assert [e["type"] for e in s.events] == ["turn/start", "turn/end", "session/end-seed"]
    assert s.events[2] == {"type": "session/end-seed", "seq": 2, "time": T0 + 1, "data": {}}
    assert "seedLength" not in s.header.to_json()  # create() stamps only what meta says
    assert store.backend.exists("s")  # a seed is written at creation
    seed[0]["data"]["turn"] = 99  # the seed was deep-copied
    assert s.events[0]["data"] == {"turn": 1}
    again = store.create("again", seed=list(s.events))
    assert [e["type"] for e in again.events].count("session/end-seed") == 1
    empty = store.create("empty", seed=[])
    assert list(empty.events) == [
        {"type": "session/end-seed", "seq": 0, "time": T0 + 4, "data": {}}
    ]
    plain = store.create("plain")
    assert list(plain.events) == []
    assert not store.backend.exists("plain")  # nothing on disk before the first append


@pytest.mark.parametrize(
    ("seed", "message"),
    [
        (
            [{"type": "a", "seq": 1, "time": 0, "data": {}}],
            r"has seq 1 \(expected 0\).*contiguous from 0",
        ),
        (
            [{"type": "a", "seq": 0, "time": 0, "data": {}, "extra": 1}],
            "invalid event envelope: unknown field",
        ),
        ([{"type": "a", "seq": 0, "time": 0}], "data is required"),
        ([{"type": "a", "seq": 0, "time": 0.5, "data": {}}], "time must be a safe integer"),
        (
            [{"type": "a", "seq": 0, "time": 0, "data": {}, "ignorable": False}],
            "ignorable may only be true",
        ),
        ([{"type": "user/message", "seq": 0, "time": 0, "data": {}}], "needs surfaceOp"),
        ([{"type": "a", "seq": 0, "time": 0, "data": float("nan")}], "not lossless JSON"),
        ("nope", "seed must be a sequence of events"),
    ],
)
def test_invalid_seeds_are_refused(store: SessionStore, seed: Any, message: str) -> None:
    with pytest.raises(SessionStoreError, match=message):
        store.create("s", seed=seed)
    assert store.get("s") is None


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({"colour": 1}, "unknown session meta field"),
        ({"cwd": "relative/dir"}, 'cwd must be an absolute path, got "relative/dir"'),
        ({"cwd": 5}, "cwd must be a string"),
        ({"origin": "user"}, 'origin must be "subagent"'),
        ({"delegationDepth": -1}, "delegationDepth must be a non-negative safe integer"),
        ({"seedLength": 1.5}, "seedLength must be a non-negative safe integer"),
        ({"seedLength": 2}, "seedLength 2 exceeds the seed's 0 events"),
        ({"owner": ""}, "owner must be a non-empty string"),
        ({"parentSession": 3}, "parentSession must be a string"),
    ],
)
def test_invalid_meta_is_refused(store: SessionStore, meta: dict[str, Any], message: str) -> None:
    with pytest.raises(SessionStoreError, match=message):
        store.create("s", meta=meta)


def test_meta_becomes_the_header_in_reference_order(store: SessionStore) -> None:
    meta = {
        "agentPreset": "coder",
        "delegationDepth": 1,
        "origin": "subagent",
        "parentSession": "p",
        "cwd": "/w",
        "owner": "me",
    }
    s = store.create("c", meta=meta)
    assert list(s.header.to_json().items()) == [
        ("type", "session"),
        ("version", 0),
        ("id", "c"),
        ("createdAt", T0),
        ("cwd", "/w"),
        ("parentSession", "p"),
        ("origin", "subagent"),
        ("delegationDepth", 1),
        ("agentPreset", "coder"),
        ("owner", "me"),
    ]


# --- append (see docs/format.md#envelopes) -------------------------------------------------


@pytest.mark.parametrize(
    ("args", "envelope", "message"),
    [
        (("", {}), {}, "event type must be a non-empty string"),
        (("text-chunks", {}), {}, "packed chunk row tag"),
        (("a", {"x": float("inf")}), {}, r"a data.x is not lossless JSON"),
        (("a", {"x": -0.0}), {}, "-0.0 reads back as 0"),
        (("a", [2**53]), {}, "outside the safe range"),
        (("a", {"x": (1, 2)}), {}, "tuple values have no exact JSON form"),
        (("a", {1: "x"}), {}, "object key 1 is not a string"),
        (("a", "\ud800"), {}, "lone surrogate"),
        (("a", {}), {"colour": "red"}, "unknown field"),
        (("a", {}), {"surfaceOp": "append"}, "not surface events and cannot carry surfaceOp"),
        (("a", {}), {"sourceEventSeqs": [0]}, "cannot carry sourceEventSeqs"),
        (("user/message", msg("x")), {}, "needs surfaceOp"),
        (("user/message", msg("x")), {"surfaceOp": "prepend"}, "surfaceOp must be"),
        (
            ("tool/result", tool_result("c", "x")),
            {"surfaceOp": "append", "sourceEventSeqs": []},
            "must not be empty",
        ),
        (
            ("tool/result", tool_result("c", "x")),
            {"surfaceOp": "append", "sourceEventSeqs": [1]},
            "must cite earlier events: 1 >= this event's seq 1",
        ),
        (
            ("tool/result", tool_result("c", "x")),
            {"surfaceOp": "append", "sourceEventSeqs": [0, 0]},
            "must not repeat",
        ),
        (("a", {}), {"ignorable": "yes"}, "ignorable may only be True"),
        (("a", {}), {"time": 1.5}, "time must be a safe integer"),
    ],
)
def test_invalid_appends_are_refused(
    store: SessionStore, args: tuple[str, Any], envelope: dict[str, Any], message: str
) -> None:
    s = store.create("s")
    s.append("turn/start", {"turn": 1})
    with pytest.raises(SessionStoreError, match=message):
        s.append(*args, **envelope)
    assert len(s.events) == 1  # a refused append takes no seq
    assert s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})["seq"] == 1


def test_append_envelope_fields_and_copies(store: SessionStore) -> None:
    s = store.create("s")
    data = {"id": "m-1", "role": "user", "source": {"kind": "user"}, "content": []}
    first = s.append("user/message", data, surface_op="append")
    data["id"] = "changed"  # the stored event holds a copy
    assert first["data"]["id"] == "m-1"
    reply = s.append(
        "assistant/message", {"turn": 1, "message": {}}, surfaceOp="append", sourceEventSeqs=[]
    )
    assert list(reply) == ["type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp"]
    note = s.append("import/note", {}, ignorable=True, time=-5)
    assert note == {"type": "import/note", "seq": 2, "time": -5, "data": {}, "ignorable": True}
    with pytest.raises(TypeError):
        s.events[0] = {}  # type: ignore[index]


def test_surface_replace_rules(store: SessionStore) -> None:
    s = store.create("s")
    s.append("user/message", msg("one", "m-1"), surfaceOp="append")  # 0
    s.append("user/message", msg("two", "m-2"), surfaceOp="append")  # 1
    s.append("log/note", {})  # 2
    with pytest.raises(
        SessionStoreError, match="must cite every node it shadows in sourceEventSeqs; missing 1"
    ):
        s.append(
            "user/message",
            msg("3"),
            surfaceOp={"op": "replace", "start": 0, "end": 1},
            sourceEventSeqs=[0],
        )
    with pytest.raises(SessionStoreError, match="not a current surface node"):
        s.append(
            "user/message",
            msg("3"),
            surfaceOp={"op": "replace", "start": 2, "end": 2},
            sourceEventSeqs=[2],
        )
    with pytest.raises(SessionStoreError, match="comes after end seq"):
        s.append(
            "user/message",
            msg("3"),
            surfaceOp={"op": "replace", "start": 1, "end": 0},
            sourceEventSeqs=[0, 1],
        )
    s.append(
        "user/message",
        msg("summary"),
        surfaceOp={"op": "replace", "start": 0, "end": 1},
        sourceEventSeqs=[2, 0, 1],
    )
    with pytest.raises(SessionStoreError, match="not a current surface node"):
        s.append(
            "user/message",
            msg("x"),
            surfaceOp={"op": "replace", "start": 0, "end": 0},
            sourceEventSeqs=[0],
        )
    s.append("tool/result", tool_result("c", "old"), surfaceOp="append")  # 4
    rewrite = tool_result("c", "new")
    rewrite["message"]["id"] = "r-c-old"
    with pytest.raises(SessionStoreError, match="may change only the result's content"):
        s.append(
            "tool/result",
            tool_result("c", "new"),
            surfaceOp={"op": "replace", "start": 4, "end": 4},
            sourceEventSeqs=[4],
        )
    s.append(
        "tool/result",
        rewrite,
        surfaceOp={"op": "replace", "start": 4, "end": 4},
        sourceEventSeqs=[4],
    )


def test_batch_writes_once_and_survives_an_exception(store: SessionStore, tmp_path: Path) -> None:
    s = store.create("s", meta={"cwd": "/w"})
    seen: list[int] = []

    def fill() -> None:
        with s.batch():
            for i in range(4):
                chunk = {"type": "text-delta", "index": 0, "text": str(i)}
                s.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
            seen.append(len(s.events))
            assert not store.backend.exists("s")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fill()
    assert seen == [4]
    path = JsonlBackend(tmp_path / "root").locate("s")
    assert path is not None
    lines = path.read_bytes().splitlines()
    assert len(lines) == 2  # the header and one packed row
    assert orjson.loads(lines[1])["type"] == "text-chunks"


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    class Failing(JsonlBackend):
        fail = False

        def append(self, header: Any, events: Any, *, create: bool) -> None:
            if self.fail:
                raise OSError("disk full")
            super().append(header, events, create=create)

    backend = Failing(tmp_path)
    store = SessionStore(backend)
    s = store.create("s")
    s.append("turn/start", {"turn": 1})
    backend.fail = True
    with pytest.raises(SessionStoreError, match="cannot persist 1 event.*disk full"):
        s.append("log/note", {})

    def two() -> None:
        with s.batch():
            s.append("log/note", {})
            s.append("log/note", {})

    with pytest.raises(SessionStoreError, match="disk full"):
        two()
    assert len(s.events) == 1
    backend.fail = False
    assert s.append("log/note", {})["seq"] == 1


def test_closed_store_detaches_sessions(store: SessionStore) -> None:
    s = store.create("s")
    store.close()
    with pytest.raises(SessionStoreError, match='session "s" is not live in this store'):
        s.append("turn/start", {"turn": 1})
    with pytest.raises(SessionStoreError, match="closed"):
        store.create("t")


# --- fork (see docs/scenarios.md#store-fork) ---------------------------------------------------


def _code(call: Callable[[], object]) -> str:
    with pytest.raises(SessionForkError) as info:
        call()
    return info.value.code


def test_fork_check_order(store: SessionStore, tmp_path: Path) -> None:
    src = store.create("src")
    turn(src, 1)
    store.create("taken")
    # The taken child id is reported before anything about the source or boundary.
    assert _code(lambda: store.fork("missing", -1, "taken")) == "SESSION_ALREADY_EXISTS"
    assert _code(lambda: store.fork("missing", -1, "new")) == "SESSION_NOT_FOUND"
    assert _code(lambda: store.fork(src, -1, "new")) == "INVALID_BOUNDARY"
    elsewhere = SessionStore(JsonlBackend(tmp_path / "other"))
    twin = elsewhere.create("src")
    assert _code(lambda: store.fork(twin)) == "SESSION_NOT_LIVE"
    stray = elsewhere.create("stray")
    assert _code(lambda: store.fork(stray)) == "SESSION_NOT_FOUND"


@pytest.mark.parametrize("boundary", [-1, True, 1.5, "2", 2**53])
def test_fork_boundary_must_be_a_safe_integer(store: SessionStore, boundary: Any) -> None:
    src = store.create("src")
    turn(src, 1)
    with pytest.raises(
        SessionForkError,
        match='fork boundary for session "src" must be a non-negative safe integer',
    ) as info:
        store.fork(src, boundary)
    assert info.value.code == "INVALID_BOUNDARY"


def test_fork_boundary_must_exist(store: SessionStore) -> None:
    src = store.create("src")
    turn(src, 1)
    with pytest.raises(
        SessionForkError, match=r'fork boundary 4 does not exist in session "src" \(last seq: 3\)'
    ):
        store.fork(src, 4)
    empty = store.create("empty")
    with pytest.raises(SessionForkError, match=r"\(last seq: none\)"):
        store.fork(empty, 0)
    child = store.fork(empty, child_session_id="c")  # omitted boundary, empty source
    assert child.seed_length == 0
    assert [(e["type"], e["seq"], e["data"]) for e in child.events] == [("session/end-seed", 0, {})]
    assert child.header.to_json()["seedLength"] == 0


def test_fork_open_turn_rule(store: SessionStore) -> None:
    src = store.create("src", meta={"cwd": "/w"})
    src.append("log/before", {})  # 0: before any turn
    turn(src, 1, reason="error")  # 1..4
    src.append("log/after", {})  # 5: after a closed turn, before the next
    turn(src, 2, close=False)  # 6..8, open
    assert store.fork(src, 0).seed_length == 1
    assert store.fork(src, 4).seed_length == 5
    assert store.fork(src, 5).seed_length == 6
    for b in (1, 3, 6, 8, None):
        with pytest.raises(SessionForkError, match=r"ends inside open turn \d") as info:
            store.fork(src, b)
        assert info.value.code == "OPEN_TURN"
    with pytest.raises(
        SessionForkError, match='fork boundary 7 in session "src" ends inside open turn 2'
    ):
        store.fork(src, 7)


def test_fork_child_shape(store: SessionStore) -> None:
    src = store.create(
        "src", meta={"cwd": "/w", "origin": "subagent", "delegationDepth": 2, "agentPreset": "x"}
    )
    turn(src, 1)
    child = store.fork("src", child_session_id="kid")
    assert child.id == "kid"
    assert child.seed_length == 4
    assert child.header.parent_session == "src"
    assert child.header.cwd == "/w"
    assert (child.header.origin, child.header.delegation_depth, child.header.agent_preset) == (
        None,
        None,
        None,
    )
    assert list(child.events[:4]) == list(src.events)
    assert child.events[0] is not src.events[0]
    assert child.events[4]["type"] == "session/end-seed"
    no_cwd = store.create("bare")
    turn(no_cwd, 1)
    assert store.fork(no_cwd).header.cwd is None


# --- subagent seeds and crash closers -----------------------------------------------------
# (see docs/scenarios.md#seeds and docs/format.md#crash-repair)


def test_completed_turn_prefix(store: SessionStore) -> None:
    s = store.create("s")
    assert completed_turn_prefix(s) is None
    turn(s, 1, close=False)
    assert completed_turn_prefix(s) is None
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    s.append("log/note", {})  # log-only events after the last turn/end are left out
    turn(s, 2, close=False)  # and so is the turn still running
    prefix = completed_turn_prefix(s)
    assert prefix == list(s.events[:4])
    assert prefix is not None
    assert prefix[0] is not s.events[0]
    assert completed_turn_prefix(list(s.events)) == prefix
    assert completed_turn_prefix(SessionLog(s.header, list(s.events))) == prefix  # a tuple too


class _Text(str):
    pass


_DATA = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([0.5, -0.0, float("nan"), float("inf")])
    | st.text(UTF8, max_size=3)
    | st.text(UTF8, max_size=3).map(_Text),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=2).map(tuple)
        | st.dictionaries(st.text(UTF8, max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(st.lists(_DATA, min_size=1, max_size=3))
def test_a_seed_is_copied_as_deepcopy_copies_it(datas: list[Any]) -> None:
    # A store session's seed is copied by the serializer where that is exact, else by
    # copy.deepcopy: either way the same values of the same types, nothing shared.
    import copy

    from pytest_dsh_replay._store.log_rules import _plain_copy

    events: list[Any] = [{"type": "log/note", "seq": n, "data": d} for n, d in enumerate(datas)]
    copied = _plain_copy(events)
    assert same_values(copied, copy.deepcopy(events))
    assert all(a is not b for a, b in zip(copied, events, strict=True))
    for event, data in zip(events, datas, strict=True):
        if isinstance(data, list | dict):
            assert not any(c["data"] is data for c in copied)
        assert event["data"] is data


def test_completed_turn_prefix_keeps_what_is_not_plain_json_in_events_it_is_given() -> None:
    import enum

    class Reason(enum.IntEnum):
        DONE = 1

    events: list[Any] = [{"type": "turn/end", "seq": 0, "data": {"reason": Reason.DONE}}]
    prefix = completed_turn_prefix(events)
    assert prefix is not None
    assert type(prefix[0]["data"]["reason"]) is Reason  # as copy.deepcopy keeps it


def _assistant_call(call_id: str) -> dict[str, Any]:
    block = {"type": "tool-call", "id": call_id, "name": "bash", "arguments": "{}"}
    return {
        "turn": 1,
        "step": 1,
        "message": {"id": f"a-{call_id}", "role": "assistant", "content": [block]},
    }


def test_interrupted_turn_closers(store: SessionStore) -> None:
    s = store.create("s")
    assert interrupted_turn_closers(s.events) == []
    s.append("turn/start", {"turn": 1})
    assert [e["type"] for e in interrupted_turn_closers(s.events)] == ["turn/end"]
    s.append("step/start", {"turn": 1, "step": 1})
    s.append("assistant/message", _assistant_call("done"), surfaceOp="append")
    s.append("assistant/message", _assistant_call("todo"), surfaceOp="append")
    s.append("tool/result", tool_result("done", "ok"), surfaceOp="append")
    closers = interrupted_turn_closers(s.events)
    assert [e["type"] for e in closers] == ["tool/result", "step/end", "turn/end"]
    assert closers[0]["data"]["error"] == {
        "name": "ToolNotStartedError",
        "code": "TOOL_NOT_STARTED",
    }
    assert "sourceEventSeqs" not in closers[0]
    assert closers[0]["data"]["message"]["content"][0]["isError"] is True
    assert closers[1] == {
        "type": "step/end",
        "seq": 6,
        "time": s.events[-1]["time"],
        "data": {"turn": 1, "step": 1},
    }
    turn(s, 2)
    assert interrupted_turn_closers(s.events) == []


def test_load_refuses_live_missing_and_invalid(store: SessionStore, tmp_path: Path) -> None:
    s = store.create("s")
    s.append("turn/start", {"turn": 1})
    with pytest.raises(SessionStoreError, match="already live"):
        store.load("s")
    with pytest.raises(SessionStoreError, match='session "zz" not found in JSONL store'):
        store.load("zz")
    path = JsonlBackend(tmp_path / "root").locate("s")
    assert path is not None
    with open(path, "ab") as f:  # a surface event without surfaceOp
        f.write(b'{"type":"user/message","seq":1,"time":0,"data":{}}\n')
    with pytest.raises(
        SessionLogError,
        match=r'stored session "s" failed validation: invalid stored event at index 1: '
        r"user/message is a surface event",
    ) as info:
        SessionStore(JsonlBackend(tmp_path / "root")).load("s")
    assert info.value.path == str(path)


# --- the JSONL layout (see docs/format.md#jsonl-store) -----------------------------------------


@pytest.mark.parametrize(
    ("cwd", "key"),
    [
        ("/home/me/my proj", "--home-me-my~0020proj--"),
        (None, "_no-cwd"),
        ("/", "--root--"),
        ("C:\\Users\\x://y", "--C-Users-x-y--"),
        ("/a/~b/.c_d-e", "--a-~007Eb-.c_d-e--"),
        ("/🎉", "--~D83C~DF89--"),
        ("/" + "a" * 300, "--" + "a" * 251 + "--"),
    ],
)
def test_project_key(cwd: str | None, key: str) -> None:
    assert project_key(cwd) == key


@pytest.mark.parametrize(
    ("sid", "segment"),
    [
        (".", "~002E"),
        ("..", "~002E~002E"),
        ("a/b", "a~002Fb"),
        ("~", "~007E"),
        ("s-1.x_y", "s-1.x_y"),
        ("é", "~00E9"),
    ],
)
def test_encode_segment(sid: str, segment: str) -> None:
    assert encode_segment(sid) == segment
    assert decode_segment(segment) == sid


@given(st.text(UTF8, min_size=1))
def test_encode_segment_is_injective(sid: str) -> None:
    encoded = encode_segment(sid)
    assert all(c.isascii() and c not in "/\\:" for c in encoded)
    assert decode_segment(encoded) == sid


def test_encode_segment_rejects_empty_and_decode_rejects_junk() -> None:
    with pytest.raises(SessionStoreError):
        encode_segment("")
    assert decode_segment("a~00") is None
    assert decode_segment("a b") is None
    assert decode_segment("~002E") == "."


def test_files_on_disk(tmp_path: Path) -> None:
    backend = JsonlBackend(tmp_path)
    store = SessionStore(backend, clock=fake_clock())
    s = store.create("s/1", meta={"cwd": "/home/me/my proj"})
    path = tmp_path / "--home-me-my~0020proj--" / "s~002F1" / "session.jsonl"
    assert backend.path_for(s.header) == path
    s.append("turn/start", {"turn": 1})
    for i in range(5):  # separate appends: separate batches, so nothing is packed
        s.append(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": str(i)}},
        )
    assert backend.locate("s/1") == path
    assert backend.session_ids() == ["s/1"]
    assert sorted(os.listdir(path.parent)) == ["session.jsonl"]  # no temporary file left
    data = path.read_bytes()
    assert data.startswith(
        b'{"type":"session","version":0,"id":"s/1","createdAt":1785000000000,'
        b'"cwd":"/home/me/my proj","delegationDepth":0}\n'
        b'{"type":"turn/start","seq":0,"time":1785000000001,"data":{"turn":1}}\n'
    )
    assert data.count(b"\n") == 7
    assert parse_session_log(data) == list(s.events)


@pytest.mark.parametrize(
    ("sid", "size"),
    [("a" * 256, 256), ("a" * 300, 300), ("\u65e5" * 60, 300), ("\U0001f600" * 26, 260)],
    ids=["ascii-256", "ascii-300", "cjk-60", "astral-26"],
)
@pytest.mark.parametrize("project_exists", [True, False], ids=["project", "no-project"])
def test_an_id_too_long_for_a_directory_name_is_refused_at_create(
    tmp_path: Path, sid: str, size: int, project_exists: bool
) -> None:
    # docs/format.md#jsonl-store: the encoded id must fit the 255-byte name limit; it is
    # refused with the store's error, before the session is live, whether or not its
    # project directory exists yet (then the first append was what failed).
    root = tmp_path / "root"
    store = SessionStore(JsonlBackend(root), clock=fake_clock())
    if project_exists:
        turn(store.create("p", meta={"cwd": "/w"}), 1)
    message = f"session id {orjson.dumps(sid).decode()} is too long for a JSONL store: its "
    message += f"directory name would be {size} bytes, and a file system allows at most 255"
    with pytest.raises(SessionStoreError, match=re.escape(message)):
        store.create(sid, meta={"cwd": "/w"})
    assert store.get(sid) is None
    assert sorted(p.name for p in root.glob("*/*")) == (["p"] if project_exists else [])


def test_an_id_too_long_for_a_directory_name_is_refused_at_fork(tmp_path: Path) -> None:
    store = SessionStore(JsonlBackend(tmp_path), clock=fake_clock())
    src = store.create("src", meta={"cwd": "/w"})
    turn(src, 1)
    with pytest.raises(SessionStoreError, match="is too long for a JSONL store") as info:
        store.fork(src, 3, "z" * 400)
    assert "would be 400 bytes" in str(info.value)
    assert [s.id for s in store.sessions()] == ["src"]
    assert JsonlBackend(tmp_path).session_ids() == ["src"]


def test_the_longest_id_a_directory_name_holds_is_stored(tmp_path: Path) -> None:
    store = SessionStore(JsonlBackend(tmp_path), clock=fake_clock())
    longest = "a" * 250 + "\u65e5"  # 250 + 5 bytes
    turn(store.create(longest, meta={"cwd": "/w"}), 1)
    child = store.fork(longest, 3, "b" * 255)
    store.close()
    assert JsonlBackend(tmp_path).session_ids() == [longest, child.id]
    assert len(SessionStore(JsonlBackend(tmp_path)).load(child.id).events) == 5


def test_a_file_system_error_is_the_store_s_error_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "--w--").write_bytes(b"")  # a file where the project directory goes
    s = SessionStore(JsonlBackend(tmp_path)).create("x", meta={"cwd": "/w"})
    with pytest.raises(SessionStoreError, match="cannot write session log") as info:
        s.append("turn/start", {"turn": 1})
    assert str(tmp_path / "--w--" / "x" / "session.jsonl") in str(info.value)
    assert s.events == []  # nothing was appended


def test_first_write_never_overwrites(tmp_path: Path) -> None:
    a = SessionStore(JsonlBackend(tmp_path))
    b = SessionStore(JsonlBackend(tmp_path))
    sa, sb = a.create("x"), b.create("x")  # neither is on disk yet
    sa.append("log/note", {"by": "a"})
    with pytest.raises(SessionStoreError, match='session "x" already exists'):
        sb.append("log/note", {"by": "b"})
    loaded = SessionStore(JsonlBackend(tmp_path)).load("x")
    assert [e["data"] for e in loaded.events] == [{"by": "a"}]


def test_layout_refusals(tmp_path: Path) -> None:
    store = SessionStore(JsonlBackend(tmp_path))
    s = store.create("x", meta={"cwd": "/one"})
    s.append("turn/start", {"turn": 1})
    with pytest.raises(SessionStoreError, match='compression "zstd"'):
        JsonlBackend(tmp_path, compression="zstd").exists("x")
    dup = tmp_path / "--two--" / "x"
    dup.mkdir(parents=True)
    (dup / "session.jsonl").write_bytes(b"")
    with pytest.raises(
        SessionStoreError,
        match='duplicate JSONL session id "x" appears in multiple project directories',
    ):
        JsonlBackend(tmp_path).locate("x")
    (dup / "session.jsonl").unlink()
    (tmp_path / "--one--" / "flat.jsonl").write_bytes(b"")
    with pytest.raises(SessionStoreError, match="unsupported flat-file layout"):
        JsonlBackend(tmp_path).session_ids()
    with pytest.raises(SessionStoreError, match="unknown compression"):
        JsonlBackend(tmp_path, compression="gzip")  # type: ignore[arg-type]


def test_header_must_match_its_path(tmp_path: Path) -> None:
    store = SessionStore(JsonlBackend(tmp_path))
    store.create("x", meta={"cwd": "/one"}).append("turn/start", {"turn": 1})
    moved = tmp_path / "--two--"
    (tmp_path / "--one--").rename(moved)
    with pytest.raises(SessionLogError, match='header id "x" and cwd identify'):
        JsonlBackend(tmp_path).read("x")


def test_zstd_frames(tmp_path: Path) -> None:
    import zstandard

    backend = JsonlBackend(tmp_path, compression="zstd")
    store = SessionStore(backend)
    s = store.create("z")
    s.append("turn/start", {"turn": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    path = backend.locate("z")
    assert path is not None
    assert path.name == "session.jsonl.zstd"
    reader = zstandard.ZstdDecompressor().stream_reader(path.read_bytes(), read_across_frames=True)
    assert parse_session_log(reader.read()) == list(s.events)
    assert path.read_bytes().count(b"\x28\xb5\x2f\xfd") == 3  # header, then one frame per batch


def test_zstd_needs_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(SessionStoreError, match=r"pip install 'pytest-dsh-replay\[zstd\]'"):
        JsonlBackend(tmp_path, compression="zstd")


# --- the JSONL loader (see docs/format.md#crash-repair) ------------------------------------------


def _write_log(root: Path, sid: str, body: bytes, header: dict[str, Any] | None = None) -> Path:
    head = header or {
        "type": "session",
        "version": 0,
        "id": sid,
        "createdAt": 0,
        "delegationDepth": 0,
    }
    path = root / "_no-cwd" / encode_segment(sid) / "session.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(head) + b"\n" + body)
    return path


def _ev(seq: int, kind: str = "log/note", **data: Any) -> bytes:
    return orjson.dumps({"type": kind, "seq": seq, "time": 0, "data": data}) + b"\n"


def test_torn_tail_is_truncated_on_disk(tmp_path: Path) -> None:
    body = _ev(0) + _ev(1) + b"{bad json}\n" + _ev(3) + b'{"type":"log/no'
    path = _write_log(tmp_path, "s", body)
    size = len(path.read_bytes())
    stored = JsonlBackend(tmp_path).read("s")
    assert stored is not None
    assert [e["seq"] for e in stored.events] == [0, 1]
    assert stored.repaired
    assert len(path.read_bytes()) == size - len(body) + len(_ev(0) + _ev(1))


def test_damage_before_a_turn_end_is_fatal(tmp_path: Path) -> None:
    _write_log(tmp_path, "s", _ev(0) + b"{bad json}\n" + _ev(2, "turn/end", turn=1))
    with pytest.raises(SessionLogError, match="unparsable committed event") as info:
        JsonlBackend(tmp_path).read("s")
    assert info.value.line == 3
    _write_log(tmp_path, "g", _ev(0) + _ev(5) + _ev(6, "turn/end"))
    with pytest.raises(
        SessionLogError, match=r"seq gap in committed region \(expected 1, got 5\)"
    ) as info:
        JsonlBackend(tmp_path).read("g")
    assert info.value.line == 3


@pytest.mark.parametrize(
    ("corrupt", "reason"),
    [
        (b"{not json\n", "unparsable committed event (a later turn/end shows the damage"),
        (_ev(7, "turn/start", turn=1), "seq gap in committed region (expected 0, got 7)"),
    ],
    ids=["unparsable", "seq-gap"],
)
def test_a_damaged_line_is_named_once_by_its_physical_line(
    tmp_path: Path, corrupt: bytes, reason: str
) -> None:
    # The header is line 1 (docs/format.md#crash-repair): the first event's line is 2,
    # and the message names no other line.
    store = SessionStore(JsonlBackend(tmp_path), clock=fake_clock())
    s = store.create("s", meta={"cwd": "/w"})
    s.append("turn/start", {"turn": 1})
    s.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    store.close()
    path = tmp_path / "--w--" / "s" / "session.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + corrupt + lines[2])
    with pytest.raises(SessionLogError) as info:
        SessionStore(JsonlBackend(tmp_path)).load("s")
    assert info.value.line == 2
    assert str(info.value).startswith(f"{path}:2: corrupt session log: {reason}")
    assert "line" not in info.value.reason


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "empty or header-less session log"),
        (b'{"type":"session"', "empty or header-less session log"),
        (b"nope\n", "header line is not valid JSON"),
        (
            b'{"type":"session","version":1,"id":"s","createdAt":0,"delegationDepth":0}\n',
            "format v1",
        ),
        (
            b'{"type":"session","version":0,"id":"s","createdAt":0}\n',
            "first line is not a session header",
        ),
        (
            b'{"type":"session","version":0,"id":"s","createdAt":0,"delegationDepth":0,"sandboxMode":"x"}\n',
            "retired policy",
        ),
        (
            b'{"type":"session","version":0,"id":"t","createdAt":0,"delegationDepth":0}\n',
            'requested id "s" does not match header id "t"',
        ),
    ],
)
def test_bad_headers(tmp_path: Path, raw: bytes, message: str) -> None:
    path = tmp_path / "_no-cwd" / "s" / "session.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    with pytest.raises(SessionLogError, match=message) as info:
        SessionStore(JsonlBackend(tmp_path)).load("s")
    assert str(path) in str(info.value)


def test_backends_satisfy_the_protocol(tmp_path: Path) -> None:
    from pytest_dsh_replay._store.backends.sqlite import SqliteBackend

    assert isinstance(JsonlBackend(tmp_path), SessionBackend)
    backend = SqliteBackend(tmp_path / "s.sqlite")
    assert isinstance(backend, SessionBackend)
    backend.close()


def test_a_throwaway_store_skips_fsync_but_writes_thesame_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    durable = SessionStore(JsonlBackend(tmp_path / "a"), clock=lambda: 7)
    durable.create("s").append("turn/start", {"turn": 1})

    def no_fsync(fd: int) -> None:
        raise AssertionError("fsync called on a non-durable store")

    monkeypatch.setattr(os, "fsync", no_fsync)
    quick = SessionStore(JsonlBackend(tmp_path / "b", durable=False), clock=lambda: 7)
    quick.create("s").append("turn/start", {"turn": 1})
    a = next((tmp_path / "a").rglob("session.jsonl")).read_bytes()
    b = next((tmp_path / "b").rglob("session.jsonl")).read_bytes()
    assert a == b


def test_the_memory_backend_keeps_sessions_for_the_store_s_life() -> None:
    from pytest_dsh_replay import MemoryBackend

    backend = MemoryBackend()
    store = SessionStore(backend, clock=lambda: 5)
    parent = store.create("p", meta={"cwd": "/w"})
    parent.append("turn/start", {"turn": 1})
    parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    child = store.fork(parent, child_session_id="c")
    assert (child.seed_length, child.events[-1]["type"]) == (2, "session/end-seed")
    assert backend.session_ids() == ["p", "c"]
    stored = backend.read("c")
    assert stored is not None
    assert stored.events == list(child.events)
    stored.events.clear()  # a copy: the backend's log is untouched
    assert backend.read("c").events == list(child.events)  # type: ignore[union-attr]
    reopened = SessionStore(backend).load("p")
    assert list(reopened.events) == list(parent.events)
    with pytest.raises(SessionStoreError, match="already exists"):
        store.create("p")


def test_a_store_given_a_path_for_its_backend_says_what_it_takes(tmp_path: Path) -> None:
    from pytest_dsh_replay import SessionStore, SessionStoreError

    with pytest.raises(SessionStoreError, match=r"takes a backend \(JsonlBackend\(root\)"):
        SessionStore(str(tmp_path))  # type: ignore[arg-type]


def test_a_seed_length_inside_the_seed_must_stand_at_its_end_seed(store: SessionStore) -> None:
    # create() took seedLength 1 for a two-event seed; the loader then refused the log it
    # wrote, and every re-record wrote it again.
    seed = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 2,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    with pytest.raises(SessionStoreError, match=r"seedLength 1 does not end the seed's inherited"):
        store.create("c", seed=seed, meta={"parentSession": "p", "seedLength": 1})
    assert store.get("c") is None
    # a resumed fork child's seed holds its fork's marker at seq seedLength: accepted
    marker = {"type": "session/end-seed", "seq": 2, "time": 3, "data": {}}
    resumed = [*seed, marker, {"type": "turn/start", "seq": 3, "time": 4, "data": {"turn": 2}}]
    child = store.create("r", seed=resumed, meta={"parentSession": "p", "seedLength": 2})
    assert child.header.seed_length == 2
