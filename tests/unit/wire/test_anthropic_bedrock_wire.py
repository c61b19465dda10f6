"""Anthropic Messages on Bedrock: routes, requests, the chunk event stream, errors, recording.

What we emit is read by the ``anthropic`` SDK's own ``AnthropicBedrock`` clients (and
their ``AWSEventStreamDecoder``, botocore checking each message's CRCs).
"""

from __future__ import annotations

import asyncio
import base64
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.chunks import IT_IS_5, add_call
from support.relayed import relay_live
from support.scenarios import one_session

anthropic = pytest.importorskip("anthropic", reason="AnthropicBedrock is the anthropic SDK's")
pytest.importorskip("boto3", reason="AnthropicBedrock signs with botocore")

from anthropic.lib.bedrock._stream_decoder import AWSEventStreamDecoder  # noqa: E402
from botocore.eventstream import EventStreamBuffer  # noqa: E402

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall  # noqa: E402
from pytest_dsh_replay._endpoint.endpoint import Endpoint  # noqa: E402
from pytest_dsh_replay._endpoint.transport import sdk_client, worker_pool  # noqa: E402
from pytest_dsh_replay._replay.model import ReplayModel  # noqa: E402
from pytest_dsh_replay._scripts.entries import ChunksEntry  # noqa: E402
from pytest_dsh_replay._wire import bedrock  # noqa: E402
from pytest_dsh_replay._wire.anthropic import AnthropicDecoder  # noqa: E402
from pytest_dsh_replay._wire.anthropic_bedrock import CHUNK_STREAM, WIRE  # noqa: E402
from pytest_dsh_replay._wire.base import httpx_module  # noqa: E402
from pytest_dsh_replay._wire.table import (  # noqa: E402
    RECORD_URL_VARIABLES,
    endpoint_env,
    served_routes,
    wire_for,
)

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
STREAM = f"/model/{MODEL}/invoke-with-response-stream"  # the SDK keeps the ``:``
TOOLS: Any = [{"name": "add", "description": "adds", "input_schema": {"type": "object"}}]
PROMPT: Any = [{"role": "user", "content": "add 2 and 3"}]
TOOL = add_call("tu_1")
TEXT = IT_IS_5


single = partial(one_session, path=Path("mem"), recorded_id="rec", first="add 2 and 3")
"""One primary session of ``entries`` (``first=`` another first user message)."""


def client_on(endpoint: Endpoint, **options: object) -> Any:
    return sdk_client("anthropic-bedrock", endpoint, None, {"max_retries": 0, **options})


def second_turn(content: list[Any]) -> Any:
    result = {"type": "tool_result", "tool_use_id": "tu_1", "content": "5"}
    return [
        *PROMPT,
        {"role": "assistant", "content": content},
        {"role": "user", "content": [result]},
    ]


def _encoded(chunks: list[dict[str, Any]]) -> bytes:
    encoder = WIRE.encoder({}, model=MODEL, call_id="msg_1")
    return encoder.start() + encoder.feed_all(chunks[:-1]) + encoder.finish(chunks[-1]["reason"])


# --- routes and requests --------------------------------------------------------------------


def test_the_routes_take_the_model_with_its_colon_and_a_404_names_them() -> None:
    assert wire_for(STREAM) is WIRE
    assert wire_for("/model/anthropic.claude-v2%3A1/invoke") is WIRE
    assert wire_for(f"/model/{MODEL}/converse-stream") is bedrock.WIRE
    assert wire_for("/v1beta/models/gemini-2.0-flash:streamGenerateContent") is not None
    assert wire_for("/v1beta/models/a:b:streamGenerateContent") is None  # ``:`` ends it there
    assert "POST /model/{model}/invoke-with-response-stream" in served_routes()
    response = Endpoint.replaying(ReplayModel(single())).handle(
        "POST", "/model/m/invoke-with-stream", {}, b"{}"
    )
    assert response.status == 404
    assert b"/model/{model}/invoke-with-response-stream" in b"".join(response.body)


