"""The Ollama wire: requests, encoding and decoding, errors, the ollama client in process."""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.chunks import IT_IS_5, add_call
from support.relayed import relay_live
from support.scenarios import one_session

from pytest_dsh_replay import ScriptedModel
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import endpoint_env, sdk_client, worker_pool
from pytest_dsh_replay._errors import DshReplayError
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._wire.base import httpx_module
from pytest_dsh_replay._wire.framing import NDJSON, Frame
from pytest_dsh_replay._wire.gemini import call_id_for
from pytest_dsh_replay._wire.ollama import (
    WIRE,
    OllamaDecoder,
    OllamaEncoder,
    decode_response,
    ollama_failure,
    ollama_request,
)
from pytest_dsh_replay._wire.table import RECORD_URL_VARIABLES, list_wire, served_routes, wire_for

ollama = pytest.importorskip("ollama", reason="the ollama client is not installed")

ROUTE = "/api/chat"
ADD = call_id_for("add", {"a": 2, "b": 3}, {})

TOOL = add_call(
    "call_1", reasoning="I add.", usage={"inputTokens": 5, "outputTokens": 4, "cacheWriteTokens": 1}
)
TEXT = IT_IS_5
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]


single = partial(one_session, path=Path("mem"), recorded_id="rec", first="add 2 and 3")
"""One primary session of ``entries`` (``first=`` another first user message)."""


def failed(failure: dict[str, Any]) -> ChunksEntry:
    return ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": failure}}])


def lines(raw: bytes) -> list[dict[str, Any]]:
    """Each NDJSON line's object (every line ends in a newline)."""
    assert raw.endswith(b"\n")
    return [json.loads(line) for line in raw.split(b"\n") if line]


def body(messages: list[dict[str, Any]], **more: Any) -> bytes:
    return orjson.dumps({"model": "llama3.2", "messages": messages, **more})


# --- routes, the table, the environment ----------------------------------------------------


def test_the_routes_model_list_and_variables_come_from_the_table() -> None:
    assert wire_for(ROUTE) is WIRE
    assert wire_for(ROUTE + "/") is WIRE
    assert list_wire("/api/tags", {}) is WIRE
    assert "POST /api/chat" in served_routes()
    assert "GET /api/tags" in served_routes()
    assert endpoint_env("http://127.0.0.1:5")["OLLAMA_HOST"] == "http://127.0.0.1:5"
    assert "DSH_RECORD_OLLAMA_BASE_URL" in RECORD_URL_VARIABLES
    assert NDJSON.carries("application/x-ndjson; charset=utf-8")


def test_an_unserved_ollama_route_names_the_served_ones() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    response = endpoint.handle("POST", "/api/generate", {}, b"{}")
    assert response.status == 404
    text = b"".join(response.body).decode()
    assert "POST /api/chat" in text
    assert "GET /api/tags" in text
    assert "/api/chat" in str(endpoint.errors[0])


def test_the_model_list_is_ollamas_shape() -> None:
    listed = ollama.ListResponse(**WIRE.model_list(["llama3.2", "qwen3:8b"]))
    assert [m.model for m in listed.models] == ["llama3.2", "qwen3:8b"]
    assert listed.models[0].details is not None
    assert listed.models[0].details.format == "gguf"


# --- reading a request -----------------------------------------------------------------------


