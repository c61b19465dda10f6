"""The OpenAI Responses wire: requests read, events encoded, errors, continuation by id."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from support.chunks import text_entry

from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._format.reply import assemble_reply
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, ReplayEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript
from pytest_dsh_replay._wire.base import Answered, BadRequest, SSEParser, httpx_module
from pytest_dsh_replay._wire.responses import (
    ResponsesDecoder,
    ResponsesEncoder,
    decode_response,
    read_responses_request,
    responses_object,
)

TOOL: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "reasoning"},
    {"type": "reasoning-delta", "index": 0, "text": "think"},
    {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "think"}},
    {"type": "block-start", "index": 1, "blockType": "tool-call"},
    {"type": "tool-call-delta", "index": 1, "id": "call_1", "name": "look", "argumentsDelta": "{"},
    {"type": "tool-call-delta", "index": 1, "id": "call_1", "argumentsDelta": '"q":1}'},
    {
        "type": "block-end",
        "index": 1,
        "block": {"type": "tool-call", "id": "call_1", "name": "look", "arguments": '{"q":1}'},
    },
    {
        "type": "usage",
        "usage": {
            "inputTokens": 3,
            "outputTokens": 2,
            "cacheReadTokens": 1,
            "reasoningTokens": 1,
            "totalTokens": 6,
        },
    },
    {"type": "finish", "reason": {"kind": "tool-calls"}},
]


class _NoHistory:
    def conversation(self, call_id: str) -> list[Any] | None:
        return None

    def answered(self, call_id: str) -> Answered | None:
        return None

    def hold(self) -> None:
        raise AssertionError("the Responses wire keeps every answer: it never asks")


def _endpoint(*entries: ReplayEntry) -> Endpoint:
    script = SessionScript(
        file="session.jsonl",
        recorded_id="p",
        created_at=0,
        seed_length=0,
        parent_session=None,
        primary=True,
        entries=tuple(entries),
    )
    return Endpoint.replaying(ReplayModel(Scenario(Path("mem"), (script,))))


def _client(endpoint: Endpoint) -> openai.OpenAI:
    http = httpx_module().Client(transport=sync_transport(endpoint))
    return openai.OpenAI(base_url="http://t/v1", api_key="k", http_client=http, max_retries=0)


def _events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for name, data in SSEParser().feed(raw):
        event = json.loads(data)
        assert name == event["type"]
        out.append(event)
    return out


# --- requests -------------------------------------------------------------------------------


def test_input_items_read_into_chat_messages() -> None:
    body = {
        "model": "m",
        "instructions": "be brief",
        "input": [
            {"role": "user", "content": "hi"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}]},
            {"type": "reasoning", "id": "rs", "summary": [{"type": "summary_text", "text": "t"}]},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok", "annotations": []}],
            },
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "42"},
        ],
        "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": True}],
        "max_output_tokens": 64,
        "reasoning": {"effort": "low"},
        "store": False,
    }
    read = read_responses_request(body, _NoHistory())
    assert read["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {
            "role": "assistant",
            "content": "ok",
            "reasoning_content": "t",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    assert read["tools"] == [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert read["max_tokens"] == 64
    assert read["reasoning_effort"] == "low"
    assert read["store"] is False
    assert "input" not in read


def test_a_string_input_is_one_user_message() -> None:
    read = read_responses_request({"input": "hello"}, _NoHistory())
    assert read["messages"] == [{"role": "user", "content": "hello"}]


def test_an_unknown_previous_response_id_is_the_apis_400() -> None:
    with pytest.raises(BadRequest) as refused:
        read_responses_request({"input": "x", "previous_response_id": "resp_nope"}, _NoHistory())
    assert refused.value.error.status == 400
    error = json.loads(refused.value.error.body)["error"]
    assert error["code"] == "previous_response_not_found"
    assert error["param"] == "previous_response_id"


def test_an_unknown_previous_response_id_over_http_is_400_and_no_call() -> None:
    endpoint = _endpoint(text_entry("never"))
    with pytest.raises(openai.BadRequestError, match="resp_nope"):
        _client(endpoint).responses.create(model="m", input="x", previous_response_id="resp_nope")
    assert endpoint.errors == []


# --- answers --------------------------------------------------------------------------------


def test_stream_events_are_numbered_from_zero_and_end_with_completed() -> None:
    encoder = ResponsesEncoder(model="m", response_id="resp_1")
    raw = encoder.start() + b"".join(encoder.feed(c) for c in TOOL[:-1])
    raw += encoder.finish(TOOL[-1]["reason"])
    events = _events(raw)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.reasoning_summary_text.delta" in kinds
    assert kinds.count("response.function_call_arguments.delta") == 2
    assert b"[DONE]" not in raw
    completed = events[-1]["response"]
    assert completed["status"] == "completed"
    assert [item["type"] for item in completed["output"]] == ["reasoning", "function_call"]
    assert completed["output"][1]["call_id"] == "call_1"
    assert completed["output"][1]["arguments"] == '{"q":1}'
    assert completed["usage"] == {
        "input_tokens": 4,
        "input_tokens_details": {"cached_tokens": 1},
        "output_tokens": 2,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": 6,
    }
    assert encoder.marks() == ["", "call_1"]


def test_max_tokens_ends_with_incomplete() -> None:
    chunks = [*text_entry("cut").chunks[:-1], {"type": "finish", "reason": {"kind": "max-tokens"}}]
    encoder = ResponsesEncoder(model="m", response_id="resp_1")
    raw = encoder.start() + b"".join(encoder.feed(c) for c in chunks[:-1])
    last = _events(raw + encoder.finish(chunks[-1]["reason"]))[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    whole = responses_object(chunks, model="m", call_id="resp_1")
    assert whole["status"] == "incomplete"
    assert whole["output"][0]["content"][0]["text"] == "cut"


def test_encoded_events_decode_back_to_the_same_reply() -> None:
    encoder = ResponsesEncoder(model="m", response_id="resp_1")
    raw = encoder.start() + b"".join(encoder.feed(c) for c in TOOL[:-1])
    raw += encoder.finish(TOOL[-1]["reason"])
    decoder = ResponsesDecoder()
    chunks = [c for e in _events(raw) for c in decoder.feed(e)]
    assert decoder.done
    assert decoder.response_id == "resp_1"
    assert decoder.end() == []
    assert assemble_reply(chunks) == assemble_reply(TOOL)
    whole = responses_object(TOOL, model="m", call_id="resp_1")
    assert assemble_reply(decode_response(whole)) == assemble_reply(TOOL)


def test_a_cut_stream_decodes_as_an_error_finish() -> None:
    decoder = ResponsesDecoder()
    decoder.feed({"type": "response.output_text.delta", "item_id": "m", "delta": "hal"})
    assert decoder.end()[-1]["reason"]["kind"] == "error"


# --- over HTTP ------------------------------------------------------------------------------


def test_the_sdk_streams_and_continues_by_previous_response_id() -> None:
    endpoint = _endpoint(ChunksEntry(TOOL), text_entry("done"), text_entry("again"))
    client = _client(endpoint)
    first = client.responses.create(model="m", input="hi")
    assert first.output[1].type == "function_call"
    with client.responses.stream(
        model="m",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": "call_1", "output": "42"}],
    ) as stream:
        second = stream.get_final_response()
    assert second.output_text == "done"
    third = client.responses.create(
        model="m", previous_response_id=second.id, input="and again?", stream=False
    )
    assert third.output_text == "again"
    assert endpoint.errors == []


def test_full_input_continues_the_session_by_content() -> None:
    endpoint = _endpoint(ChunksEntry(TOOL), text_entry("done"))
    client = _client(endpoint)
    first = client.responses.create(model="m", input=[{"role": "user", "content": "hi"}])
    items: list[Any] = [{"role": "user", "content": "hi"}]
    items += [item.model_dump(exclude_none=True) for item in first.output]
    items.append({"type": "function_call_output", "call_id": "call_1", "output": "42"})
    assert client.responses.create(model="m", input=items).output_text == "done"
    assert endpoint.errors == []


@pytest.mark.parametrize(
    ("code", "status", "error"),
    [
        ("AUTH", 401, openai.AuthenticationError),
        ("RATE_LIMIT", 429, openai.RateLimitError),
        ("OVERLOADED", 503, openai.InternalServerError),
        ("CONTEXT_WINDOW_EXCEEDED", 400, openai.BadRequestError),
        ("SERVER", 500, openai.InternalServerError),
    ],
)
def test_a_failure_before_content_is_the_apis_http_error(
    code: str, status: int, error: type[Exception]
) -> None:
    failure = {"message": f"recorded {code}", "code": code}
    entry = ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": failure}}])
    client = _client(_endpoint(entry))
    with pytest.raises(error) as raised:
        client.responses.create(model="m", input="x", stream=True)
    assert getattr(raised.value, "status_code", None) == status


def test_a_failure_after_content_is_response_failed_then_error() -> None:
    failure = {"message": "went away", "code": "OVERLOADED"}
    chunks = [
        *text_entry("part").chunks[:-1],
        {"type": "finish", "reason": {"kind": "error", "failure": failure}},
    ]
    endpoint = _endpoint(ChunksEntry(chunks))
    http = httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")
    raw = http.post("/v1/responses", json={"model": "m", "input": "x", "stream": True}).content
    events = _events(raw)
    assert [e["type"] for e in events[-2:]] == ["response.failed", "error"]
    assert events[-2]["response"]["error"]["message"] == "went away"
    assert events[-1]["message"] == "went away"
    # the SDK hands both to its caller as typed events, as it does the API's
    stream = _client(_endpoint(ChunksEntry(chunks))).responses.create(
        model="m", input="x", stream=True
    )
    kinds = [type(event).__name__ for event in stream]
    assert kinds[-2:] == ["ResponseFailedEvent", "ResponseErrorEvent"]


@pytest.mark.parametrize(
    ("chunk", "kind", "fields", "after"),
    [
        (
            {"type": "text-delta", "index": 0, "text": 'he said "hi"\n\u00e9\U0001f600'},
            "response.output_text.delta",
            {"content_index": 0},
            {"logprobs": []},
        ),
        (
            {"type": "reasoning-delta", "index": 0, "text": "think\u2028"},
            "response.reasoning_summary_text.delta",
            {"summary_index": 0},
            {},
        ),
        (
            {
                "type": "tool-call-delta",
                "index": 0,
                "id": "c",
                "name": "f",
                "argumentsDelta": '{"a',
            },
            "response.function_call_arguments.delta",
            {},
            {},
        ),
    ],
)
def test_a_delta_event_is_byte_for_byte_the_dict_it_stands_for(
    chunk: dict[str, Any], kind: str, fields: dict[str, Any], after: dict[str, Any]
) -> None:
    encoder = ResponsesEncoder(model="m", response_id="resp_9")
    encoder.start()
    opened = encoder.feed(chunk)
    again = encoder.feed(chunk)  # a second delta on the same item: the kept frame
    for out in (opened, again):
        frame = out.split(b"\n\n")[-2] + b"\n\n"
        payload = json.loads(frame.split(b"data: ", 1)[1])
        delta = chunk.get("text", chunk.get("argumentsDelta"))
        expected = {
            "type": kind,
            "sequence_number": payload["sequence_number"],
            "item_id": payload["item_id"],
            "output_index": 0,
            **fields,
            "delta": delta,
            **after,
        }
        assert frame == b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(expected) + b"\n\n"
    assert json.loads(again.split(b"data: ", 1)[1])["sequence_number"] == (
        json.loads(opened.split(b"\n\n")[-2].split(b"data: ", 1)[1])["sequence_number"] + 1
    )
