"""The OpenAI-compatible live model, against the package's scripted server.

Calls go to a ``ScriptedServer``: a ``ScriptedModel``'s answers reach the adapter as the
model endpoint's chat-completions SSE and HTTP errors (docs/recording.md#scripted-server).
A few provider details that no encoder of the endpoint writes come from ``canned``, a
loopback server that answers with the exact bytes a test gives: DeepSeek's usage fields,
finish reasons beyond OpenAI's (and none at all), an error body's own ``code`` under a
message that does not name the context window, and a ``Retry-After`` header alone.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support.upstream import SILENT, Upstream, chat_events
from support.upstream import Reply as Exact

from pytest_dsh_replay import (
    Answer,
    Chunks,
    Hang,
    ProviderFailure,
    Rule,
    ScriptedModel,
    ScriptedRequest,
    ScriptedServer,
    ToolCall,
)
from pytest_dsh_replay._errors import RecordingError
from pytest_dsh_replay._recording.live_openai import (
    RECORD_ENV_VARS,
    TIMEOUT_VAR,
    OpenAICompatibleModel,
)
from pytest_dsh_replay._recording.proxy import UPSTREAM_IDLE_TIMEOUT_S
from pytest_dsh_replay._scripted.model import answer_chunks

KEY = "sk-live-test-0123456789abcdef"
USER = {"messages": [{"role": "user", "content": "hi"}]}
REQUEST_ID = "req-scripted-1"

ChunkList = list[dict[str, Any]]
Reply = Answer | Chunks | ProviderFailure | Hang
Scripted = Reply | Callable[[ScriptedRequest], Reply]


def run(model: OpenAICompatibleModel, request: Any, mode: str, **kwargs: Any) -> ChunkList:
    """Read one call to the end, through ``stream`` or ``astream``."""
    if mode == "sync":
        return list(model.stream(request, **kwargs))

    async def read() -> ChunkList:
        return [chunk async for chunk in model.astream(request, **kwargs)]

    return asyncio.run(read())


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


# The answers for the next calls of the shared server, in order; a call with none left
# matches no rule, which the server answers 400 and keeps as an error.
_NEXT: list[Scripted] = []


def _next_answer(seen: ScriptedRequest) -> Reply:
    answer = _NEXT.pop(0)
    return answer(seen) if callable(answer) else answer


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[ScriptedServer, OpenAICompatibleModel]]:
    """One scripted server and one model for the module; each test queues its answers."""
    scripted = ScriptedModel([Rule(_next_answer, when=lambda seen: bool(_NEXT))])
    with scripted.serve(idle_timeout=60) as server:
        model = OpenAICompatibleModel(base_url=server.base_url + "/v1", api_key=KEY, model="m1")
        try:
            yield server, model
        finally:
            model.close()


@pytest.fixture
def server(shared: tuple[ScriptedServer, OpenAICompatibleModel]) -> Iterator[ScriptedServer]:
    """The shared server with no answers queued; the test fails on an error it keeps."""
    server = shared[0]
    server.requests.clear()
    _NEXT.clear()
    kept = len(server.errors)
    yield server
    _NEXT.clear()
    assert server.errors[kept:] == []


def answers(*script: Scripted) -> None:
    """Queue the answers of the next calls."""
    _NEXT[:] = script


@pytest.fixture
def model(shared: tuple[ScriptedServer, OpenAICompatibleModel], server: ScriptedServer) -> Any:
    return shared[1]


@pytest.fixture
def call(server: ScriptedServer, model: OpenAICompatibleModel) -> Any:
    """``call(answer, mode, request=USER)``: one request answered with ``answer``."""

    def call(answer: Scripted, mode: str = "sync", request: Any = USER) -> ChunkList:
        answers(answer)
        return run(model, request, mode)

    return call


@pytest.fixture
def received(server: ScriptedServer, model: OpenAICompatibleModel) -> Any:
    """``received(request, **options)``: the JSON body the server got for ``request``."""

    def received(request: Any, **options: Any) -> dict[str, Any]:
        server.requests.clear()
        answers(Answer(text="ok"))
        own = (
            OpenAICompatibleModel(
                base_url=server.base_url + "/v1", api_key=KEY, model="m1", **options
            )
            if options
            else model
        )
        try:
            run(own, request, "sync")
        finally:
            if own is not model:
                own.close()
        body: dict[str, Any] = server.requests[0].body
        return body

    return received


def failure(chunks: ChunkList) -> dict[str, Any]:
    assert chunks[-1]["type"] == "finish"
    assert chunks[-1]["reason"]["kind"] == "error"
    result: dict[str, Any] = chunks[-1]["reason"]["failure"]
    return result


def sent_frames(server: ScriptedServer) -> list[Any]:
    """The JSON frames of the last streamed answer, as the server sent them."""
    text = bytes(server.requests[-1].response).decode()
    return [
        json.loads(line[6:])
        for line in text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]


def without_usage(answer: Answer) -> Callable[[ScriptedRequest], Reply]:
    """``answer`` as a provider that reports no usage streams it: no usage chunk."""

    def build(seen: ScriptedRequest) -> Reply:
        return Chunks([c for c in answer_chunks(answer, seen) if c["type"] != "usage"])

    return build


def _split(text: str, pieces: int) -> list[str]:
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def interleaved(text: str, calls: list[ToolCall], pieces: int) -> Chunks:
    """A text block, then tool calls opened together whose argument deltas alternate."""
    chunks: ChunkList = [{"type": "block-start", "index": 0, "blockType": "text"}]
    chunks += [{"type": "text-delta", "index": 0, "text": p} for p in _split(text, pieces)]
    chunks.append({"type": "block-end", "index": 0, "block": {"type": "text", "text": text}})
    for k in range(1, len(calls) + 1):
        chunks.append({"type": "block-start", "index": k, "blockType": "tool-call"})
    for k, tool in enumerate(calls, 1):
        opening = {"type": "tool-call-delta", "index": k, "id": tool.id, "name": tool.name}
        chunks.append({**opening, "argumentsDelta": ""})
    parts = [_split(tool.arguments_json, pieces) for tool in calls]
    for round_no in range(max(len(p) for p in parts)):
        for k, (tool, mine) in enumerate(zip(calls, parts, strict=True), 1):
            if round_no < len(mine):
                delta = {"type": "tool-call-delta", "index": k, "id": tool.id}
                chunks.append({**delta, "argumentsDelta": mine[round_no]})
    for k, tool in enumerate(calls, 1):
        block = {"type": "tool-call", "id": tool.id, "name": tool.name}
        chunks.append(
            {"type": "block-end", "index": k, "block": {**block, "arguments": tool.arguments_json}}
        )
    chunks.append({"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 9}})
    chunks.append({"type": "finish", "reason": {"kind": "tool-calls"}})
    return Chunks(chunks)


def content_filtered(text: str) -> Chunks:
    """``text``, usage, then the provider's content filter stops the answer."""
    stopped = {"message": "filtered", "code": "CONTENT_FILTER"}
    return Chunks(
        [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": text},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            {"type": "usage", "usage": {"inputTokens": 2, "outputTokens": 1}},
            {"type": "finish", "reason": {"kind": "error", "failure": stopped}},
        ]
    )


