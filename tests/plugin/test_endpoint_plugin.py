"""The model endpoint through the fixture, as users run it (pytester)."""

from __future__ import annotations

import pytest
from support.doc_examples import DOCS, titled
from support.scenarios import make_scenario


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_scenario(pytester.path / "snaps" / "one", primary=["Hello"])
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    return pytester


def test_an_unserved_route_fails_the_test_with_its_404_and_no_rerecord_hint(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        """
        import openai
        import pytest

        @pytest.mark.dsh_scenario("one")
        def test_embeddings(dsh_replay):
            client = dsh_replay.openai_client(max_retries=0)
            reply = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            assert reply.choices[0].message.content == "Hello"
            try:
                client.embeddings.create(model="e", input="hi")
            except openai.NotFoundError:
                pass  # swallowed: the test still fails, with the route named
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "UnservedRouteError: POST /v1/embeddings is not served*",
            "(a model call to the model endpoint met this error: "
            "its client got a 404 with this message)",
        ]
    )
    assert "re-record" not in out  # a recording cannot add a route


def test_a_replay_error_over_http_fails_the_test_with_the_typed_error(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        """
        import openai
        import pytest

        def ask(client, *texts):
            messages = []
            for text in texts:
                messages.append({"role": "user", "content": text})
                messages.append({"role": "assistant", "content": "Hello"})
            return client.chat.completions.create(
                model="m", messages=messages[:-1]
            ).choices[0].message.content

        @pytest.mark.dsh_scenario("one")
        def test_swallowed(dsh_replay):
            client = dsh_replay.openai_client()
            assert ask(client, "hi") == "Hello"
            try:
                ask(client, "hi", "hi again")  # one call more than recorded
            except openai.BadRequestError:
                pass  # an agent that swallows errors still fails the test

        @pytest.mark.dsh_scenario("one")
        def test_raised(dsh_replay):
            client = dsh_replay.openai_client()
            ask(client, "hi")
            ask(client, "hi", "hi again")
        """
    )
    result = project.runpytest("-p", "no:randomly")
    # One replay error counts once: test_raised fails in its body, with no teardown error.
    result.assert_outcomes(failed=2)
    assert "ERROR at teardown" not in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*_ test_swallowed _*",
            "ReplayExhaustedError: session '*' (first user message 'hi') asked for call #2*"
            "re-record: *::test_swallowed*",
            "(a model call to the model endpoint met this error: "
            "its client got a 400 with this message)",
            "*_ test_raised _*",
            # the typed error leads, the SDK's exception (its echo) comes under it
            "ReplayExhaustedError: session '*' (first user message 'hi') asked for call #2*",
            "(a model call to the model endpoint met this error: "
            "its client got a 400 with this message)",
            "",
            "the code under test then raised (caused by the error above):",
            "test_*.py:26: in test_raised",
            '*ask(client, "hi", "hi again")',
            # the SDK repeats the response's text: shown once, above
            "E   openai.BadRequestError: Error code: 400 - ReplayExhaustedError: (the error above)",
        ]
    )
    swallowed = result.stdout.str().split("_ test_swallowed _")[1].split("_ test_raised _")[0]
    assert "if the new behaviour is right" not in swallowed  # its error says how, once
    # (up to the short summary: newer pytest repeats whole messages there)
    raised = result.stdout.str().split("_ test_raised _")[1].split("short test summary info")[0]
    assert "_pytest" not in raised  # the body's exception from the test's own frame on
    assert raised.count("ReplayExhaustedError") == 2  # the error and the SDK's echo


def test_env_points_an_agent_process_at_the_endpoint(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import os
        import subprocess
        import sys

        import pytest

        AGENT = '''
        import os, openai
        client = openai.OpenAI()
        answer = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        print("".join(c.choices[0].delta.content or "" for c in answer if c.choices))
        '''

        @pytest.mark.dsh_scenario("one", compare_logs=False)  # a hand-made recording
        def test_process(dsh_replay):
            env = {**os.environ, **dsh_replay.env}
            assert env["OPENAI_BASE_URL"] == dsh_replay.base_url + "/v1"
            assert env["OPENAI_API_BASE"] == env["OPENAI_BASE_URL"]  # LlamaIndex reads it
            assert dsh_replay.base_url.startswith("http://127.0.0.1:")
            out = subprocess.run(
                [sys.executable, "-c", AGENT.replace("\\n        ", "\\n")],
                env=env, capture_output=True, text=True, timeout=60, check=True,
            )
            assert out.stdout.strip() == "Hello"
        """
    )
    project.runpytest().assert_outcomes(passed=1)


