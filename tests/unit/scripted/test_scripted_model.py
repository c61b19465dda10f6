"""The scripted live model: rules, answers as chunks, failures, hangs, in process and async."""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
import threading
import time
from typing import Any

import orjson
import pytest
from support.hang_guard import deadline

from pytest_dsh_replay import (
    Answer,
    Chunks,
    DshReplayError,
    Hang,
    MemoryBackend,
    ProviderFailure,
    RecordingModel,
    Rule,
    ScriptedModel,
    ScriptedModelError,
    ScriptedRequest,
    SessionStore,
    ToolCall,
)
from pytest_dsh_replay._format.reply import assemble_reply


def bad(value: object) -> Any:
    """A value of the wrong type, on purpose."""
    return value


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_an_answer_streams_reasoning_text_and_tool_calls_as_blocks() -> None:
    call = ToolCall("add", {"a": 2, "b": 3}, id="call_1")
    answer = Answer(reasoning="adding", text="Let me add.", tool_calls=[call], pieces=2)
    chunks = list(ScriptedModel([Rule(answer)]).stream(ask("add 2 and 3")))
    reply = assemble_reply(chunks)
    assert reply.content == [
        {"type": "reasoning", "text": "adding"},
        {"type": "text", "text": "Let me add."},
        {"type": "tool-call", "id": "call_1", "name": "add", "arguments": '{"a":2,"b":3}'},
    ]
    assert reply.finish == {"kind": "tool-calls"}
    assert [c["text"] for c in chunks if c["type"] == "text-delta"] == ["Let me", " add."]
    deltas = [c for c in chunks if c["type"] == "tool-call-delta"]
    assert deltas[0]["name"] == "add"
    assert all("name" not in d for d in deltas[1:])
    assert reply.usage == {"inputTokens": 4, "outputTokens": 6, "reasoningTokens": 1}
    assert chunks[-2:] == [
        {"type": "usage", "usage": reply.usage},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


def test_rules_match_by_prompt_pattern_predicate_and_call_number_first_wins() -> None:
    model = ScriptedModel(
        [
            Rule(Answer(text="first call"), call=1),
            Rule(Answer(text="capital"), prompt="capital"),
            Rule(Answer(text="digits"), prompt=re.compile(r"\d+")),
            Rule(Answer(text="long"), when=lambda r: len(r.prompt) > 20),
        ],
        default=Answer(text="fallback"),
    )

    def text(request: dict[str, Any]) -> str:
        return "".join(c["text"] for c in model.stream(request) if c["type"] == "text-delta")

    assert text(ask("the capital")) == "first call"
    assert text(ask("the capital")) == "capital"
    assert text(ask("call 42")) == "digits"
    assert text(ask("a question of more than twenty characters")) == "long"
    assert text(ask("short")) == "fallback"
    assert [c.call for c in model.calls] == [1, 2, 3, 4, 5]


def test_times_fails_once_then_the_retry_gets_the_next_rule() -> None:
    model = ScriptedModel(
        [
            Rule(ProviderFailure(429, retry_after=1.5), prompt="hi", times=1),
            Rule(Answer(text="hello"), prompt="hi"),
        ]
    )
    first = list(model.stream(ask("hi")))
    assert first == [
        {
            "type": "finish",
            "reason": {
                "kind": "error",
                "failure": {
                    "message": "Rate limit reached for requests.",
                    "code": "RATE_LIMIT",
                    "status": 429,
                    "providerRetryAfterMs": 1500,
                },
            },
        }
    ]
    assert assemble_reply(list(model.stream(ask("hi")))).finish == {"kind": "stop"}


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (ProviderFailure(401), "AUTH"),
        (ProviderFailure(402), "QUOTA"),
        (ProviderFailure(400, "maximum context length exceeded"), "CONTEXT_WINDOW_EXCEEDED"),
        (ProviderFailure(400, "bad temperature"), "INVALID_REQUEST"),
        (ProviderFailure(503), "OVERLOADED"),
        (ProviderFailure(500), "SERVER"),
        (ProviderFailure(404), "HTTP_404"),
        (ProviderFailure(500, code="UNKNOWN"), "UNKNOWN"),
        (ProviderFailure(None, code="NETWORK"), "NETWORK"),
    ],
)
def test_a_failure_code_follows_the_status(failure: ProviderFailure, code: str) -> None:
    assert failure.failure()["code"] == code
    assert failure.failure()["message"]


