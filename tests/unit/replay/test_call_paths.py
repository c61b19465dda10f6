"""A replayed call read from its chunk list and read step by step ends the same way.

`ReplayCall.stream` / ``astream`` choose once per call: an unpaced call without a
caller's cancel event is read from its chunk list (``ChunkStream`` for ``stream``, the
list's iterator inside one async generator for ``astream``); a call given a cancel event
(or paced) is read step by step (``_steps``). Whatever the path, the caller gets the
same chunks and the call's end is seen the same way: by the recorder that logs it (the
follower of a list read, the relay of a step read: the session log the check compares),
and by the recorded-order gate (the call noted as served, which admits the next call).
Each way a caller can leave a stream is covered: read to the end, abandoned half-way and
closed, abandoned half-way and dropped, and never iterated.
"""

from __future__ import annotations

import asyncio
import gc
import re
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import orjson
import pytest
from support.scenarios import one_session

from pytest_dsh_replay import ChunksEntry, MemoryBackend, RecordingModel, SessionStore, ThrowEntry
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._replay.order import CallTimes, OrderGate
from pytest_dsh_replay._scripts.entries import ReplayEntry

HOWS = ["all", "close", "drop", "never"]
_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def _text(n: int, tag: str) -> ChunksEntry:
    deltas = [{"type": "text-delta", "index": 0, "text": f"{tag}{k}"} for k in range(n)]
    return ChunksEntry([*deltas, {"type": "finish", "reason": {"kind": "stop"}}])


def _throw(n: int) -> ThrowEntry:
    deltas = [{"type": "text-delta", "index": 0, "text": f"t{k}"} for k in range(n)]
    return ThrowEntry(deltas, "the recorded failure", "E_RECORDED")


ENTRIES: dict[str, list[ReplayEntry]] = {
    "chunks": [_text(5, "a"), _text(3, "b")],
    "throw": [_throw(4), _text(3, "b")],
}


def _request(n: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"question {n}"}]}


def _cancel(stepwise: bool, *, aio: bool) -> dict[str, Any]:
    """The call's keywords: a cancel event nobody sets makes the step-by-step read."""
    if not stepwise:
        return {}
    return {"cancel": asyncio.Event() if aio else threading.Event()}


def _logged(store: SessionStore) -> list[Any]:
    """The store's session logs as the check compares them (times and ids made stable)."""
    logs = [[dict(e, time=0) for e in s.events] for s in store.sessions()]
    seen: dict[bytes, bytes] = {}
    text = _UUID.sub(lambda m: seen.setdefault(m[0], b"id-%d" % len(seen)), orjson.dumps(logs))
    result: list[Any] = orjson.loads(text)
    return result


def _leave(stream: Iterator[Any], how: str) -> list[Any]:
    """Read ``stream`` as ``how`` says; the chunks (or the error's type) it handed out."""
    got: list[Any] = []
    if how == "never":
        return got
    try:
        for chunk in stream:
            got.append(chunk)
            if how != "all" and len(got) == 2:
                break
    except Exception as error:
        got.append(type(error).__name__)
    if how == "close":
        stream.close()  # type: ignore[attr-defined]
        assert list(stream) == []  # a closed stream hands out nothing more
    return got


async def _aleave(stream: AsyncIterator[Any], how: str) -> list[Any]:
    got: list[Any] = []
    if how == "never":
        return got
    try:
        async for chunk in stream:
            got.append(chunk)
            if how != "all" and len(got) == 2:
                break
    except Exception as error:
        got.append(type(error).__name__)
    if how == "close":
        await stream.aclose()  # type: ignore[attr-defined]
        assert [c async for c in stream] == []
    return got


def _collect_if_dropped(how: str) -> None:
    """Collect a stream abandoned half-way that a reference cycle may keep alive.

    Only a dropped stream waits for the collector; a full collection in a worker whose
    heap holds the corpus costs a tenth of a second, so the other ways skip it.
    """
    if how == "drop":
        gc.collect()


