"""The Gemini wire: reading requests, encoding and decoding, errors, google-genai in process."""

from __future__ import annotations

import asyncio
import json
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors, types
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus
from support.scenarios import one_session

from pytest_dsh_replay import load_scenario
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sdk_client, sync_transport, worker_pool
from pytest_dsh_replay._errors import DshReplayError, ReplayCancelledError
from pytest_dsh_replay._format.reply import assemble_reply
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, HangEntry, ThrowEntry
from pytest_dsh_replay._wire.base import httpx_module
from pytest_dsh_replay._wire.framing import Frame
from pytest_dsh_replay._wire.gemini import (
    WIRE,
    GeminiDecoder,
    call_id_for,
    gemini_failure,
    gemini_request,
    gemini_upstream,
)
from pytest_dsh_replay._wire.table import list_wire, wire_for

GOAL = "goal-0c0ffee0-1234"
STREAM = "/v1beta/models/gemini-x:streamGenerateContent"

TOOL: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "reasoning"},
    {"type": "reasoning-delta", "index": 0, "text": "think"},
    {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "think"}},
    {"type": "block-start", "index": 1, "blockType": "tool-call"},
    {
        "type": "tool-call-delta",
        "index": 1,
        "id": "call_1",
        "name": "add",
        "argumentsDelta": '{"a"',
    },
    {"type": "tool-call-delta", "index": 1, "id": "call_1", "argumentsDelta": ": 2, "},
    {"type": "tool-call-delta", "index": 1, "id": "call_1", "argumentsDelta": '"b": 3}'},
    {
        "type": "block-end",
        "index": 1,
        "block": {
            "type": "tool-call",
            "id": "call_1",
            "name": "add",
            "arguments": '{"a": 2, "b": 3}',
        },
    },
    {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 4, "reasoningTokens": 1}},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
]
TEXT: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "It is "},
    {"type": "text-delta", "index": 0, "text": "5."},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "It is 5."}},
    {"type": "usage", "usage": {"inputTokens": 9, "outputTokens": 3, "cacheReadTokens": 2}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
CONFIG = types.GenerateContentConfig(
    system_instruction="You add.",
    tools=[
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name="add", description="adds", parameters_json_schema={"type": "object"}
                )
            ]
        )
    ],
)


def gemini_client(endpoint: Endpoint, pool: Any, options: dict[str, object]) -> Any:
    """The Gemini wire's in-process ``google-genai`` client on ``endpoint``."""
    return sdk_client("gemini", endpoint, pool, options)


single = partial(one_session, path=Path("mem"), recorded_id="rec", first="add 2 and 3")
"""One primary session of ``entries`` (``first=`` another first user message)."""


def failed(failure: dict[str, Any]) -> ChunksEntry:
    return ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": failure}}])


def raw_client(endpoint: Endpoint) -> Any:
    return httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")


def frames(raw: bytes) -> list[dict[str, Any]]:
    """The JSON of each ``data:`` frame (the test's own SSE reader)."""
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].strip() for line in block.decode().split("\n") if line.startswith("data:")]
        if data:
            out.append(json.loads("\n".join(data)))
    return out


# --- reading a request --------------------------------------------------------------------