def test_the_model_is_the_path_s_and_the_route_says_whether_it_streams() -> None:
    body = {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 9, "messages": PROMPT}
    read = WIRE.canonical(body, path="/model/anthropic.claude-v2%3A1/invoke", history=None)  # type: ignore[arg-type]
    assert (read["model"], read["stream"], read["messages"]) == (
        "anthropic.claude-v2:1",
        False,
        PROMPT,
    )
    assert WIRE.canonical(body, path=STREAM, history=None)["stream"] is True  # type: ignore[arg-type]
    assert "model" not in body  # the body is not changed


def test_a_misshapen_request_is_a_validation_exception() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single()))
    response = endpoint.handle("POST", STREAM, {}, b'{"messages": "hi"}')
    assert response.status == 400
    assert ("x-amzn-errortype", "ValidationException") in response.headers
    assert "messages" in orjson.loads(b"".join(response.body))["message"]


# --- answers, read by the SDK -----------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "invoke-with-response-stream"])
def test_anthropic_bedrock_calls_a_tool_and_continues_the_session(stream: bool) -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    client = client_on(endpoint)
    assert type(client) is anthropic.AnthropicBedrock
    kwargs: Any = {"model": MODEL, "max_tokens": 64, "tools": TOOLS}
    if stream:
        with client.messages.stream(messages=PROMPT, **kwargs) as events:
            first = events.get_final_message()
    else:
        first = client.messages.create(messages=PROMPT, **kwargs)
    assert [b.type for b in first.content] == ["thinking", "tool_use"]
    assert (first.content[1].id, first.content[1].input) == ("tu_1", {"a": 2, "b": 3})
    assert (first.stop_reason, first.model) == ("tool_use", MODEL)
    assert (first.usage.input_tokens, first.usage.output_tokens) == (5, 4)
    assert first.usage.cache_read_input_tokens == 2
    content = [b.model_dump(exclude_none=True) for b in first.content]
    answer = client.messages.create(messages=second_turn(content), stream=stream, **kwargs)
    if stream:
        kinds = [event.type for event in answer]
        assert (kinds[0], kinds[-1]) == ("message_start", "message_stop")
    else:
        assert answer.content[0].text == "It is 5."
    assert endpoint.errors == []
    model.assert_consumed()
    assert len(model.bindings) == 1  # the second request continued the same session


def test_the_async_client_streams_the_same_answers() -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    pool = worker_pool()

    async def main() -> Any:
        client: Any = sdk_client("anthropic-bedrock", endpoint, pool, {"max_retries": 0})
        assert type(client) is anthropic.AsyncAnthropicBedrock
        kwargs: Any = {"model": MODEL, "max_tokens": 64, "tools": TOOLS}
        async with client.messages.stream(messages=PROMPT, **kwargs) as events:
            first = await events.get_final_message()
        content = [b.model_dump(exclude_none=True) for b in first.content]
        async with client.messages.stream(messages=second_turn(content), **kwargs) as events:
            return await events.get_final_text()

    try:
        assert asyncio.run(main()) == "It is 5."
    finally:
        pool.shutdown()
    assert endpoint.errors == []
    model.assert_consumed()


def test_each_event_is_a_chunk_message_carrying_its_json_in_base64() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    body = orjson.dumps({"anthropic_version": "bedrock-2023-05-31", "messages": PROMPT})
    response = endpoint.handle("POST", STREAM, {}, body)
    assert response.status == 200
    assert response.headers[0] == ("content-type", "application/vnd.amazon.eventstream")
    raw = b"".join(response.body)
    buffer = EventStreamBuffer()
    buffer.add_data(raw)  # botocore checks both CRCs of each message
    messages = list(buffer)
    assert {m.headers[":event-type"] for m in messages} == {"chunk"}
    assert {m.headers[":message-type"] for m in messages} == {"event"}
    events = [orjson.loads(base64.b64decode(orjson.loads(m.payload)["bytes"])) for m in messages]
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[0]["message"]["model"] == MODEL
    # the SDK's own decoder gives the events under their names
    decoded = list(AWSEventStreamDecoder().iter_bytes(iter([raw[:7], raw[7:]])))
    assert [(s.event, orjson.loads(s.data)) for s in decoded] == [(e["type"], e) for e in events]


