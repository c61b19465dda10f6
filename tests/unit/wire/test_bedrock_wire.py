"""The Bedrock Converse wire: requests, the AWS event stream, errors, signing, boto3 in process."""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.chunks import IT_IS_5, add_call
from support.relayed import relay_live
from support.scenarios import one_session

boto3 = pytest.importorskip("boto3", reason="the Bedrock wire's client is boto3")

from botocore.auth import SigV4Auth  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.credentials import Credentials  # noqa: E402
from botocore.eventstream import EventStreamBuffer  # noqa: E402
from botocore.exceptions import ClientError, EventStreamError  # noqa: E402

from pytest_dsh_replay._endpoint.endpoint import Endpoint  # noqa: E402
from pytest_dsh_replay._endpoint.transport import sdk_client  # noqa: E402
from pytest_dsh_replay._replay.model import ReplayModel  # noqa: E402
from pytest_dsh_replay._scripts.entries import ChunksEntry  # noqa: E402
from pytest_dsh_replay._wire import bedrock  # noqa: E402
from pytest_dsh_replay._wire.base import httpx_module  # noqa: E402
from pytest_dsh_replay._wire.bedrock import (  # noqa: E402
    EVENT_STREAM,
    WIRE,
    BedrockDecoder,
    bedrock_auth_headers,
    bedrock_failure,
    bedrock_request,
)
from pytest_dsh_replay._wire.table import served_routes, wire_for  # noqa: E402

MODEL = "anthropic.claude-3-5-sonnet-20240620-v1:0"
STREAM = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
TOOL = add_call("tu_1")
TEXT = IT_IS_5
TOOL_CONFIG = {
    "tools": [
        {
            "toolSpec": {
                "name": "add",
                "description": "adds",
                "inputSchema": {"json": {"type": "object"}},
            }
        }
    ]
}

KWARGS: dict[str, Any] = {"system": [{"text": "You add."}], "toolConfig": TOOL_CONFIG}


single = partial(one_session, path=Path("mem"), recorded_id="rec", first="add 2 and 3")
"""One primary session of ``entries`` (``first=`` another first user message)."""


def client_on(endpoint: Endpoint, **options: object) -> Any:
    return sdk_client("bedrock", endpoint, None, dict(options))


def messages(raw: bytes) -> list[tuple[dict[str, Any], Any]]:
    """Each event stream message's headers and JSON payload, as botocore decodes them."""
    buffer = EventStreamBuffer()
    buffer.add_data(raw)
    return [(dict(m.headers), orjson.loads(m.payload)) for m in buffer]


def turn(client: Any, stream: bool) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One user turn through boto3: the answer's content blocks and its stop reason/usage."""
    first = [{"role": "user", "content": [{"text": "add 2 and 3"}]}]
    kwargs = {"modelId": MODEL, **KWARGS}
    if not stream:
        answer = client.converse(messages=first, **kwargs)
        return answer["output"]["message"]["content"], answer
    events = list(client.converse_stream(messages=first, **kwargs)["stream"])
    blocks: dict[int, dict[str, Any]] = {}
    tail: dict[str, Any] = {}
    for event in events:
        if "contentBlockStart" in event:
            start = event["contentBlockStart"]
            use = start["start"]["toolUse"]
            blocks[start["contentBlockIndex"]] = {"toolUse": {**use, "input": ""}}
        elif "contentBlockDelta" in event:
            delta = event["contentBlockDelta"]
            block = blocks.setdefault(delta["contentBlockIndex"], {})
            if "toolUse" in delta["delta"]:
                block["toolUse"]["input"] += delta["delta"]["toolUse"]["input"]
            elif "reasoningContent" in delta["delta"]:
                text = block.setdefault("reasoningContent", {"reasoningText": {"text": ""}})
                text["reasoningText"]["text"] += delta["delta"]["reasoningContent"]["text"]
            else:
                block["text"] = block.get("text", "") + delta["delta"]["text"]
        elif "messageStop" in event:
            tail["stopReason"] = event["messageStop"]["stopReason"]
        elif "metadata" in event:
            tail["usage"] = event["metadata"]["usage"]
    content = [blocks[i] for i in sorted(blocks)]
    for block in content:
        if "toolUse" in block:
            block["toolUse"]["input"] = orjson.loads(block["toolUse"]["input"])
    return content, tail