# --- canned: the bytes no encoder of the endpoint writes --------------------------------

SSE = {"content-type": "text/event-stream"}


@contextmanager
def canned(
    status: int, body: bytes, headers: Mapping[str, str] = SSE
) -> Iterator[OpenAICompatibleModel]:
    """A model whose calls go to a loopback server answering ``status``, ``headers``, ``body``."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(status)
            for name, value in {**headers, "content-length": str(len(body))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Keep test output quiet."""

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    model = OpenAICompatibleModel(
        base_url=f"http://127.0.0.1:{httpd.server_address[1]}/v1", api_key=KEY, model="m1"
    )
    try:
        yield model
    finally:
        model.close()
        httpd.shutdown()
        httpd.server_close()


def sse(*frames: Mapping[str, Any]) -> bytes:
    """An SSE body: each frame as ``data: <json>``, then ``data: [DONE]``."""
    return b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames) + (
        b"data: [DONE]\n\n"
    )


def frame(delta: Mapping[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "model": "m1",
        "choices": [choice],
    }


def usage_frame(usage: Mapping[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": usage}


def error_body(message: str, **fields: Any) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": "api_error", "code": None, **fields}}
    ).encode()


# --- streaming content -------------------------------------------------------------------


def test_text_streams_as_one_text_block(call: Any, mode: str) -> None:
    usage = {"inputTokens": 5, "outputTokens": 3}
    chunks = call(Answer(text="Hello there!", pieces=4, usage=usage), mode)
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "Hel"},
        {"type": "text-delta", "index": 0, "text": "lo "},
        {"type": "text-delta", "index": 0, "text": "the"},
        {"type": "text-delta", "index": 0, "text": "re!"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello there!"}},
        {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 3}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def test_reasoning_block_ends_when_text_starts(call: Any, mode: str) -> None:
    chunks = call(without_usage(Answer(reasoning="think", text="ok", pieces=2)), mode)
    assert chunks == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "thi"},
        {"type": "reasoning-delta", "index": 0, "text": "nk"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "think"}},
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "text-delta", "index": 1, "text": "o"},
        {"type": "text-delta", "index": 1, "text": "k"},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "ok"}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