def test_recording_with_the_server_down_names_the_url_and_the_error(
    pytester: pytest.Pytester,
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    pytester._monkeypatch.setenv("DSH_RECORD_BASE_URL", url)
    pytester._monkeypatch.setenv("DSH_RECORD_API_KEY", "sk-test-0123456789abcdef")
    pytester._monkeypatch.setenv("DSH_RECORD_MODEL", "m")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    pytester.makepyfile(
        """
        import openai

        def test_in_process(dsh_replay):
            request = {"messages": [{"role": "user", "content": "hi"}]}
            chunks = list(dsh_replay.model.stream(request))
            assert chunks[-1]["reason"]["failure"]["code"] == "NETWORK"  # ignored by the agent

        def test_through_the_proxy(dsh_replay):
            client = dsh_replay.openai_client(max_retries=0)
            try:
                client.chat.completions.create(model="m", messages=[])
            except openai.APIStatusError as error:
                assert error.status_code == 400  # not retried: the run ends at once
                assert "cannot reach the live model at" in error.message
        """
    )
    result = pytester.runpytest("--dsh-record", "-p", "no:randomly")
    result.assert_outcomes(failed=2)  # once each, not again at teardown
    result.stdout.fnmatch_lines(
        [
            "*_ test_in_process _*",
            f"RecordingError: recording * failed: cannot reach the live model at {url}: *Connect*",
            "*_ test_through_the_proxy _*",
            f"RecordingError: recording * failed: cannot reach the live model at {url}/chat/comp*",
        ]
    )
    assert not (pytester.path / "snaps").exists()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


UNREACHED = """
import openai
import pytest

MESSAGES = [{"role": "user", "content": "hi"}]

def test_in_process(dsh_replay):
    list(dsh_replay.model.stream({"model": "m", "messages": MESSAGES}))

def test_through_an_sdk(dsh_replay):
    client = dsh_replay.openai_client(max_retries=0)
    client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
"""

# A live model of the user's own, on the openai SDK: it raises when its server is down.
SDK_LIVE = """
import os

import openai

class SdkLive:
    def stream(self, request, **kwargs):
        client = openai.OpenAI(base_url=os.environ["LIVE_URL"], api_key="dummy", max_retries=0)
        client.chat.completions.create(model="m", messages=request["messages"], stream=True)
        return iter([{"type": "finish", "reason": {"kind": "stop"}}])

def pytest_dsh_replay_live_model(config, scenario_path):
    return SdkLive()
"""


@pytest.mark.parametrize("live", ["DSH_RECORD_BASE_URL", "hook"])
def test_an_unreachable_live_model_fails_first_with_its_redacted_url(
    pytester: pytest.Pytester, live: str
) -> None:
    pytest.importorskip("openai")
    port, secret = closed_port(), "sk-query-0123456789abcdefghij"
    url = f"http://127.0.0.1:{port}/v1?api_key={secret}"
    if live == "hook":  # a live model that raises: it once failed as a bug of the endpoint
        pytester.makeconftest(SDK_LIVE)
        pytester._monkeypatch.setenv("LIVE_URL", url)
        shown = (
            f"SdkLive at http://127.0.0.1:{port}/v1*api_key=[[]REDACTED[]]*: APIConnectionError*"
        )
    else:
        pytester._monkeypatch.setenv("DSH_RECORD_BASE_URL", url)
        pytester._monkeypatch.setenv("DSH_RECORD_API_KEY", "sk-test-0123456789abcdef")
        shown = f"at http://127.0.0.1:{port}/v1*api_key=[[]REDACTED[]]*: *Connect*"
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    pytester.makepyfile(UNREACHED)
    result = pytester.runpytest("--dsh-record", "-p", "no:randomly")
    result.assert_outcomes(failed=2)  # once each, not again at teardown
    typed = f"RecordingError: recording * failed: cannot reach the live model {shown}"
    for test in ("test_in_process", "test_through_an_sdk"):
        result.stdout.fnmatch_lines([f"*_ {test} _*", typed], consecutive=True)
    out = result.stdout.str()
    assert "bug of the endpoint" not in out
    assert secret not in out
    assert not (pytester.path / "snaps").exists()


# Live models that fail a call: a scripted one with no rule for the test's prompt and no
# default answer, and one of the user's own that raises.
FAILING_LIVE = {
    "scripted": """
from pytest_dsh_replay import Answer, Rule, ScriptedModel

def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(Answer(text="Paris"), prompt="nomatch")])
""",
    "raising": """
class Raising:
    def stream(self, request, **kwargs):
        raise ValueError("the live model's own error")

def pytest_dsh_replay_live_model(config, scenario_path):
    return Raising()
""",
}

FAILING_LIVE_TESTS = """
import openai

MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]

def test_raised(dsh_replay):
    dsh_replay.openai_client().chat.completions.create(model="m", messages=MESSAGES)

def test_swallowed(dsh_replay):
    try:
        dsh_replay.openai_client().chat.completions.create(model="m", messages=MESSAGES)
    except openai.BadRequestError:
        pass  # an agent that swallows errors still fails the recording
"""


@pytest.mark.parametrize(
    ("live", "typed"),
    [
        pytest.param(
            "scripted",
            "ScriptedModelError: call #1: no rule of the scripted model matches the request "
            "(prompt 'What is the capital of France?'*add a rule or a default answer",
            id="scripted",
        ),
        pytest.param(
            "raising",
            "RecordingError: recording * failed: the live model Raising failed: "
            "ValueError: the live model's own error; nothing was written.",
            id="raising",
        ),
    ],
)
def test_a_live_model_failing_a_call_over_http_fails_the_recording_with_its_error_first(
    pytester: pytest.Pytester, live: str, typed: str
) -> None:
    pytest.importorskip("openai")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    pytester.makeconftest(FAILING_LIVE[live])
    pytester.makepyfile(FAILING_LIVE_TESTS)
    result = pytester.runpytest("--dsh-record=missing", "-p", "no:randomly")
    result.assert_outcomes(failed=2)  # once each, not again at teardown
    for test in ("test_raised", "test_swallowed"):  # the typed error first
        result.stdout.fnmatch_lines([f"*_ {test} _*", typed], consecutive=True)
    result.stdout.fnmatch_lines(
        [
            "the code under test then raised (caused by the error above):",
            "*BadRequestError: Error code: 400 - the live model failed: *",
        ]
    )
    assert not (pytester.path / "snaps").exists()


HOSTILE = """
import http.client
import json
import socket
from urllib.parse import urlsplit

import pytest


def raw(url, data):
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, json.loads(response.read())


def post(length, body=b"", path="/v1/chat/completions"):
    head = f"POST {path} HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: {length}\\r\\n\\r\\n"
    return head.encode() + body


CALL = json.dumps({"messages": []}).encode()  # the recorded request
"""


def test_hostile_requests_to_the_fixtures_endpoint_get_400_and_413_and_print_nothing(
    project: pytest.Pytester,
) -> None:
    project.makeini("[pytest]\ndsh_snapshot_dir = snaps\ndsh_replay_max_body_bytes = 4096\n")
    project.makepyfile(
        HOSTILE
        + """
@pytest.mark.dsh_scenario("one")
def test_hostile(dsh_replay):
    url = dsh_replay.base_url
    status, body = raw(url, post("abc", b"{}"))
    assert status == 400 and "Content-Length" in body["error"]["message"]
    assert raw(url, post("10^12"))[0] == 400
    status, body = raw(url, post("1000000000000", path="/v1/messages"))
    assert (status, body["error"]["type"]) == (413, "request_too_large")
    big = json.dumps({"model": "m", "messages": [], "pad": "x" * 5000}).encode()
    status, body = raw(url, post(len(big), big))  # over the ini's cap, under the default
    assert status == 413 and "4096" in body["error"]["message"]
    bad = json.dumps({"model": "m", "messages": "hi"}).encode()
    status, body = raw(url, post(len(bad), bad))
    assert status == 400 and "'messages'" in body["error"]["message"]
    bad = json.dumps({"contents": "hi"}).encode()
    status, body = raw(url, post(len(bad), bad, "/v1beta/models/g:generateContent"))
    assert (status, body["error"]["status"]) == (400, "INVALID_ARGUMENT")
    status, body = raw(url, post(len(CALL), CALL))  # the recorded call
    assert (status, body["choices"][0]["message"]["content"]) == (200, "Hello")
"""
    )
    result = project.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    output = "\n".join([*result.outlines, *result.errlines])
    assert "Traceback" not in output
    assert "Exception occurred during processing" not in output


def test_an_unexpected_exception_in_the_endpoint_fails_the_test(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        HOSTILE
        + """
@pytest.mark.dsh_scenario("one")
def test_broken(dsh_replay, monkeypatch):
    url = dsh_replay.base_url
    def route(headers, request):
        raise ZeroDivisionError("the router broke")
    monkeypatch.setattr(dsh_replay._endpoint.router, "route", route)
    status, body = raw(url, post(len(CALL), CALL))
    assert status == 400  # not retried: the test fails anyway
    assert "ZeroDivisionError: the router broke" in body["error"]["message"]
"""
    )
    result = project.runpytest_subprocess("-s", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_broken _*",
            "EndpointError: the model endpoint failed answering POST /v1/chat/completions: "
            "ZeroDivisionError: the router broke",
            "(a model call to the model endpoint met this error: "
            "its client got a 400 with this message)",
            "(this is a bug of the endpoint, not of the recording*",
        ]
    )
    result.stdout.no_fnmatch_line("*--dsh-record*")
    assert "Exception occurred during processing" not in "\n".join(result.errlines)