# --- the recorder: the follower of a list read, the relay of a step read ------------------


def _recorded(kind: str, how: str, stepwise: bool) -> tuple[list[Any], list[Any], list[Any]]:
    store = SessionStore(MemoryBackend())
    model = RecordingModel(
        ReplayModel(one_session(*ENTRIES[kind])), store, parsed_chunks=True, request_views=True
    )
    stream = model.stream(_request(1), session_id="s", **_cancel(stepwise, aio=False))
    # a chunks entry's list read is followed (the caller reads the model's own stream)
    assert (type(stream).__name__ == "ChunkStream") is (kind == "chunks" and not stepwise)
    first = _leave(iter(stream), how)
    del stream  # dropped: gone now (reference counting), as a dropped generator is
    second = list(model.stream(_request(2), session_id="s", **_cancel(stepwise, aio=False)))
    model.close_open_calls()
    return first, second, _logged(store)


@pytest.mark.parametrize("kind", sorted(ENTRIES))
@pytest.mark.parametrize("how", HOWS)
def test_a_list_read_and_a_step_read_are_logged_alike(kind: str, how: str) -> None:
    listed, stepped = _recorded(kind, how, False), _recorded(kind, how, True)
    assert listed == stepped
    first, second, logs = listed
    assert len(second) == 4  # the next call replays the next entry, read whole
    if how == "all":  # every chunk, then the recorded failure of a throw entry
        assert len(first) == len(ENTRIES[kind][0].chunks) + (kind == "throw")
    kinds = [e["type"] for e in logs[0]]
    assert kinds.count("user/message") == 2  # both calls logged, each once
    assert kinds[-1] == "turn/end"


async def _arecorded(kind: str, how: str, stepwise: bool) -> tuple[list[Any], list[Any], list[Any]]:
    store = SessionStore(MemoryBackend())
    model = RecordingModel(
        ReplayModel(one_session(*ENTRIES[kind])), store, parsed_chunks=True, request_views=True
    )
    stream = model.astream(_request(1), session_id="s", **_cancel(stepwise, aio=True))
    first = await _aleave(stream, how)
    del stream
    _collect_if_dropped(how)
    await asyncio.sleep(0)  # a dropped async generator is closed by the loop (its hook)
    second = [
        c async for c in model.astream(_request(2), session_id="s", **_cancel(stepwise, aio=True))
    ]
    model.close_open_calls()
    return first, second, _logged(store)


@pytest.mark.parametrize("kind", sorted(ENTRIES))
@pytest.mark.parametrize("how", HOWS)
def test_a_list_read_and_a_step_read_are_logged_alike_async(kind: str, how: str) -> None:
    listed = asyncio.run(_arecorded(kind, how, False))
    stepped = asyncio.run(_arecorded(kind, how, True))
    assert listed == stepped
    assert listed[2] == _recorded(kind, how, False)[2]  # and as the sync reads log it


# --- the follower itself: what it reads of the call (docs/recording.md#lazy) --------------


def _followed(kind: str, how: str) -> tuple[list[Any], list[Any], bool, str | None]:
    model = ReplayModel(one_session(*ENTRIES[kind]))
    stream: Any = model.stream(_request(1), session_id="s")
    read = stream.followed()
    got = _leave(stream, how)
    del stream
    error = read.error()
    return got, read.handed_out(copies=True), read.done(), type(error).__name__ if error else None


@pytest.mark.parametrize(
    ("kind", "how", "done", "error"),
    [
        ("chunks", "all", True, None),
        ("chunks", "close", True, None),
        ("chunks", "drop", True, None),
        ("chunks", "never", False, None),
        ("throw", "all", True, "ReplayedModelError"),
        ("throw", "close", True, None),
        ("throw", "drop", True, None),
        ("throw", "never", False, None),
    ],
)
def test_the_follower_sees_where_the_list_read_ended(
    kind: str, how: str, done: bool, error: str | None
) -> None:
    got, handed, is_done, raised = _followed(kind, how)
    chunks = [c for c in got if isinstance(c, dict)]
    assert handed == chunks  # what the caller was handed, no more
    assert (is_done, raised) == (done, error)