# --- routes and requests --------------------------------------------------------------------


def test_the_routes_are_in_the_table_and_named_by_a_404() -> None:
    assert wire_for(STREAM) is WIRE
    assert wire_for("/model/m/converse") is WIRE
    assert wire_for("/model/m/converse-streams") is None
    assert "POST /model/{model}/converse-stream" in served_routes()
    response = Endpoint.replaying(ReplayModel(single())).handle(
        "POST", "/model/m/conversex", {}, b"{}"
    )
    assert response.status == 404
    assert b"/model/{model}/converse-stream" in b"".join(response.body)


def test_a_converse_body_is_read_into_the_in_process_shape() -> None:
    body = {
        "system": [{"text": "Be "}, {"text": "brief."}],
        "messages": [
            {"role": "user", "content": [{"text": "add 2 and 3"}]},
            {
                "role": "assistant",
                "content": [
                    {"reasoningContent": {"reasoningText": {"text": "hm", "signature": "s"}}},
                    {"text": "Adding."},
                    {"toolUse": {"toolUseId": "tu_1", "name": "add", "input": {"a": 2}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "tu_1", "content": [{"json": {"r": 5}}]}},
                    {"text": "thanks"},
                ],
            },
        ],
        "toolConfig": TOOL_CONFIG,
        "inferenceConfig": {"maxTokens": 64, "temperature": 0.5, "stopSequences": ["X"]},
    }
    assert bedrock_request(body, STREAM) == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "add 2 and 3"},
            {
                "role": "assistant",
                "content": "Adding.",
                "reasoning_content": "hm",
                "tool_calls": [
                    {
                        "id": "tu_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a":2}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "tu_1", "content": '{"r":5}'},
            {"role": "user", "content": "thanks"},
        ],
        "model": MODEL,
        "stream": True,
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "adds",
                    "parameters": {"type": "object"},
                },
            }
        ],
        "max_tokens": 64,
        "temperature": 0.5,
        "stop": ["X"],
    }
    assert bedrock_request({"messages": []}, "/model/m/converse")["stream"] is False


def test_a_misshapen_request_is_a_validation_exception() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single()))
    response = endpoint.handle("POST", STREAM, {}, b'{"messages": "hi"}')
    assert response.status == 400
    assert ("x-amzn-errortype", "ValidationException") in response.headers
    assert "messages" in orjson.loads(b"".join(response.body))["message"]


# --- answers, through boto3 -------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_boto3_calls_a_tool_and_continues_the_session(stream: bool) -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    client = client_on(endpoint)
    content, tail = turn(client, stream)
    assert content == [
        {"reasoningContent": {"reasoningText": {"text": "think"}}},
        {"toolUse": {"toolUseId": "tu_1", "name": "add", "input": {"a": 2, "b": 3}}},
    ]
    assert tail["stopReason"] == "tool_use"
    assert tail["usage"] == {
        "inputTokens": 5,
        "outputTokens": 4,
        "totalTokens": 11,
        "cacheReadInputTokens": 2,
    }
    second = [
        {"role": "user", "content": [{"text": "add 2 and 3"}]},
        {"role": "assistant", "content": content},
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "tu_1", "content": [{"text": "5"}]}}],
        },
    ]
    if stream:
        events = client.converse_stream(modelId=MODEL, messages=second, **KWARGS)
        names = [next(iter(e)) for e in events["stream"]]
        assert names == ["messageStart", *["contentBlockDelta"] * 2, "contentBlockStop",
                         "messageStop", "metadata"]  # fmt: skip
    else:
        answer = client.converse(modelId=MODEL, messages=second, **KWARGS)
        assert answer["output"]["message"]["content"] == [{"text": "It is 5."}]
        assert answer["stopReason"] == "end_turn"
    assert endpoint.errors == []
    model.assert_consumed()
    assert len(model.bindings) == 1  # the second request continued the same session


