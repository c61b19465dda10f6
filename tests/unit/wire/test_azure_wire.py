"""The Azure OpenAI wires: routes, requests, answers and errors as ``AzureOpenAI`` reads them.

The checks that matter decode what the endpoint sends with the ``openai`` SDK's own
``AzureOpenAI`` client (in process, and through the loopback server from the variables
``AzureOpenAI()`` reads); recording through the proxy keeps the ``api-version`` query
and sends the live key as ``api-key``.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.scenarios import one_session

openai = pytest.importorskip("openai", reason="the Azure wires are checked with openai's client")

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall  # noqa: E402
from pytest_dsh_replay._endpoint.endpoint import Endpoint  # noqa: E402
from pytest_dsh_replay._endpoint.transport import (  # noqa: E402
    sdk_client,
    sync_transport,
    worker_pool,
)
from pytest_dsh_replay._errors import UnservedRouteError  # noqa: E402
from pytest_dsh_replay._fixture.dsh_replay import DshReplay  # noqa: E402
from pytest_dsh_replay._recording.live_openai import OpenAICompatibleModel  # noqa: E402
from pytest_dsh_replay._replay.model import ReplayModel  # noqa: E402
from pytest_dsh_replay._scripts.entries import ChunksEntry  # noqa: E402
from pytest_dsh_replay._wire import azure, azure_responses  # noqa: E402
from pytest_dsh_replay._wire.base import httpx_module, join_path  # noqa: E402
from pytest_dsh_replay._wire.framing import SSE  # noqa: E402
from pytest_dsh_replay._wire.table import (  # noqa: E402
    RECORD_URL_VARIABLES,
    endpoint_env,
    list_wire,
    recording_redactor,
    served_routes,
    wire_for,
    wire_named,
)

CHAT = "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
TOOL: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "tool-call"},
    {"type": "tool-call-delta", "index": 0, "id": "call_1", "name": "add", "argumentsDelta": "{"},
    {"type": "tool-call-delta", "index": 0, "id": "call_1", "argumentsDelta": '"a": 2}'},
    {
        "type": "block-end",
        "index": 0,
        "block": {"type": "tool-call", "id": "call_1", "name": "add", "arguments": '{"a": 2}'},
    },
    {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 4}},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
]
TEXT: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "It is "},
    {"type": "text-delta", "index": 0, "text": "2."},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "It is 2."}},
    {"type": "usage", "usage": {"inputTokens": 9, "outputTokens": 3, "cacheReadTokens": 2}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
TOOLS: Any = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
PROMPT = "add 2"


single = partial(one_session, path=Path("mem"), recorded_id="rec", first=PROMPT)
"""One primary session of ``entries`` (``first=`` another first user message)."""


def failed(failure: dict[str, Any]) -> ChunksEntry:
    return ChunksEntry([{"type": "finish", "reason": {"kind": "error", "failure": failure}}])


def raw_client(endpoint: Endpoint) -> Any:
    return httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")


def data_frames(raw: bytes) -> list[Any]:
    """The JSON of each ``data:`` frame but ``[DONE]`` (the test's own SSE reader)."""
    out = []
    for block in raw.split(b"\n\n"):
        for line in block.decode().split("\n"):
            if line.startswith("data: ") and line != "data: [DONE]":
                out.append(orjson.loads(line[6:]))
    return out


# --- routes, requests ------------------------------------------------------------------


def test_the_routes_and_the_model_lists_are_azures() -> None:
    assert wire_for(CHAT) is azure.WIRE
    assert wire_for("/openai/v1/chat/completions") is azure.WIRE
    assert wire_for("/openai/responses?api-version=2025-04-01-preview") is azure_responses.WIRE
    assert wire_for("/openai/v1/responses/") is azure_responses.WIRE
    assert wire_for("/openai/deployments/a/b/chat/completions") is None  # one segment
    assert list_wire("/openai/models", {}) is azure.WIRE
    assert list_wire("/openai/v1/models", {}) is azure.WIRE
    assert wire_named("azure") is azure.WIRE
    assert wire_named("azure-responses") is azure_responses.WIRE
    routes = served_routes()
    for route in (
        "POST /openai/deployments/{deployment}/chat/completions",
        "POST /openai/v1/chat/completions",
        "POST /openai/responses",
        "POST /openai/v1/responses",
        "GET /openai/models",
    ):
        assert route in routes


def test_an_unserved_azure_path_is_a_404_naming_the_azure_routes() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    response = raw_client(endpoint).post("/openai/deployments/d/completions?api-version=1")
    assert response.status_code == 404
    assert "POST /openai/deployments/{deployment}/chat/completions" in response.text
    (error,) = endpoint.errors
    assert isinstance(error, UnservedRouteError)


def test_the_deployment_in_the_path_is_the_requests_model() -> None:
    body: dict[str, Any] = {
        "messages": [
            {"role": "system", "content": "You add."},
            {"role": "user", "content": PROMPT},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "2"},
        ],
        "tools": TOOLS,
    }
    history: Any = None
    read = azure.WIRE.canonical(body, path=CHAT, history=history)
    assert read == {**body, "model": "gpt-4o-prod"}
    assert "model" not in body  # the body is not changed
    named = azure.WIRE.canonical({**body, "model": "other"}, path=CHAT, history=history)
    assert named["model"] == "gpt-4o-prod"  # Azure uses the deployment
    v1 = azure.WIRE.canonical(
        {**body, "model": "gpt-4o"}, path="/openai/v1/chat/completions", history=history
    )
    assert v1["model"] == "gpt-4o"
    response = raw_client(Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))).post(
        CHAT, json={"messages": "x"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages"


# --- answers, through AzureOpenAI --------------------------------------------------------


def azure_client(endpoint: Endpoint, **options: object) -> Any:
    return sdk_client("azure", endpoint, None, dict(options))


def test_the_streamed_answer_opens_with_azures_prompt_filter_chunk() -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    client = azure_client(endpoint)
    assert isinstance(client, openai.AzureOpenAI)
    messages: list[Any] = [{"role": "user", "content": PROMPT}]
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-prod",
            messages=messages,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    first = chunks[0]
    assert (first.choices, first.id) == ([], "")
    filters = first.model_extra["prompt_filter_results"]
    assert filters[0]["content_filter_results"]["hate"] == {"filtered": False, "severity": "safe"}
    assert {c.model for c in chunks[1:]} == {"gpt-4o-prod"}
    calls = [t for c in chunks if c.choices for t in c.choices[0].delta.tool_calls or ()]
    assert (calls[0].id, calls[0].function.name) == ("call_1", "add")
    assert "".join(t.function.arguments for t in calls) == '{"a": 2}'
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == 5
    messages += [
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "2"},
    ]
    with client.chat.completions.stream(model="gpt-4o-prod", messages=messages) as stream:
        final = stream.get_final_completion()  # the SDK's stream helper takes the chunk too
    assert final.choices[0].message.content == "It is 2."
    assert endpoint.errors == []
    model.assert_consumed()
    assert len(model.bindings) == 1


def test_the_whole_answer_carries_the_filter_results_and_the_tool_calls() -> None:
    model = ReplayModel(single(ChunksEntry(TOOL)))
    endpoint = Endpoint.replaying(model)
    reply = azure_client(endpoint).chat.completions.create(
        model="gpt-4o-prod", messages=[{"role": "user", "content": PROMPT}], tools=TOOLS
    )
    assert reply.model == "gpt-4o-prod"
    assert reply.choices[0].finish_reason == "tool_calls"
    (call,) = reply.choices[0].message.tool_calls
    assert (call.id, call.function.name, call.function.arguments) == ("call_1", "add", '{"a": 2}')
    assert reply.model_extra["prompt_filter_results"] == azure.PROMPT_FILTER_RESULTS
    assert reply.choices[0].model_extra["content_filter_results"]["violence"]["filtered"] is False
    assert azure.WIRE.decode_whole(reply.model_dump()) == [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {
            "type": "tool-call-delta",
            "index": 0,
            "id": "call_1",
            "name": "add",
            "argumentsDelta": '{"a": 2}',
        },
        TOOL[3],
        {"type": "usage", "usage": {"inputTokens": 5, "outputTokens": 4}},
        TOOL[-1],
    ]


def test_the_async_client_and_the_responses_api_of_the_same_client() -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    pool = worker_pool()

    async def main() -> str:
        client = sdk_client("azure-responses", endpoint, pool, {})
        assert isinstance(client, openai.AsyncAzureOpenAI)
        tools: Any = [{"type": "function", "name": "add", "parameters": {"type": "object"}}]
        first = await client.responses.create(model="gpt-4o-prod", input=PROMPT, tools=tools)
        (call,) = [item for item in first.output if item.type == "function_call"]
        assert (call.call_id, call.name) == ("call_1", "add")
        stream = await client.responses.create(
            model="gpt-4o-prod",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": "call_1", "output": "2"}],
            stream=True,
        )
        text = [event.delta async for event in stream if event.type == "response.output_text.delta"]
        return "".join(text)

    try:
        assert asyncio.run(main()) == "It is 2."
    finally:
        pool.shutdown()
    assert endpoint.errors == []
    model.assert_consumed()


def test_the_model_list_is_served_to_azure_openai() -> None:
    model = ReplayModel(single(ChunksEntry(TEXT)))
    ids = [m.id for m in azure_client(Endpoint.replaying(model)).models.list()]
    assert ids  # the recording's model names (none named here: one placeholder)


# --- errors ------------------------------------------------------------------------------

FAILURES: list[tuple[dict[str, Any], type[Exception], dict[str, Any]]] = [
    (
        {"message": "slow down", "code": "RATE_LIMIT", "providerRetryAfterMs": 2000},
        openai.RateLimitError,
        {"code": "429", "message": "slow down"},
    ),
    (
        {"message": "bad key", "code": "AUTH"},
        openai.AuthenticationError,
        {"code": "401", "message": "bad key"},
    ),
    (
        {"message": "too long", "code": "CONTEXT_WINDOW_EXCEEDED"},
        openai.BadRequestError,
        {"code": "context_length_exceeded", "type": "invalid_request_error", "param": None},
    ),
]


@pytest.mark.parametrize(
    ("failure", "raised", "error"), FAILURES, ids=[f[0]["code"] for f in FAILURES]
)
def test_a_failure_before_content_is_azures_error(
    failure: dict[str, Any], raised: type[Exception], error: dict[str, Any]
) -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(failed(failure))))
    with pytest.raises(raised) as caught:
        azure_client(endpoint, max_retries=0).chat.completions.create(
            model="d", messages=[{"role": "user", "content": PROMPT}], stream=True
        )
    status = caught.value.status_code  # type: ignore[attr-defined]
    body = caught.value.body  # type: ignore[attr-defined]
    assert error.items() <= body.items()
    response = caught.value.response  # type: ignore[attr-defined]
    decoded = azure.WIRE.failure(status, {"error": body}, dict(response.headers))
    assert decoded["code"] == failure["code"]
    if failure["code"] == "RATE_LIMIT":
        assert response.headers["retry-after-ms"] == "2000"
        assert decoded["providerRetryAfterMs"] == 2000


