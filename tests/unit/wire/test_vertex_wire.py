"""The Vertex AI wires: Gemini (google-genai ``vertexai=True``) and Anthropic (AnthropicVertex).

Routes, requests read with the model from the path, answers decoded by the SDKs' own
clients (sync and async), errors in the providers' shapes, live streams and errors decoded
for recording, the URL a recorded call goes to, the variables, and no call leaving the
process (google-auth is never asked for credentials or a token).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from support.scenarios import one_session

genai = pytest.importorskip("google.genai", reason="the Vertex Gemini client is google-genai")
anthropic = pytest.importorskip("anthropic", reason="AnthropicVertex is in the anthropic SDK")
from google.genai import errors, types  # noqa: E402
from support.chunks import text_call  # noqa: E402

from pytest_dsh_replay import Answer, Rule, ScriptedModel  # noqa: E402
from pytest_dsh_replay._endpoint.endpoint import Endpoint  # noqa: E402
from pytest_dsh_replay._endpoint.transport import (  # noqa: E402
    endpoint_env,
    sdk_client,
    sync_transport,
    worker_pool,
)
from pytest_dsh_replay._errors import UnservedRouteError  # noqa: E402
from pytest_dsh_replay._replay.model import ReplayModel  # noqa: E402
from pytest_dsh_replay._scripts.entries import ChunksEntry, ReplayEntry  # noqa: E402
from pytest_dsh_replay._wire.anthropic import anthropic_failure  # noqa: E402
from pytest_dsh_replay._wire.base import httpx_module  # noqa: E402
from pytest_dsh_replay._wire.table import (  # noqa: E402
    closest_route,
    list_wire,
    served_routes,
    wire_for,
    wire_named,
)
from pytest_dsh_replay._wire.vertex import WIRE as VERTEX  # noqa: E402
from pytest_dsh_replay._wire.vertex import vertex_upstream  # noqa: E402
from pytest_dsh_replay._wire.vertex_anthropic import WIRE as CLAUDE  # noqa: E402

SCOPE = "/projects/p/locations/us-central1/publishers"
GEMINI_STREAM = f"/v1beta1{SCOPE}/google/models/gemini-x:streamGenerateContent"
CLAUDE_STREAM = f"/v1{SCOPE}/anthropic/models/claude-x:streamRawPredict"

TOOL: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "tool-call"},
    {"type": "tool-call-delta", "index": 0, "id": "call_1", "name": "add", "argumentsDelta": ""},
    {"type": "tool-call-delta", "index": 0, "id": "call_1", "argumentsDelta": '{"a": 2, "b": 3}'},
    {
        "type": "block-end",
        "index": 0,
        "block": {
            "type": "tool-call",
            "id": "call_1",
            "name": "add",
            "arguments": '{"a": 2, "b": 3}',
        },
    },
    {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 4}},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
]
TEXT = text_call("It is 5.", usage={"inputTokens": 9, "outputTokens": 3})
RATE_LIMITED: dict[str, Any] = {
    "message": "slow down",
    "code": "RATE_LIMIT",
    "providerRetryAfterMs": 2000,
}


single = partial(one_session, path=Path("mem"), recorded_id="rec", first="add 2 and 3")
"""One primary session of ``entries`` (``first=`` another first user message)."""


def replaying(*entries: ReplayEntry) -> tuple[ReplayModel, Endpoint]:
    model = ReplayModel(single(*entries))
    return model, Endpoint.replaying(model)


def raw_client(endpoint: Endpoint) -> Any:
    return httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No socket connects but to 127.0.0.1, google-auth is never asked: nothing leaves."""

    connect = socket.socket.connect

    def loopback_only(sock: socket.socket, address: Any) -> None:
        if not (isinstance(address, tuple) and address[0] == "127.0.0.1"):
            raise AssertionError(f"a network connection was attempted: {address}")
        connect(sock, address)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("google-auth was asked for credentials")

    monkeypatch.setattr(socket.socket, "connect", loopback_only)
    monkeypatch.setattr("google.auth.default", refuse)


# --- routes ---------------------------------------------------------------------------------