def test_an_answer_with_a_failure_streams_its_content_then_the_error_finish() -> None:
    answer = Answer(text="partial", failure=ProviderFailure(500, "upstream died"))
    chunks = list(ScriptedModel([Rule(answer)]).stream(ask("x")))
    assert "".join(c.get("text", "") for c in chunks) == "partial"
    assert chunks[-1]["reason"]["failure"]["message"] == "upstream died"
    assert not any(c["type"] == "usage" for c in chunks)


def test_a_callable_answer_quotes_the_request_and_sees_tool_results() -> None:
    def respond(request: ScriptedRequest) -> Answer:
        return Answer(text=f"results: {'; '.join(request.tool_results)}")

    model = ScriptedModel([Rule(respond, when=lambda r: bool(r.tool_results))])
    request = {
        "system": "be brief",
        "messages": [
            {"role": "user", "content": "add"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "5"},
        ],
        "tools": [{"type": "function", "function": {"name": "add", "parameters": {}}}],
        "model": "m",
    }
    chunks = list(model.stream(request, session_id="main"))
    assert "".join(c.get("text", "") for c in chunks) == "results: 5"
    (seen,) = model.calls
    assert (seen.prompt, seen.tool_results, seen.system) == ("", ("5",), "be brief")
    assert seen.messages == (("user", "add"), ("assistant", ""), ("tool", "5"))
    assert (seen.tools, seen.model, seen.session_id) == (("add",), "m", "main")


def test_default_tool_call_ids_depend_only_on_the_conversation() -> None:
    model = ScriptedModel([Rule(Answer(tool_calls=[ToolCall("a"), ToolCall("b")]))])
    ids = [
        [c["block"]["id"] for c in model.stream(ask(text)) if c["type"] == "block-end"]
        for text in ("one", "one", "two")
    ]
    assert ids[0] == ids[1] != ids[2]
    assert re.fullmatch(r"call_[0-9a-f]{16}_0", ids[0][0])
    assert ids[0][1].endswith("_1")


def tool_call_ids(model: ScriptedModel, request: dict[str, Any]) -> list[str]:
    return [c["block"]["id"] for c in model.stream(request) if c["type"] == "block-end"]


def runtime_request(cwd: str, task: str = "list the files") -> dict[str, Any]:
    """A request as the dsh runtime sends one: its working directory in the system
    prompt and in a runtime-context message after the user's words."""
    context = f'Current working directory: "{cwd}".\nFiles under {cwd}/src may change.'
    return {
        "system": f"You work in {cwd} (see {cwd}/README.md).",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": task}]},
            {"role": "user", "content": [{"type": "text", "text": context}]},
        ],
    }


def test_tool_call_ids_do_not_depend_on_the_temporary_directory_of_the_run() -> None:
    # The dsh runtime names its working directory, pytest's tmp_path, in every request:
    # two runs of one test, or two machines, must get the same ids.
    model = ScriptedModel([Rule(Answer(tool_calls=[ToolCall("glob"), ToolCall("read")]))])
    first = tool_call_ids(model, runtime_request("/tmp/pytest-of-ann/pytest-3/test_x0/work"))
    again = tool_call_ids(model, runtime_request("/tmp/pytest-of-bob/pytest-41/test_x0/work"))
    windows = tool_call_ids(model, runtime_request("C:\\Users\\cy\\AppData\\Local\\Temp\\w"))
    assert first == again == windows
    assert re.fullmatch(r"call_[0-9a-f]{16}_0", first[0])
    # What is not a path still tells conversations apart; a conversation without a
    # path keeps the ids it always had.
    other = tool_call_ids(model, runtime_request("/tmp/w", task="list the tests"))
    assert other != first
    url = ask("fetch https://example.com/a/b and/or 1 / 2")
    assert tool_call_ids(model, url) != tool_call_ids(model, ask("fetch https://example.com/a/c"))
    plain = ScriptedRequest.read(ask("one"), call=1)
    assert (
        plain.stable_id() == hashlib.sha256(orjson.dumps(["", [["user", "one"]]])).hexdigest()[:16]
    )


STOP = {"type": "finish", "reason": {"kind": "stop"}}
TEXT = {"type": "text-delta", "index": 0, "text": "x"}