@pytest.mark.parametrize("value", ["abc", "0", "-5", "1.5"])
def test_a_bad_body_cap_in_the_ini_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makeini(f"[pytest]\ndsh_replay_max_body_bytes = {value}\n")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*dsh_replay_max_body_bytes must be a positive whole number of bytes, got '{value}'*"]
    )


def test_a_bad_compare_logs_value_in_the_ini_names_the_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndsh_compare_logs = maybe\n")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*dsh_compare_logs: *maybe*; expected true or false*"])


FAKE_LIVE = """
class Live:
    def stream(self, request, **kwargs):
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for piece in ["The capital ", "is Paris."]:
            yield {"type": "text-delta", "index": 0, "text": piece}
        yield {"type": "block-end", "index": 0,
               "block": {"type": "text", "text": "The capital is Paris."}}
        yield {"type": "usage", "usage": {"inputTokens": 9, "outputTokens": 5}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""


@pytest.mark.parametrize(
    ("page", "title"),
    [("openai-chat.md", "test_openai_chat.py"), ("anthropic.md", "test_anthropic.py")],
)
def test_guide_sdk_first_tests_record_then_replay(
    pytester: pytest.Pytester, page: str, title: str
) -> None:
    pytester.makepyfile(test_capital=titled(DOCS / "guide" / page, title))
    pytester.makeconftest(FAKE_LIVE)
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=1)


NESTED_LIVE = """
import json