def test_the_vertex_routes_and_the_model_list_are_served() -> None:
    for version in ("v1", "v1beta1"):
        for method in ("streamGenerateContent", "generateContent"):
            assert wire_for(f"/{version}{SCOPE}/google/models/gemini-x:{method}") is VERTEX
            assert wire_for(f"/{version}/publishers/google/models/g:{method}?alt=sse") is VERTEX
        assert list_wire(f"/{version}/publishers/google/models", {}) is VERTEX
    for verb in ("streamRawPredict", "rawPredict"):
        assert wire_for(f"/v1{SCOPE}/anthropic/models/claude-x%40001:{verb}") is CLAUDE
    assert wire_for("/v1beta/models/gemini-x:generateContent") is wire_named("gemini")
    assert wire_named("vertex") is VERTEX
    assert wire_named("anthropic-vertex") is CLAUDE
    served = served_routes()
    assert "GET /v1beta1/publishers/google/models" in served
    route = "/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}"
    assert f"POST {route}:streamRawPredict" in served


def test_an_unserved_vertex_route_is_a_404_naming_the_closest() -> None:
    _, endpoint = replaying(ChunksEntry(TEXT))
    path = f"/v1{SCOPE}/anthropic/models/claude-x:countTokens"
    response = raw_client(endpoint).post(path, json={})
    assert response.status_code == 404
    message = response.json()["error"]["message"]
    assert "publishers/anthropic/models/{model}:rawPredict" in message
    assert closest_route("POST", path) is not None
    assert "anthropic" in str(closest_route("POST", path))


def test_the_scripted_server_speaks_both_vertex_wires_and_checks_the_bearer_token() -> None:
    model = ScriptedModel([Rule(Answer(text="It is 5."))])
    gemini = {"contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}]}
    claude = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 9, "stream": True,
              "messages": [{"role": "user", "content": "add 2 and 3"}]}  # fmt: skip
    served = pytest.raises(UnservedRouteError, match="closest is POST .*:streamRawPredict")
    with (
        served,
        contextlib.ExitStack() as closing,
        model.serve(api_key="tok", idle_timeout=30) as server,
    ):
        assert server.env["GOOGLE_VERTEX_BASE_URL"] == server.base_url
        http = httpx_module().Client(base_url=server.base_url)
        closing.callback(http.close)
        refused = http.post(GEMINI_STREAM, json=gemini)
        assert (refused.status_code, refused.json()["error"]["status"]) == (401, "UNAUTHENTICATED")
        bearer = {"authorization": "Bearer tok"}
        streamed = http.post(GEMINI_STREAM + "?alt=sse", json=gemini, headers=bearer)
        frames = VERTEX.framing.splitter().feed_raw(streamed.content)
        decoder = VERTEX.decoder()
        chunks = [c for f in frames for c in decoder.feed(json.loads(f.data or ""))]
        assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "It is 5."
        answered = http.post(CLAUDE_STREAM, json=claude, headers=bearer)
        assert b"event: message_stop" in answered.content
        unserved = http.post(CLAUDE_STREAM.replace("Raw", ""), json={}, headers=bearer)
        assert unserved.status_code == 404
        assert "publishers/anthropic/models/{model}:streamRawPredict" in unserved.text
    assert [r.path.rsplit(":", 1)[1] for r in server.requests][1:3] == [
        "streamGenerateContent?alt=sse",
        "streamRawPredict",
    ]


# --- reading requests ---------------------------------------------------------------------


def test_a_vertex_gemini_body_is_read_with_the_model_from_the_path() -> None:
    body = {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "add"}]},
            {"role": "model", "parts": [{"functionCall": {"id": "c1", "name": "add", "args": {}}}]},
            {
                "role": "user",
                "parts": [{"functionResponse": {"id": "c1", "name": "add", "response": {"r": 5}}}],
            },
        ],
        "tools": [{"functionDeclarations": [{"name": "add"}]}],
    }
    request = VERTEX.canonical(body, path=GEMINI_STREAM + "?alt=sse", history=None)  # type: ignore[arg-type]
    assert (request["model"], request["stream"]) == ("gemini-x", True)
    assert [m["role"] for m in request["messages"]] == ["system", "user", "assistant", "tool"]
    assert request["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": '{"r":5}'}
    assert request["tools"] == [{"type": "function", "function": {"name": "add"}}]