def test_the_stream_is_the_aws_event_stream_with_its_crcs() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TOOL))))
    body = orjson.dumps({"messages": [{"role": "user", "content": [{"text": "add 2 and 3"}]}]})
    response = endpoint.handle("POST", STREAM, {}, body)
    assert response.status == 200
    assert response.headers[0] == ("content-type", "application/vnd.amazon.eventstream")
    got = messages(b"".join(response.body))  # botocore checks both CRCs of each message
    assert [h[":message-type"] for h, _ in got] == ["event"] * len(got)
    assert {h[":content-type"] for h, _ in got} == {"application/json"}
    assert [(h[":event-type"], p) for h, p in got] == [
        ("messageStart", {"role": "assistant"}),
        (
            "contentBlockDelta",
            {"delta": {"reasoningContent": {"text": "think"}}, "contentBlockIndex": 0},
        ),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        (
            "contentBlockStart",
            {"start": {"toolUse": {"toolUseId": "tu_1", "name": "add"}}, "contentBlockIndex": 1},
        ),
        ("contentBlockDelta", {"delta": {"toolUse": {"input": '{"a"'}}, "contentBlockIndex": 1}),
        (
            "contentBlockDelta",
            {"delta": {"toolUse": {"input": ': 2, "b": 3}'}}, "contentBlockIndex": 1},
        ),
        ("contentBlockStop", {"contentBlockIndex": 1}),
        ("messageStop", {"stopReason": "tool_use"}),
        (
            "metadata",
            {
                "usage": {
                    "inputTokens": 5,
                    "outputTokens": 4,
                    "totalTokens": 11,
                    "cacheReadInputTokens": 2,
                },
                "metrics": {"latencyMs": 0},
            },
        ),
    ]


OVERFLOW = "Input is too long for requested model."
THROTTLED = "ThrottlingException"
FAILURES: list[tuple[dict[str, Any], int, str]] = [
    ({"message": "slow", "code": "RATE_LIMIT", "providerRetryAfterMs": 2000}, 429, THROTTLED),
    ({"message": OVERFLOW, "code": "CONTEXT_WINDOW_EXCEEDED"}, 400, "ValidationException"),
    ({"message": "busy", "code": "OVERLOADED"}, 503, "ServiceUnavailableException"),
    ({"message": "no", "code": "AUTH", "status": 403}, 403, "AccessDeniedException"),
    ({"message": "boom", "code": "SERVER"}, 500, "InternalServerException"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("failure", "status", "name"), FAILURES, ids=[f[0]["code"] for f in FAILURES]
)
def test_a_failure_before_content_is_the_aws_error_boto3_raises(
    failure: dict[str, Any], status: int, name: str
) -> None:
    finish = {"type": "finish", "reason": {"kind": "error", "failure": failure}}
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry([finish]))))
    with pytest.raises(ClientError) as raised:
        client_on(endpoint).converse_stream(
            modelId=MODEL, messages=[{"role": "user", "content": [{"text": "add 2 and 3"}]}]
        )
    error = raised.value.response
    assert error["Error"]["Code"] == name
    assert failure["message"] in error["Error"]["Message"]
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    headers = error["ResponseMetadata"]["HTTPHeaders"]
    decoded = bedrock_failure(status, {"message": error["Error"]["Message"]}, headers)
    assert decoded["code"] == {"SERVER": "UNKNOWN"}.get(failure["code"], failure["code"])
    if failure["code"] == "RATE_LIMIT":
        assert decoded["providerRetryAfterMs"] == 2000
    assert endpoint.errors == []


