"""How a replayed call hands out its chunks: fresh objects, and cancellation between them.

A call that neither paces, hangs nor watches a caller's event is read through a list
iterator that ``model.cancel()`` empties; these tests pin that it behaves as a chunk by
chunk check would: before the first chunk, between chunks, and after the last one.
"""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.chunks import text_call
from support.scenarios import one_session
from support.values import UTF8

from pytest_dsh_replay._errors import ReplayCancelledError, ReplayedModelError
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, ThrowEntry, materialize_runs

REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}


def test_a_call_cancelled_before_it_is_read_raises_before_its_first_chunk() -> None:
    model = ReplayModel(one_session(ChunksEntry(text_call("a")), ChunksEntry(text_call("b"))))
    stream = model.stream(REQUEST, session_id="s")
    model.cancel("s")
    later = model.stream(REQUEST, session_id="s")
    with pytest.raises(ReplayCancelledError, match=r"call #1 .* was cancelled$"):
        next(stream)
    assert next(stream, None) is None  # ended, as a generator that raised
    assert next(c["type"] for c in later) == "block-start"  # made after the cancel


def test_a_cancel_after_the_last_chunk_lets_the_call_end_as_recorded() -> None:
    chunks = text_call("a")
    model = ReplayModel(one_session(ChunksEntry(chunks), ThrowEntry(chunks, "boom", "AUTH")))
    first = model.stream(REQUEST, session_id="s")
    got = [next(first) for _ in chunks]
    model.cancel("s")
    assert got == chunks
    assert next(first, None) is None

    second = model.stream(REQUEST, session_id="s")
    got = [next(second) for _ in chunks]
    model.cancel("s")
    with pytest.raises(ReplayedModelError, match="boom"):
        next(second)


def test_a_throw_entry_cancelled_midway_raises_the_cancellation() -> None:
    chunks = text_call("abc")
    model = ReplayModel(one_session(ThrowEntry(chunks, "boom", "AUTH")))
    stream = model.stream(REQUEST, session_id="s")
    next(stream)
    model.cancel("s")
    with pytest.raises(ReplayCancelledError):
        next(stream)


def test_astream_is_cancelled_between_chunks() -> None:
    model = ReplayModel(one_session(ChunksEntry(text_call("abc"))))

    async def main(seen: list[str]) -> None:
        async for chunk in model.astream(REQUEST, session_id="s"):
            seen.append(chunk["type"])
            model.cancel("s")

    seen: list[str] = []
    with pytest.raises(ReplayCancelledError):
        asyncio.run(main(seen))
    assert seen == ["block-start"]


def test_an_abandoned_read_is_forgotten() -> None:
    model = ReplayModel(one_session(ChunksEntry(text_call("abc"))))
    stream = model.stream(REQUEST, session_id="s")
    next(stream)
    bound = model._sessions._bound["s"]
    assert len(bound.reading) == 1
    del stream
    gc.collect()
    assert not bound.reading


def test_every_read_hands_out_new_objects() -> None:
    chunks = text_call("abc", usage={"inputTokens": 1, "outputTokens": 2})
    scenario = one_session(ChunksEntry(chunks))
    first = list(ReplayModel(scenario).stream(REQUEST))
    first[-1]["mutated"] = True
    for chunk in first:
        for value in chunk.values():
            if isinstance(value, dict):
                value["mutated"] = True
    assert list(ReplayModel(scenario).stream(REQUEST)) == chunks


_text = st.text(UTF8, max_size=4)
_index = st.integers(min_value=0, max_value=3)
_run = st.one_of(
    st.tuples(st.sampled_from(["text-delta", "reasoning-delta"]), _index, st.lists(_text)),
    st.tuples(st.just("tool-call-delta"), _index, st.lists(_text), _text),
    st.tuples(st.just("tool-call-delta"), _index, st.lists(_text), _text, _text),
    st.fixed_dictionaries({"type": st.just("finish"), "reason": st.just({"kind": "stop"})}),
)


def _expected(item: Any) -> list[dict[str, Any]]:
    """The chunks of one run, spelled out (the shapes of ``ChunkRun``)."""
    if isinstance(item, dict):
        return [item]
    kind, index, members, *rest = item
    if kind != "tool-call-delta":
        return [{"type": kind, "index": index, "text": m} for m in members]
    named = {"name": rest[1]} if len(rest) == 2 else {}
    return [
        {"type": kind, "index": index, "id": rest[0], **named, "argumentsDelta": m} for m in members
    ]


@given(st.lists(_run, max_size=6))
def test_materialized_runs_are_the_spelled_out_chunks_in_key_order(runs: list[Any]) -> None:
    items = [r if isinstance(r, dict) else list(r) for r in runs]
    got = materialize_runs(items)
    want = [chunk for item in items for chunk in _expected(item)]
    assert got == want
    assert [list(c) for c in got] == [list(c) for c in want]  # key order too
    members = [c for c in got if c.get("type") != "finish"]
    assert len({id(c) for c in members}) == len(members)