def test_a_failure_carries_the_providers_request_id() -> None:
    failure = ProviderFailure(429, retry_after=1, request_id="req_42").failure()
    assert failure == {
        "message": "Rate limit reached for requests.",
        "code": "RATE_LIMIT",
        "status": 429,
        "providerRetryAfterMs": 1000,
        "requestId": "req_42",
    }
    assert "requestId" not in ProviderFailure(429).failure()


def test_chunks_stream_as_given_and_each_call_gets_its_own() -> None:
    given: list[dict[str, Any]] = [
        {"type": "block-start", "index": 0, "blockType": "tool-call"},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {"type": "tool-call-delta", "index": 0, "id": "a", "name": "f", "argumentsDelta": "{"},
        {"type": "tool-call-delta", "index": 1, "id": "b", "name": "g", "argumentsDelta": "{}"},
        {"type": "tool-call-delta", "index": 0, "id": "a", "argumentsDelta": "}"},
        {"type": "block-end", "index": 0,
         "block": {"type": "tool-call", "id": "a", "name": "f", "arguments": "{}"}},
        {"type": "block-end", "index": 1,
         "block": {"type": "tool-call", "id": "b", "name": "g", "arguments": "{}"}},
        {"type": "finish", "reason": {"kind": "tool-calls"}, "replayState": {"k": [1]}},
    ]  # fmt: skip
    expected = [dict(c) for c in given]
    answer = Chunks(given)
    given[0]["index"] = 9  # a later change to the given objects does not reach the answer
    model = ScriptedModel([Rule(answer)])
    first = list(model.stream(ask("x")))
    assert first == expected  # interleaved deltas, no usage chunk, the finish as given
    first[-1]["replayState"]["k"].append(2)
    assert list(model.stream(ask("x"))) == expected

    async def read() -> list[dict[str, Any]]:
        return [chunk async for chunk in model.astream(ask("x"))]

    assert asyncio.run(read()) == expected
    assert model.answer(ask("x")) is answer


def test_an_unmatched_request_is_a_typed_error_naming_the_call_and_prompt() -> None:
    model = ScriptedModel([Rule(Answer(text="x"), prompt="capital")])
    with pytest.raises(ScriptedModelError, match=r"call #1: no rule .*'what time is it'"):
        list(model.stream(ask("what time is it")))
    assert issubclass(ScriptedModelError, DshReplayError)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Rule(bad("text")), r"Rule\(answer\) takes an Answer"),
        (lambda: Rule(Answer(), times=0), r"Rule\(times=...\) takes an integer >= 1"),
        (lambda: Rule(Answer(), prompt=bad(3)), r"Rule\(prompt=...\) takes a string"),
        (lambda: Answer(pieces=0), r"Answer\(pieces=...\) must be an integer >= 1"),
        (lambda: Answer(finish=bad("length")), r"Answer\(finish=...\)"),
        (lambda: Answer(tool_calls=bad("add")), r"Answer\(tool_calls=...\)"),
        (lambda: ToolCall("f", "[1]"), r"arguments must be a JSON object"),
        (lambda: ToolCall("f", "{"), r"arguments must be a JSON object text"),
        (lambda: ProviderFailure(200), r"must be an HTTP error 400-599, got 200"),
        (lambda: ProviderFailure(None), r"status=None\) needs code="),
        (lambda: ProviderFailure(429, retry_after=0), r"retry_after=...\) takes .*seconds > 0"),
        (lambda: ProviderFailure(429, request_id=""), r"request_id=...\) must be a non-empty"),
        (lambda: Hang(seconds=-1), r"Hang\(seconds=...\) takes a finite number of seconds > 0"),
        (lambda: Hang(seconds=math.inf), r"Hang\(seconds=...\) takes a finite number"),
        (lambda: Answer(delay=math.inf), r"Answer\(delay=...\) takes a finite number"),
        (lambda: Answer(usage={"foo": 3}), r"Answer\(usage=...\) must be a token usage"),
        (lambda: Answer(usage={"inputTokens": 1}), r"Answer\(usage=...\) must be a token usage"),
        (lambda: ToolCall("f", {"a": [math.nan]}), r"a float is NaN or infinite"),
        (lambda: Chunks([{**STOP, "replayState": {"x": math.inf}}]), r"a float is NaN or"),
        (lambda: Chunks([{"type": "bogus"}, STOP]), r"stream-chunks\)$"),
        (
            lambda: ScriptedModel(bad(Rule(Answer()))),
            r"a list of Rule objects \(wrap a single rule",
        ),
        (lambda: Chunks(bad("text")), r"Chunks\(chunks\) takes a list of stream chunks"),
        (lambda: Chunks([bad("x"), STOP]), r"Chunks\(chunks\[0\]\) must be a stream chunk"),
        (lambda: Chunks([{"type": "text-delta", "index": 0}, STOP]), r"chunks\[0\]\).*needs text"),
        (lambda: Chunks([{"type": "block-eMd", "index": 0}, STOP]), r"unknown stream chunk type"),
        (lambda: Chunks([{**STOP, "extra": 1}]), r"unknown field \"extra\""),
        (lambda: Chunks([{**STOP, "replayState": {"x": object()}}]), r"is not a JSON object"),
        (lambda: Chunks([]), r"end in one finish chunk .* positions \[\] of 0"),
        (lambda: Chunks([STOP, STOP]), r"positions \[0, 1\] of 2"),
        (lambda: Chunks([STOP, TEXT]), r"positions \[0\] of 2"),
        (lambda: ScriptedModel([bad(Answer())]), r"rules\[0\]\) must be a Rule"),
        (lambda: ScriptedModel(bad(None)), r"ScriptedModel\(rules\) takes a list of Rule"),
    ],
)
def test_bad_rules_and_answers_are_refused_saying_what_was_expected(
    build: Any, message: str
) -> None:
    with pytest.raises(ScriptedModelError, match=message):
        build()