OVERFLOW = "Input is too long for requested model."
SLOW = {"message": "slow", "code": "RATE_LIMIT", "providerRetryAfterMs": 2000}
FAILURES: list[tuple[dict[str, Any], type[Exception], int]] = [
    (SLOW, anthropic.RateLimitError, 429),
    ({"message": OVERFLOW, "code": "CONTEXT_WINDOW_EXCEEDED"}, anthropic.BadRequestError, 400),
    ({"message": "busy", "code": "OVERLOADED"}, anthropic.InternalServerError, 503),
    ({"message": "no", "code": "AUTH", "status": 403}, anthropic.PermissionDeniedError, 403),
]  # fmt: skip


@pytest.mark.parametrize(
    ("failure", "raised", "status"), FAILURES, ids=[f[0]["code"] for f in FAILURES]
)
def test_a_failure_before_content_is_bedrock_s_error_the_sdk_raises(
    failure: dict[str, Any], raised: type[Exception], status: int
) -> None:
    finish = {"type": "finish", "reason": {"kind": "error", "failure": failure}}
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry([finish]))))
    with pytest.raises(raised) as caught:
        client_on(endpoint).messages.create(model=MODEL, max_tokens=9, messages=PROMPT, stream=True)
    error: Any = caught.value
    assert error.status_code == status
    assert error.body == {"message": failure["message"]}
    headers = {k.lower(): v for k, v in error.response.headers.items()}
    decoded = WIRE.failure(status, error.body, headers)
    assert decoded["code"] == failure["code"]
    if failure["code"] == "RATE_LIMIT":
        assert decoded["providerRetryAfterMs"] == 2000
    assert endpoint.errors == []


def test_a_failure_after_content_is_an_exception_message_the_sdk_raises() -> None:
    failure = {"message": "cut", "code": "RATE_LIMIT"}
    chunks = [*TEXT[:3], {"type": "finish", "reason": {"kind": "error", "failure": failure}}]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    stream = client_on(endpoint).messages.create(
        model=MODEL, max_tokens=9, messages=PROMPT, stream=True
    )
    seen: list[str] = []
    with pytest.raises(anthropic.APIStatusError) as raised:
        seen.extend(event.type for event in stream)
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "throttlingException", "message": "cut"},
    }
    assert seen == ["message_start", "content_block_start", *["content_block_delta"] * 2]


# --- decoding a live stream (recording) --------------------------------------------------------