def test_a_gemini_body_is_read_into_the_in_process_shape() -> None:
    body = {
        "systemInstruction": {"parts": [{"text": "Be "}, {"text": "brief."}]},
        "contents": [
            {
                "role": "user",
                "parts": [{"text": "add"}, {"inlineData": {"mimeType": "x", "data": "AA"}}],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "hm", "thought": True},
                    {"text": "ok"},
                    {"functionCall": {"name": "add", "args": {"b": 1, "a": 2}}},
                    {"functionCall": {"name": "add", "args": {"a": 2, "b": 1}}},
                    {"functionCall": {"name": "mul", "args": {}, "id": "given"}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {"functionResponse": {"name": "mul", "response": {"r": 0}}},
                    {"functionResponse": {"name": "add", "response": {"r": 3}}},
                    {"functionResponse": {"name": "add", "response": {"r": 3}}},
                    {"text": "go on"},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "add", "description": "adds", "parameters": {"type": "object"}},
                    {"name": "mul", "parameters_json_schema": {"type": "object"}},
                ]
            }
        ],
        "generationConfig": {"maxOutputTokens": 10, "temperature": 0.5, "stopSequences": ["x"]},
    }
    request = WIRE.canonical(body, path=STREAM + "?alt=sse", history=None)  # type: ignore[arg-type]
    first = call_id_for("add", {"a": 2, "b": 1}, {})
    assert first.startswith("call_add_")
    assert len(first) == len("call_add_") + 8
    assert request == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "add"},
                    {"type": "inlineData", "inlineData": {"mimeType": "x", "data": "AA"}},
                ],
            },
            {
                "role": "assistant",
                "content": "ok",
                "reasoning_content": "hm",
                "tool_calls": [
                    {
                        "id": first,
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a":2,"b":1}'},
                    },
                    {
                        "id": f"{first}_2",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a":2,"b":1}'},
                    },
                    {
                        "id": "given",
                        "type": "function",
                        "function": {"name": "mul", "arguments": "{}"},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "given", "content": '{"r":0}'},
            {"role": "tool", "tool_call_id": first, "content": '{"r":3}'},
            {"role": "tool", "tool_call_id": f"{first}_2", "content": '{"r":3}'},
            {"role": "user", "content": "go on"},
        ],
        "model": "gemini-x",
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "adds",
                    "parameters": {"type": "object"},
                },
            },
            {"type": "function", "function": {"name": "mul", "parameters": {"type": "object"}}},
        ],
        "max_tokens": 10,
        "temperature": 0.5,
        "stop": ["x"],
    }
    assert gemini_request({"contents": []}, "/v1/models/m:generateContent")["stream"] is False


def test_the_routes_and_model_lists() -> None:
    for version in ("v1beta", "v1"):
        for method in ("streamGenerateContent", "generateContent"):
            assert wire_for(f"/{version}/models/gemini-2.5-flash:{method}?alt=sse") is WIRE
    assert wire_for("/v1beta/models/a/b:generateContent") is None
    assert list_wire("/v1beta/models", {}) is WIRE
    assert list_wire("/v1/models", {"x-goog-api-key": "k"}) is WIRE
    assert list_wire("/v1/models", {}) is not WIRE
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    client = gemini_client(endpoint, None, {})
    assert [m.name for m in client.models.list()] == ["models/dsh-replay"]


def test_the_upstream_url_joins_the_path_and_replaces_the_model() -> None:
    base = "https://generativelanguage.googleapis.com/"
    assert (
        gemini_upstream(base, STREAM, None)
        == "https://generativelanguage.googleapis.com/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    )
    assert (
        gemini_upstream("http://h/v1beta", STREAM + "?alt=sse", "other")
        == "http://h/v1beta/models/other:streamGenerateContent?alt=sse"
    )
    assert gemini_upstream("http://h", "/v1/models/m:generateContent", None) == (
        "http://h/v1/models/m:generateContent"
    )
    assert WIRE.upstream("http://h", STREAM, b"{}", "x")[1] == b"{}"
    assert WIRE.auth_headers("key") == {"x-goog-api-key": "key"}


# --- encoding -----------------------------------------------------------------------------


def test_a_streamed_answer_is_one_frame_per_part_the_last_with_finish_and_usage() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TOOL))))
    response = raw_client(endpoint).post(
        STREAM, json={"contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}]}
    )
    assert response.headers["content-type"] == "text/event-stream"
    assert response.content.endswith(b"\r\n\r\n")
    got = frames(response.content)
    head = {"modelVersion": "gemini-x", "responseId": "dsh-replay-1"}
    assert got == [
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": "think", "thought": True}]},
                    "index": 0,
                }
            ],
            **head,
        },
        {
            "candidates": [
                {
                    "content": {
                        "role": "model",
                        "parts": [
                            {
                                "functionCall": {
                                    "id": "call_1",
                                    "name": "add",
                                    "args": {"a": 2, "b": 3},
                                }
                            }
                        ],
                    },
                    "index": 0,
                }
            ],
            **head,
        },
        {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [{"text": ""}]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 5,
                "candidatesTokenCount": 4,
                "thoughtsTokenCount": 1,
                "totalTokenCount": 9,
            },
            **head,
        },
    ]