def test_a_failure_after_content_is_an_exception_event() -> None:
    failure = {"message": "cut", "code": "RATE_LIMIT"}
    chunks = [*TEXT[:3], {"type": "finish", "reason": {"kind": "error", "failure": failure}}]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    stream = client_on(endpoint).converse_stream(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "add 2 and 3"}]}]
    )["stream"]
    seen = []
    with pytest.raises(EventStreamError) as raised:
        seen.extend(stream)
    assert raised.value.response["Error"] == {"Code": "throttlingException", "Message": "cut"}
    assert [next(iter(e)) for e in seen] == [
        "messageStart",
        "contentBlockDelta",
        "contentBlockDelta",
    ]


def test_content_filter_is_a_stop_reason() -> None:
    failure = {"message": "blocked", "code": "CONTENT_FILTER"}
    chunks = [*TEXT[:3], {"type": "finish", "reason": {"kind": "error", "failure": failure}}]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    answer = client_on(endpoint).converse(
        modelId=MODEL, messages=[{"role": "user", "content": [{"text": "add 2 and 3"}]}]
    )
    assert answer["stopReason"] == "content_filtered"


# --- decoding a live stream (recording) --------------------------------------------------------


def _encoded(chunks: list[dict[str, Any]]) -> bytes:
    encoder = WIRE.encoder({}, model=MODEL, call_id="c")
    return encoder.start() + encoder.feed_all(chunks[:-1]) + encoder.finish(chunks[-1]["reason"])