class Live:
    \"\"\"Answers by the last message: plan and child call a tool, anything else says leaf.\"\"\"

    def stream(self, request, **kwargs):
        last = (request.get("messages") or [{}])[-1]
        said = last.get("content") if isinstance(last.get("content"), str) else ""
        if last.get("role") == "tool" or said not in ("plan", "child"):
            text = "done" if last.get("role") == "tool" else "leaf"
            yield {"type": "block-start", "index": 0, "blockType": "text"}
            yield {"type": "text-delta", "index": 0, "text": text}
            yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
            yield {"type": "finish", "reason": {"kind": "stop"}}
            return
        call = {"type": "tool-call", "id": f"call-{said}", "name": "delegate", "arguments": "{}"}
        yield {"type": "block-start", "index": 0, "blockType": "tool-call"}
        yield {"type": "tool-call-delta", "index": 0, "id": call["id"], "name": "delegate",
               "argumentsDelta": "{}"}
        yield {"type": "block-end", "index": 0, "block": call}
        yield {"type": "finish", "reason": {"kind": "tool-calls"}}


def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""

NESTED_AGENT = """
NAMED = {named}  # send the session headers
PARENTS = {{"plan": None, "child": "plan", "grandchild": "child"}}


def ask(client, messages):
    me = messages[0]["content"]
    headers = {{"x-dsh-session-id": me}} if NAMED else {{}}
    if NAMED and PARENTS[me]:
        headers["x-dsh-parent-session-id"] = PARENTS[me]
    answer = client.chat.completions.create(model="m", messages=messages, extra_headers=headers)
    return answer.choices[0].message


def test_nested(dsh_replay):
    client = dsh_replay.openai_client(max_retries=0)
    plan = [{{"role": "user", "content": "plan"}}]
    planned = ask(client, plan)  # the primary waits for its tool: a child
    child = [{{"role": "user", "content": "child"}}]
    asked = ask(client, child)  # the child waits for its tool too: a grandchild
    ask(client, [{{"role": "user", "content": "grandchild"}}])  # whose child is it?
    for messages, message in ((child, asked), (plan, planned)):
        call = message.tool_calls[0]
        answer = {{"role": "assistant", "content": None, "tool_calls": [call.model_dump()]}}
        result = {{"role": "tool", "tool_call_id": call.id, "content": "ok"}}
        ask(client, [*messages, answer, result])
"""


def test_a_recording_says_where_content_could_not_tell_a_childs_parent(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(NESTED_LIVE)
    pytester.makepyfile(test_nested=NESTED_AGENT.format(named=False))
    result = pytester.runpytest("--dsh-record=all", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "recorded *test_nested*: 3 sessions, 5 model calls",
            "  content alone could not tell which session started 1 child session (several "
            "could have; the parent was guessed): send the x-dsh-session-id and "
            "x-dsh-parent-session-id headers*",
        ]
    )
    # With the headers nothing is guessed.
    pytester.makepyfile(test_nested=NESTED_AGENT.format(named=True))
    again = pytester.runpytest("--dsh-record=all", "-p", "no:randomly")
    again.assert_outcomes(passed=1)
    assert "could not tell" not in again.stdout.str()