def test_the_whole_answer_merges_the_parts() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TOOL))))
    body = {"contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}]}
    answer = raw_client(endpoint).post("/v1/models/g:generateContent", json=body).json()
    assert answer["candidates"] == [
        {
            "content": {
                "role": "model",
                "parts": [
                    {"text": "think", "thought": True},
                    {"functionCall": {"id": "call_1", "name": "add", "args": {"a": 2, "b": 3}}},
                ],
            },
            "finishReason": "STOP",
            "index": 0,
        }
    ]
    assert answer["modelVersion"] == "g"
    assert WIRE.decode_whole(answer) == [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "think"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "think"}},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 1,
            "id": "call_1",
            "name": "add",
            "argumentsDelta": '{"a":2,"b":3}',
        },
        {
            "type": "block-end",
            "index": 1,
            "block": {
                "type": "tool-call",
                "id": "call_1",
                "name": "add",
                "arguments": '{"a":2,"b":3}',
            },
        },
        {
            "type": "usage",
            "usage": {"inputTokens": 5, "outputTokens": 4, "reasoningTokens": 1, "totalTokens": 9},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


FAILURES: list[tuple[dict[str, Any], int, str]] = [
    ({"message": "bad key", "code": "AUTH"}, 401, "UNAUTHENTICATED"),
    (
        {"message": "slow down", "code": "RATE_LIMIT", "providerRetryAfterMs": 2000},
        429,
        "RESOURCE_EXHAUSTED",
    ),
    ({"message": "busy", "code": "OVERLOADED"}, 503, "UNAVAILABLE"),
    ({"message": "too big", "code": "CONTEXT_WINDOW_EXCEEDED"}, 400, "INVALID_ARGUMENT"),
    ({"message": "boom", "code": "SERVER"}, 500, "INTERNAL"),
    ({"message": "late", "code": "UNKNOWN", "status": 504}, 504, "DEADLINE_EXCEEDED"),
]


@pytest.mark.parametrize(
    ("failure", "status", "name"), FAILURES, ids=[f[0]["code"] for f in FAILURES]
)
def test_a_failure_before_content_is_googles_error(
    failure: dict[str, Any], status: int, name: str
) -> None:
    endpoint = Endpoint.replaying(
        ReplayModel(single(failed(failure), ThrowEntry([], failure["message"], failure["code"])))
    )
    body = {"contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}]}
    response = raw_client(endpoint).post(STREAM, json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (status, name)
    assert failure["message"] in error["message"]
    if failure["code"] == "CONTEXT_WINDOW_EXCEEDED":
        assert "context window" in error["message"]
    if failure["code"] == "RATE_LIMIT":
        assert response.headers["retry-after"] == "2"
    decoded = gemini_failure(response.status_code, response.json(), dict(response.headers))
    expected = {"SERVER": "UNKNOWN"}.get(failure["code"], failure["code"])
    assert decoded["code"] == (expected if status != 504 else "UNKNOWN")
    with pytest.raises(errors.APIError) as raised:  # the throw entry, through the SDK
        gemini_client(endpoint, None, {}).models.generate_content(
            model="g",
            contents=[types.Content(role="user", parts=[types.Part.from_text(text="add 2 and 3")])],
        )
    assert raised.value.code == (500 if "status" in failure else status)  # a throw has none
    assert endpoint.errors == []


def test_a_failure_after_content_is_an_error_frame() -> None:
    chunks = [
        *TEXT[:3],
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "cut", "code": "RATE_LIMIT"}},
        },
    ]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks), ChunksEntry(chunks))))
    body = {"contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}]}
    got = frames(raw_client(endpoint).post(STREAM, json=body).content)
    assert got[-1] == {"error": {"code": 429, "message": "cut", "status": "RESOURCE_EXHAUSTED"}}
    assert WIRE.stream_failure(got[-1]) == {"message": "cut", "code": "RATE_LIMIT", "status": 429}
    stream = gemini_client(endpoint, None, {}).models.generate_content_stream(
        model="g", contents="add 2 and 3"
    )
    with pytest.raises(errors.ClientError, match="cut"):
        list(stream)


def test_content_filter_and_empty_answers_finish_the_stream() -> None:
    filtered = [
        *TEXT[:3],
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "f", "code": "CONTENT_FILTER"}},
        },
    ]
    empty = [
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "e", "code": "EMPTY_RESPONSE"}},
        }
    ]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(filtered), ChunksEntry(empty))))
    body = {"contents": [{"role": "user", "parts": [{"text": "add 2 and 3"}]}]}
    headers = {"x-dsh-session-id": "s"}
    first = frames(raw_client(endpoint).post(STREAM, json=body, headers=headers).content)
    assert first[-1]["candidates"][0]["finishReason"] == "SAFETY"
    decoder = GeminiDecoder()
    assert [c for f in first for c in decoder.feed(f)][-1]["reason"]["failure"][
        "code"
    ] == "CONTENT_FILTER"
    second = frames(raw_client(endpoint).post(STREAM, json=body, headers=headers).content)
    assert second == [
        {
            "candidates": [{"finishReason": "STOP", "index": 0}],
            "modelVersion": "gemini-x",
            "responseId": "dsh-replay-2",
        }
    ]
    decoder = GeminiDecoder()
    assert decoder.feed(second[0])[-1]["reason"]["failure"]["code"] == "EMPTY_RESPONSE"