@pytest.mark.parametrize("interleave", [False, True], ids=["sequential", "interleaved"])
def test_parallel_tool_calls_are_tool_call_blocks(
    call: Any, server: ScriptedServer, mode: str, interleave: bool
) -> None:
    calls = [ToolCall("read", '{"path": "a.txt"}', "call_a"), ToolCall("ls", "{}", "call_b")]
    answer = (
        interleaved("Let me look.", calls, 3)
        if interleave
        else Answer(text="Let me look.", tool_calls=calls, pieces=3)
    )
    chunks = call(answer, mode)
    sent = [c["choices"][0]["delta"]["tool_calls"][0] for c in sent_frames(server)
            if c["choices"] and "tool_calls" in c["choices"][0]["delta"]]  # fmt: skip
    if interleave:  # both calls open before their arguments alternate on the wire
        assert [d["index"] for d in sent] == [0, 1, 0, 1, 0, 1, 0]
    kinds = [(c["type"], c.get("index")) for c in chunks]
    assert kinds[:1] == [("block-start", 0)]
    assert ("block-end", 0) in kinds
    assert kinds.index(("block-end", 0)) < kinds.index(("block-start", 1))  # text closed first
    deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    for index, expected in ((1, calls[0]), (2, calls[1])):
        mine = [d for d in deltas if d["index"] == index]
        assert {d["id"] for d in mine} == {expected.id}
        assert [d.get("name") for d in mine] == [expected.name] + [None] * (len(mine) - 1)
        assert "".join(d["argumentsDelta"] for d in mine) == expected.arguments
        assert list(mine[0]) == ["type", "index", "id", "name", "argumentsDelta"]
    if interleave:
        assert [d["index"] for d in deltas][2:4] == [1, 2]
    ends = [c for c in chunks if c["type"] == "block-end"]
    assert [c["block"] for c in ends[1:]] == [
        {"type": "tool-call", "id": "call_a", "name": "read", "arguments": '{"path": "a.txt"}'},
        {"type": "tool-call", "id": "call_b", "name": "ls", "arguments": "{}"},
    ]
    # the tool-call blocks stay open together and end in index order at the end
    assert [c["type"] for c in chunks[-4:]] == ["block-end", "block-end", "usage", "finish"]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_text_after_tool_calls_opens_a_new_block(call: Any) -> None:
    chunks = call(Answer(reasoning="a", text="b", pieces=1), "sync")
    assert [c["type"] for c in chunks] == [
        "block-start", "reasoning-delta", "block-end",
        "block-start", "text-delta", "block-end",
        "usage", "finish",
    ]  # fmt: skip


# --- usage ---------------------------------------------------------------------------------


def _usage(prompt: int, completion: int, **extra: Any) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **extra,
    }


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        pytest.param(
            _usage(100, 7, prompt_tokens_details={"cached_tokens": 64},
                   completion_tokens_details={"reasoning_tokens": 0}),
            {"inputTokens": 36, "outputTokens": 7, "cacheReadTokens": 64, "reasoningTokens": 0},
            id="openai",
        ),
        pytest.param(
            _usage(10, 2, prompt_tokens_details={"cached_tokens": 0}),
            {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 0},
            id="no-cache-hit",
        ),
        pytest.param(_usage(3, 1), {"inputTokens": 3, "outputTokens": 1}, id="plain"),
    ],
)  # fmt: skip
def test_usage_mapping(
    call: Any, server: ScriptedServer, usage: dict[str, Any], expected: dict[str, Any]
) -> None:
    chunks = call(Answer(text="x", usage=expected))
    assert sent_frames(server)[-1]["usage"] == usage  # what the provider reported
    assert chunks[-2] == {"type": "usage", "usage": expected}
    assert list(chunks[-2]["usage"]) == list(expected)  # key order as dsh writes it


def test_deepseek_cache_fields_map_to_cache_reads() -> None:
    # DeepSeek's prompt_cache_hit_tokens / prompt_cache_miss_tokens: no encoder writes them
    usage = _usage(8427, 99, prompt_cache_hit_tokens=8064, prompt_cache_miss_tokens=363,
                   completion_tokens_details={"reasoning_tokens": 20})  # fmt: skip
    expected = {"inputTokens": 363, "outputTokens": 99, "cacheReadTokens": 8064,
                "reasoningTokens": 20}  # fmt: skip
    body = sse(frame({"role": "assistant", "content": "x"}), frame({}, "stop"), usage_frame(usage))
    with canned(200, body) as model:
        chunks = run(model, USER, "sync")
    assert chunks[-2] == {"type": "usage", "usage": expected}
    assert list(chunks[-2]["usage"]) == list(expected)  # key order as dsh writes it


def test_no_usage_chunk_when_the_provider_sends_none(call: Any, server: ScriptedServer) -> None:
    chunks = call(without_usage(Answer(text="x")), "sync")
    assert all("usage" not in f for f in sent_frames(server))
    assert [c["type"] for c in chunks][-2:] == ["block-end", "finish"]


# --- finish reasons ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (Answer(text="x", finish="stop"), {"kind": "stop"}),
        (Answer(tool_calls=[ToolCall("t")], finish="tool-calls"), {"kind": "tool-calls"}),
        (Answer(tool_calls=[ToolCall("t")], finish="stop"), {"kind": "tool-calls"}),
        (Answer(text="x", finish="max-tokens"), {"kind": "max-tokens"}),
        (Answer(reasoning="only thinking", finish="max-tokens"), {"kind": "max-tokens"}),
    ],
    ids=["stop", "tool_calls", "stop-with-tool-calls", "length", "length-in-reasoning"],
)
def test_finish_reasons(
    call: Any, server: ScriptedServer, answer: Answer, reason: dict[str, Any]
) -> None:
    assert call(answer)[-1] == {"type": "finish", "reason": reason}
    wire = {"stop": "stop", "tool-calls": "tool_calls", "max-tokens": "length"}[str(answer.finish)]
    assert sent_frames(server)[-2]["choices"][0]["finish_reason"] == wire


