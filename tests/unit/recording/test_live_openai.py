"""The OpenAI-compatible live model, against the loopback server of support.openai_server."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from typing import Any

import pytest
from support.openai_server import (
    HttpError,
    OpenAIServer,
    Reply,
    ScriptedResponder,
    ToolCall,
    replies,
)

from pytest_dsh_replay._errors import RecordingError
from pytest_dsh_replay._recording.live_openai import RECORD_ENV_VARS, OpenAICompatibleModel

KEY = "sk-live-test-0123456789abcdef"
USER = {"messages": [{"role": "user", "content": "hi"}]}

Chunks = list[dict[str, Any]]


def run(model: OpenAICompatibleModel, request: Any, mode: str, **kwargs: Any) -> Chunks:
    """Read one call to the end, through ``stream`` or ``astream``."""
    if mode == "sync":
        return list(model.stream(request, **kwargs))

    async def read() -> Chunks:
        return [chunk async for chunk in model.astream(request, **kwargs)]

    return asyncio.run(read())


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def shared() -> Iterator[tuple[OpenAIServer, OpenAICompatibleModel]]:
    """One server and one model for the module; each test scripts its own replies."""
    with OpenAIServer(idle_timeout=30) as server:
        model = OpenAICompatibleModel(base_url=server.base_url, api_key=KEY, model="m1")
        try:
            yield server, model
        finally:
            model.close()


@pytest.fixture
def server(shared: tuple[OpenAIServer, OpenAICompatibleModel]) -> OpenAIServer:
    server = shared[0]
    server.requests.clear()
    server.responder = replies()
    return server


@pytest.fixture
def model(shared: tuple[OpenAIServer, OpenAICompatibleModel], server: OpenAIServer) -> Any:
    return shared[1]


@pytest.fixture
def call(server: OpenAIServer, model: OpenAICompatibleModel) -> Any:
    """``call(reply, mode, request=USER)``: one request answered with ``reply``."""

    def call(reply: Reply, mode: str = "sync", request: Any = USER) -> Chunks:
        server.responder = replies(reply)
        return run(model, request, mode)

    return call


@pytest.fixture
def received(server: OpenAIServer, model: OpenAICompatibleModel) -> Any:
    """``received(request, **options)``: the JSON body the server got for ``request``."""

    def received(request: Any, **options: Any) -> dict[str, Any]:
        server.requests.clear()
        server.responder = replies(Reply(text="ok"))
        own = (
            OpenAICompatibleModel(base_url=server.base_url, api_key=KEY, model="m1", **options)
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


def failure(chunks: Chunks) -> dict[str, Any]:
    assert chunks[-1]["type"] == "finish"
    assert chunks[-1]["reason"]["kind"] == "error"
    result: dict[str, Any] = chunks[-1]["reason"]["failure"]
    return result


# --- streaming content -------------------------------------------------------------------


def test_text_streams_as_one_text_block(call: Any, mode: str) -> None:
    chunks = call(Reply(text="Hello there!", pieces=4, usage=_usage(5, 3)), mode)
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
    chunks = call(Reply(reasoning="think", text="ok", pieces=2, send_usage=False), mode)
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
def test_parallel_tool_calls_are_tool_call_blocks(call: Any, mode: str, interleave: bool) -> None:
    calls = [ToolCall("read", '{"path": "a.txt"}', "call_a"), ToolCall("ls", "{}", "call_b")]
    reply = Reply(text="Let me look.", tool_calls=calls, pieces=3, interleave=interleave)
    chunks = call(reply, mode)
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
    chunks = call(Reply(reasoning="a", text="b", pieces=1), "sync")
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
            _usage(8427, 99, prompt_cache_hit_tokens=8064, prompt_cache_miss_tokens=363,
                   completion_tokens_details={"reasoning_tokens": 20}),
            {"inputTokens": 363, "outputTokens": 99, "cacheReadTokens": 8064,
             "reasoningTokens": 20},
            id="deepseek",
        ),
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
def test_usage_mapping(call: Any, usage: dict[str, Any], expected: dict[str, Any]) -> None:
    chunks = call(Reply(text="x", usage=usage))
    assert chunks[-2] == {"type": "usage", "usage": expected}
    assert list(chunks[-2]["usage"]) == list(expected)  # key order as dsh writes it


def test_no_usage_chunk_when_the_provider_sends_none(call: Any) -> None:
    chunks = call(Reply(text="x", send_usage=False), "sync")
    assert [c["type"] for c in chunks][-2:] == ["block-end", "finish"]


# --- finish reasons ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(text="x", finish_reason="stop"), {"kind": "stop"}),
        (Reply(tool_calls=[ToolCall("t")], finish_reason="tool_calls"), {"kind": "tool-calls"}),
        (Reply(tool_calls=[ToolCall("t")], finish_reason="stop"), {"kind": "tool-calls"}),
        (Reply(text="x", finish_reason="length"), {"kind": "max-tokens"}),
        (Reply(reasoning="only thinking", finish_reason="length"), {"kind": "max-tokens"}),
    ],
    ids=["stop", "tool_calls", "stop-with-tool-calls", "length", "length-in-reasoning"],
)
def test_finish_reasons(call: Any, reply: Reply, reason: dict[str, Any]) -> None:
    assert call(reply)[-1] == {"type": "finish", "reason": reason}


@pytest.mark.parametrize(
    ("finish_reason", "code"),
    [
        ("content_filter", "CONTENT_FILTER"),
        ("insufficient_system_resource", "OVERLOADED"),
        ("something_new", "UNKNOWN"),
        ("", "UNKNOWN"),  # the stream ended without any finish reason
    ],
)
def test_other_finish_reasons_are_errors(call: Any, finish_reason: str, code: str) -> None:
    chunks = call(Reply(text="partial", finish_reason=finish_reason))
    assert chunks[-3]["block"] == {"type": "text", "text": "partial"}  # content is kept
    assert chunks[-2]["type"] == "usage"
    assert failure(chunks)["code"] == code
    assert "status" not in failure(chunks)


def test_empty_response_is_an_error(call: Any, mode: str) -> None:
    chunks = call(Reply(usage=_usage(4, 0)), mode)
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


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (HttpError(401, "Authentication Fails, Your api key is invalid"), "AUTH"),
        (HttpError(403, "forbidden"), "AUTH"),
        (HttpError(429, "Rate limit reached"), "RATE_LIMIT"),
        (HttpError(400, CONTEXT, type="invalid_request_error"), "CONTEXT_WINDOW_EXCEEDED"),
        (HttpError(400, "too long", code="context_length_exceeded"), "CONTEXT_WINDOW_EXCEEDED"),
        (HttpError(400, "Invalid max_tokens value, the valid range is [1, 8192]"), "UNKNOWN"),
        (HttpError(404, "Model Not Exist"), "UNKNOWN"),
        (HttpError(500, "internal"), "UNKNOWN"),
        (HttpError(503, "Server overloaded"), "OVERLOADED"),
        (HttpError(529, "Overloaded"), "OVERLOADED"),
    ],
    ids=lambda v: str(v.status) if isinstance(v, HttpError) else str(v),
)
def test_http_errors_become_an_error_finish(call: Any, error: HttpError, code: str) -> None:
    chunks = call(Reply(error=error))
    assert chunks == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": error.message,
                    "code": code,
                    "status": error.status,
                    "requestId": failure(chunks)["requestId"],
                },
            },
        }
    ]


def test_async_maps_finishes_and_failures_like_sync(call: Any) -> None:
    cases = [
        Reply(text="x", finish_reason="length"),
        Reply(text="x", finish_reason="content_filter"),
        Reply(error=HttpError(400, CONTEXT)),
        Reply(error=HttpError(503, "busy", retry_after="1")),
    ]
    for reply in cases:
        expected = call(reply, "sync")
        got = call(reply, "async")
        if "failure" in expected[-1]["reason"]:
            expected[-1]["reason"]["failure"].pop("requestId", None)
            got[-1]["reason"]["failure"].pop("requestId", None)
        assert got == expected


def test_retry_after_seconds(call: Any, mode: str) -> None:
    chunks = call(Reply(error=HttpError(429, "slow down", retry_after="2.5")), mode)
    assert failure(chunks)["providerRetryAfterMs"] == 2500
    assert list(failure(chunks)) == [
        "message", "code", "status", "providerRetryAfterMs", "requestId",
    ]  # fmt: skip


def test_retry_after_http_date(call: Any) -> None:
    when = format_datetime(datetime.now(timezone.utc) + timedelta(hours=1), usegmt=True)
    chunks = call(Reply(error=HttpError(503, "busy", retry_after=when)), "sync")
    assert 3_500_000 < failure(chunks)["providerRetryAfterMs"] <= 3_600_000


@pytest.mark.parametrize("value", ["0", "soon", "-3"])
def test_unusable_retry_after_is_left_out(call: Any, value: str) -> None:
    chunks = call(Reply(error=HttpError(429, "slow down", retry_after=value)), "sync")
    assert "providerRetryAfterMs" not in failure(chunks)


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


def test_timeout_is_a_network_error(server: OpenAIServer, mode: str) -> None:
    # The reply is held until the client has given up: no race between a delay and the
    # timeout (a client that never times out gets "late" after HOLD_CAP_S and fails).
    released = threading.Event()
    server.responder = replies(Reply(text="late", hold=released))
    slow = OpenAICompatibleModel(base_url=server.base_url, api_key=KEY, model="m", timeout=0.15)
    try:
        chunks = run(slow, USER, mode)
    finally:
        released.set()
        slow.close()
    assert failure(chunks)["code"] == "NETWORK"
    assert "status" not in failure(chunks)


def test_error_event_mid_stream_keeps_the_chunks_already_sent(call: Any, mode: str) -> None:
    chunks = call(Reply(text="abcdef", pieces=2, stream_error="upstream died"), mode)
    assert chunks[:3] == [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "abc"},
        {"type": "text-delta", "index": 0, "text": "def"},
    ]
    assert len(chunks) == 4  # no block-end for the unfinished block, no usage
    assert failure(chunks) == {"message": "upstream died", "code": "UNKNOWN"}


def test_connection_cut_mid_stream_is_a_network_error(call: Any, mode: str) -> None:
    chunks = call(Reply(text="abcdef", pieces=2, cut_off=True), mode)
    assert [c["type"] for c in chunks] == ["block-start", "text-delta", "text-delta", "finish"]
    assert failure(chunks)["code"] == "NETWORK"


def test_wrong_key_is_auth_and_the_key_is_never_echoed(call: Any, mode: str) -> None:
    echo = Reply(error=HttpError(401, f"Incorrect API key provided: {KEY}"))
    assert failure(call(echo, mode))["message"] == "Incorrect API key provided: [REDACTED]"
    with OpenAIServer(api_key="another-key", idle_timeout=10) as server:
        model = OpenAICompatibleModel(base_url=server.base_url, api_key=KEY, model="m")
        try:
            assert failure(run(model, USER, mode))["code"] == "AUTH"
        finally:
            model.close()


# --- requests ------------------------------------------------------------------------------


def test_request_basics_and_the_key_only_in_the_authorization_header(
    server: OpenAIServer, mode: str
) -> None:
    server.responder = replies(Reply(text="x"), Reply(text="y"))
    model = OpenAICompatibleModel(
        base_url=server.base_url, api_key=KEY, model="m1", extra_body={"thinking": {"x": 1}}
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
        assert KEY.encode() not in seen.raw
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


def test_the_requests_model_is_sent_unless_one_is_forced(server: OpenAIServer) -> None:
    server.responder = replies(Reply(text="ok"), Reply(text="ok"))
    own = OpenAICompatibleModel(base_url=server.base_url, api_key=KEY)
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
    server: OpenAIServer, model: OpenAICompatibleModel, request_: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        model.stream(request_)
    with pytest.raises(error):
        model.astream(request_)
    assert server.requests == []


def test_abandoned_stream_frees_the_connection(
    server: OpenAIServer, model: OpenAICompatibleModel
) -> None:
    server.responder = replies(Reply(text="a" * 50, pieces=25), Reply(text="next"))
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
    with pytest.raises(RecordingError, match=r"pip install 'pytest-dsh-replay\[record\]'"):
        OpenAICompatibleModel(base_url="http://127.0.0.1:9/v1", api_key=KEY, model="m")


# --- the test server itself ----------------------------------------------------------------


def test_scripted_responder_drives_a_tool_round(
    server: OpenAIServer, model: OpenAICompatibleModel, mode: str
) -> None:
    server.responder = ScriptedResponder(pieces=2)
    prompt = {"role": "user", "content": 'go [[tool read {"path": "a"}]] [[tool ls]]'}
    first = run(model, {"messages": [prompt]}, mode)
    assert first[-1]["reason"] == {"kind": "tool-calls"}
    calls = [c["block"] for c in first if c["type"] == "block-end"][1:]
    assert [(c["name"], c["arguments"]) for c in calls] == [("read", '{"path": "a"}'), ("ls", "{}")]
    results = [
        {"type": "tool-result", "toolCallId": c["id"],
         "content": [{"type": "text", "text": f"ran {c['name']}"}]}
        for c in calls
    ]  # fmt: skip
    conversation = [prompt, {"role": "assistant", "content": calls}]
    second = run(model, {"messages": [*conversation, {"role": "user", "content": results}]}, mode)
    texts = [c["block"]["text"] for c in second if c["type"] == "block-end"]
    assert texts == ["tool results: ran read; ran ls"]
    assert run(model, {"messages": [prompt]}, mode) == first  # deterministic


def test_scripted_responder_fails_once_then_answers(
    server: OpenAIServer, model: OpenAICompatibleModel
) -> None:
    server.responder = ScriptedResponder()
    request = {"messages": [{"role": "user", "content": "hello [[fail 503]][[think hm]]"}]}
    assert failure(run(model, request, "sync"))["code"] == "OVERLOADED"
    ends = [c["block"] for c in run(model, request, "sync") if c["type"] == "block-end"]
    assert ends == [{"type": "reasoning", "text": "hm"}, {"type": "text", "text": "echo: hello"}]


def test_server_answers_without_streaming_too(server: OpenAIServer) -> None:
    server.responder = replies(
        Reply(reasoning="r", text="t", tool_calls=[ToolCall("f", "{}", "c1")])
    )
    data = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]})
    http = urllib.request.Request(
        server.base_url + "/chat/completions",
        data=data.encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(http, timeout=5) as response:
        body = json.loads(response.read())
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(server.base_url + "/models", timeout=5)
    error.value.close()
    assert error.value.code == 404
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "t",
        "reasoning_content": "r",
        "tool_calls": [call],
    }
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_server_stops_by_itself_when_idle() -> None:
    server = OpenAIServer(idle_timeout=0.1).start()
    deadline = time.monotonic() + 3
    while server.running and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not server.running
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", server.port))
    server.stop()  # idempotent


def test_server_stops_on_exit_and_binds_loopback_only() -> None:
    with OpenAIServer(idle_timeout=10) as server:
        assert server.running
        assert server.base_url.startswith("http://127.0.0.1:")
    assert not server.running


def test_from_env_without_a_model_sends_each_requests_own() -> None:
    env = {"DSH_RECORD_BASE_URL": "http://127.0.0.1:9/v1", "DSH_RECORD_API_KEY": KEY}
    model = OpenAICompatibleModel.from_env(env)
    assert model is not None
    assert model.model is None