def test_the_decoder_maps_finish_reasons_and_ids() -> None:
    def run(*events: dict[str, Any]) -> list[dict[str, Any]]:
        decoder = GeminiDecoder()
        out = [c for e in events for c in decoder.feed(e)]
        return out + decoder.end()

    def part(reason: str | None, **p: Any) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [p]}}
        if reason:
            candidate["finishReason"] = reason
        return {"candidates": [candidate]}

    assert run(part("MAX_TOKENS", text="a"))[-1]["reason"] == {"kind": "max-tokens"}
    assert run(part("RECITATION", text="a"))[-1]["reason"]["failure"]["code"] == "CONTENT_FILTER"
    assert (
        run(part("MALFORMED_FUNCTION_CALL", text="a"))[-1]["reason"]["failure"]["code"] == "UNKNOWN"
    )
    assert run(part(None, text="a"))[-1]["reason"]["failure"]["code"] == "UNKNOWN"
    assert (
        run({"promptFeedback": {"blockReason": "SAFETY"}})[-1]["reason"]["failure"]["code"]
        == "CONTENT_FILTER"
    )
    calls = run(
        part(None, functionCall={"name": "f", "args": {"x": 1}}),
        part("STOP", functionCall={"name": "f", "args": {"x": 1}}),
    )
    ids = [c["id"] for c in calls if c["type"] == "tool-call-delta"]
    first = call_id_for("f", {"x": 1}, {})
    assert ids == [first, f"{first}_2"]
    assert calls[-1]["reason"] == {"kind": "tool-calls"}
    for reason, ends in (("STOP", True), (None, False)):
        data = json.dumps(part(reason, text="a"))
        frame = Frame(f"data: {data}\r\n\r\n".encode(), None, data)
        assert WIRE.ends_answer(frame, json.loads(data)) is ends
    failure = gemini_failure(
        400,
        {
            "error": {
                "message": "The input token count exceeds the maximum number of tokens allowed"
            }
        },
        {},
    )
    assert failure["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert gemini_failure(403, {}, {"retry-after": "3"}) == {
        "message": "Gemini API request failed (403)",
        "code": "AUTH",
        "status": 403,
        "providerRetryAfterMs": 3000,
    }


# --- google-genai in process --------------------------------------------------------------