def test_a_content_filter_finish_is_an_error(call: Any, server: ScriptedServer) -> None:
    chunks = call(content_filtered("partial"))
    assert sent_frames(server)[-2]["choices"][0]["finish_reason"] == "content_filter"
    assert chunks[-3]["block"] == {"type": "text", "text": "partial"}  # content is kept
    assert chunks[-2]["type"] == "usage"
    assert failure(chunks)["code"] == "CONTENT_FILTER"
    assert "status" not in failure(chunks)


@pytest.mark.parametrize(
    ("finish_reason", "code"),
    [
        ("insufficient_system_resource", "OVERLOADED"),  # DeepSeek's
        ("something_new", "UNKNOWN"),
        (None, "UNKNOWN"),  # the stream ended without any finish reason
    ],
)
def test_other_finish_reasons_are_errors(finish_reason: str | None, code: str) -> None:
    # finish reasons beyond OpenAI's, and usage after none: no encoder writes them
    ending = [frame({}, finish_reason)] if finish_reason else []
    body = sse(frame({"role": "assistant", "content": ""}), frame({"content": "part"}),
               frame({"content": "ial"}), *ending, usage_frame(_usage(3, 2)))  # fmt: skip
    with canned(200, body) as model:
        chunks = run(model, USER, "sync")
    assert chunks[-3]["block"] == {"type": "text", "text": "partial"}  # content is kept
    assert chunks[-2]["type"] == "usage"
    assert failure(chunks)["code"] == code
    assert "status" not in failure(chunks)


def test_empty_response_is_an_error(call: Any, mode: str) -> None:
    chunks = call(Answer(usage={"inputTokens": 4, "outputTokens": 0}), mode)
    assert chunks == [
        {"type": "usage", "usage": {"inputTokens": 4, "outputTokens": 0}},
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": "the model returned a completed response with no text, "
                    "reasoning or tool call (finish_reason 'stop')",
                    "code": "EMPTY_RESPONSE",
                },
            },
        },
    ]


# --- failures ------------------------------------------------------------------------------

CONTEXT = (
    "This model's maximum context length is 65536 tokens. However, you requested "
    "70000 tokens (70000 in the messages). Please reduce the length of the messages."
)


def provider(status: int, message: str, **options: Any) -> ProviderFailure:
    """A provider's HTTP error, with its request id."""
    return ProviderFailure(status, message, request_id=REQUEST_ID, **options)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (provider(401, "Authentication Fails, Your api key is invalid"), "AUTH"),
        (provider(403, "forbidden"), "AUTH"),
        (provider(429, "Rate limit reached"), "RATE_LIMIT"),
        # an invalid_request_error with no error code: the message names the overflow
        (provider(400, CONTEXT, code="INVALID_REQUEST"), "CONTEXT_WINDOW_EXCEEDED"),
        (provider(400, "Invalid max_tokens value, the valid range is [1, 8192]"), "UNKNOWN"),
        (provider(404, "Model Not Exist"), "UNKNOWN"),
        (provider(500, "internal"), "UNKNOWN"),
        (provider(503, "Server overloaded"), "OVERLOADED"),
        (provider(529, "Overloaded"), "OVERLOADED"),
    ],
    ids=lambda v: str(v.status) if isinstance(v, ProviderFailure) else str(v),
)
def test_http_errors_become_an_error_finish(
    call: Any, server: ScriptedServer, error: ProviderFailure, code: str
) -> None:
    chunks = call(error)
    assert server.requests[-1].status == error.status
    sent = json.loads(bytes(server.requests[-1].response))["error"]
    assert sent["message"] == error.message
    if error.code == "INVALID_REQUEST":
        assert sent["code"] is None  # the adapter has only the status and the message
    assert chunks == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": error.message,
                    "code": code,
                    "status": error.status,
                    "requestId": REQUEST_ID,
                },
            },
        }
    ]


def test_the_error_bodys_code_names_a_context_overflow() -> None:
    # code context_length_exceeded under a message that does not say so: the endpoint's
    # error body for such a failure adds the words, so this body is canned
    body = error_body("too long", type="invalid_request_error", code="context_length_exceeded")
    headers = {"content-type": "application/json", "x-request-id": REQUEST_ID}
    with canned(400, body, headers) as model:
        chunks = run(model, USER, "sync")
    assert chunks == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": "too long",
                    "code": "CONTEXT_WINDOW_EXCEEDED",
                    "status": 400,
                    "requestId": REQUEST_ID,
                },
            },
        }
    ]


