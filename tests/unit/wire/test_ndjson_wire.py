"""A wire that does not frame with server-sent events goes through the seam untouched.

A tiny wire speaking newline-delimited JSON (one JSON object a line, as Ollama's
``/api/chat`` streams) is built here on :class:`BaseWire` and the shared ``NDJSON``
framing, entered in the wires' table, and served by the endpoint (a replayed call) and the
recording proxy (a relayed call), neither of which knows its media type
(docs/architecture.md#adding-a-wire).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._format.events import JSONObject, StreamChunk
from pytest_dsh_replay._recording.proxy import Relay, proxy_stream
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript
from pytest_dsh_replay._wire import table
from pytest_dsh_replay._wire.base import BaseWire, Failure, WireError, httpx_module
from pytest_dsh_replay._wire.framing import JSON_HEADERS, NDJSON, Frame
from pytest_dsh_replay._wire.shapes import FailureRecord

MEDIA = "application/x-ndjson"
ROUTE = "/api/chat"


def _line(obj: object) -> bytes:
    return orjson.dumps(obj) + b"\n"


class LineEncoder:
    """``{"message": {"content": <text>}, "done": false}`` per text, ``{"done": true}`` last."""

    def __init__(self) -> None:
        self.text: list[str] = []

    def start(self) -> bytes:
        return b""

    def feed(self, chunk: StreamChunk) -> bytes:
        if chunk.get("type") != "text-delta":
            return b""
        self.text.append(chunk["text"])
        return _line({"message": {"role": "assistant", "content": chunk["text"]}, "done": False})

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        return b"".join(self.feed(chunk) for chunk in chunks)

    def finish(self, reason: Mapping[str, object]) -> bytes:
        return _line({"done": True, "done_reason": reason.get("kind")})

    def marks(self) -> list[str]:
        return ["".join(self.text)]

    def failure_event(self, failure: Failure) -> bytes:
        return _line({"error": str(failure.get("message"))})

    def replay_error_event(self, message: str) -> bytes:
        return _line({"error": message})


class LineDecoder:
    """The encoder's lines back to chunks."""

    response_id: str | None = None

    def __init__(self) -> None:
        self.done = False

    def feed(self, event: Mapping[str, object]) -> list[StreamChunk]:
        if event.get("done"):
            self.done = True
            return [{"type": "finish", "reason": {"kind": "stop"}}]
        message = event["message"]
        assert isinstance(message, Mapping)
        return [{"type": "text-delta", "index": 0, "text": message["content"]}]

    def end(self) -> list[StreamChunk]:
        return []

    def failed(self, failure: FailureRecord) -> StreamChunk:
        self.done = True
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}


def _error(status: int, message: str) -> WireError:
    return WireError(status, list(JSON_HEADERS), orjson.dumps({"error": message}))


class LineWire(BaseWire):
    """The test wire: what a wire that frames with NDJSON writes, and nothing more."""

    name = "lines"
    routes = (ROUTE,)
    framing = NDJSON

    def encoder(self, request: Mapping[str, Any], **kwargs: Any) -> LineEncoder:
        return LineEncoder()

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        text = "".join(c["text"] for c in chunks if c["type"] == "text-delta")
        return {"model": model, "message": {"role": "assistant", "content": text}, "done": True}

    def error(self, failure: Failure) -> WireError:
        return _error(500, str(failure.get("message")))

    def refusal(self, status: int, message: str, *, param: str | None = None) -> WireError:
        return _error(status, message)

    def decoder(self) -> LineDecoder:
        return LineDecoder()

    def failure(
        self, status: int | None, body: object, headers: Mapping[str, str]
    ) -> FailureRecord:
        failure: FailureRecord = {"message": str(body), "code": "UNKNOWN"}
        if status is not None:
            failure["status"] = status
        return failure

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        return event is not None and event.get("done") is True


WIRE = LineWire()
TEXTS = ["Hel", "lo", " there"]
CHUNKS: list[StreamChunk] = [
    *({"type": "text-delta", "index": 0, "text": text} for text in TEXTS),
    {"type": "finish", "reason": {"kind": "stop"}},
]
LINES = b"".join(
    [
        *(_line({"message": {"role": "assistant", "content": t}, "done": False}) for t in TEXTS),
        _line({"done": True, "done_reason": "stop"}),
    ]
)


@pytest.fixture
def in_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test wire as one entry of the wires' table (its route served)."""
    monkeypatch.setattr(table, "WIRES", (*table.WIRES, WIRE))
    monkeypatch.setitem(table.ROUTES, ROUTE, WIRE)


def _scenario() -> Scenario:
    script = SessionScript(
        file="session.jsonl",
        recorded_id="rec",
        created_at=0,
        seed_length=0,
        parent_session=None,
        primary=True,
        entries=(ChunksEntry(CHUNKS),),
        first_user_text="hi",
    )
    return Scenario(Path("mem"), (script,))


def _body(stream: bool) -> bytes:
    return orjson.dumps(
        {"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}
    )


@pytest.mark.usefixtures("in_the_table")
def test_the_endpoint_serves_a_replayed_call_in_the_wire_s_framing() -> None:
    endpoint = Endpoint.replaying(ReplayModel(_scenario()))
    response = endpoint.handle("POST", ROUTE, {}, _body(True))
    assert response.status == 200
    assert dict(response.headers)["content-type"] == MEDIA
    assert b"".join(response.body) == LINES
    assert endpoint.errors == []


@pytest.mark.usefixtures("in_the_table")
def test_the_endpoint_serves_a_whole_answer_and_a_refusal_of_the_wire() -> None:
    endpoint = Endpoint.replaying(ReplayModel(_scenario()))
    whole = endpoint.handle("POST", ROUTE, {}, _body(False))
    assert whole.status == 200
    assert orjson.loads(b"".join(whole.body))["message"]["content"] == "".join(TEXTS)
    refused = endpoint.handle("POST", ROUTE, {}, b'{"messages": 3}')
    assert refused.status == 400
    assert "messages" in orjson.loads(b"".join(refused.body))["error"]


def test_the_proxy_relays_a_stream_in_the_wire_s_framing() -> None:
    httpx = httpx_module()
    sent: list[Any] = []

    class Pieces(httpx.ByteStream):  # type: ignore[misc, name-defined]
        def __iter__(self) -> Iterator[bytes]:
            yield from (LINES[:7], LINES[7:60], LINES[60:])  # lines split between reads

    def provider(request: Any) -> Any:
        sent.append(request)
        return httpx.Response(200, headers={"content-type": MEDIA}, stream=Pieces(b""))

    relay = Relay(WIRE, _body(True), {"content-type": "application/json"}, ROUTE)
    chunks = list(
        proxy_stream(
            relay,
            client=httpx.Client(transport=httpx.MockTransport(provider)),
            base_url="http://upstream.invalid",
            api_key="live-key-0123",
            model=None,
            timeout=5,
            on_network_error=lambda message: None,
        )
    )
    assert chunks == CHUNKS
    assert relay.streamed
    assert relay.ended
    assert relay.take() + relay.take_ending() == LINES  # passed on as it came
    assert str(sent[0].url) == f"http://upstream.invalid{ROUTE}"
    assert sent[0].headers["authorization"] == "Bearer live-key-0123"