@pytest.mark.parametrize("cut", [1, 7, 1000])
def test_the_splitter_and_decoder_read_our_stream_back(cut: int) -> None:
    raw = _encoded(TOOL)
    splitter = EVENT_STREAM.splitter()
    frames = [f for i in range(0, len(raw), cut) for f in splitter.feed_raw(raw[i : i + cut])]
    assert splitter.pending == b""
    assert b"".join(f.raw for f in frames) == raw
    decoder = BedrockDecoder()
    chunks = [c for f in frames for c in decoder.feed(orjson.loads(f.data or "null"))]
    assert decoder.done
    assert [f.name for f in frames if WIRE.ends_answer(f, None)] == ["metadata"]
    tool = [c for c in chunks if c["type"] == "block-end"][1]["block"]
    assert tool == {
        "type": "tool-call",
        "id": "tu_1",
        "name": "add",
        "arguments": '{"a": 2, "b": 3}',
    }
    assert chunks[-2:] == [
        {
            "type": "usage",
            "usage": {"inputTokens": 5, "outputTokens": 4, "cacheReadTokens": 2, "totalTokens": 11},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def test_a_whole_answer_decodes_as_its_stream() -> None:
    decoded = WIRE.decode_whole(WIRE.whole(list(TOOL), model=MODEL, call_id="c"))
    assert [c["block"] for c in decoded if c["type"] == "block-end"] == [
        {"type": "reasoning", "text": "think"},
        {"type": "tool-call", "id": "tu_1", "name": "add", "arguments": '{"a":2,"b":3}'},
    ]
    assert decoded[-1] == {"type": "finish", "reason": {"kind": "tool-calls"}}


def test_live_exceptions_and_a_corrupt_stream_are_failures() -> None:
    raw = bedrock.exception_message("throttlingException", "Too many requests")
    (frame,) = EVENT_STREAM.splitter().feed_raw(raw)
    event = orjson.loads(frame.data or "")
    assert WIRE.stream_failure(event) == {"message": "Too many requests", "code": "RATE_LIMIT"}
    broken = bytearray(_encoded(TEXT))
    broken[-1] ^= 0xFF  # the last message's CRC no longer holds
    frames = EVENT_STREAM.splitter().feed_raw(bytes(broken))
    failure = WIRE.stream_failure(orjson.loads(frames[-1].data or ""))
    assert failure is not None
    assert "corrupt" in failure["message"]
    headers = {
        "x-amzn-errortype": "ValidationException:http://internal.amazon.com/",
        "x-amzn-requestid": "r-1",
    }
    assert WIRE.failure(400, {"message": "Input is too long for requested model."}, headers) == {
        "message": "Input is too long for requested model.",
        "code": "CONTEXT_WINDOW_EXCEEDED",
        "status": 400,
        "requestId": "r-1",
    }


def test_a_secret_in_a_relayed_frame_is_replaced_and_the_frame_still_holds() -> None:
    secret = "live-secret-0123456789"
    raw = EVENT_STREAM.frame(
        orjson.dumps({"delta": {"text": secret}, "contentBlockIndex": 0}), "contentBlockDelta"
    )
    edited = EVENT_STREAM.rewritten(raw, lambda p: p.replace(secret.encode(), b"[REDACTED]"))
    ((headers, payload),) = messages(edited)
    assert headers[":event-type"] == "contentBlockDelta"
    assert payload["delta"]["text"] == "[REDACTED]"


# --- recording: the proxy and signing ------------------------------------------------------------


def test_signing_is_botocores_sigv4(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime

    import botocore.auth

    secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_SESSION_TOKEN", "token-example")
    now = datetime.datetime(2026, 1, 2, 3, 4, 5)
    monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: now)
    # the request as botocore's own client sends it (its path encoding), not sent anywhere
    sent: list[Any] = []
    client = boto3.client(
        "bedrock-runtime",
        region_name="eu-west-3",
        endpoint_url="https://bedrock-runtime.eu-west-3.amazonaws.com",
        aws_access_key_id="AKIDEXAMPLE",
        aws_secret_access_key=secret,
    )
    client.meta.events.register("before-send", lambda request, **kw: _stop(sent, request))
    with pytest.raises(_Stopped):
        client.converse(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])
    url, body = sent[0].url, sent[0].body
    assert url.endswith("/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse")
    got = bedrock_auth_headers("unused", url, body)
    expected = AWSRequest(method="POST", url=url, data=body)
    credentials = Credentials("AKIDEXAMPLE", secret, "token-example")
    SigV4Auth(credentials, "bedrock", "eu-west-3").add_auth(expected)
    assert got == {k.lower(): v for k, v in expected.headers.items()}
    assert got["authorization"].startswith(
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260102/eu-west-3/bedrock/aws4_request, "
        "SignedHeaders=host;x-amz-date;x-amz-security-token, Signature="
    )
    assert got["x-amz-security-token"] == "token-example"
    assert "token-example" not in got["authorization"]
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    other = bedrock_auth_headers("unused", "http://127.0.0.1:9/model/m/converse", b"{}")
    assert "/ap-south-1/bedrock/" in other["authorization"]


class _Stopped(Exception):
    pass


def _stop(sent: list[Any], request: Any) -> None:
    sent.append(request)
    raise _Stopped


def test_the_upstream_replaces_the_model_in_the_path() -> None:
    url, body = WIRE.upstream("https://b.example/base", STREAM, b"{}", "amazon.nova-pro-v1:0")
    assert url == "https://b.example/base/model/amazon.nova-pro-v1%3A0/converse-stream"
    assert body == b"{}"
    assert (
        WIRE.upstream("https://b.example", STREAM, b"{}", None)[0] == f"https://b.example{STREAM}"
    )


def test_the_proxy_relays_a_live_event_stream_byte_for_byte(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-key-example-0123")
    live = _encoded(TEXT)
    chunks, relay, seen = relay_live(
        WIRE,
        STREAM,
        live,
        cuts=(5, 200),  # messages split between reads
        base_url="https://bedrock-runtime.us-west-2.amazonaws.com",
        httpx=httpx_module(),
    )
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
    assert relay.take() + relay.take_ending() == live
    (request,) = seen
    assert request.headers["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/us-west-2/bedrock/" in request.headers["authorization"]


def test_the_client_is_sync_only_and_env_points_boto3_at_the_endpoint() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single()))
    with pytest.raises(Exception, match="no async client"):
        sdk_client("bedrock", endpoint, object(), {})  # type: ignore[arg-type]
    env = WIRE.endpoint_env("http://127.0.0.1:5", "k")
    assert env["AWS_ENDPOINT_URL_BEDROCK_RUNTIME"] == "http://127.0.0.1:5"
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "us-east-1"