def test_async_maps_finishes_and_failures_like_sync(call: Any) -> None:
    cases: list[Reply] = [
        Answer(text="x", finish="max-tokens"),
        content_filtered("x"),
        ProviderFailure(400, CONTEXT, code="INVALID_REQUEST"),
        ProviderFailure(503, "busy", retry_after=1),
    ]
    for answer in cases:
        expected = call(answer, "sync")
        got = call(answer, "async")
        if "failure" in expected[-1]["reason"]:
            expected[-1]["reason"]["failure"].pop("requestId", None)
            got[-1]["reason"]["failure"].pop("requestId", None)
        assert got == expected


def test_retry_after_seconds(call: Any, server: ScriptedServer, mode: str) -> None:
    chunks = call(provider(429, "slow down", retry_after=2.5), mode)
    assert server.requests[-1].status == 429
    assert failure(chunks)["providerRetryAfterMs"] == 2500
    assert list(failure(chunks)) == [
        "message", "code", "status", "providerRetryAfterMs", "requestId",
    ]  # fmt: skip


# A Retry-After header alone (the endpoint also sends retry-after-ms): canned.
def _retry_after(value: str) -> dict[str, Any]:
    headers = {"content-type": "application/json", "retry-after": value, "x-request-id": "r1"}
    with canned(429, error_body("slow down"), headers) as model:
        return failure(run(model, USER, "sync"))


def test_retry_after_seconds_alone() -> None:
    assert _retry_after("2.5")["providerRetryAfterMs"] == 2500


def test_retry_after_http_date() -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(hours=1), usegmt=True)
    assert 3_500_000 < _retry_after(when)["providerRetryAfterMs"] <= 3_600_000


@pytest.mark.parametrize("value", ["0", "soon", "-3"])
def test_unusable_retry_after_is_left_out(value: str) -> None:
    assert "providerRetryAfterMs" not in _retry_after(value)


def test_dead_port_is_a_network_error(mode: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAICompatibleModel(base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY, model="m")
    try:
        chunks = run(model, USER, mode)
    finally:
        model.close()
    assert len(chunks) == 1
    assert failure(chunks)["code"] == "NETWORK"
    assert set(failure(chunks)) == {"message", "code"}
    assert "Connect" in failure(chunks)["message"]
    # Kept for the test failure: the base URL and the network error (issue 13.8).
    (kept,) = model.network_failures
    assert kept.startswith(f"cannot reach the live model at http://127.0.0.1:{port}/v1: ")
    assert "Connect" in kept
    assert kept == failure(chunks)["message"]


def test_timeout_is_a_network_error(server: ScriptedServer, mode: str) -> None:
    # The answer hangs until the client has given up: no race between a delay and the
    # timeout (a client that never times out gets the hang's end after 10 s and fails).
    answers(Hang(seconds=10))
    slow = OpenAICompatibleModel(
        base_url=server.base_url + "/v1", api_key=KEY, model="m", timeout=0.05
    )
    try:
        chunks = run(slow, USER, mode)
    finally:
        slow.close()
    assert failure(chunks)["code"] == "NETWORK"
    assert "status" not in failure(chunks)


def test_error_event_mid_stream_keeps_the_chunks_already_sent(call: Any, mode: str) -> None:
    died = ProviderFailure(500, "upstream died")
    chunks = call(Answer(text="abcdef", pieces=2, failure=died), mode)
    assert chunks[:3] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "abc"},
        {"type": "text-delta", "index": 0, "text": "def"},
    ]
    assert len(chunks) == 4  # no block-end for the unfinished block, no usage
    assert failure(chunks) == {"message": "upstream died", "code": "UNKNOWN"}


def test_connection_cut_mid_stream_is_a_network_error(call: Any, mode: str) -> None:
    cut = ProviderFailure(None, code="TRANSPORT")
    chunks = call(Answer(text="abcdef", pieces=2, failure=cut), mode)
    assert [c["type"] for c in chunks] == ["block-start", "text-delta", "text-delta", "finish"]
    assert failure(chunks)["code"] == "NETWORK"


def test_wrong_key_is_auth_and_the_key_is_never_echoed(
    call: Any, server: ScriptedServer, mode: str
) -> None:
    echo = ProviderFailure(401, f"Incorrect API key provided: {KEY}")
    assert failure(call(echo, mode))["message"] == "Incorrect API key provided: [REDACTED]"
    assert KEY.encode() in server.requests[-1].response  # the provider did echo it
    with ScriptedServer(ScriptedModel(), api_key="another-key", idle_timeout=10) as other:
        model = OpenAICompatibleModel(base_url=other.base_url + "/v1", api_key=KEY, model="m")
        try:
            assert failure(run(model, USER, mode))["code"] == "AUTH"
        finally:
            model.close()


def test_a_base_url_with_a_query_string_keeps_it_after_the_path(
    server: ScriptedServer, mode: str
) -> None:
    # The Azure shape: the SDK joined paths after the query (/v1/?api_key=...chat/completions).
    secret = "sk-query-0123456789abcdefghij"
    query = f"api-version=2024-10-21&api_key={secret}&blank="
    answers(Answer(text="fine"), Answer(text="again"))
    model = OpenAICompatibleModel(base_url=f"{server.base_url}/v1?{query}", api_key=KEY, model="m")
    try:
        assert [c for c in run(model, USER, mode) if c["type"] == "text-delta"]
        run(model, USER, mode)
        shown = repr(model)
    finally:
        model.close()
    assert [r.path for r in server.requests] == [f"/v1/chat/completions?{query}"] * 2
    assert secret not in shown
    assert "api-version=2024-10-21&api_key=[REDACTED]" in shown