# --- the recorded-order gate: the call's end admits the next call -------------------------


class _NotingGate(OrderGate):
    """The recorded-order gate of one timed session, noting each call it is told ended."""

    def __init__(self, calls: int):
        times = [[CallTimes(10 * k, 10 * k + 5) for k in range(calls)]]
        super().__init__(times, ["session.jsonl"], timeout=5.0, max_gap=0.0)
        self.ended: list[tuple[int, int]] = []

    def served(self, script: int, call: int) -> None:
        self.ended.append((script, call))
        super().served(script, call)


def _gated(kind: str, how: str, stepwise: bool) -> tuple[list[Any], list[Any]]:
    model = ReplayModel(one_session(*ENTRIES[kind]))
    gate = _NotingGate(2)
    model._gate = gate  # keep_recorded_order() with these times, without a log to read
    stream = model.stream(_request(1), **_cancel(stepwise, aio=False))
    got = _leave(stream, how)
    del stream
    ended = list(gate.ended)
    list(model.stream(_request(2), **_cancel(stepwise, aio=False)))
    return got, [ended, gate.ended]


@pytest.mark.parametrize("kind", sorted(ENTRIES))
@pytest.mark.parametrize("how", HOWS)
def test_a_list_read_and_a_step_read_end_alike_for_the_order_gate(kind: str, how: str) -> None:
    listed, stepped = _gated(kind, how, False), _gated(kind, how, True)
    assert listed == stepped
    ended_then, ended_after = listed[1]
    # read, closed or dropped: the first call is served; never iterated: it never is
    assert ended_then == ([] if how == "never" else [(0, 0)])
    assert ended_after[-1] == (0, 1)


async def _agated(kind: str, how: str, stepwise: bool) -> tuple[list[Any], list[Any]]:
    model = ReplayModel(one_session(*ENTRIES[kind]))
    gate = _NotingGate(2)
    model._gate = gate
    stream = model.astream(_request(1), **_cancel(stepwise, aio=True))
    got = await _aleave(stream, how)
    del stream
    _collect_if_dropped(how)
    await asyncio.sleep(0)
    ended = list(gate.ended)
    [c async for c in model.astream(_request(2), **_cancel(stepwise, aio=True))]
    return got, [ended, gate.ended]


@pytest.mark.parametrize("kind", sorted(ENTRIES))
@pytest.mark.parametrize("how", HOWS)
def test_a_list_read_and_a_step_read_end_alike_for_the_order_gate_async(
    kind: str, how: str
) -> None:
    listed = asyncio.run(_agated(kind, how, False))
    assert listed == asyncio.run(_agated(kind, how, True))
    if how != "drop":  # the loop closes a dropped async generator later (a task of its own)
        assert listed == _gated(kind, how, False)  # and as the sync reads end


# --- cancellation in the middle of a list read -------------------------------------------


@pytest.mark.parametrize("aio", [False, True])
def test_a_cancel_in_the_middle_of_a_list_read_ends_it_as_a_step_read(aio: bool) -> None:
    def run(stepwise: bool) -> list[Any]:
        model = ReplayModel(one_session(*ENTRIES["chunks"]))
        got: list[Any] = []

        async def aread() -> None:
            async for chunk in model.astream(_request(1), **_cancel(stepwise, aio=True)):
                got.append(chunk["text"])
                if len(got) == 2:
                    model.cancel()

        try:
            if aio:
                asyncio.run(aread())
            else:
                for chunk in model.stream(_request(1), **_cancel(stepwise, aio=False)):
                    got.append(chunk["text"])
                    if len(got) == 2:
                        model.cancel()
        except Exception as error:
            got.append(type(error).__name__)
        return got

    assert run(False) == run(True) == ["a0", "a1", "ReplayCancelledError"]
