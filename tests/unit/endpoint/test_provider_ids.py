"""The endpoint serves the provider ids a recording holds; the log check compares them as ids.

The dsh runtime logs the provider's id of each answer (the completion ``id`` it read) in
the ``finish`` chunk's ``replayState.response.responseId``. A replay that answered under
an id of its own would make every replayed log differ from the recording there.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.chunks import text_entry
from support.scenarios import one_session

from pytest_dsh_replay._check.normalize import Normalizer
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, HangEntry
from pytest_dsh_replay._wire.base import httpx_module

RECORDED_ID = "chatcmpl-9f8e7d6c5b4a"


def answered(text: str, response_id: str | None) -> ChunksEntry:
    chunks = text_entry(text).chunks
    if response_id is not None:
        state = {
            "response": {"kind": "pi-ai", "api": "openai-completions", "responseId": response_id}
        }
        chunks[-1] = {**chunks[-1], "replayState": state}
    return ChunksEntry(chunks)


def endpoint_of(*entries: ChunksEntry) -> Endpoint:
    return Endpoint.replaying(ReplayModel(one_session(*entries)))


def post(endpoint: Endpoint, path: str, body: dict[str, Any]) -> Any:
    client = httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")
    return client.post(path, json=body, headers={"x-dsh-session-id": "s"})


def ask(**extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": "hi"}], **extra}


def frames(raw: str) -> list[dict[str, Any]]:
    data = [f.split("data: ", 1)[1] for f in raw.split("\n\n") if "data: " in f]
    return [json.loads(d) for d in data if d != "[DONE]"]


def test_a_chat_completion_streams_under_the_recorded_id() -> None:
    endpoint = endpoint_of(answered("Hello", RECORDED_ID))
    streamed = frames(post(endpoint, "/v1/chat/completions", ask(stream=True)).text)
    assert {frame["id"] for frame in streamed} == {RECORDED_ID}


def test_a_whole_answer_and_each_call_get_their_own_recorded_id() -> None:
    endpoint = endpoint_of(answered("a", RECORDED_ID), answered("b", "chatcmpl-second"))
    first = post(endpoint, "/v1/chat/completions", ask()).json()
    second = frames(post(endpoint, "/v1/chat/completions", ask(stream=True)).text)
    assert first["id"] == RECORDED_ID
    assert {frame["id"] for frame in second} == {"chatcmpl-second"}


def test_without_a_recorded_id_the_endpoint_numbers_its_answers() -> None:
    endpoint = endpoint_of(answered("a", None))
    assert post(endpoint, "/v1/chat/completions", ask()).json()["id"] == "chatcmpl-dsh-replay-1"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/messages", {"max_tokens": 5}, "id"),
        ("/v1/responses", {}, "id"),
        ("/v1beta/models/m:generateContent", {}, "responseId"),
    ],
    ids=["anthropic", "responses", "gemini"],
)
def test_every_wire_answers_under_the_recorded_id(
    path: str, body: dict[str, Any], field: str
) -> None:
    endpoint = endpoint_of(answered("Hello", RECORDED_ID))
    request: dict[str, Any]
    if path.startswith("/v1beta"):
        request = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    elif path == "/v1/responses":
        request = {"model": "m", "input": "hi"}
    else:
        request = ask(**body)
    answer = post(endpoint, path, request).json()
    assert answer[field] == RECORDED_ID


def test_an_entry_knows_its_recorded_id() -> None:
    assert answered("a", RECORDED_ID).response_id == RECORDED_ID
    assert answered("a", None).response_id is None
    assert answered("a", "").response_id is None
    assert HangEntry().response_id is None


def test_the_log_check_compares_response_ids_as_ids() -> None:
    def state(response_id: str) -> dict[str, Any]:
        return {"replayState": {"response": {"responseId": response_id}}}

    recorded, replayed = Normalizer(), Normalizer()
    assert recorded.value(state("chatcmpl-abc")) == replayed.value(state("chatcmpl-dsh-replay-1"))
    # Two answers under one id and under two ids still differ.
    one, two = Normalizer(), Normalizer()
    same = [one.value(state("x")), one.value(state("x"))]
    different = [two.value(state("x")), two.value(state("y"))]
    assert same != different
    assert not Normalizer().untouched(json.dumps(state("x")).encode())