def test_an_ollama_body_is_read_into_the_in_process_shape() -> None:
    given = {
        "model": "llama3.2",
        "messages": [
            {"role": "system", "content": "You add."},
            {"role": "user", "content": "add", "images": ["AAAA"]},
            {
                "role": "assistant",
                "content": "",
                "thinking": "hm",
                "tool_calls": [
                    {"function": {"name": "add", "arguments": {"b": 3, "a": 2}}},
                    {"function": {"name": "add", "arguments": {"a": 2, "b": 3}}},
                    {"function": {"name": "mul", "arguments": {}}},
                ],
            },
            {"role": "tool", "tool_name": "mul", "content": "0"},
            {"role": "tool", "tool_name": "add", "content": "5"},
            {"role": "tool", "content": "5"},  # no name: the first call still open
        ],
        "tools": TOOLS,
        "options": {"num_predict": 10, "temperature": 0.5, "stop": ["x"], "num_ctx": 4096},
        "think": True,
        "keep_alive": "5m",
    }
    request = WIRE.canonical(given, path=ROUTE, history=None)  # type: ignore[arg-type]
    mul = call_id_for("mul", {}, {})
    assert request == {
        "messages": [
            {"role": "system", "content": "You add."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "add"}, {"type": "image", "image": "AAAA"}],
            },
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "hm",
                "tool_calls": [
                    {
                        "id": ADD,
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
                    },
                    {
                        "id": f"{ADD}_2",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a":2,"b":3}'},
                    },
                    {"id": mul, "type": "function", "function": {"name": "mul", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": mul, "content": "0"},
            {"role": "tool", "tool_call_id": ADD, "content": "5"},
            {"role": "tool", "tool_call_id": f"{ADD}_2", "content": "5"},
        ],
        "model": "llama3.2",
        "stream": True,  # Ollama streams unless told not to
        "tools": TOOLS,
        "max_tokens": 10,
        "temperature": 0.5,
        "stop": ["x"],
    }


def test_ids_a_client_kept_name_the_call_by_its_content() -> None:
    given = {
        "messages": [
            {"role": "user", "content": "add"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "srv_9", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}
                ],
            },
            {"role": "tool", "tool_call_id": "srv_9", "content": "5"},
            {"role": "tool", "tool_call_id": "gone", "content": "?"},
        ],
        "stream": False,
    }
    request = ollama_request(given)
    messages = request["messages"]
    assert messages[1]["tool_calls"][0]["id"] == ADD
    assert [m.get("tool_call_id") for m in messages[2:]] == [ADD, "gone"]
    assert request["stream"] is False


def test_a_misshapen_request_is_refused_in_ollamas_error_shape() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    response = endpoint.handle("POST", ROUTE, {}, b'{"model": "m", "messages": {"role": "user"}}')
    assert response.status == 400
    error = orjson.loads(b"".join(response.body))
    assert list(error) == ["error"]
    assert "messages" in error["error"]
    refused = ollama.ResponseError(json.dumps(error), response.status)  # as the client reads it
    assert refused.error == error["error"]
    assert refused.status_code == 400


def _client(endpoint: Endpoint, **options: Any) -> Any:
    return sdk_client("ollama", endpoint, None, dict(options))


def test_a_streamed_answer_is_one_line_per_delta_then_done() -> None:
    encoder = WIRE.encoder({}, model="llama3.2", call_id="x")
    raw = encoder.start() + encoder.feed_all(TOOL[:-1]) + encoder.finish(TOOL[-1]["reason"])
    parsed = lines(raw)
    responses = [ollama.ChatResponse(**line) for line in parsed]
    assert [r.message.thinking for r in responses[:1]] == ["I add."]
    (call,) = responses[1].message.tool_calls or []
    assert (call.function.name, dict(call.function.arguments)) == ("add", {"a": 2, "b": 3})
    assert parsed[1]["message"]["tool_calls"][0]["id"] == ADD  # named by its content
    last = responses[-1]
    assert (last.done, last.done_reason) == (True, "stop")
    assert (last.prompt_eval_count, last.eval_count) == (6, 4)
    assert all(r.model == "llama3.2" and r.created_at for r in responses)
    assert encoder.marks() == ["", ADD]


def test_the_ollama_client_calls_a_tool_and_continues_streamed_and_whole() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT))))
    client = _client(endpoint)
    messages: list[Any] = [{"role": "user", "content": "add 2 and 3"}]
    parts = list(client.chat(model="llama3.2", messages=messages, tools=TOOLS, stream=True))
    assert "".join(p.message.thinking or "" for p in parts) == "I add."
    calls = [c for p in parts for c in p.message.tool_calls or []]
    assert [c.function.name for c in calls] == ["add"]
    messages += [
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_name": "add", "content": "5"},
    ]
    whole = client.chat(model="llama3.2", messages=messages, tools=TOOLS)
    assert whole.message.content == "It is 5."
    assert (whole.done_reason, whole.prompt_eval_count, whole.eval_count) == ("stop", 9, 3)
    assert endpoint.errors == []
    listed = client.list()
    assert [m.model for m in listed.models] == ["llama3.2"]


def test_the_async_ollama_client_reaches_the_endpoint() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    pool = worker_pool()

    async def run() -> str:
        client: Any = sdk_client("ollama", endpoint, pool, {})
        parts = [
            p
            async for p in await client.chat(
                model="m", messages=[{"role": "user", "content": "add 2 and 3"}], stream=True
            )
        ]
        return "".join(p.message.content or "" for p in parts)

    try:
        assert asyncio.run(run()) == "It is 5."
    finally:
        pool.shutdown()


