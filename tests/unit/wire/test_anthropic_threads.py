"""The Messages wire's server-held threads: a continuation read as the whole conversation.

The anthropic SDK's tool runner (and ``client.beta.messages.thread``) sends
``thread: {"type": "create"}`` first, then ``{"type": "continue", "previous_message_id"}``
with only the new messages: no history, no ``system``, no ``tools``
(docs/wires.md#anthropic-threads).
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
import orjson
import pytest
from anthropic.types import ThreadNotFoundError
from support.chunks import text_entry
from support.scenarios import one_session
from support.tool_runner_agent import MUSEUM, PLAN, SYSTEM, TASK, WEATHER, plan_day

from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._errors import ReplayConsumptionError
from pytest_dsh_replay._format.events import StreamChunk
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._wire.anthropic import answer_content, read_thread
from pytest_dsh_replay._wire.base import Answered, BadRequest, httpx_module

TOOLS = [{"name": "look", "input_schema": {"type": "object"}}]


def tool_call(call_id: str, name: str, arguments: str, *, text: str = "") -> list[StreamChunk]:
    """One finished call: ``text`` (if any), then one tool call."""
    chunks: list[StreamChunk] = []
    if text:
        chunks += [
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": text},
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        ]
    index = len(chunks) // 3
    block = {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
    return [
        *chunks,
        {"type": "block-start", "index": index, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": index,
            "id": call_id,
            "name": name,
            "argumentsDelta": arguments,
        },
        {"type": "block-end", "index": index, "block": block},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


class _Kept:
    """A history that holds the given answers (what the endpoint kept)."""

    def __init__(self, **answers: Answered):
        self.answers = answers
        self.held = False

    def conversation(self, call_id: str) -> list[Any] | None:
        raise AssertionError("the Messages wire reads the answer and its request")

    def answered(self, call_id: str) -> Answered | None:
        return self.answers.get(call_id)

    def hold(self) -> None:
        self.held = True


FIRST: dict[str, Any] = {
    "model": "m",
    "max_tokens": 64,
    "system": "Be brief.",
    "tools": TOOLS,
    "messages": [{"role": "user", "content": "Look it up."}],
}
ANSWER = tool_call("toolu_1", "look", '{"q": 1}', text="Looking.")
RESULT: dict[str, Any] = {
    "role": "user",
    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}],
}


def continued(previous: str = "msg_1", **fields: Any) -> dict[str, Any]:
    return {
        "model": "m2",
        "max_tokens": 32,
        "messages": [RESULT],
        "thread": {"type": "continue", "previous_message_id": previous},
        **fields,
    }


# --- reading a body -----------------------------------------------------------------------


def test_a_body_without_a_thread_is_read_as_it_is_and_its_answer_is_not_kept() -> None:
    history = _Kept()
    assert read_thread(FIRST, history) is FIRST
    assert not history.held


def test_a_thread_that_is_created_keeps_its_answer_and_the_body_without_the_field() -> None:
    history = _Kept()
    body = {**FIRST, "thread": {"type": "create"}}
    assert read_thread(body, history) == FIRST
    assert history.held
    assert body["thread"] == {"type": "create"}  # the body itself is never changed


def test_a_continuation_is_the_whole_conversation_it_continues() -> None:
    history = _Kept(msg_1=Answered(FIRST, ANSWER))
    read = read_thread(continued(), history)
    assert read == {
        "model": "m2",  # the continuation's own fields
        "max_tokens": 32,
        "system": "Be brief.",  # the thread's
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "Look it up."},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"q": 1}},
                ],
            },
            RESULT,
        ],
    }
    assert history.held  # a continuation is continued in turn


def test_a_continuation_that_sends_a_system_prompt_keeps_its_own() -> None:
    history = _Kept(msg_1=Answered(FIRST, ANSWER))
    read = read_thread(continued(system="Be long."), history)
    assert read["system"] == "Be long."
    assert read["tools"] == TOOLS


def test_an_answer_is_sent_back_as_the_sdk_sends_it() -> None:
    reasoning: list[StreamChunk] = [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "hmm"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "hmm"}},
    ]
    later = [{**c, "index": c["index"] + 1} if "index" in c else c for c in ANSWER]
    chunks = [*reasoning, *later]
    # the blocks and keys of the assistant message the SDK builds from the same answer
    assert answer_content(chunks) == [
        {"type": "thinking", "thinking": "hmm", "signature": ""},
        {"type": "text", "text": "Looking."},
        {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {"q": 1}},
    ]


def test_an_unknown_previous_message_id_is_the_apis_404_thread_not_found() -> None:
    with pytest.raises(BadRequest) as refused:
        read_thread(continued("msg_nope"), _Kept(msg_1=Answered(FIRST, ANSWER)))
    assert refused.value.error.status == 404
    body = json.loads(refused.value.error.body)
    assert body["error"]["type"] == "not_found_error"
    assert body["error"]["details"] == {"error_code": "thread_not_found"}
    assert "'msg_nope'" in body["error"]["message"]


@pytest.mark.parametrize(
    "thread",
    [
        "continue",
        {"type": "fork"},
        {"type": "continue"},
        {"type": "continue", "previous_message_id": ""},
        {"type": "continue", "previous_message_id": 7},
    ],
)
def test_a_malformed_thread_is_a_400_naming_the_field(thread: Any) -> None:
    with pytest.raises(BadRequest) as refused:
        read_thread({**FIRST, "thread": thread}, _Kept())
    assert refused.value.error.status == 400
    error = json.loads(refused.value.error.body)["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("Invalid 'thread'")
    assert error["message"].endswith(f"got {orjson.dumps(thread).decode()}")


# --- over HTTP, through the endpoint ---------------------------------------------------------


def _client(endpoint: Endpoint, sent: list[dict[str, Any]]) -> anthropic.Anthropic:
    def keep(request: Any) -> None:
        sent.append(json.loads(request.content))

    httpx = httpx_module()
    http = httpx.Client(transport=sync_transport(endpoint), event_hooks={"request": [keep]})
    return anthropic.Anthropic(base_url="http://t", api_key="k", http_client=http, max_retries=0)


def _recorded(chunks: list[StreamChunk], response_id: str) -> ChunksEntry:
    """``chunks`` with the provider id the dsh runtime logs in the ``finish``."""
    state = {"response": {"kind": "pi-ai", "api": "anthropic-messages", "responseId": response_id}}
    return ChunksEntry([*chunks[:-1], {**chunks[-1], "replayState": state}])


def _trip(*, recorded_ids: bool) -> ReplayModel:
    calls = [
        tool_call("toolu_w", "get_weather", '{"city": "Paris"}', text="Let me check."),
        tool_call("toolu_m", "find_museum", '{"city": "Paris"}'),
        text_entry(PLAN).chunks,
    ]
    entries = [
        _recorded(chunks, f"msg_recorded_{n}") if recorded_ids else ChunksEntry(chunks)
        for n, chunks in enumerate(calls, 1)
    ]
    return ReplayModel(one_session(*entries))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("recorded_ids", [False, True], ids=["numbered", "recorded-ids"])
def test_the_tool_runner_continues_its_thread_on_replay(stream: bool, recorded_ids: bool) -> None:
    replay = _trip(recorded_ids=recorded_ids)
    endpoint = Endpoint.replaying(replay)
    sent: list[dict[str, Any]] = []
    assert plan_day(_client(endpoint, sent), stream=stream) == PLAN
    replay.assert_consumed()  # one session: each continuation continued it
    assert endpoint.errors == []
    ids = (
        ["msg_recorded_1", "msg_recorded_2"]
        if recorded_ids
        else ["msg-dsh-replay-1", "msg-dsh-replay-2"]
    )
    assert [body.get("thread") for body in sent] == [
        {"type": "create"},
        {"type": "continue", "previous_message_id": ids[0]},
        {"type": "continue", "previous_message_id": ids[1]},
    ]
    assert "system" not in sent[2]  # the SDK sends little...
    assert len(sent[2]["messages"]) == 1
    last = endpoint.conversation(ids[1])  # ... and the endpoint read the whole of it
    assert last is not None
    roles = [m["role"] for m in last]
    assert roles == ["user", "assistant", "user", "assistant"]
    assert last[0]["content"] == TASK
    results = [b["content"] for b in last[2]["content"]]
    assert results == [WEATHER]
    answered = endpoint.answered(ids[1])
    assert answered is not None
    assert answered.request["system"] == SYSTEM
    assert sent[2]["messages"][0]["content"][0]["content"] == MUSEUM  # the second result


def test_only_answers_to_threaded_requests_are_kept() -> None:
    endpoint = Endpoint.replaying(ReplayModel(one_session(text_entry("one"), text_entry("two"))))
    client = _client(endpoint, [])
    plain = client.messages.create(
        model="m", max_tokens=8, messages=[{"role": "user", "content": "a"}]
    )
    assert endpoint.answered(plain.id) is None  # nothing asked to continue it
    with pytest.raises(anthropic.NotFoundError, match=plain.id) as refused:
        client.beta.messages.create(
            model="m",
            max_tokens=8,
            messages=[{"role": "user", "content": "b"}],
            thread={"type": "continue", "previous_message_id": plain.id},
        )
    assert refused.value.error_code == "thread_not_found"
    assert endpoint.errors == []  # refused as the API refuses it: no call was made
    threaded = client.beta.messages.create(
        model="m",
        max_tokens=8,
        messages=[
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "one"},
            {"role": "user", "content": "b"},
        ],
        thread={"type": "create"},
    )
    kept = endpoint.answered(threaded.id)
    assert kept is not None
    assert answer_content(kept.chunks) == [{"type": "text", "text": "two"}]


def test_an_unknown_id_over_http_is_a_thread_not_found_error_and_no_call() -> None:
    replay = ReplayModel(one_session(text_entry("never")))
    client = _client(Endpoint.replaying(replay), [])
    with pytest.raises(anthropic.NotFoundError, match="msg_gone") as refused:
        client.beta.messages.create(
            model="m",
            max_tokens=8,
            messages=[{"role": "user", "content": "go on"}],
            thread={"type": "continue", "previous_message_id": "msg_gone"},
        )
    assert isinstance(refused.value, ThreadNotFoundError)  # what the SDK's threads recover from
    with pytest.raises(ReplayConsumptionError, match="never replayed"):
        replay.assert_consumed()  # the recorded call is still there