def _turn(contents: list[types.Content], answer: types.Content) -> list[types.Content]:
    result = types.Part.from_function_response(name="add", response={"result": 5})
    return [*contents, answer, types.Content(role="user", parts=[result])]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_google_genai_calls_a_function_and_continues_the_session(stream: bool) -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    client = gemini_client(endpoint, None, {})
    assert isinstance(client, genai.Client)
    contents = [types.Content(role="user", parts=[types.Part.from_text(text="add 2 and 3")])]
    if stream:
        pieces = list(
            client.models.generate_content_stream(
                model="gemini-x", contents=contents, config=CONFIG
            )
        )
        parts = [
            p
            for c in pieces
            if c.candidates and c.candidates[0].content
            for p in c.candidates[0].content.parts or ()
        ]
        answer = types.Content(role="model", parts=parts)
        assert pieces[-1].usage_metadata is not None
        assert pieces[-1].usage_metadata.thoughts_token_count == 1
    else:
        response = client.models.generate_content(
            model="gemini-x", contents=contents, config=CONFIG
        )
        assert response.candidates
        assert response.candidates[0].content
        answer = response.candidates[0].content
        assert response.function_calls
        assert [(c.id, c.name, c.args) for c in response.function_calls] == [
            ("call_1", "add", {"a": 2, "b": 3})
        ]
    # streamed: the last frame's empty text part too, as the live API sends one
    expected = [True, None, None] if stream else [True, None]
    assert [p.thought for p in answer.parts or ()] == expected
    contents = _turn(contents, answer)
    if stream:
        text = "".join(
            c.text or ""
            for c in client.models.generate_content_stream(
                model="gemini-x", contents=contents, config=CONFIG
            )
        )
    else:
        last = client.models.generate_content(model="gemini-x", contents=contents, config=CONFIG)
        text = last.text or ""
        assert last.usage_metadata is not None
        assert (
            last.usage_metadata.prompt_token_count,
            last.usage_metadata.cached_content_token_count,
        ) == (11, 2)
    assert text == "It is 5."
    assert endpoint.errors == []
    model.assert_consumed()
    assert len(model.bindings) == 1  # the second request continued the same session


def test_the_async_google_genai_client_is_the_aio_face() -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    pool = worker_pool()

    async def main() -> str:
        client = gemini_client(endpoint, pool, {})
        contents = [types.Content(role="user", parts=[types.Part.from_text(text="add 2 and 3")])]
        response = await client.models.generate_content(
            model="gemini-x", contents=contents, config=CONFIG
        )
        assert response.candidates
        assert response.candidates[0].content
        contents = _turn(contents, response.candidates[0].content)
        text = ""
        async for piece in await client.models.generate_content_stream(
            model="gemini-x", contents=contents, config=CONFIG
        ):
            text += piece.text or ""
        return text

    try:
        assert asyncio.run(main()) == "It is 5."
    finally:
        pool.shutdown()
    assert endpoint.errors == []
    model.assert_consumed()