def test_max_tokens_is_length_and_text_left_in_a_block_end_is_sent() -> None:
    chunks: list[dict[str, Any]] = [
        {"type": "text-delta", "index": 0, "text": "It"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "It is"}},
    ]
    encoder = OllamaEncoder(model="m")
    raw = encoder.feed_all(chunks) + encoder.finish({"kind": "max-tokens"})
    parsed = lines(raw)
    assert [p["message"]["content"] for p in parsed] == ["It", " is", ""]
    assert parsed[-1]["done_reason"] == "length"
    whole = WIRE.whole(
        [*chunks, {"type": "finish", "reason": {"kind": "max-tokens"}}], model="m", call_id="x"
    )
    assert whole["done_reason"] == "length"
    assert whole["message"]["content"] == "It is"


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "status"),
    [
        ({"message": "model 'x' not found", "code": "UNKNOWN", "status": 404}, 404),
        ({"message": "slow down", "code": "RATE_LIMIT", "providerRetryAfterMs": 2000}, 429),
        ({"message": "busy", "code": "OVERLOADED"}, 503),
    ],
)
def test_a_failure_before_content_is_ollamas_http_error(
    failure: dict[str, Any], status: int
) -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(failed(failure))))
    with pytest.raises(ollama.ResponseError) as caught:
        list(
            _client(endpoint).chat(
                model="m", messages=[{"role": "user", "content": "add 2 and 3"}], stream=True
            )
        )
    assert caught.value.status_code == status
    assert caught.value.error == failure["message"]
    error = WIRE.error(failure)
    assert orjson.loads(error.body) == {"error": failure["message"]}
    if status == 429:
        assert ("retry-after", "2") in error.headers


def test_a_failure_after_content_is_an_error_line() -> None:
    failure = {"message": "the runner crashed", "code": "SERVER"}
    chunks = [*TEXT[:2], {"type": "finish", "reason": {"kind": "error", "failure": failure}}]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    response = endpoint.handle(
        "POST", ROUTE, {}, body([{"role": "user", "content": "add 2 and 3"}])
    )
    assert response.status == 200
    parsed = lines(b"".join(response.body))
    assert parsed[-1] == {"error": "the runner crashed"}
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    with pytest.raises(ollama.ResponseError, match="the runner crashed"):
        list(
            _client(endpoint).chat(
                model="m", messages=[{"role": "user", "content": "add 2 and 3"}], stream=True
            )
        )


def test_live_errors_become_dsh_failures() -> None:
    headers = {"retry-after": "3", "x-request-id": "req-1"}
    assert ollama_failure(429, {"error": "too many"}, headers) == {
        "message": "too many",
        "code": "RATE_LIMIT",
        "status": 429,
        "providerRetryAfterMs": 3000,
        "requestId": "req-1",
    }
    assert ollama_failure(404, {"error": 'model "x" not found'}, {})["code"] == "UNKNOWN"
    assert ollama_failure(401, None, {}) == {
        "message": "Ollama request failed (401)",
        "code": "AUTH",
        "status": 401,
    }
    overflow = ollama_failure(400, {"error": "input is too long for the context length"}, {})
    assert overflow["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert ollama_failure(500, {"error": {"message": "proxied"}}, {})["message"] == "proxied"
    assert WIRE.stream_failure({"error": "boom"}) == {"message": "boom", "code": "UNKNOWN"}
    assert WIRE.stream_failure({"done": False, "message": {}}) is None
    (finish,) = decode_response({"error": "no such model"})
    assert finish["reason"]["failure"]["message"] == "no such model"


# --- decoding a live stream ------------------------------------------------------------------


def _live(message: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "created_at": "2025-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": "", **message},
        "done": False,
        **more,
    }


def test_the_decoder_reads_thinking_text_tool_calls_and_done() -> None:
    decoder = OllamaDecoder()
    chunks: list[Any] = []
    for line in [
        _live({"thinking": "hm"}),
        _live({"content": "Let me "}),
        _live({"content": "add."}),
        _live(
            {
                "tool_calls": [
                    {
                        "id": "srv_1",
                        "function": {"index": 0, "name": "add", "arguments": {"b": 3, "a": 2}},
                    }
                ]
            }
        ),
        {
            **_live({}),
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 12,
            "eval_count": 5,
        },
    ]:
        chunks += decoder.feed(line)
    assert decoder.done
    assert decoder.response_id is None
    assert decoder.feed(_live({"content": "late"})) == []
    assert [c["type"] for c in chunks] == [
        "block-start", "reasoning-delta", "block-end",
        "block-start", "text-delta", "text-delta", "block-end",
        "block-start", "tool-call-delta", "block-end",
        "usage", "finish",
    ]  # fmt: skip
    assert chunks[8] == {
        "type": "tool-call-delta",
        "index": 2,
        "id": ADD,  # the server's id is not kept: calls are named by content
        "name": "add",
        "argumentsDelta": '{"a":2,"b":3}',
    }
    assert chunks[-2:] == [
        {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 5}},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


