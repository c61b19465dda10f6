"""Session.append_chunk: the cheap chunk append stores what append stores, in order."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay import MemoryBackend, SessionStoreError
from pytest_dsh_replay._format.jsonl import parse_session_log
from pytest_dsh_replay._format.reply import assemble_reply
from pytest_dsh_replay._store.backends.jsonl import JsonlBackend
from pytest_dsh_replay._store.store import SessionStore

T0 = 1_785_000_000_000


def clock() -> Callable[[], int]:
    counter = itertools.count(T0)
    return lambda: next(counter)


def text_chunks(*texts: str) -> list[dict[str, Any]]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": t} for t in texts),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(texts)}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def both_ways(chunks: list[dict[str, Any]], *, parsed: bool) -> tuple[list[Any], list[Any]]:
    """The events of the same log written with append and with append_chunk."""
    logs = []
    for cheap in (False, True):
        store = SessionStore(MemoryBackend(), clock=clock())
        session = store.create("s")
        session.append("turn/start", {"turn": 1})
        for chunk in chunks:
            if cheap:
                session.append_chunk(1, 1, chunk, parsed=parsed)
            else:
                session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        logs.append(list(session.events))
    return logs[0], logs[1]


@pytest.mark.parametrize("parsed", [False, True])
def test_the_events_equal_those_append_stores(parsed: bool) -> None:
    plain, cheap = both_ways(text_chunks("Hel", "lo"), parsed=parsed)
    assert cheap == plain
    assert [list(e) for e in cheap] == [list(e) for e in plain]  # the same key order


def test_seqs_are_returned_and_a_view_taken_before_sees_the_run() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    view = session.events
    seqs = [session.append_chunk(1, 1, c, parsed=True) for c in text_chunks("a", "b")]
    assert seqs == [0, 1, 2, 3, 4]
    assert len(view) == 5
    assert [e["seq"] for e in view] == seqs
    assert view[1]["data"]["chunk"]["text"] == "a"


def test_other_appends_keep_the_order_of_the_calls() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    session.append_chunk(1, 1, {"type": "text-delta", "index": 0, "text": "x"})
    session.append("tool/call", {"turn": 1, "step": 1, "callId": "c", "name": "f"})
    session.append_chunk(1, 1, {"type": "finish", "reason": {"kind": "stop"}})
    assert [e["type"] for e in session.events] == [
        "assistant/chunk",
        "tool/call",
        "assistant/chunk",
    ]
    assert [e["seq"] for e in session.events] == [0, 1, 2]
    assert [e["time"] for e in session.events] == [T0 + 1, T0 + 2, T0 + 3]


def test_a_chunk_changed_after_the_append_does_not_reach_the_log() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    chunk = {"type": "text-delta", "index": 0, "text": "kept"}
    session.append_chunk(1, 1, chunk, parsed=True)
    chunk["text"] = "changed"
    assert session.events[0]["data"]["chunk"]["text"] == "kept"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (math.nan, "NaN"),
        (-0.0, "-0.0"),
        ("\ud800", "lone surrogate"),
        ((1, 2), "tuple"),
        (2**60, "integer"),
    ],
)
def test_what_is_not_lossless_json_is_refused_and_nothing_is_appended(
    value: Any, problem: str
) -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    with pytest.raises(SessionStoreError, match="assistant/chunk data"):
        session.append_chunk(1, 1, {"type": "text-delta", "index": 0, "text": value})
    assert list(session.events) == []


@pytest.mark.parametrize(("value", "problem"), [(-0.0, "-0.0"), ("\udfff", "surrogate")])
def test_parsed_chunks_are_still_checked_for_what_a_parser_can_make(
    value: Any, problem: str
) -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    with pytest.raises(SessionStoreError):
        session.append_chunk(1, 1, {"type": "text-delta", "index": 0, "text": value}, parsed=True)
    assert list(session.events) == []


def test_a_closed_store_refuses_the_append() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    store.close()
    with pytest.raises(SessionStoreError, match="not live"):
        session.append_chunk(1, 1, {"type": "finish", "reason": {"kind": "stop"}})


def test_a_file_backend_writes_the_same_log(tmp_path: Path) -> None:
    files = []
    for cheap in (False, True):
        root = tmp_path / str(cheap)
        store = SessionStore(JsonlBackend(root), clock=clock())
        session = store.create("s")
        with session.batch():
            for chunk in text_chunks("one ", "two"):
                if cheap:
                    session.append_chunk(1, 1, chunk, parsed=True)
                else:
                    session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": chunk})
        session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
        store.close()
        (log,) = root.rglob("*.jsonl")
        files.append(log.read_bytes())
    assert files[0] == files[1]
    assert len(parse_session_log(files[1], source="log")) == 6  # 5 chunks, turn/end


_chunk = st.one_of(
    st.builds(
        lambda kind, index, text: {"type": kind, "index": index, "text": text},
        st.sampled_from(["text-delta", "reasoning-delta"]),
        st.integers(0, 2),
        st.text(UTF8, max_size=3),
    ),
    st.builds(
        lambda index, i, n, a: {
            "type": "tool-call-delta",
            "index": index,
            "id": i,
            "name": n,
            "argumentsDelta": a,
        },
        st.integers(0, 2),
        st.sampled_from(["", "c1"]),
        st.sampled_from(["", "f"]),
        st.text(UTF8, max_size=3),
    ),
    st.builds(
        lambda index: {"type": "block-end", "index": index, "block": {"type": "text", "text": "E"}},
        st.integers(0, 2),
    ),
    st.just({"type": "usage", "usage": {"inputTokens": 1}}),
    st.just({"type": "finish", "reason": {"kind": "stop"}}),
)


def _assembled_one_by_one(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The blocks a reply holds, each delta added to its block as it comes (the oracle)."""
    ended: dict[int, dict[str, Any]] = {}
    partial: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        index, kind = chunk.get("index", -1), chunk["type"]
        if kind == "block-end":
            ended[index] = chunk["block"]
        elif kind in ("text-delta", "reasoning-delta"):
            base = {"type": "text" if kind == "text-delta" else "reasoning", "text": ""}
            block = partial.setdefault(index, base)
            block["text"] = block.get("text", "") + chunk["text"]
        elif kind == "tool-call-delta":
            block = partial.setdefault(
                index, {"type": "tool-call", "id": "", "name": "", "arguments": ""}
            )
            for key in ("id", "name"):
                if chunk[key]:
                    block[key] = chunk[key]
            block["arguments"] = block.get("arguments", "") + chunk["argumentsDelta"]
    blocks = {**partial, **ended}
    return [blocks[i] for i in sorted(blocks)]


@given(st.lists(_chunk, max_size=12))
def test_a_reply_joins_each_block_s_deltas_as_adding_them_one_by_one_does(
    chunks: list[dict[str, Any]],
) -> None:
    assert assemble_reply(chunks).content == _assembled_one_by_one(chunks)
