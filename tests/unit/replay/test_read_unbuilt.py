"""A replayed stream read whole without building its chunks (`ChunkStream.read_unbuilt`).

What the model endpoint uses to serve an encoding it kept (docs/wires.md#encoded-once):
the call counts as read to its end, a follower of the read gets the entry's chunks, and
any call it cannot read so is left as it was, to be read as usual.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from support.chunks import text_entry
from support.scenarios import one_session

from pytest_dsh_replay import ReplayCancelledError, ReplayedModelError
from pytest_dsh_replay._replay.call import ChunkStream
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, ThrowEntry

REQ = {"messages": [{"role": "user", "content": "work on goal-42"}]}


def _stream(*entries: Any) -> tuple[ReplayModel, ChunkStream]:
    model = ReplayModel(one_session(*entries, path=Path("/nowhere")))
    stream = model.stream(REQ, session_id="s")
    assert isinstance(stream, ChunkStream)
    return model, stream


def test_a_chunks_entry_reads_whole_without_its_chunks() -> None:
    entry = text_entry("hello")
    model, stream = _stream(entry)
    read = stream.followed()
    assert not read.done()
    assert stream.read_unbuilt() == entry.chunk_count == 4
    assert list(stream) == []  # nothing more is handed out
    assert read.done()
    assert read.error() is None
    assert read.handed_out() == entry.chunks  # built when the follower asks
    assert read.handed_out() is read.handed_out()  # once
    assert read.handed_out(copies=True) == entry.chunks
    model.assert_consumed()
    assert stream.read_unbuilt() is None  # read already


@pytest.mark.parametrize("read", ["read_unbuilt", "read_runs"])
def test_a_started_read_is_left_to_the_reader(read: str) -> None:
    entry = text_entry("hello")
    _model, stream = _stream(entry)
    first = next(stream)
    assert getattr(stream, read)() is None
    assert [first, *stream] == entry.chunks


@pytest.mark.parametrize("read", ["read_unbuilt", "read_runs"])
@pytest.mark.parametrize(
    "entry",
    [
        text_entry("on {{fromRequest:goal-[0-9]+}}"),
        ThrowEntry(text_entry("partial").chunks[:2], "overloaded", "OVERLOADED"),
    ],
    ids=["placeholders", "throw"],
)
def test_an_entry_whose_read_is_not_the_recorded_list_reads_as_usual(entry: Any, read: str) -> None:
    # Neither counted as read unbuilt nor served from its runs.
    _model, stream = _stream(entry)
    assert getattr(stream, read)() is None
    if isinstance(entry, ThrowEntry):
        with pytest.raises(ReplayedModelError):
            list(stream)
    else:
        assert list(stream)[1]["text"] == "on goal-42"


@pytest.mark.parametrize("read", ["read_unbuilt", "read_runs"])
def test_a_cancelled_call_raises_its_cancellation_as_usual(read: str) -> None:
    model, stream = _stream(text_entry("hello"))
    model.cancel("s")
    assert getattr(stream, read)() is None
    with pytest.raises(ReplayCancelledError):
        list(stream)


def test_a_call_with_a_callers_event_is_no_chunk_stream() -> None:
    model = ReplayModel(one_session(text_entry("hello"), path=Path("/nowhere")))
    stream = model.stream(REQ, session_id="s", cancel=threading.Event())
    assert not hasattr(stream, "read_unbuilt")  # the endpoint reads it as usual
    assert [c["type"] for c in stream][-1] == "finish"


# --- read as its entry's chunk runs (ChunkStream.read_runs) --------------------------------


def _packed_entry() -> ChunksEntry:
    runs: list[Any] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        ["text-delta", 0, ["hel", "lo"]],
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hello"}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    return ChunksEntry.from_runs(runs, 5)


def test_a_chunks_entry_reads_whole_as_its_runs() -> None:
    entry = _packed_entry()
    model, stream = _stream(entry)
    read = stream.followed()
    runs = stream.read_runs()
    assert runs == entry.runs()
    assert runs is not None
    assert runs[1] == ["text-delta", 0, ["hel", "lo"]]
    assert list(stream) == []  # nothing more is handed out
    assert read.done()
    assert read.error() is None
    assert read.handed_out() == entry.chunks  # built from the runs read
    assert read.handed_out()[0] is runs[0]  # a chunk object is the run's own
    assert read.handed_out(copies=True) == entry.chunks
    model.assert_consumed()
    assert stream.read_runs() is None  # read already
    assert stream.read_unbuilt() is None


def test_an_entry_that_goes_on_after_its_finish_is_read_as_usual() -> None:
    chunks = [*text_entry("hi").chunks, {"type": "usage", "usage": {"outputTokens": 1}}]
    entry = ChunksEntry(chunks)
    _model, stream = _stream(entry)
    assert stream.read_runs() is None
    assert list(stream) == chunks
