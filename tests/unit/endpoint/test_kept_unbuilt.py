"""A kept encoding is served without building the call's chunk objects.

See docs/wires.md#encoded-once: once an entry's streamed encoding is kept, a later call
replaying it reads the replay's stream whole without its chunks being built
(`ChunkStream.read_unbuilt`); the bytes, the endpoint's bookkeeping and the recorder's
log stay exactly those of a call whose chunks were built and encoded.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from support.chunks import text_entry
from support.scenarios import one_session

from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore
from pytest_dsh_replay._endpoint.endpoint import _KEPT, Endpoint
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts import entries
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._scripts.scenario import Scenario

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
HEADERS = {"x-dsh-session-id": "s"}
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")  # message ids


def _chat_body() -> bytes:
    return orjson.dumps(
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times an entry's chunk objects were built (one item per build)."""
    counted: list[int] = []
    materialize = entries.materialize_runs

    def counting(items: Any) -> Any:
        counted.append(1)
        return materialize(items)

    monkeypatch.setattr(entries, "materialize_runs", counting)
    return counted


def _serve(endpoint: Endpoint, path: str = CHAT, body: bytes | None = None) -> tuple[Any, ...]:
    response = endpoint.handle("POST", path, HEADERS, _chat_body() if body is None else body)
    data = b"".join(response.body)
    router = endpoint.router
    state = (list(router._waiting), set(router._failed), dict(router._served))
    return response.status, response.headers, data, state, dict(endpoint._served)


def _scenario() -> Scenario:
    return one_session(text_entry("hello there", usage={"inputTokens": 3, "outputTokens": 2}))


def test_a_kept_encoding_is_served_without_building_chunks(built: list[int]) -> None:
    scenario = _scenario()
    first = _serve(Endpoint.replaying(ReplayModel(scenario)))
    assert built  # the first call built its chunks to encode them
    assert first[0] == 200
    assert b'"content":"hello there"' in first[2]
    built.clear()
    model = ReplayModel(scenario)
    again = _serve(Endpoint.replaying(model))
    assert built == []  # served from the kept bytes: no chunk object built
    assert again == first  # the same bytes, headers and router state
    model.assert_consumed()  # the call counts as made and read


def test_the_recorders_log_is_the_same_as_when_chunks_are_built(built: list[int]) -> None:
    scenario = _scenario()

    def logged() -> list[Any]:
        replay = ReplayModel(scenario)
        store = SessionStore(MemoryBackend())
        recorder = RecordingModel(
            replay, store, parsed_chunks=True, text_safe=True, request_views=True
        )
        endpoint = Endpoint.replaying(replay, model=recorder)
        status, _headers, data, _state, _kept = _serve(endpoint)
        assert status == 200
        session = store.get("s")
        assert session is not None
        events = [{k: v for k, v in e.items() if k != "time"} for e in session.events]
        return [data, orjson.loads(_UUID.sub(b"<id>", orjson.dumps(events)))]

    first = logged()
    built.clear()
    again = logged()
    assert again == first
    assert len(built) == 1  # the log built them once, when it was read
    chunks = [e["data"]["chunk"] for e in again[1] if e["type"] == "assistant/chunk"]
    entry = scenario.scripts[0].entries[0]
    assert isinstance(entry, ChunksEntry)
    assert chunks == entry.chunks


def test_a_call_that_keeps_its_chunks_builds_them(built: list[int]) -> None:
    # The Responses wire continues every answer by id: the endpoint keeps the chunks.
    scenario = _scenario()
    body = orjson.dumps({"model": "m", "input": "hi", "stream": True})
    first = _serve(Endpoint.replaying(ReplayModel(scenario)), RESPONSES, body)
    entry = scenario.scripts[0].entries[0]
    assert isinstance(entry, ChunksEntry)
    assert len(_KEPT.of(entry)) == 1
    built.clear()
    again = _serve(Endpoint.replaying(ReplayModel(scenario)), RESPONSES, body)
    assert built  # read as usual: the kept answer holds the served chunks
    assert again[:4] == first[:4]
    [answered] = again[4].values()
    assert list(answered.chunks) == entry.chunks