def test_a_content_filter_refusal_is_azures_400_and_decodes_back() -> None:
    error = azure.WIRE.error({"message": "filtered", "code": "CONTENT_FILTER", "status": 400})
    assert error.status == 400
    body = orjson.loads(error.body)
    assert {"code": "content_filter", "param": "prompt", "status": 400}.items() <= body[
        "error"
    ].items()
    assert body["error"]["innererror"]["code"] == "ResponsibleAIPolicyViolation"
    assert azure.WIRE.failure(400, body, dict(error.headers))["code"] == "CONTENT_FILTER"


def test_a_failure_after_content_ends_the_stream_with_an_error_event() -> None:
    chunks = [
        *TEXT[:3],
        {
            "type": "finish",
            "reason": {"kind": "error", "failure": {"message": "cut", "code": "CONTENT_FILTER"}},
        },
    ]
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(chunks))))
    stream = azure_client(endpoint).chat.completions.create(
        model="d", messages=[{"role": "user", "content": PROMPT}], stream=True
    )
    pieces = list(stream)
    assert pieces[-1].choices[0].finish_reason == "content_filter"


def test_live_azure_frames_and_errors_decode_for_recording() -> None:
    live: list[dict[str, Any]] = [
        {
            "choices": [],
            "created": 0,
            "id": "",
            "model": "",
            "object": "",
            "prompt_filter_results": azure.PROMPT_FILTER_RESULTS,
        },
        {
            "id": "chatcmpl-live",
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": "hi"},
                    "finish_reason": None,
                    "content_filter_results": {},
                }
            ],
        },
        {
            "id": "chatcmpl-live",
            "object": "chat.completion.chunk",
            "model": "gpt-4o",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        },
    ]
    decoder = azure.WIRE.decoder()
    chunks = [c for frame in live for c in decoder.feed(frame)] + decoder.end()
    assert decoder.response_id == "chatcmpl-live"  # not the filter chunk's empty id
    assert [c["type"] for c in chunks] == [
        "block-start", "text-delta", "block-end", "finish"
    ]  # fmt: skip
    assert azure.WIRE.ends_answer(SSE.splitter().feed_raw(b"data: [DONE]\n\n")[0], None)
    body = {
        "error": {
            "code": "content_filter",
            "message": "The response was filtered",
            "param": "prompt",
            "status": 400,
            "innererror": {"code": "ResponsibleAIPolicyViolation"},
        }
    }
    found = azure.WIRE.failure(400, body, {"apim-request-id": "apim-1"})
    assert found == {
        "message": "The response was filtered",
        "code": "CONTENT_FILTER",
        "status": 400,
        "requestId": "apim-1",
    }
    limited = azure_responses.WIRE.failure(
        429, {"error": {"code": "429", "message": "Requests ... exceeded"}}, {"retry-after": "3"}
    )
    assert (limited["code"], limited["providerRetryAfterMs"]) == ("RATE_LIMIT", 3000)