def test_an_unreachable_base_url_with_a_key_in_its_query_never_shows_the_key(
    mode: str,
) -> None:
    secret = "sk-query-0123456789abcdefghij"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAICompatibleModel(
        base_url=f"http://127.0.0.1:{port}/v1?api_key={secret}&api-version=1",
        api_key=KEY,
        model="m",
    )
    try:
        chunks = run(model, USER, mode)
    finally:
        model.close()
    (kept,) = model.network_failures
    assert kept.startswith(
        f"cannot reach the live model at http://127.0.0.1:{port}/v1?api_key=[REDACTED]"
        "&api-version=1: "
    )
    assert secret not in failure(chunks)["message"]


def test_a_base_url_whose_query_repeats_a_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="repeats the parameter 'v'"):
        OpenAICompatibleModel(base_url="http://127.0.0.1:9/v1?v=1&v=2", api_key=KEY)
    environ = {"DSH_RECORD_BASE_URL": "http://127.0.0.1:9/v1?v=1&v=2", "DSH_RECORD_API_KEY": KEY}
    with pytest.raises(RecordingError, match="^DSH_RECORD_BASE_URL: .*repeats the parameter"):
        OpenAICompatibleModel.from_env(environ)


# --- requests ------------------------------------------------------------------------------


def test_request_basics_and_the_key_only_in_the_authorization_header(
    server: ScriptedServer, mode: str
) -> None:
    answers(Answer(text="x"), Answer(text="y"))
    model = OpenAICompatibleModel(
        base_url=server.base_url + "/v1",
        api_key=KEY,
        model="m1",
        extra_body={"thinking": {"x": 1}},
    )
    try:
        run(model, USER, mode, session_id="s1", parent_session_id=None, turn=1, step=2)
        run(model, USER, mode)
        assert KEY not in repr(model)
    finally:
        model.close()
    assert len(server.requests) == 2
    for seen in server.requests:
        assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
        assert seen.headers["authorization"] == f"Bearer {KEY}"
        others = {k: v for k, v in seen.headers.items() if k != "authorization"}
        assert KEY not in json.dumps(others)
        assert KEY not in json.dumps(seen.body)
        assert seen.body == {
            "model": "m1",
            "messages": [{"role": "user", "content": "hi"}],
            "stream": True,
            "stream_options": {"include_usage": True},
            "thinking": {"x": 1},
        }
        assert seen.headers["x-stainless-retry-count"] == "0"


def test_dsh_messages_are_converted(received: Any) -> None:
    request = {
        "system": "You are terse.",
        "messages": [
            {"role": "user", "content": "list files", "id": "u1"},
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "I should call ls."},
                    {"type": "text", "text": "Looking."},
                    {"type": "tool-call", "id": "c1", "name": "ls", "arguments": '{"d": "."}'},
                    {"type": "tool-call", "id": "c2", "name": "pwd", "arguments": "{}"},
                ],
                "source": {"kind": "model"},
                "id": "a1",
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c1",
                        "content": [{"type": "text", "text": "a.txt"}],
                    },
                    {
                        "type": "tool-result",
                        "toolCallId": "c2",
                        "content": [{"type": "text", "text": "no such dir"}],
                        "isError": True,
                    },
                ],
                "source": {"kind": "tool"},
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "reasoning", "text": "hmm"},
                    {"type": "tool-call", "id": "c3", "name": "ls", "arguments": "{}"},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool-result", "toolCallId": "c3", "content": []},
                    {"type": "text", "text": "Thanks."},
                    {"type": "text", "text": "Now stop."},
                ],
            },
        ],
    }
    assert received(request)["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "list files", "id": "u1"},  # string content: as is
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "ls", "arguments": '{"d": "."}'}},
                {"id": "c2", "type": "function", "function": {"name": "pwd", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        {"role": "tool", "tool_call_id": "c2", "content": "no such dir"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": ""},
        {"role": "user", "content": "Thanks.\nNow stop."},
    ]  # fmt: skip


def test_openai_messages_pass_through(received: Any) -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "what is in the picture?", "name": "ann"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "x", "content": "done"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "and this?"},
            ],
        },
        {"role": "tool", "tool_call_id": "y", "content": [{"type": "text", "text": "ok"}]},
    ]
    sent = received({"messages": messages})["messages"]
    assert sent[:4] == messages[:4]
    assert sent[4] == messages[4]  # a non-text part keeps the list form
    assert sent[5] == {"role": "tool", "content": "ok", "tool_call_id": "y"}


