"""The HTTP model endpoint: failures as HTTP, hangs, replay errors, routing, transports."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from support.chunks import text_entry
from support.hang_guard import deadline

from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.server import EndpointServer
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._errors import ReplayBindingError, ReplayExhaustedError
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript
from pytest_dsh_replay._wire.base import httpx_module

TEXT: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "Hel"},
    {"type": "text-delta", "index": 0, "text": "lo"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello"}},
    {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 2, "cacheReadTokens": 1}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


def reply(text: str) -> ChunksEntry:
    return text_entry(text)


def failed(failure: dict[str, Any]) -> ChunksEntry:
    return ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": failure}}])


def script(
    file: str,
    entries: list[ReplayEntry],
    *,
    rid: str,
    parent: str | None = None,
    first: str | None = None,
    seed: int = 0,
) -> SessionScript:
    return SessionScript(
        file=file,
        recorded_id=rid,
        created_at=0,
        seed_length=seed,
        parent_session=parent,
        primary=parent is None,
        entries=tuple(entries),
        first_user_text=first,
    )


def single(*entries: ReplayEntry) -> Scenario:
    return Scenario(Path("mem"), (script("session.jsonl", list(entries), rid="primary-rec"),))


def client(endpoint: Endpoint) -> Any:
    return httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")


def ask(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], **extra}


def sdk_openai(endpoint: Endpoint) -> openai.OpenAI:
    http = httpx_module().Client(transport=sync_transport(endpoint))
    return openai.OpenAI(base_url="http://t/v1", api_key="k", http_client=http, max_retries=0)


def sdk_anthropic(endpoint: Endpoint) -> anthropic.Anthropic:
    http = httpx_module().Client(transport=sync_transport(endpoint))
    return anthropic.Anthropic(base_url="http://t", api_key="k", http_client=http, max_retries=0)


# --- the two wires -----------------------------------------------------------------------


def test_openai_stream_has_role_first_usage_last_and_done() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    body = ask("hi", stream=True, stream_options={"include_usage": True})
    raw = client(endpoint).post("/v1/chat/completions", json=body).text
    frames = [f[len("data: ") :] for f in raw.split("\n\n") if f]
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(f) for f in frames[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [c["choices"][0]["delta"].get("content") for c in chunks[1:3]] == ["Hel", "lo"]
    assert chunks[3]["choices"][0]["finish_reason"] == "stop"
    assert chunks[4]["choices"] == []
    assert chunks[4]["usage"] == {
        "prompt_tokens": 4,
        "completion_tokens": 2,
        "total_tokens": 6,
        "prompt_tokens_details": {"cached_tokens": 1},
    }


def test_openai_stream_without_include_usage_sends_no_usage() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    raw = client(endpoint).post("/chat/completions", json=ask("hi", stream=True)).text
    assert '"usage"' not in raw


def test_the_sdks_read_streamed_and_whole_answers() -> None:
    model = ReplayModel(single(ChunksEntry(TEXT), ChunksEntry(TEXT), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    headers = {"x-dsh-session-id": "s"}
    stream = sdk_openai(endpoint).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True, extra_headers=headers
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello"
    whole = sdk_openai(endpoint).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
    )
    assert whole.choices[0].message.content == "Hello"
    assert whole.usage is not None
    assert whole.usage.prompt_tokens == 4
    with sdk_anthropic(endpoint).messages.stream(
        model="m",
        max_tokens=10,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers=headers,
    ) as events:
        message = events.get_final_message()
    assert message.content[0].text == "Hello"  # type: ignore[union-attr]
    assert (message.stop_reason, message.usage.input_tokens) == ("end_turn", 3)
    assert message.usage.cache_read_input_tokens == 1
    model.assert_consumed()


def test_anthropic_events_for_thinking_and_tool_use() -> None:
    chunks: list[dict[str, Any]] = [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": "hmm"},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "hmm"}},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 1, "id": "t1", "name": "add", "argumentsDelta": ""},
        {"type": "tool-call-delta", "index": 1, "id": "t1", "argumentsDelta": '{"a": 1}'},
        {
            "type": "block-end",
            "index": 1,
            "block": {"type": "tool-call", "id": "t1", "name": "add", "arguments": '{"a": 1}'},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    raw = client(endpoint).post("/v1/messages", json=ask("hi", stream=True, max_tokens=5)).text
    events = [json.loads(frame.split("\ndata: ")[1]) for frame in raw.split("\n\n") if frame]
    kinds = [e["type"] for e in events]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[1]["content_block"]["type"] == "thinking"
    assert events[4]["content_block"] == {
        "type": "tool_use",
        "id": "t1",
        "name": "add",
        "input": {},
    }
    assert events[5]["delta"] == {"type": "input_json_delta", "partial_json": '{"a": 1}'}
    assert events[7]["delta"]["stop_reason"] == "tool_use"


# --- recorded failures become the provider's HTTP errors --------------------------------

FAILURES = [
    (
        {"message": "bad key", "code": "AUTH"},
        401,
        openai.AuthenticationError,
        anthropic.AuthenticationError,
    ),
    (
        {"message": "slow down", "code": "RATE_LIMIT", "providerRetryAfterMs": 2000},
        429,
        openai.RateLimitError,
        anthropic.RateLimitError,
    ),
    (
        {
            "message": "prompt is too long for the model's context window",
            "code": "CONTEXT_WINDOW_EXCEEDED",
        },
        400,
        openai.BadRequestError,
        anthropic.BadRequestError,
    ),
    (
        {"message": "no", "code": "INVALID_REQUEST"},
        400,
        openai.BadRequestError,
        anthropic.BadRequestError,
    ),
    (
        {"message": "boom", "code": "SERVER", "status": 502},
        502,
        openai.InternalServerError,
        anthropic.InternalServerError,
    ),
    (
        {"message": "busy", "code": "OVERLOADED"},
        None,
        openai.InternalServerError,
        anthropic.InternalServerError,
    ),
    (
        {"message": "odd", "code": "UNKNOWN"},
        500,
        openai.InternalServerError,
        anthropic.InternalServerError,
    ),
]


@pytest.mark.parametrize(("failure", "status", "openai_error", "anthropic_error"), FAILURES)
def test_a_recorded_failure_is_the_providers_http_error(
    failure: dict[str, Any], status: int | None, openai_error: Any, anthropic_error: Any
) -> None:
    model = ReplayModel(
        single(failed(failure), ThrowEntry([], failure["message"], failure["code"]))
    )
    endpoint = Endpoint.replaying(model)
    with pytest.raises(openai_error) as oa:
        sdk_openai(endpoint).chat.completions.create(model="m", messages=[], stream=True)
    with pytest.raises(anthropic_error) as an:  # a throw entry, the other wire
        sdk_anthropic(endpoint).messages.create(model="m", max_tokens=5, messages=[], stream=True)
    assert oa.value.status_code == (status or 503)
    # The throw entry carries no status: the code decides.
    assert an.value.status_code == {502: 500}.get(status or 529, status or 529)
    assert failure["message"] in oa.value.message
    assert failure["message"] in an.value.message
    if failure["code"] == "RATE_LIMIT":
        assert oa.value.response.headers["retry-after"] == "2"
    if failure["code"] == "CONTEXT_WINDOW_EXCEEDED":
        assert oa.value.code == "context_length_exceeded"
    assert endpoint.errors == []  # recorded failures are the recording, not replay errors


def test_a_failure_after_content_is_an_in_stream_error_event() -> None:
    chunks = [
        *TEXT[:3],
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "cut", "code": "SERVER"}},
        },
    ]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks), ChunksEntry(chunks))))
    with pytest.raises(openai.APIError, match="cut"):
        list(sdk_openai(endpoint).chat.completions.create(model="m", messages=[], stream=True))
    raw = client(endpoint).post("/v1/messages", json=ask("x", stream=True)).text
    assert raw.endswith(
        'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"cut"}}\n\n'
    )


def test_a_transport_failure_drops_the_connection() -> None:
    failure = {"message": "gone", "code": "TRANSPORT"}
    endpoint = Endpoint.replaying(ReplayModel(single(failed(failure))))
    with pytest.raises(openai.APIConnectionError):
        sdk_openai(endpoint).chat.completions.create(model="m", messages=[], stream=True)


# --- replay errors: a status nobody retries, the message, kept for the test -------------

# Each route's first call of a scenario with no call: a replay error at once.
REPLAY_ERROR_CALLS: dict[str, tuple[str, dict[str, Any], Callable[[Any], Any]]] = {
    "chat": ("/v1/chat/completions", ask("a"), lambda b: b["error"]),
    "responses": ("/v1/responses", {"model": "m", "input": "a"}, lambda b: b["error"]),
    "messages": ("/v1/messages", {**ask("a"), "max_tokens": 9}, lambda b: b["error"]),
    "gemini": (
        "/v1beta/models/m:generateContent",
        {"contents": [{"role": "user", "parts": [{"text": "a"}]}]},
        lambda b: b["error"],
    ),
}


def no_calls() -> Endpoint:
    return Endpoint.replaying(ReplayModel(single()))


@pytest.mark.parametrize("route", REPLAY_ERROR_CALLS)
def test_a_replay_error_answers_400_in_the_wires_error_shape(route: str) -> None:
    path, body, error_of = REPLAY_ERROR_CALLS[route]
    endpoint = no_calls()
    response = client(endpoint).post(path, json=body)
    # 400: neither the SDKs (they retry 408, 409, 429, 5xx) nor the dsh runtime retry it
    assert response.status_code == 400
    assert response.headers["x-should-retry"] == "false"
    assert response.headers["content-type"].startswith("application/json")
    error = error_of(response.json())
    assert error["message"].startswith("ReplayExhaustedError: ")
    assert "asked for call #1" in error["message"]
    shape = {k: v for k, v in error.items() if k != "message"}
    assert (
        shape
        == {
            "chat": {"type": "invalid_request_error", "param": None, "code": None},
            "responses": {"type": "invalid_request_error", "param": None, "code": None},
            "messages": {"type": "invalid_request_error"},
            "gemini": {"code": 400, "status": "INVALID_ARGUMENT"},
        }[route]
    )
    if route == "messages":
        assert response.json()["type"] == "error"
    (kept,) = endpoint.errors
    assert isinstance(kept, ReplayExhaustedError)


def test_the_sdks_raise_a_replay_error_at_once_with_their_default_retries() -> None:
    endpoint = no_calls()
    http = httpx_module().Client(transport=sync_transport(endpoint))
    sdk = openai.OpenAI(base_url="http://t/v1", api_key="k", http_client=http)  # 2 retries
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    assert info.value.message.startswith("Error code: 400 - ReplayExhaustedError: ")
    with pytest.raises(openai.BadRequestError):
        sdk.responses.create(model="m", input="a")
    messages = anthropic.Anthropic(base_url="http://t", api_key="k", http_client=http)
    with pytest.raises(anthropic.BadRequestError) as refused:
        messages.messages.create(
            model="m", max_tokens=9, messages=[{"role": "user", "content": "a"}]
        )
    assert "ReplayExhaustedError: " in refused.value.message
    # one request each: a retry would have met (and kept) the error again
    assert [type(e) for e in endpoint.errors] == [ReplayExhaustedError] * 3


def test_a_replay_error_after_the_stream_started_is_an_error_the_runtime_does_not_retry() -> None:
    from pytest_dsh_replay._wire.anthropic import AnthropicWire

    frame = AnthropicWire().encoder({}, model="m", call_id="c").replay_error_event("boom")
    event = json.loads(frame.decode().split("data: ", 1)[1])
    assert event == {"type": "error", "error": {"type": "invalid_request_error", "message": "boom"}}


def test_content_that_cannot_decide_fails_showing_the_first_messages() -> None:
    scripts = (
        script("session.jsonl", [reply("p")], rid="primary-rec", first="go"),
        script("session.1.jsonl", [reply("a")], rid="child-a", parent="primary-rec", first="same"),
        script("session.2.jsonl", [reply("b")], rid="child-b", parent="primary-rec", first="same"),
    )
    endpoint = Endpoint.replaying(ReplayModel(Scenario(Path("mem"), scripts)))
    http = client(endpoint)
    for text, answer in (("go", "p"), ("same", "a"), ("same", "b")):  # arrival order
        response = http.post("/v1/chat/completions", json=ask(text))
        assert response.json()["choices"][0]["message"]["content"] == answer
    follow = [
        {"role": "user", "content": "same"},
        {"role": "assistant", "content": "neither"},
        {"role": "user", "content": "more"},
    ]
    response = http.post("/v1/chat/completions", json={"model": "m", "messages": follow})
    assert response.status_code == 400
    assert "continues the latest request of 2 sessions alike" in response.text
    assert "'same'" in response.text
    assert isinstance(endpoint.errors[0], ReplayBindingError)


# --- content routing ---------------------------------------------------------------------


def forked_scenario() -> Scenario:
    parent = "primary-rec"
    return Scenario(
        Path("mem"),
        (
            script(
                "session.jsonl",
                [reply("OK"), failed({"message": "busy", "code": "SERVER"}), reply("delegating")],
                rid=parent,
                first="WARMUP",
            ),
            script(
                "session.1.jsonl",
                [reply("SPAWN_OK")],
                rid="spawn-rec",
                parent=parent,
                first=f'SPAWN_TASK. Your parent agent id is "{parent}".',
            ),
            script(
                "session.2.jsonl",
                [reply("FORK_OK")],
                rid="fork-rec",
                parent=parent,
                first=f'FORK_TASK. Your parent agent id is "{parent}".',
                seed=5,
            ),
        ),
    )


def test_content_routing_tells_parent_fork_and_spawn_apart() -> None:
    model = ReplayModel(forked_scenario())
    endpoint = Endpoint.replaying(model)
    http = client(endpoint)

    def post(messages: list[dict[str, Any]]) -> str:
        body = {"model": "m", "messages": messages}
        response = http.post("/v1/chat/completions", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["choices"][0]["message"]["content"])

    sys = {"role": "system", "content": "S"}
    turn1 = [sys, {"role": "user", "content": "WARMUP"}, {"role": "user", "content": "ctx /p"}]
    assert post(turn1) == "OK"
    turn2 = [*turn1, {"role": "assistant", "content": "OK"}, {"role": "user", "content": "DO"}]
    failure = http.post("/v1/chat/completions", json={"model": "m", "messages": turn2})
    assert failure.status_code == 500
    assert post(turn2) == "delegating"  # a retry of the failed request: the same session
    # The fork child's first request extends the parent's turn-1 request, not its latest.
    fork = [
        *turn1,
        {"role": "assistant", "content": "OK"},
        {"role": "user", "content": 'FORK_TASK. Your parent agent id is "live-9".'},
        {"role": "user", "content": "ctx /child"},
    ]
    assert post(fork) == "FORK_OK"
    spawn: list[dict[str, Any]] = [
        sys,
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "SPAWN_TASK."},
                {"type": "text", "text": ' Your parent agent id is "live-9".'},
                {"type": "text", "text": "ctx /child"},
            ],
        },
    ]
    assert post(spawn) == "SPAWN_OK"
    model.assert_consumed()
    parent_id = next(k for k, b in model.bindings.items() if b.file == "session.jsonl")
    for file in ("session.1.jsonl", "session.2.jsonl"):
        child = next(k for k, b in model.bindings.items() if b.file == file)
        assert model._sessions.live_parent(child) == parent_id


def test_runtime_headers_name_the_session_and_its_fork_parent() -> None:
    model = ReplayModel(forked_scenario())
    endpoint = Endpoint.replaying(model)
    http = client(endpoint)
    warm = {"x-deepseek-harness-session-id": "sess-main"}
    assert (
        http.post("/v1/messages", json=ask("WARMUP", max_tokens=1), headers=warm).status_code == 200
    )
    log = {"session": {"id": "kid", "parentSession": "sess-main", "seedLength": 17}}
    body = ask('FORK_TASK. Your parent agent id is "sess-main".', max_tokens=1, dsh_session_log=log)
    response = http.post(
        "/v1/messages", json=body, headers={"x-deepseek-harness-session-id": "kid"}
    )
    assert response.json()["content"][0]["text"] == "FORK_OK"
    assert model.bindings["kid"].file == "session.2.jsonl"


# --- hangs ---------------------------------------------------------------------------------


def test_a_hang_ends_at_the_clients_read_timeout(tmp_path: Path) -> None:
    model = ReplayModel(single(HangEntry(ready_file="ready")), workdir=tmp_path)
    endpoint = Endpoint.replaying(model)
    sdk = sdk_openai(endpoint)
    started = time.monotonic()
    with deadline(20):
        stream = sdk.chat.completions.create(model="m", messages=[], stream=True, timeout=0.15)
        events = iter(stream)
        assert next(events).choices[0].delta.role == "assistant"
        with pytest.raises(openai.APIError):
            list(events)
    assert (tmp_path / "ready").exists()
    assert time.monotonic() - started < 10
    assert endpoint.errors == []


def test_a_hang_over_the_socket_ends_when_the_client_leaves_or_the_server_stops(
    tmp_path: Path,
) -> None:
    model = ReplayModel(
        single(HangEntry(ready_file="r1"), HangEntry(ready_file="r2")), workdir=tmp_path
    )
    server = EndpointServer(Endpoint.replaying(model))
    try:
        assert server.base_url.startswith("http://127.0.0.1:")
        body = json.dumps(ask("x", stream=True)).encode()

        def call() -> Any:
            request = urllib.request.Request(
                f"{server.base_url}/v1/chat/completions",
                data=body,
                headers={"content-type": "application/json", "x-dsh-session-id": "s"},
            )
            return urllib.request.urlopen(request, timeout=10)

        with deadline(20):
            response = call()
            assert response.readline().startswith(b"data: ")
            response.close()  # the client leaves: the call ends, its thread is free
            while (tmp_path / "r1").exists() and threading.active_count() > 50:
                time.sleep(0.01)
            second = call()
            assert second.readline().startswith(b"data: ")
            before = threading.active_count()
            server.stop()  # the test ends: the hang ends, the server stops
            assert threading.active_count() < before
    finally:
        server.stop()
    assert (tmp_path / "r1").exists()
    assert (tmp_path / "r2").exists()


def test_the_async_transport_does_not_block_the_loop_while_a_call_hangs(tmp_path: Path) -> None:
    from pytest_dsh_replay._endpoint.transport import async_transport

    model = ReplayModel(single(HangEntry(ready_file="ready"), reply("after")), workdir=tmp_path)
    endpoint = Endpoint.replaying(model)

    async def run() -> str:
        http = httpx_module().AsyncClient(transport=async_transport(endpoint))
        sdk = openai.AsyncOpenAI(
            base_url="http://t/v1", api_key="k", http_client=http, max_retries=0
        )
        stream = await sdk.chat.completions.create(
            model="m", messages=[], stream=True, extra_headers={"x-dsh-session-id": "s"}
        )
        first = await stream.__anext__()
        assert first.choices[0].delta.role == "assistant"
        ticks = 0
        while not (tmp_path / "ready").exists():
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks < 1000
        await stream.close()
        endpoint.close()
        return "ok"

    with deadline(20):
        assert asyncio.run(run()) == "ok"


def test_the_async_transport_under_another_event_loop_says_what_to_use(tmp_path: Path) -> None:
    # Under trio it failed with a bare "RuntimeError: no running event loop" from inside.
    from pytest_dsh_replay._endpoint.transport import async_transport
    from pytest_dsh_replay._errors import EndpointError

    endpoint = Endpoint.replaying(ReplayModel(single(reply("hi")), workdir=tmp_path))
    transport = async_transport(endpoint)
    httpx = httpx_module()
    request = httpx.Request("POST", "http://t/v1/chat/completions", json={"messages": []})
    expected = r"run in asyncio's event loop.*dsh_replay\.base_url"
    call = transport.handle_async_request(request)  # driven by no asyncio loop
    with pytest.raises(EndpointError, match=expected):
        call.send(None)
    try:
        import trio  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        pass
    else:

        async def run() -> None:
            http = httpx.AsyncClient(transport=async_transport(endpoint))
            await http.post("http://t/v1/chat/completions", json={"messages": []})

        with pytest.raises(EndpointError, match=expected):
            trio.run(run)
    endpoint.close()


def test_the_endpoint_modules_import_no_sdk_or_http_client() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import pytest_dsh_replay._fixture.dsh_replay, pytest_dsh_replay._endpoint.endpoint\n"
        "import pytest_dsh_replay._endpoint.server, pytest_dsh_replay._endpoint.transport\n"
        "import pytest_dsh_replay._recording.proxy, pytest_dsh_replay._recording.live_openai\n"
        "roots = ('openai', 'anthropic', 'httpx', 'httpx2')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in roots))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("first", ["France", "Germany"])
def test_two_conversations_started_at_once_each_replay_their_own_recording(first: str) -> None:
    """Whichever of two unrelated conversations calls first, each binds by its opening."""
    questions = {"France": "What is the capital of France?", "Germany": "And Germany?"}
    scenario = Scenario(
        Path("mem"),
        (
            script("session.jsonl", [reply("Paris")], rid="p", first=questions["France"]),
            script(
                "session.1.jsonl",
                [reply("Berlin")],
                rid="c",
                parent="p",
                first=questions["Germany"],
            ),
        ),
    )
    endpoint = Endpoint.replaying(ReplayModel(scenario))
    http = client(endpoint)
    order = [first, *(q for q in questions if q != first)]
    answers = {}
    for country in order:
        answer = http.post("/v1/chat/completions", json=ask(questions[country]))
        assert answer.status_code == 200, answer.text
        answers[country] = answer.json()["choices"][0]["message"]["content"]
    assert answers == {"France": "Paris", "Germany": "Berlin"}
    endpoint.close()


def test_a_late_subagent_found_by_content_is_recorded_under_the_first_session() -> None:
    """A child whose first call comes after its parent went on still gets a parent."""
    from pytest_dsh_replay._endpoint.routing import Router

    router = Router()
    first = router.route({}, {"messages": [{"role": "user", "content": "main task"}]})
    router.answered(first.session_id, wants_tools=True)
    turn2 = [
        {"role": "user", "content": "main task"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "t1"}]},
        {"role": "tool", "tool_call_id": "t1", "content": "started"},
    ]
    again = router.route({}, {"messages": turn2})
    assert again.session_id == first.session_id
    router.answered(first.session_id)  # a plain answer: nobody waits for tools now
    child = router.route({}, {"messages": [{"role": "user", "content": "sub task"}]})
    assert child.new
    assert child.parent_guess == first.session_id


@pytest.mark.parametrize(
    "reason",
    [
        {"kind": "error", "failure": {"message": "reset by peer", "code": "NETWORK"}},
        {"kind": "aborted", "failure": {"message": "stopped reading", "code": "ABORTED"}},
    ],
)
def test_a_transport_failure_after_content_cuts_the_body_as_a_dropped_connection(
    reason: dict[str, Any],
) -> None:
    # The whole answer is produced at once (nothing can wait), so the failure is found
    # while the endpoint encodes it: the content goes out, then the body breaks off.
    chunks = [*TEXT[:3], {"type": "finish", "reason": reason}]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    stream = sdk_openai(endpoint).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    received: list[str] = []

    def read() -> None:
        for chunk in stream:
            received.extend(c.delta.content or "" for c in chunk.choices)

    with pytest.raises(openai.APIConnectionError) as raised:  # the SDK's own type
        read()
    assert "".join(received) == "Hello"
    assert isinstance(raised.value.__cause__, httpx_module().ReadError)
