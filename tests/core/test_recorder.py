"""RecordingModel: every chunk the caller sees lands in the calling session's log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_dsh_replay import (
    JsonlBackend,
    RecordingError,
    RecordingModel,
    SessionStore,
    derive_replay_script,
)

CALL = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "he"},
    {"type": "text-delta", "index": 0, "text": "llo"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hello"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


class Boom(Exception):
    code = "RATE_LIMIT"
    status = 429


class Live:
    """A scripted live model: each call streams the next list; an exception raises."""

    def __init__(self, *calls: list[Any]):
        self.calls = list(calls)
        self.kwargs: list[dict[str, Any]] = []

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.kwargs.append(kwargs)
        for item in self.calls.pop(0):
            if isinstance(item, BaseException):
                raise item
            yield dict(item)


class AsyncLive(Live):
    async def astream(self, request: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.stream(request, **kwargs):
            await asyncio.sleep(0)
            yield chunk


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(JsonlBackend(tmp_path / "sessions"))


def chunks_of(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    session = store.get(session_id)
    assert session is not None
    return [e["data"] for e in session.events if e["type"] == "assistant/chunk"]


def test_chunks_are_logged_with_turn_and_step_and_derive_back(store: SessionStore) -> None:
    live = Live(CALL, CALL)
    model = RecordingModel(live, store)
    first = list(model.stream({"messages": []}, session_id="s", turn=3, step=2))
    second = list(model.stream({"messages": []}, session_id="s", turn=3, step=2))
    assert first == second == CALL
    logged = chunks_of(store, "s")
    assert {(d["turn"], d["step"]) for d in logged} == {(3, 2)}
    session = store.get("s")
    assert session is not None
    assert [e.to_json()["chunks"] for e in derive_replay_script(session.events)] == [CALL, CALL]
    assert live.kwargs[0] == {"session_id": "s", "turn": 3, "step": 2}  # passed through


def test_without_turn_and_step_each_call_is_a_new_turn(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL, CALL), store)
    for _ in range(2):
        list(model.stream({}, session_id="s"))
    assert [(d["turn"], d["step"]) for d in chunks_of(store, "s")][::5] == [(1, 1), (2, 1)]


def test_unknown_sessions_are_created_with_their_parent(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL, CALL, CALL), store)
    list(model.stream({}, session_id="parent"))
    list(model.stream({}, session_id="child", parent_session_id="parent"))
    list(model.stream({}))  # anonymous: one fresh session
    sessions = {s.id: s for s in store.sessions()}
    assert sessions["child"].header.parent_session == "parent"
    assert len(sessions) == 3


def test_replay_mode_logs_only_sessions_the_code_created(store: SessionStore) -> None:
    store.create("mine")
    model = RecordingModel(Live(CALL, CALL), store, create_sessions=False)
    list(model.stream({}, session_id="mine"))
    list(model.stream({}, session_id="not-in-the-store"))
    assert [s.id for s in store.sessions()] == ["mine"]
    assert len(chunks_of(store, "mine")) == len(CALL)


def test_a_raising_stream_is_logged_with_an_error_finish_and_re_raised(
    store: SessionStore,
) -> None:
    model = RecordingModel(Live([CALL[0], CALL[1], Boom("slow down")]), store)
    seen: list[dict[str, Any]] = []
    with pytest.raises(Boom):
        seen.extend(model.stream({}, session_id="s"))
    assert seen == CALL[:2]
    logged = [d["chunk"] for d in chunks_of(store, "s")]
    assert logged[:2] == CALL[:2]
    assert logged[2] == {
        "type": "finish",
        "reason": {
            "kind": "error",
            "failure": {"message": "slow down", "code": "RATE_LIMIT", "status": 429},
        },
    }
    session = store.get("s")
    assert session is not None
    (entry,) = derive_replay_script(session.events)
    assert entry.chunks == logged


def test_an_abandoned_stream_ends_with_an_aborted_finish(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL), store)
    stream = model.stream({}, session_id="s")
    next(stream)
    stream.close()
    logged = [d["chunk"] for d in chunks_of(store, "s")]
    assert logged[-1]["reason"]["kind"] == "aborted"
    assert logged[-1]["reason"]["failure"]["code"] == "ABORTED"


def test_a_stream_without_finish_is_a_recording_error(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL[:-1]), store)
    with pytest.raises(RecordingError, match="without a finish chunk"):
        list(model.stream({}, session_id="s"))


def test_consumers_mutating_chunks_do_not_change_the_log(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL), store)
    for chunk in model.stream({}, session_id="s"):
        chunk["type"] = "mutated"
    assert [d["chunk"] for d in chunks_of(store, "s")] == CALL


def test_async_callers_get_the_same_log(store: SessionStore) -> None:
    async def main() -> list[dict[str, Any]]:
        model = RecordingModel(AsyncLive(CALL, [CALL[0], Boom("x")]), store)
        got = [c async for c in model.astream({}, session_id="a")]
        with pytest.raises(Boom):
            async for _ in model.astream({}, session_id="a"):
                pass
        return got

    assert asyncio.run(main()) == CALL
    logged = [d["chunk"] for d in chunks_of(store, "a")]
    assert logged[: len(CALL)] == CALL
    assert logged[-1]["reason"]["kind"] == "error"


def test_async_callers_of_a_sync_only_model(store: SessionStore) -> None:
    async def main() -> list[dict[str, Any]]:
        model = RecordingModel(Live(CALL), store)
        return [c async for c in model.astream({}, session_id="a")]

    assert asyncio.run(main()) == CALL
    assert len(chunks_of(store, "a")) == len(CALL)