def test_tools_and_options_are_converted(received: Any) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    openai_tool = {"type": "function", "function": {"name": "g", "parameters": schema}}
    request = {
        **USER,
        "tools": [
            {"name": "read", "description": "Read a file.", "inputSchema": schema},
            {"name": "ls", "parameters": schema},
            {"name": "noargs"},
            openai_tool,
        ],
        "maxTokens": 256,
        "temperature": 0.2,
    }
    body = received(request)
    assert body["tools"] == [
        {"type": "function",
         "function": {"name": "read", "description": "Read a file.", "parameters": schema}},
        {"type": "function", "function": {"name": "ls", "parameters": schema}},
        {"type": "function",
         "function": {"name": "noargs", "parameters": {"type": "object", "properties": {}}}},
        openai_tool,
    ]  # fmt: skip
    assert (body["max_tokens"], body["temperature"]) == (256, 0.2)
    assert received({**USER, "max_tokens": 9})["max_tokens"] == 9


PASSED_THROUGH = {
    "tool_choice": {"type": "function", "function": {"name": "g"}},
    "parallel_tool_calls": False,
    "response_format": {"type": "json_object"},
    "seed": 7,
    "top_p": 0.5,
    "stop": ["END"],
    "stream_options": {"include_usage": False},
    "provider_option": {"x": 1},
}


def test_every_request_key_is_sent_as_it_is(received: Any) -> None:
    body = received({**USER, **PASSED_THROUGH})
    assert {k: body[k] for k in PASSED_THROUGH} == PASSED_THROUGH
    assert body["model"] == "m1"  # the constructor's model replaces the request's


def test_the_requests_model_is_sent_unless_one_is_forced(server: ScriptedServer) -> None:
    answers(Answer(text="ok"), Answer(text="ok"))
    own = OpenAICompatibleModel(base_url=server.base_url + "/v1", api_key=KEY)
    try:
        run(own, {**USER, "model": "asked-for"}, "sync")
        assert server.requests[-1].body["model"] == "asked-for"
        assert server.requests[-1].body["stream_options"] == {"include_usage": True}
        with pytest.raises(ValueError, match="DSH_RECORD_MODEL"):
            run(own, USER, "sync")
    finally:
        own.close()


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        ("hi", TypeError),
        ({}, ValueError),
        ({"messages": "hi"}, ValueError),
        ({"messages": ["hi"]}, ValueError),
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, ValueError),
        ({"messages": [{"role": "user", "content": [{"type": "image", "attachment": {}}]}]},
         ValueError),
        ({**USER, "system": ["not", "a", "string"]}, ValueError),
        ({**USER, "tools": [{"description": "no name"}]}, ValueError),
    ],
)  # fmt: skip
def test_malformed_requests_raise_before_anything_is_sent(
    server: ScriptedServer, model: OpenAICompatibleModel, request_: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        model.stream(request_)
    with pytest.raises(error):
        model.astream(request_)
    assert server.requests == []


def test_abandoned_stream_frees_the_connection(
    server: ScriptedServer, model: OpenAICompatibleModel
) -> None:
    answers(Answer(text="a" * 50, pieces=25), Answer(text="next"))
    stream = model.stream(USER)
    assert next(stream)["type"] == "block-start"
    stream.close()  # type: ignore[attr-defined]
    assert run(model, USER, "sync")[-1] == {"type": "finish", "reason": {"kind": "stop"}}


# --- configuration -------------------------------------------------------------------------


def test_from_env() -> None:
    env = dict(zip(RECORD_ENV_VARS, ["http://127.0.0.1:9/v1", KEY, "deepseek-chat"], strict=True))
    model = OpenAICompatibleModel.from_env(env)
    assert model is not None
    assert (model.base_url, model.model, model.timeout) == (
        "http://127.0.0.1:9/v1",
        "deepseek-chat",
        120.0,
    )
    assert RECORD_ENV_VARS == ("DSH_RECORD_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_MODEL")


@pytest.mark.parametrize("missing", RECORD_ENV_VARS[:2])
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_from_env_without_a_variable_is_none(missing: str, how: str) -> None:
    env = dict(zip(RECORD_ENV_VARS, ["http://127.0.0.1:9/v1", KEY, "m"], strict=True))
    if how == "unset":
        del env[missing]
    else:
        env[missing] = ""
    assert OpenAICompatibleModel.from_env(env) is None


def test_from_env_reads_the_idle_timeout() -> None:
    env = dict(zip(RECORD_ENV_VARS, ["http://127.0.0.1:9/v1", KEY, "m"], strict=True))
    model = OpenAICompatibleModel.from_env({**env, TIMEOUT_VAR: "0.5"})
    assert model is not None
    assert model.timeout == 0.5
    model = OpenAICompatibleModel.from_env({**env, TIMEOUT_VAR: " "})
    assert model is not None
    assert model.timeout == UPSTREAM_IDLE_TIMEOUT_S == 120.0


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf"])
def test_from_env_refuses_an_idle_timeout_that_is_no_number_of_seconds(value: str) -> None:
    env = dict(zip(RECORD_ENV_VARS, ["http://127.0.0.1:9/v1", KEY, "m"], strict=True))
    with pytest.raises(RecordingError, match=rf"DSH_RECORD_TIMEOUT='{value}' is not a number"):
        OpenAICompatibleModel.from_env({**env, TIMEOUT_VAR: value})


def test_an_answer_that_stalls_mid_stream_is_a_timeout_not_a_network_failure(mode: str) -> None:
    with Upstream(Exact([*chat_events("Hel", finish=None), SILENT])) as upstream:
        model = OpenAICompatibleModel(base_url=upstream.base_url, api_key=KEY, timeout=0.2)
        try:
            chunks = run(model, {**USER, "model": "m"}, mode)
        finally:
            model.close()
    assert [c["type"] for c in chunks] == ["block-start", "text-delta", "finish"]
    assert failure(chunks)["code"] == "TIMEOUT"
    assert "sent nothing for 0.2 s" in failure(chunks)["message"]
    assert model.network_failures == []  # the recording holds it; the test does not fail


def test_a_json_error_answering_a_stream_keeps_the_providers_message(mode: str) -> None:
    body = b'{"error": {"message": "the model is overloaded", "type": "server_error"}}'
    with Upstream(Exact([body], content_type="application/json")) as upstream:
        model = OpenAICompatibleModel(base_url=upstream.base_url, api_key=KEY, model="m")
        try:
            chunks = run(model, USER, mode)
        finally:
            model.close()
    assert chunks == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {"message": "the model is overloaded", "code": "UNKNOWN"},
            },
        }
    ]