def test_an_anthropic_vertex_body_takes_its_model_from_the_path() -> None:
    body = {
        "anthropic_version": "vertex-2023-10-16",
        "max_tokens": 10,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "add"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "add", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "5"}],
            },
        ],
    }
    path = f"/v1{SCOPE}/anthropic/models/claude-x%40001:rawPredict"
    request = CLAUDE.canonical(dict(body), path=path, history=None)  # type: ignore[arg-type]
    assert (request["model"], request["stream"]) == ("claude-x@001", False)
    assert request["system"] == "Be brief."
    assert request["messages"] == body["messages"]
    streamed = CLAUDE.canonical(dict(body), path=CLAUDE_STREAM, history=None)  # type: ignore[arg-type]
    assert (streamed["model"], streamed["stream"]) == ("claude-x", True)
    refused = raw_client(replaying()[1]).post(CLAUDE_STREAM, json={**body, "messages": "x"})
    assert refused.status_code == 400
    assert refused.json()["type"] == "error"  # Anthropic's error shape


# --- google-genai vertexai=True -------------------------------------------------------------


def _contents() -> list[types.Content]:
    return [types.Content(role="user", parts=[types.Part.from_text(text="add 2 and 3")])]


def _with_result(contents: list[types.Content], answer: types.Content) -> list[types.Content]:
    result = types.Part.from_function_response(name="add", response={"result": 5})
    return [*contents, answer, types.Content(role="user", parts=[result])]


def test_google_genai_on_vertex_calls_a_function_then_streams_the_answer() -> None:
    model, endpoint = replaying(ChunksEntry(TOOL), ChunksEntry(TEXT))
    client = sdk_client("vertex", endpoint, None, {})
    assert isinstance(client, genai.Client)
    assert client.vertexai
    first = client.models.generate_content(model="gemini-x", contents=_contents())
    assert [(c.id, c.name, c.args) for c in first.function_calls or ()] == [
        ("call_1", "add", {"a": 2, "b": 3})
    ]
    assert first.candidates
    assert first.candidates[0].content
    contents = _with_result(_contents(), first.candidates[0].content)
    pieces = list(client.models.generate_content_stream(model="gemini-x", contents=contents))
    assert "".join(p.text or "" for p in pieces) == "It is 5."
    assert pieces[-1].usage_metadata is not None
    assert pieces[-1].usage_metadata.candidates_token_count == 3
    assert [m.name for m in client.models.list()] == ["publishers/google/models/gemini-x"]
    assert endpoint.errors == []
    model.assert_consumed()
    assert len(model.bindings) == 1


def test_the_async_vertex_client_is_the_aio_face() -> None:
    model, endpoint = replaying(ChunksEntry(TOOL), ChunksEntry(TEXT))
    pool = worker_pool()

    async def main() -> str:
        client: Any = sdk_client("vertex", endpoint, pool, {})
        first = await client.models.generate_content(model="gemini-x", contents=_contents())
        contents = _with_result(_contents(), first.candidates[0].content)
        text = ""
        async for piece in await client.models.generate_content_stream(
            model="gemini-x", contents=contents
        ):
            text += piece.text or ""
        return text

    try:
        assert asyncio.run(main()) == "It is 5."
    finally:
        pool.shutdown()
    model.assert_consumed()


def test_a_vertex_failure_is_googles_error_and_decodes_back() -> None:
    failed = ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": RATE_LIMITED}}])
    _, endpoint = replaying(failed, failed)
    response = raw_client(endpoint).post(
        GEMINI_STREAM, json={"contents": [{"parts": [{"text": "add 2 and 3"}]}]}
    )
    assert response.status_code == 429
    assert response.json()["error"]["status"] == "RESOURCE_EXHAUSTED"
    decoded = VERTEX.failure(429, response.json(), dict(response.headers))
    assert (decoded["code"], decoded["providerRetryAfterMs"]) == ("RATE_LIMIT", 2000)
    client: Any = sdk_client("vertex", endpoint, None, {})
    with pytest.raises(errors.ClientError, match="slow down"):
        client.models.generate_content(model="gemini-x", contents=_contents())