def test_the_gemini_client_needs_google_genai(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real = builtins.__import__

    def refuse(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("google.genai"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr("importlib.import_module", lambda name: refuse(name))
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    with pytest.raises(DshReplayError, match="pip install google-genai"):
        gemini_client(endpoint, None, {})


# --- every corpus call, over the Gemini route -----------------------------------------------


def _replayable() -> list[Path]:
    return [
        p for p in corpus_scenarios() if json.loads((p / "expected.json").read_text("utf-8"))["ok"]
    ]


def _read(client: Any, headers: dict[str, str], body: dict[str, Any]) -> list[dict[str, Any]]:
    """One streamed call over the Gemini route, decoded by the wire's decoder."""
    httpx = httpx_module()
    decoder = GeminiDecoder()
    try:
        with client.stream("POST", STREAM + "?alt=sse", json=body, headers=headers) as response:
            raw = response.read()
            if response.status_code != 200:
                return [decoder.failed(gemini_failure(response.status_code, json.loads(raw), {}))]
    except (httpx.ReadError, httpx.RemoteProtocolError):
        return [decoder.failed({"message": "dropped", "code": "TRANSPORT"})]
    chunks: list[dict[str, Any]] = []
    for frame in frames(raw):
        failure = WIRE.stream_failure(frame)
        if failure is not None:
            return [*chunks, decoder.failed(failure)]
        chunks.extend(decoder.feed(frame))
    return chunks + decoder.end()


def _args(text: Any) -> Any:
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _as_streamed(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``chunks`` with each text block's ``block-end`` text what its deltas streamed.

    A few recordings end a block with a text its deltas do not spell out; a wire carries
    the deltas (see the corpus test of the other wires), so they are what a call means.
    """
    streamed: dict[Any, str] = {}
    out = []
    for chunk in chunks:
        if chunk.get("type") in ("text-delta", "reasoning-delta"):
            streamed[chunk.get("index")] = streamed.get(chunk.get("index"), "") + chunk["text"]
        elif chunk.get("type") == "block-end" and chunk.get("index") in streamed:
            block = chunk["block"]
            if block.get("type") in ("text", "reasoning"):
                chunk = {**chunk, "block": {**block, "text": streamed[chunk["index"]]}}
        out.append(chunk)
    return out


def meaning(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a call means on this wire: text, reasoning, tool calls, usage, finish."""
    reply = assemble_reply(_as_streamed(chunks))
    finish = reply.finish or {"kind": "error"}
    kind = finish.get("kind")
    done = "error" if kind in ("error", "aborted") else kind
    if done == "error" and (finish.get("failure") or {}).get("code") in (
        "CONTENT_FILTER",
        "EMPTY_RESPONSE",
    ):
        done = finish["failure"]["code"]
    usage = reply.usage
    return {
        "text": "".join(str(b.get("text", "")) for b in reply.content if b.get("type") == "text"),
        "reasoning": "".join(
            str(b.get("text", "")) for b in reply.content if b.get("type") == "reasoning"
        ),
        "tools": [
            (b.get("id"), b.get("name"), _args(b.get("arguments"))) for b in reply.tool_calls
        ],
        "usage": None
        if usage is None or done == "error"
        else (
            usage.get("inputTokens", 0) + usage.get("cacheWriteTokens", 0),
            usage.get("outputTokens", 0),
            usage.get("cacheReadTokens"),
            usage.get("reasoningTokens"),
        ),
        "finish": done,
    }


@pytest.mark.parametrize("path", corpus_params(_replayable()))
def test_every_corpus_call_round_trips_over_the_gemini_route(
    path: Path | None, tmp_path: Path
) -> None:
    require_corpus()
    assert path is not None
    scenario = load_scenario(path)
    model = ReplayModel(scenario, workdir=tmp_path)  # ready files: never into the corpus
    endpoint = Endpoint.replaying(model)
    client = raw_client(endpoint)
    live = {script.recorded_id: f"live-{i}" for i, script in enumerate(scenario.scripts)}
    for i, script in enumerate(scenario.scripts):
        headers = {"x-dsh-session-id": f"live-{i}"}
        parent = live.get(script.parent_session or "")
        if parent is not None and not script.primary:
            headers["x-dsh-parent-session-id"] = parent
        text = script.first_user_text if script.first_user_text is not None else "no message"
        body = {
            "contents": [
                {"role": "user", "parts": [{"text": f"work on {GOAL}"}]},
                {"role": "user", "parts": [{"text": text}]},
            ]
        }
        for number, entry in enumerate(script.entries):
            if isinstance(entry, HangEntry):  # hangs have their own tests
                cancelled = threading.Event()
                cancelled.set()
                request = gemini_request(body, STREAM)
                with pytest.raises(ReplayCancelledError):
                    list(
                        model.stream(
                            request,
                            session_id=f"live-{i}",
                            parent_session_id=parent,
                            cancel=cancelled,
                            by_content=True,
                        )
                    )
                continue
            got = _read(client, headers, body)
            if isinstance(entry, ThrowEntry):
                assert meaning(got)["finish"] == "error"
                continue
            chunks = json.loads(
                json.dumps(entry.chunks).replace("{{fromRequest:goal-[0-9a-f-]+}}", GOAL)
            )
            assert meaning(got) == meaning(chunks), (script.file, number)
    assert endpoint.errors == []
    try:
        model.assert_consumed()
    except DshReplayError as error:  # pragma: no cover - the message says which
        pytest.fail(str(error))