@pytest.mark.parametrize(
    "options",
    [{"base_url": ""}, {"api_key": ""}, {"model": ""}, {"timeout": 0}, {"timeout": -1.0}],
)
def test_invalid_arguments(options: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", "api_key": KEY, "model": "m"}
    with pytest.raises(ValueError, match=next(iter(options))):
        OpenAICompatibleModel(**{**arguments, **options})


def test_missing_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(RecordingError, match=r"pip install openai \(the plugin's record extra\)"):
        OpenAICompatibleModel(base_url="http://127.0.0.1:9/v1", api_key=KEY, model="m")


# --- a conversation with the scripted model's rules -------------------------------------


def test_a_tool_round_with_the_scripted_models_rules(mode: str) -> None:
    scripted = ScriptedModel(
        [
            Rule(
                lambda seen: Answer(text="tool results: " + "; ".join(seen.tool_results)),
                when=lambda seen: bool(seen.tool_results),
            ),
            Rule(
                Answer(
                    reasoning="calling read; calling ls",
                    tool_calls=[ToolCall("read", '{"path": "a"}'), ToolCall("ls")],
                    pieces=2,
                ),
                prompt="go",
            ),
        ]
    )
    with scripted.serve(idle_timeout=10) as server:
        model = OpenAICompatibleModel(base_url=server.base_url + "/v1", api_key=KEY, model="m")
        try:
            prompt = {"role": "user", "content": "go"}
            first = run(model, {"messages": [prompt]}, mode)
            assert first[-1]["reason"] == {"kind": "tool-calls"}
            calls = [c["block"] for c in first if c["type"] == "block-end"][1:]
            assert [(c["name"], c["arguments"]) for c in calls] == [
                ("read", '{"path": "a"}'),
                ("ls", "{}"),
            ]
            results = [
                {"type": "tool-result", "toolCallId": c["id"],
                 "content": [{"type": "text", "text": f"ran {c['name']}"}]}
                for c in calls
            ]  # fmt: skip
            conversation = [prompt, {"role": "assistant", "content": calls}]
            request = {"messages": [*conversation, {"role": "user", "content": results}]}
            second = run(model, request, mode)
            texts = [c["block"]["text"] for c in second if c["type"] == "block-end"]
            assert texts == ["tool results: ran read; ran ls"]
            assert run(model, {"messages": [prompt]}, mode) == first  # deterministic
        finally:
            model.close()


def test_a_failure_once_then_the_answer() -> None:
    scripted = ScriptedModel(
        [
            Rule(ProviderFailure(503), prompt="hello", times=1),
            Rule(Answer(reasoning="hm", text="echo: hello"), prompt="hello"),
        ]
    )
    request = {"messages": [{"role": "user", "content": "hello"}]}
    with scripted.serve(idle_timeout=10) as server:
        model = OpenAICompatibleModel(base_url=server.base_url + "/v1", api_key=KEY, model="m")
        try:
            assert failure(run(model, request, "sync"))["code"] == "OVERLOADED"
            ends = [c["block"] for c in run(model, request, "sync") if c["type"] == "block-end"]
        finally:
            model.close()
    assert ends == [{"type": "reasoning", "text": "hm"}, {"type": "text", "text": "echo: hello"}]


def test_from_env_without_a_model_sends_each_requests_own() -> None:
    env = {"DSH_RECORD_BASE_URL": "http://127.0.0.1:9/v1", "DSH_RECORD_API_KEY": KEY}
    model = OpenAICompatibleModel.from_env(env)
    assert model is not None
    assert model.model is None