def test_a_callable_answer_that_returns_no_answer_is_refused() -> None:
    model = ScriptedModel([Rule(bad(lambda r: "oops"))])
    with pytest.raises(ScriptedModelError, match=r"call #1: the answer of Rule.* returned 'oops'"):
        list(model.stream(ask("x")))


def test_a_hang_ends_by_its_time_by_the_callers_cancel_or_by_close() -> None:
    model = ScriptedModel([Rule(Hang(seconds=0.05))])
    with deadline(20):
        started = time.monotonic()
        (timed_out,) = list(model.stream(ask("x")))
        assert time.monotonic() - started >= 0.05
        assert timed_out["reason"]["failure"]["code"] == "TIMEOUT"

        cancel = threading.Event()
        threading.Timer(0.05, cancel.set).start()
        (cancelled,) = list(ScriptedModel([Rule(Hang(seconds=10))]).stream(ask("x"), cancel=cancel))
        assert cancelled["reason"]["kind"] == "aborted"

        closing = ScriptedModel([Rule(Hang(seconds=10))])
        threading.Timer(0.05, closing.close).start()
        started = time.monotonic()
        (closed,) = list(closing.stream(ask("x")))
        assert closed["reason"]["failure"]["code"] == "ABORTED"
        assert time.monotonic() - started < 5


def test_astream_yields_the_same_chunks_and_hangs_without_blocking_the_loop() -> None:
    model = ScriptedModel(
        [Rule(Hang(seconds=0.1), prompt="hang"), Rule(Answer(text="hi", delay=0.05))]
    )

    async def main() -> tuple[list[Any], list[Any], int, int]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            for _ in range(3):
                await asyncio.sleep(0.02)
                ticks += 1

        ticker = asyncio.create_task(tick())
        hung = [c async for c in model.astream(ask("hang"))]
        during = ticks  # the ticker's first 20 ms ended before the 100 ms hang did
        answered = [c async for c in model.astream(ask("hello"))]
        await ticker
        return hung, answered, ticks, during

    with deadline(20):
        hung, answered, ticks, during = asyncio.run(main())
    assert during >= 1, "the hang blocked the event loop"
    assert hung[-1]["reason"]["failure"]["code"] == "TIMEOUT"
    assert answered == list(ScriptedModel([Rule(Answer(text="hi"))]).stream(ask("hello")))
    assert ticks == 3


def test_the_recorder_logs_a_scripted_call_like_a_live_one() -> None:
    store = SessionStore(MemoryBackend())
    model = RecordingModel(ScriptedModel([Rule(Answer(text="The capital is Paris."))]), store)
    chunks = list(model.stream(ask("What is the capital of France?"), session_id="main"))
    assert assemble_reply(chunks).finish == {"kind": "stop"}
    session = store.get("main")
    assert session is not None
    kinds = [event["type"] for event in session.events]
    assert "assistant/message" in kinds
    assert kinds[-1] == "turn/end"
