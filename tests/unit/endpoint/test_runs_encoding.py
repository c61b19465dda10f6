"""An answer served at once framed from the entry's chunk runs (`BaseWire.runs_encoder`).

See docs/wires.md#encoded-once: on a wire whose encoder frames chunk runs (Bedrock), the
endpoint reads a vouched-for call whole as its entry's runs (`ChunkStream.read_runs`)
and frames them without building the chunk objects; the bytes, the endpoint's
bookkeeping and the recorder's log stay exactly those of the call read chunk by chunk.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest

pytest.importorskip("botocore")

from support.scenarios import one_session

from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.response import DroppedConnection
from pytest_dsh_replay._replay.call import ChunkStream
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, ReplayEntry
from pytest_dsh_replay._wire.bedrock import BedrockWire

PATH = "/model/m/converse-stream"
HEADERS = {"x-dsh-session-id": "s"}
BODY = orjson.dumps({"messages": [{"role": "user", "content": [{"text": "hi"}]}]})
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")

_TEXT: list[Any] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    ["text-delta", 0, ["Hel", "", 'lo "you"', ",\n"]],
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": 'Hello "you",\n'}},
]
_TOOL: list[Any] = [
    {"type": "block-start", "index": 1, "blockType": "tool-call"},
    ["tool-call-delta", 1, ['{"q"', ': "x"}'], "call-1", "search"],
    {
        "type": "block-end",
        "index": 1,
        "block": {"type": "tool-call", "id": "call-1", "name": "search", "arguments": '{"q": "x"}'},
    },
]
_TOOL_DELTA: Any = {
    "type": "tool-call-delta",
    "index": 1,
    "id": "call-1",
    "name": "search",
    "argumentsDelta": '{"q": "x"}',
}
_USAGE: Any = {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 4}}


def _finish(kind: str, code: str | None = None) -> Any:
    if code is None:
        return {"type": "finish", "reason": {"kind": kind}}
    failure = {"message": "it failed", "code": code}
    return {"type": "finish", "reason": {"kind": "error", "failure": failure}}


def _entry(runs: list[Any], count: int) -> ChunksEntry:
    return ChunksEntry.from_runs(runs, count)


ENTRIES = {
    "text": lambda: _entry([*_TEXT, _USAGE, _finish("stop")], 8),
    "tool call": lambda: _entry([*_TEXT, *_TOOL, _USAGE, _finish("tool-calls")], 12),
    "chunk objects": lambda: ChunksEntry(
        [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "hi"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}},
            _finish("stop"),
        ]
    ),
    # chunk objects only (as a scenario written one chunk event per chunk stores them):
    # framed by feed_all, the tool calls read from the chunks as they are
    "chunk objects, tool call": lambda: ChunksEntry(
        [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": "on it"},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "on it"}},
            {"type": "block-start", "index": 1, "blockType": "tool-call"},
            _TOOL_DELTA,
            _TOOL[2],
            _USAGE,
            _finish("tool-calls"),
        ]
    ),
    "failed after content": lambda: _entry([*_TEXT, _finish("error", "RATE_LIMIT")], 7),
    "failed before content": lambda: _entry([_USAGE, _finish("error", "RATE_LIMIT")], 2),
    "dropped": lambda: _entry([*_TEXT, _finish("error", "NETWORK")], 7),
    "empty": lambda: _entry([_finish("error", "EMPTY_RESPONSE")], 1),
}


def _served(entry: ReplayEntry) -> list[Any]:
    """What one call serves, how the endpoint took it, and the recorder's log of it."""
    replay = ReplayModel(one_session(entry))
    store = SessionStore(MemoryBackend())
    recorder = RecordingModel(replay, store, parsed_chunks=True, text_safe=True, request_views=True)
    endpoint = Endpoint.replaying(replay, model=recorder)
    response = endpoint.handle("POST", PATH, HEADERS, BODY)
    pieces: list[bytes] = []
    try:
        pieces.extend(response.body)
        dropped = False
    except DroppedConnection:
        dropped = True
    data = b"".join(pieces)
    router = endpoint.router
    state = [list(router._waiting), sorted(router._failed), dict(router._served)]
    session = store.get("s")
    assert session is not None
    events = [{k: v for k, v in e.items() if k != "time"} for e in session.events]
    logged = orjson.loads(_UUID.sub(b"<id>", orjson.dumps(events)))
    return [response.status, response.headers, data, dropped, repr(state), logged]


@pytest.fixture
def runs_read(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each `ChunkStream.read_runs` of the test: whether it gave the runs."""
    seen: list[bool] = []
    read_runs = ChunkStream.read_runs

    def spy(self: ChunkStream) -> Any:
        runs = read_runs(self)
        seen.append(runs is not None)
        return runs

    monkeypatch.setattr(ChunkStream, "read_runs", spy)
    return seen


@pytest.mark.parametrize("name", list(ENTRIES))
def test_the_runs_serve_what_the_chunks_serve(
    name: str, runs_read: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _served(ENTRIES[name]())
    assert runs_read == [True]  # framed from the runs
    with monkeypatch.context() as slow:
        slow.setattr(BedrockWire, "runs_encoder", lambda self, *a, **k: None)
        runs_read.clear()
        chunk_by_chunk = _served(ENTRIES[name]())
        assert runs_read == []  # read as usual
    assert fast == chunk_by_chunk
    assert fast[0] == (200 if name != "failed before content" else 429)


def test_an_answer_is_framed_from_its_runs_once(runs_read: list[bool]) -> None:
    entry = ENTRIES["text"]()
    scenario = one_session(entry)
    first = Endpoint.replaying(ReplayModel(scenario)).handle("POST", PATH, HEADERS, BODY)
    again = Endpoint.replaying(ReplayModel(scenario)).handle("POST", PATH, HEADERS, BODY)
    assert runs_read == [True]  # the second serves the encoding kept for the entry
    assert b"".join(again.body) == b"".join(first.body)