def test_a_live_vertex_stream_decodes_to_the_chunks_it_carries() -> None:
    _, endpoint = replaying(ChunksEntry(TOOL))
    raw = raw_client(endpoint).post(
        GEMINI_STREAM, json={"contents": [{"parts": [{"text": "add 2 and 3"}]}]}
    )
    decoder = VERTEX.decoder()
    split = list(VERTEX.framing.splitter().feed_raw(raw.content))  # as the proxy splits it
    frames = [json.loads(frame.data or "") for frame in split]
    chunks = [c for frame in frames for c in decoder.feed(frame)]
    assert [VERTEX.ends_answer(f, e) for f, e in zip(split, frames, strict=True)][-2:] == [
        False,
        True,
    ]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}
    ends = [c["block"] for c in chunks if c["type"] == "block-end"]
    assert ends == [
        {"type": "tool-call", "id": "call_1", "name": "add", "arguments": '{"a":2,"b":3}'}
    ]
    error = {"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}
    assert VERTEX.stream_failure(error) == {"message": "busy", "code": "OVERLOADED", "status": 503}


# --- AnthropicVertex -----------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_vertex_calls_a_tool_then_answers(stream: bool) -> None:
    model, endpoint = replaying(ChunksEntry(TOOL), ChunksEntry(TEXT))
    client = sdk_client("anthropic-vertex", endpoint, None, {})
    assert isinstance(client, anthropic.AnthropicVertex)
    tools = [{"name": "add", "input_schema": {"type": "object"}}]
    messages: list[Any] = [{"role": "user", "content": "add 2 and 3"}]
    first = client.messages.create(
        model="claude-x@001", max_tokens=64, messages=messages, tools=tools
    )
    (use,) = [b for b in first.content if b.type == "tool_use"]
    assert (use.id, use.name, use.input, first.stop_reason) == (
        "call_1",
        "add",
        {"a": 2, "b": 3},
        "tool_use",
    )
    assert first.model == "claude-x@001"
    messages += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "5"}],
        },
    ]
    if stream:
        with client.messages.stream(
            model="claude-x@001", max_tokens=64, messages=messages, tools=tools
        ) as events:
            answer = events.get_final_message()
    else:
        answer = client.messages.create(
            model="claude-x@001", max_tokens=64, messages=messages, tools=tools
        )
    assert answer.content[0].text == "It is 5."
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (9, 3)
    assert endpoint.errors == []
    model.assert_consumed()
    assert len(model.bindings) == 1


def test_the_async_anthropic_vertex_client() -> None:
    model, endpoint = replaying(ChunksEntry(TEXT))
    pool = worker_pool()

    async def main() -> str:
        client: Any = sdk_client("anthropic-vertex", endpoint, pool, {})
        assert isinstance(client, anthropic.AsyncAnthropicVertex)
        message = await client.messages.create(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "add 2 and 3"}]
        )
        return str(message.content[0].text)

    try:
        assert asyncio.run(main()) == "It is 5."
    finally:
        pool.shutdown()
    model.assert_consumed()


def test_an_anthropic_vertex_failure_is_anthropics_error() -> None:
    failed = ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": RATE_LIMITED}}])
    _, endpoint = replaying(failed)
    client: Any = sdk_client("anthropic-vertex", endpoint, None, {"max_retries": 0})
    with pytest.raises(anthropic.RateLimitError, match="slow down"):
        client.messages.create(
            model="claude-x", max_tokens=64, messages=[{"role": "user", "content": "add 2 and 3"}]
        )


def test_live_anthropic_vertex_errors_of_both_shapes_decode() -> None:
    google = {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
    assert CLAUDE.failure(429, google, {})["code"] == "RATE_LIMIT"
    assert (
        CLAUDE.failure(
            403, {"error": {"code": 403, "message": "no", "status": "PERMISSION_DENIED"}}, {}
        )["code"]
        == "AUTH"
    )
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "busy"}}
    assert CLAUDE.failure(529, overloaded, {}) == anthropic_failure(529, overloaded, {})
    assert CLAUDE.failure(500, "not json", {})["status"] == 500