@pytest.mark.parametrize(
    ("reason", "kind", "code"),
    [("length", "max-tokens", None), ("load", "error", "UNKNOWN"), ("stop", "stop", None)],
)
def test_the_decoder_maps_done_reasons(reason: str, kind: str, code: str | None) -> None:
    decoder = OllamaDecoder()
    chunks = decoder.feed(_live({"content": "hi"})) + decoder.feed(
        {**_live({}), "done": True, "done_reason": reason}
    )
    finish = chunks[-1]["reason"]
    assert finish["kind"] == kind
    assert (finish.get("failure") or {}).get("code") == code


def test_the_decoder_fails_an_empty_answer_and_a_stream_without_done() -> None:
    empty = OllamaDecoder().feed({**_live({}), "done": True, "done_reason": "stop"})
    assert empty[-1]["reason"]["failure"]["code"] == "EMPTY_RESPONSE"
    decoder = OllamaDecoder()
    decoder.feed(_live({"content": "cut"}))
    ended = decoder.end()
    assert ended[0] == {"type": "block-end", "index": 0, "block": {"type": "text", "text": "cut"}}
    assert ended[-1]["reason"]["failure"]["code"] == "UNKNOWN"
    assert decoder.end() == []


def _kinds(chunks: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (c["type"], c.get("text"), c.get("name")) for c in chunks if c["type"] != "tool-call-delta"
    ]


def test_what_the_encoder_sends_decodes_to_the_same_answer() -> None:
    for chunks in (TOOL, TEXT):
        encoder = OllamaEncoder(model="m")
        raw = encoder.feed_all(chunks[:-1]) + encoder.finish(chunks[-1]["reason"])
        decoder = OllamaDecoder()
        decoded = [c for line in lines(raw) for c in decoder.feed(line)]
        kinds = _kinds
        assert [c for c in kinds(decoded) if c[0] != "usage"] == [
            c for c in kinds(chunks) if c[0] != "usage"
        ]
        whole = decode_response(WIRE.whole(list(chunks), model="m", call_id="x"))
        assert whole[-1] == decoded[-1]


def test_the_line_splitter_keeps_lines_split_between_reads() -> None:
    splitter = NDJSON.splitter()
    assert splitter.feed_raw(b'{"a":') == []
    assert splitter.pending == b'{"a":'
    frames = splitter.feed_raw(b'1}\r\n\n{"b"')
    assert frames == [Frame(b'{"a":1}\r\n', None, '{"a":1}'), Frame(b"\n", None, None)]
    assert splitter.pending == b'{"b"'


# --- recording: the proxy relays an Ollama stream --------------------------------------------


def test_the_proxy_relays_a_live_ollama_stream_and_records_its_chunks() -> None:
    httpx = httpx_module()
    encoder = OllamaEncoder(model="llama3.2")
    raw = encoder.feed_all(TEXT[:-1]) + encoder.finish(TEXT[-1]["reason"])
    chunks, relay, sent = relay_live(
        WIRE,
        ROUTE,
        raw,
        cuts=(9, 150),
        base_url="http://ollama.invalid:11434",
        body=body([{"role": "user", "content": "add 2 and 3"}]),
        headers={"content-type": "application/json"},
        model="qwen3:8b",
        httpx=httpx,
    )
    assert [c["type"] for c in chunks][-2:] == ["usage", "finish"]
    assert "".join(c.get("text", "") for c in chunks if c["type"] == "text-delta") == "It is 5."
    assert relay.take() + relay.take_ending() == raw
    assert str(sent[0].url) == "http://ollama.invalid:11434/api/chat"
    assert orjson.loads(sent[0].content)["model"] == "qwen3:8b"


def test_the_scripted_server_speaks_ollama_to_the_ollama_client() -> None:
    from pytest_dsh_replay import Answer, Rule

    model = ScriptedModel([Rule(Answer(text="hello"))])
    with (
        model.serve(idle_timeout=30) as server,
        ollama.Client(host=server.env["OLLAMA_HOST"]) as client,
    ):
        reply = client.chat(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.message.content == "hello"
        assert [m.model for m in client.list().models] == ["m"]
    assert [r.path for r in server.requests] == ["/api/chat", "/api/tags"]


def test_the_ollama_client_needs_ollama(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ollama", None)
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    with pytest.raises(DshReplayError, match="pip install ollama"):
        _client(endpoint)
