"""The scripted model over loopback HTTP: every wire the endpoint speaks, from real SDKs."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from support.hang_guard import deadline

from pytest_dsh_replay import (
    Answer,
    Chunks,
    Hang,
    ProviderFailure,
    Rule,
    ScriptedModel,
    ScriptedModelError,
    ScriptedServer,
    ToolCall,
    UnservedRouteError,
)

CAPITAL = Answer(reasoning="Recalling.", text="The capital is Paris.")
ADD = Answer(tool_calls=[ToolCall("add", {"a": 2, "b": 3}, id="call_add")])


def model() -> ScriptedModel:
    return ScriptedModel(
        [
            Rule(ProviderFailure(429, retry_after=2), prompt="flaky", times=1),
            Rule(Answer(text="recovered"), prompt="flaky"),
            Rule(Answer(text="half", failure=ProviderFailure(500, "upstream died")), prompt="half"),
            Rule(Hang(seconds=20), prompt="hang"),
            Rule(ADD, prompt="add"),
            Rule(Answer(text="It is 5."), when=lambda r: bool(r.tool_results)),
            Rule(CAPITAL, prompt="capital"),
        ]
    )


def post(url: str, body: dict[str, Any], **headers: str) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def test_chat_completions_whole_and_streamed_from_the_openai_sdk() -> None:
    openai = pytest.importorskip("openai")
    with deadline(60), model().serve() as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0)
        whole = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "capital?"}]
        )
        assert whole.choices[0].message.content == "The capital is Paris."
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "add 2 and 3"}],
            stream=True,
        )
        calls = [c.choices[0].delta.tool_calls for c in stream if c.choices]
        (first,) = next(call for call in calls if call)
        assert (first.id, first.function.name) == ("call_add", "add")
        arguments = "".join(d[0].function.arguments or "" for d in calls if d)
        assert json.loads(arguments) == {"a": 2, "b": 3}
        assert [r.path for r in server.requests] == ["/v1/chat/completions"] * 2
        assert server.requests[1].body["stream"] is True


def test_responses_messages_and_gemini_from_their_sdks() -> None:
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    genai = pytest.importorskip("google.genai")
    with deadline(60), model().serve() as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0)
        with client.responses.stream(model="gpt-5", input="capital?") as stream:
            assert stream.get_final_response().output_text == "The capital is Paris."
        messages = anthropic.Anthropic(base_url=server.base_url, api_key="k", max_retries=0)
        with messages.messages.stream(
            model="m", max_tokens=64, messages=[{"role": "user", "content": "capital?"}]
        ) as stream:
            final = stream.get_final_message()
        assert [b.type for b in final.content] == ["thinking", "text"]
        assert final.content[1].text == "The capital is Paris."
        gemini = genai.Client(api_key="k", http_options={"base_url": server.base_url})
        first = gemini.models.generate_content(model="gemini-2.5-flash", contents="add 2 and 3")
        assert (first.function_calls[0].name, first.function_calls[0].args) == (
            "add",
            {"a": 2, "b": 3},
        )
        streamed = gemini.models.generate_content_stream(
            model="gemini-2.5-flash", contents="capital?"
        )
        assert "".join(chunk.text or "" for chunk in streamed) == "The capital is Paris."


def test_a_rate_limit_is_the_wires_429_with_retry_after_then_the_retry_succeeds() -> None:
    with deadline(60), model().serve() as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "flaky"}]}
        status, headers, raw = post(server.base_url + "/v1/chat/completions", body)
        assert status == 429
        lower = {k.lower(): v for k, v in headers.items()}
        assert (lower["retry-after"], lower["retry-after-ms"]) == ("2", "2000")
        assert json.loads(raw)["error"]["message"] == "Rate limit reached for requests."
        status, _, raw = post(server.base_url + "/v1/chat/completions", body)
        assert status == 200
        assert json.loads(raw)["choices"][0]["message"]["content"] == "recovered"


def test_an_anthropic_call_gets_the_anthropic_error_shape() -> None:
    anthropic = pytest.importorskip("anthropic")
    with deadline(60), model().serve() as server:
        client = anthropic.Anthropic(base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(anthropic.RateLimitError) as raised:
            client.messages.create(
                model="m", max_tokens=8, messages=[{"role": "user", "content": "flaky"}]
            )
        assert raised.value.response.headers["retry-after"] == "2"


def test_a_failure_after_content_is_the_wires_in_stream_error_event() -> None:
    with deadline(60), model().serve() as server:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "half"}]}
        status, _, raw = post(server.base_url + "/v1/chat/completions", body)
    assert status == 200
    events = [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]
    deltas = [json.loads(e)["choices"][0]["delta"].get("content") for e in events[:-1]]
    assert "".join(d or "" for d in deltas) == "half"
    assert json.loads(events[-1])["error"]["message"] == "upstream died"
    assert "[DONE]" not in events


def test_chunks_reach_the_wire_in_their_order_and_a_request_id_reaches_the_sdk() -> None:
    openai = pytest.importorskip("openai")
    filtered = {"kind": "error", "failure": {"message": "filtered", "code": "CONTENT_FILTER"}}
    scripted = ScriptedModel(
        [
            Rule(ProviderFailure(429, request_id="req_42"), prompt="limit"),
            Rule(
                Chunks(
                    [
                        {"type": "tool-call-delta", "index": 0, "id": "a", "name": "f",
                         "argumentsDelta": ""},
                        {"type": "tool-call-delta", "index": 1, "id": "b", "name": "g",
                         "argumentsDelta": "{"},
                        {"type": "tool-call-delta", "index": 0, "id": "a", "argumentsDelta": "{}"},
                        {"type": "tool-call-delta", "index": 1, "id": "b", "argumentsDelta": "}"},
                        {"type": "finish", "reason": {"kind": "tool-calls"}},
                    ]
                ),
                prompt="both",
            ),
            Rule(
                Chunks(
                    [
                        {"type": "text-delta", "index": 0, "text": "par"},
                        {"type": "usage", "usage": {"inputTokens": 2, "outputTokens": 1}},
                        {"type": "finish", "reason": filtered},
                    ]
                ),
                prompt="filter",
            ),
        ]
    )  # fmt: skip
    with deadline(60), scripted.serve() as server:
        client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError) as raised:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "limit"}]
            )
        assert raised.value.request_id == "req_42"

        def stream(prompt: str) -> list[Any]:
            return list(
                client.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": prompt}],
                    stream=True,
                    stream_options={"include_usage": True},
                )
            )

        deltas = [
            (d.index, d.id, d.function.arguments)
            for c in stream("both")
            if c.choices
            for d in c.choices[0].delta.tool_calls or ()
        ]
        assert deltas == [(0, "a", ""), (1, "b", "{"), (0, None, "{}"), (1, None, "}")]
        assert b'"usage"' not in server.requests[-1].response  # none given, none sent
        filtered_stream = stream("filter")
        assert [c.choices[0].finish_reason for c in filtered_stream if c.choices][-1] == (
            "content_filter"
        )
        assert filtered_stream[-1].usage.completion_tokens == 1


def test_a_hang_holds_the_response_until_the_client_gives_up() -> None:
    openai = pytest.importorskip("openai")
    with deadline(60), model().serve() as server:
        client = openai.OpenAI(
            base_url=server.base_url + "/v1", api_key="k", max_retries=0, timeout=0.2
        )
        started = time.monotonic()
        with pytest.raises(openai.APITimeoutError):
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hang"}], stream=True
            )
        assert 0.2 <= time.monotonic() - started < 5


def test_stopping_ends_a_hanging_call_at_once() -> None:
    server = ScriptedServer(ScriptedModel([Rule(Hang(seconds=30))]))
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    outcome: list[Any] = []

    def call() -> None:
        try:
            outcome.append(post(server.base_url + "/v1/chat/completions", body))
        except Exception as error:  # the dropped connection
            outcome.append(error)

    with deadline(30):
        thread = threading.Thread(target=call)
        thread.start()
        while not server.requests:
            time.sleep(0.02)
        started = time.monotonic()
        server.stop()
        thread.join(10)
        assert not thread.is_alive()
        assert time.monotonic() - started < 5
    assert outcome
    assert not isinstance(outcome[0], tuple)


def test_an_api_key_is_required_when_given_and_env_carries_it() -> None:
    with deadline(60), ScriptedServer(model(), api_key="sk-scripted") as server:
        body = {"model": "m", "messages": [{"role": "user", "content": "capital"}]}
        url = server.base_url + "/v1/chat/completions"
        assert post(url, body)[0] == 401
        assert post(url, body, authorization="Bearer wrong")[0] == 401
        assert post(url, body, authorization="Bearer sk-scripted")[0] == 200
        anthropic_url = server.base_url + "/v1/messages"
        status, _, raw = post(anthropic_url, {**body, "max_tokens": 8}, **{"x-api-key": "no"})
        assert status == 401
        assert json.loads(raw)["type"] == "error"
        env = server.env
        assert env["OPENAI_BASE_URL"] == server.base_url + "/v1"
        assert env["ANTHROPIC_API_KEY"] == env["OPENAI_API_KEY"] == "sk-scripted"
        assert server.requests[0].headers.get("authorization") is None


def test_the_server_listens_on_loopback_and_stops_by_itself_when_idle() -> None:
    server = ScriptedServer(ScriptedModel(), idle_timeout=0.05)
    assert server.base_url.startswith("http://127.0.0.1:")
    assert server.port > 0
    with deadline(20):
        server._watch.join()  # the idle watch ends when it has stopped the server
    assert not server.running
    with pytest.raises(OSError):  # noqa: PT011 (refused, or reset: the kernel's timing)
        urllib.request.urlopen(server.base_url + "/v1/models", timeout=2)


def test_a_call_no_rule_answers_is_a_400_and_the_error_at_the_end_of_the_block() -> None:
    server = ScriptedServer(ScriptedModel([Rule(CAPITAL, prompt="capital")]))
    body = {"model": "m", "messages": [{"role": "user", "content": "weather?"}]}
    with deadline(60):
        status, _, raw = post(server.base_url + "/v1/chat/completions", body)
        with pytest.raises(ScriptedModelError, match="call #1: no rule"):
            server.__exit__(None, None, None)
    assert status == 400  # a replay error: never retried
    assert b"no rule of the scripted model" in raw
    other = ScriptedServer(ScriptedModel())
    with deadline(60):
        assert post(other.base_url + "/v2/complete", {})[0] == 404
        with pytest.raises(UnservedRouteError):
            other.__exit__(None, None, None)
    assert not other.running


def test_the_server_refuses_what_is_not_a_scripted_model() -> None:
    with pytest.raises(ScriptedModelError, match="takes a ScriptedModel"):
        ScriptedServer(object())  # type: ignore[arg-type]
    with pytest.raises(ScriptedModelError, match="idle_timeout"):
        ScriptedServer(ScriptedModel(), idle_timeout=0)


def test_answers_carry_provider_like_ids_of_the_conversation_not_the_replays_numbering() -> None:
    model = ScriptedModel([Rule(CAPITAL)])
    body = {"model": "m", "messages": [{"role": "user", "content": "capital?"}]}
    with deadline(60), model.serve() as server:
        ids = [json.loads(post(server.base_url + "/v1/chat/completions", body)[2])["id"]]
        ids.append(json.loads(post(server.base_url + "/v1/chat/completions", body)[2])["id"])
        other = {"model": "m", "messages": [{"role": "user", "content": "capital of Peru?"}]}
        ids.append(json.loads(post(server.base_url + "/v1/chat/completions", other)[2])["id"])
    first = ids[0]
    assert first.startswith("scripted-")
    assert len(first) == len("scripted-") + 16
    assert ids[1] == f"{first}-2"  # the same conversation again: its second answer
    assert ids[2].startswith("scripted-")
    assert ids[2] not in (first, ids[1])
    # A fresh model answers the same conversation under the same id: stable across runs.
    again = ScriptedModel([Rule(CAPITAL)])
    with deadline(60), again.serve() as server:
        assert json.loads(post(server.base_url + "/v1/chat/completions", body)[2])["id"] == first