def test_a_live_anthropic_vertex_stream_decodes_to_the_chunks_it_carries() -> None:
    _, endpoint = replaying(ChunksEntry(TOOL))
    body = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 9, "stream": True,
            "messages": [{"role": "user", "content": "add 2 and 3"}]}  # fmt: skip
    raw = raw_client(endpoint).post(CLAUDE_STREAM, json=body)
    decoder = CLAUDE.decoder()
    split = list(CLAUDE.framing.splitter().feed_raw(raw.content))  # as the proxy splits it
    frames = [json.loads(frame.data or "") for frame in split]
    chunks = [c for frame in frames for c in decoder.feed(frame)]
    assert [f.name for f in split if CLAUDE.ends_answer(f, None)] == ["message_stop"]
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}
    assert frames[0]["message"]["model"] == "claude-x"


# --- recording: where calls go, and how they authenticate ------------------------------------


def test_the_upstream_url_keeps_the_project_and_location_path() -> None:
    live = "https://us-central1-aiplatform.googleapis.com"
    scoped = f"{live}/v1/projects/real/locations/europe-west4"
    assert vertex_upstream(scoped, GEMINI_STREAM, None, stream_query="alt=sse") == (
        f"{scoped}/publishers/google/models/gemini-x:streamGenerateContent?alt=sse"
    )
    assert vertex_upstream(
        live, GEMINI_STREAM + "?alt=sse", "gemini-y", stream_query="alt=sse"
    ) == (f"{live}/v1beta1{SCOPE}/google/models/gemini-y:streamGenerateContent?alt=sse")
    assert (
        vertex_upstream(f"{live}/v1/", CLAUDE_STREAM, None)
        == f"{live}/v1{SCOPE}/anthropic/models/claude-x:streamRawPredict"
    )
    assert vertex_upstream(f"{live}/v1beta1?x=1", CLAUDE_STREAM, "c@2") == (
        f"{live}/v1beta1{SCOPE}/anthropic/models/c@2:streamRawPredict?x=1"
    )
    body = b'{"anthropic_version":"vertex-2023-10-16"}'
    assert CLAUDE.upstream(scoped, CLAUDE_STREAM, body, "c2") == (
        f"{scoped}/publishers/anthropic/models/c2:streamRawPredict",
        body,
    )  # the model stays in the path, the body unchanged
    assert VERTEX.upstream(live, GEMINI_STREAM, b"{}", None)[1] == b"{}"
    for wire in (VERTEX, CLAUDE):
        assert wire.auth_headers("tok") == {"authorization": "Bearer tok"}


# --- the variables an agent process reads ------------------------------------------------------


def test_the_variables_point_both_vertex_clients_at_the_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = endpoint_env("http://dsh-replay.invalid")
    assert env["GOOGLE_VERTEX_BASE_URL"] == "http://dsh-replay.invalid"
    assert env["ANTHROPIC_VERTEX_BASE_URL"] == "http://dsh-replay.invalid/v1"
    assert "GOOGLE_GENAI_USE_VERTEXAI" not in env  # a plain genai.Client() stays on Gemini
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    models = [ReplayModel(single(ChunksEntry(TEXT))) for _ in range(2)]
    endpoints = iter([Endpoint.replaying(model) for model in models])

    def http() -> Any:  # each client on an endpoint of its own (one session each)
        return httpx_module().Client(transport=sync_transport(next(endpoints)))

    claude = anthropic.AnthropicVertex(access_token="t", http_client=http())
    said = claude.messages.create(
        model="c", max_tokens=9, messages=[{"role": "user", "content": "add 2 and 3"}]
    )
    assert said.content[0].text == "It is 5."
    from google.oauth2.credentials import Credentials

    gemini = genai.Client(
        vertexai=True,
        project=env["GOOGLE_CLOUD_PROJECT"],
        location=env["GOOGLE_CLOUD_LOCATION"],
        credentials=Credentials(token="t"),  # type: ignore[no-untyped-call]
        http_options=types.HttpOptions(httpx_client=http()),
    )
    assert gemini.models.generate_content(model="g", contents="add 2 and 3").text == "It is 5."
    assert genai.Client().vertexai is False  # the plain client is not switched to Vertex
    for model in models:
        model.assert_consumed()