# --- clients, variables, recording -------------------------------------------------------


def test_the_variables_point_azure_openai_at_the_loopback_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = endpoint_env("http://127.0.0.1:1", "k")
    assert (env["AZURE_OPENAI_ENDPOINT"], env["AZURE_OPENAI_API_KEY"]) == (
        "http://127.0.0.1:1",
        "k",
    )
    assert env["OPENAI_API_VERSION"] == azure.API_VERSION
    scripted = ScriptedModel([Rule(Answer(text="hello"))])
    with scripted.serve(idle_timeout=30, api_key="azure-key-0123") as server:
        for name in ("AZURE_OPENAI_AD_TOKEN", "OPENAI_BASE_URL"):
            monkeypatch.delenv(name, raising=False)
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        client = openai.AzureOpenAI(max_retries=0)  # reads the variables only
        reply = client.chat.completions.create(
            model="dep", messages=[{"role": "user", "content": "hi"}]
        )
        assert reply.choices[0].message.content == "hello"
        wrong = openai.AzureOpenAI(api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.chat.completions.create(model="dep", messages=[{"role": "user", "content": "x"}])
        requests = list(server.requests)
    assert [r.path for r in requests] == [
        f"/openai/deployments/dep/chat/completions?api-version={azure.API_VERSION}"
    ] * 2
    assert requests[0].headers["api-key"] == "azure-key-0123"  # the scripted server took it


def test_the_client_takes_an_entra_token_instead_of_the_key() -> None:
    endpoint = Endpoint.replaying(ReplayModel(single(ChunksEntry(TEXT))))
    client = azure_client(endpoint, azure_ad_token="eyJ.a.b", azure_deployment="dep")
    reply = client.chat.completions.create(
        model="x", messages=[{"role": "user", "content": PROMPT}]
    )
    assert reply.model == "dep"  # the client's deployment is the path's


def test_the_live_call_goes_to_the_resource_with_the_api_version_and_the_key() -> None:
    path = "/openai/deployments/d/chat/completions?api-version=2024-10-21"
    body = b'{"messages":[]}'
    for base in ("https://r.openai.azure.com", "https://r.openai.azure.com/openai/"):
        assert azure.WIRE.upstream(base, path, body, None) == (
            f"https://r.openai.azure.com{path}",
            body,
        )
    url, sent = azure.WIRE.upstream(
        "https://r.openai.azure.com/openai?api-version=2025-04-01-preview", path, body, "gpt-x"
    )
    assert url == (
        "https://r.openai.azure.com/openai/deployments/gpt-x/chat/completions"
        "?api-version=2025-04-01-preview"
    )
    assert sent == body  # the deployment is the model: the body is not changed
    url, sent = azure_responses.WIRE.upstream(
        "https://r.openai.azure.com/openai/v1", "/openai/v1/responses", body, "gpt-x"
    )
    assert (url, orjson.loads(sent)["model"]) == (
        "https://r.openai.azure.com/openai/v1/responses",
        "gpt-x",
    )
    assert azure.WIRE.auth_headers("0123abcd") == {"api-key": "0123abcd"}
    assert azure.WIRE.auth_headers("eyJ0.eyJ1.sig") == {"authorization": "Bearer eyJ0.eyJ1.sig"}
    assert "DSH_RECORD_AZURE_BASE_URL" in RECORD_URL_VARIABLES
    redactor = recording_redactor({"DSH_RECORD_AZURE_BASE_URL": "https://u:pw-0123456789@r/"})
    assert "pw-0123456789" not in redactor.redact_text("at https://u:pw-0123456789@r/")


def test_join_path_sends_no_parameter_twice_the_base_urls_winning() -> None:
    assert (
        join_path("http://h/openai?api-version=2&k=", "/openai/x?api-version=1&other=3")
        == "http://h/openai/openai/x?api-version=2&k=&other=3"
    )


def test_recording_the_in_process_azure_client_keeps_its_api_version(tmp_path: Path) -> None:
    provider = ScriptedModel(
        [
            Rule(Answer(text="It is 2."), when=lambda r: bool(r.tool_results)),
            Rule(Answer(tool_calls=[ToolCall("add", '{"a": 2}', id="call_a")])),
        ]
    )
    with provider.serve(idle_timeout=30) as server:
        live = OpenAICompatibleModel(
            base_url="http://127.0.0.1:9/v1",  # not used: the Azure wire has its own
            api_key="live-azure-key-0123456789",
            base_urls={"azure": server.base_url},
        )
        recording = DshReplay.record(tmp_path / "s", live=live, workdir=tmp_path / "rec")
        try:
            client = recording.client("azure", max_retries=0)
            messages: list[Any] = [{"role": "user", "content": PROMPT}]
            first = client.chat.completions.create(model="dep", messages=messages, tools=TOOLS)
            messages += [
                first.choices[0].message.model_dump(exclude_none=True),
                {"role": "tool", "tool_call_id": "call_a", "content": "2"},
            ]
            last = client.chat.completions.create(model="dep", messages=messages, stream=True)
            assert "".join(c.choices[0].delta.content or "" for c in last if c.choices) == (
                "It is 2."
            )
            recording.finish()
        finally:
            recording.close()
            live.close()
        requests = list(server.requests)
    assert [r.path for r in requests] == [
        f"/openai/deployments/dep/chat/completions?api-version={azure.API_VERSION}"
    ] * 2
    assert {r.headers["api-key"] for r in requests} == {"live-azure-key-0123456789"}
    assert "authorization" not in requests[0].headers
    written = (tmp_path / "s" / "session.jsonl").read_text("utf-8")
    assert "live-azure-key-0123456789" not in written
    assert "It is 2." in written


def test_the_v1_form_replays_to_a_plain_openai_client() -> None:
    model = ReplayModel(single(ChunksEntry(TOOL), ChunksEntry(TEXT)))
    endpoint = Endpoint.replaying(model)
    http = httpx_module().Client(transport=sync_transport(endpoint))
    client = openai.OpenAI(base_url="http://r.invalid/openai/v1/", api_key="k", http_client=http)
    messages: Any = [{"role": "user", "content": PROMPT}]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    assert first.model == "gpt-4o"  # the body's model on the v1 route
    calls = first.choices[0].message.tool_calls
    assert calls is not None
    (call,) = calls
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "2"},
    ]
    last = client.chat.completions.create(model="gpt-4o", messages=messages)
    assert last.choices[0].message.content == "It is 2."
    assert endpoint.errors == []
    model.assert_consumed()