@pytest.mark.parametrize("cut", [1, 9, 1000])
def test_the_splitter_unwraps_each_event_and_the_anthropic_decoder_reads_it(cut: int) -> None:
    raw = _encoded(TOOL)
    splitter = CHUNK_STREAM.splitter()
    frames = [f for i in range(0, len(raw), cut) for f in splitter.feed_raw(raw[i : i + cut])]
    assert splitter.pending == b""
    assert b"".join(f.raw for f in frames) == raw
    assert frames[0].name == "message_start"
    assert [f.name for f in frames if WIRE.ends_answer(f, None)] == ["message_stop"]
    decoder = WIRE.decoder()
    assert isinstance(decoder, AnthropicDecoder)
    chunks = [c for f in frames for c in decoder.feed(orjson.loads(f.data or "null"))]
    assert decoder.done
    ends = [c["block"] for c in chunks if c["type"] == "block-end"]
    assert ends[1] == {
        "type": "tool-call",
        "id": "tu_1",
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_a_whole_answer_decodes_as_its_stream() -> None:
    decoded = WIRE.decode_whole(WIRE.whole(list(TEXT), model=MODEL, call_id="c"))
    assert [c["block"] for c in decoded if c["type"] == "block-end"] == [
        {"type": "text", "text": "It is 5."}
    ]
    assert decoded[-1] == {"type": "finish", "reason": {"kind": "stop"}}


def test_live_exceptions_and_a_corrupt_stream_are_failures() -> None:
    raw = bedrock.exception_message("throttlingException", "Too many requests")
    (frame,) = CHUNK_STREAM.splitter().feed_raw(raw)
    event = orjson.loads(frame.data or "")
    assert WIRE.stream_failure(event) == {"message": "Too many requests", "code": "RATE_LIMIT"}
    broken = bytearray(_encoded(TEXT))
    broken[-1] ^= 0xFF  # the last message's CRC no longer holds
    frames = CHUNK_STREAM.splitter().feed_raw(bytes(broken))
    failure = WIRE.stream_failure(orjson.loads(frames[-1].data or ""))
    assert failure is not None
    assert "corrupt" in failure["message"]
    assert WIRE.stream_failure({"type": "content_block_stop", "index": 0}) is None
    for payload in (b'{"bytes": "not base64!"}', b'{"bytes": "bm90IGpzb24="}', b"{}", b"{"):
        (frame,) = CHUNK_STREAM.splitter().feed_raw(bedrock.EVENT_STREAM.frame(payload, "chunk"))
        failure = WIRE.stream_failure(orjson.loads(frame.data or ""))
        assert failure is not None, payload  # never dropped in silence
        assert "carries no Anthropic event" in failure["message"]


def test_a_secret_in_a_relayed_event_is_replaced_inside_its_base64() -> None:
    secret = "live-secret-0123456789"
    event = {
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": secret},
    }
    raw = CHUNK_STREAM.frame(orjson.dumps(event))
    assert secret.encode() not in raw  # base64: a plain search would miss it
    edited = CHUNK_STREAM.rewritten(raw, lambda p: p.replace(secret.encode(), b"[REDACTED]"))
    (frame,) = CHUNK_STREAM.splitter().feed_raw(edited)
    assert orjson.loads(frame.data or "")["delta"]["text"] == "[REDACTED]"
    exception = bedrock.exception_message("throttlingException", secret)
    edited = CHUNK_STREAM.rewritten(exception, lambda p: p.replace(secret.encode(), b"[X]"))
    assert b"[X]" in edited


# --- recording: the proxy, signing, the variables -------------------------------------------------


def test_the_upstream_replaces_the_model_in_the_path_and_keeps_the_body() -> None:
    url, body = WIRE.upstream("https://b.example/base", STREAM, b"{}", "anthropic.claude-v2:1")
    assert url == "https://b.example/base/model/anthropic.claude-v2:1/invoke-with-response-stream"
    assert body == b"{}"
    assert (
        WIRE.upstream("https://b.example", STREAM, b"{}", None)[0] == f"https://b.example{STREAM}"
    )


def test_the_proxy_relays_the_live_stream_re_signed_by_botocore(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-key-example-0123")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    live = _encoded(TEXT)
    chunks, relay, seen = relay_live(
        WIRE,
        STREAM,
        live,
        cuts=(5, 150),  # messages split between reads
        base_url="https://bedrock-runtime.eu-west-3.amazonaws.com",
        httpx=httpx_module(),
    )
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    assert "".join(c.get("text", "") for c in chunks if c["type"] == "text-delta") == "It is 5."
    assert relay.take() + relay.take_ending() == live
    (request,) = seen
    assert request.url.path == STREAM
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-3/bedrock/" in request.headers["authorization"]


def test_the_variables_point_anthropic_bedrock_at_a_scripted_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = endpoint_env("http://127.0.0.1:5", "k")
    assert env["ANTHROPIC_BEDROCK_BASE_URL"] == "http://127.0.0.1:5"
    assert env["AWS_REGION"] == "us-east-1"
    assert WIRE.record_base_url_variable == "DSH_RECORD_BEDROCK_BASE_URL"
    assert RECORD_URL_VARIABLES.count("DSH_RECORD_BEDROCK_BASE_URL") == 1
    answer = Answer(tool_calls=[ToolCall("add", '{"a": 2}')])
    with ScriptedModel([Rule(answer)]).serve(idle_timeout=30) as server:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
        client = anthropic.AnthropicBedrock(max_retries=0)  # reads the variables only
        with client.messages.stream(model=MODEL, max_tokens=9, messages=PROMPT) as events:
            reply = events.get_final_message()
        requests = list(server.requests)
    assert reply.content[0].type == "tool_use"
    assert reply.content[0].input == {"a": 2}
    assert [r.path for r in requests] == [STREAM]
    assert requests[0].headers["authorization"].startswith("AWS4-HMAC-SHA256 ")  # the SDK signed


def test_a_bedrock_token_in_the_environment_is_replaced_by_the_dummy_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "a-real-token-0123")
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    client = client_on(endpoint)  # the SDK refuses AWS keys beside that token
    assert client.api_key != "a-real-token-0123"
    reply = client.messages.create(model=MODEL, max_tokens=9, messages=PROMPT)
    assert reply.content[0].text == "It is 5."
    assert endpoint.errors == []
