"""google-genai through the fixture, as users run it (pytester): record, then replay.

A user's test calls a function through ``dsh_replay.gemini_client()`` (a ``functionCall``
answer, then a text answer to the ``functionResponse``). It is recorded once from a
scripted live model given by the ``pytest_dsh_replay_live_model`` hook (its chunks are
sent on the Gemini wire), and once through the recording proxy from the package's
scripted model served on 127.0.0.1 (``ScriptedServer``, the Gemini wire); each
recording then replays with no live model at all.
"""

from __future__ import annotations

import json

import pytest

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall

ANSWER = "It is 5."
# The provider: a thought and a call of add first, the answer once the call's result came.
PROVIDER = [
    Rule(
        Answer(
            text=ANSWER,
            usage={"inputTokens": 10, "cacheReadTokens": 2, "outputTokens": 4, "totalTokens": 18},
        ),
        when=lambda r: bool(r.tool_results),
    ),
    Rule(Answer(reasoning="I will add.", tool_calls=[ToolCall("add", {"a": 2, "b": 3})])),
]

USER_TEST = """
import pytest
from google.genai import types

CONFIG = types.GenerateContentConfig(
    system_instruction="You add numbers.",
    tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
        name="add", description="adds", parameters_json_schema={"type": "object"})])],
)

def run(client):
    contents = [types.Content(role="user", parts=[types.Part.from_text(text="add 2 and 3")])]
    first = client.models.generate_content(model="gemini-x", contents=contents, config=CONFIG)
    call = first.function_calls[0]
    assert (call.name, call.args) == ("add", {"a": 2, "b": 3})
    result = types.Part.from_function_response(name="add", response={"result": 5})
    contents += [first.candidates[0].content, types.Content(role="user", parts=[result])]
    stream = client.models.generate_content_stream(
        model="gemini-x", contents=contents, config=CONFIG)
    return "".join(chunk.text or "" for chunk in stream)

@pytest.mark.dsh_scenario("gemini-agent")
def test_agent(dsh_replay):
    assert run(dsh_replay.gemini_client()) == "It is 5."
    if dsh_replay.mode == "replay":
        assert len(dsh_replay.model.bindings) == 1  # one session, continued by content
"""

# A live model for --dsh-record: a tool call first, the answer once a tool result came.
CONFTEST = """
from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall

MODEL = ScriptedModel([
    Rule(Answer(text="It is 5.", usage={"inputTokens": 7, "outputTokens": 3}),
         when=lambda request: bool(request.tool_results)),
    Rule(Answer(tool_calls=[ToolCall("add", '{"a": 2, "b": 3}', id="call_add_1")])),
])

def pytest_dsh_replay_live_model(config, scenario_path):
    return MODEL
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(test_user=USER_TEST)
    return pytester


def _recorded(project: pytest.Pytester) -> list[dict[str, object]]:
    path = project.path / "recordings" / "gemini-agent" / "session.jsonl"
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]


def test_gemini_client_replays_a_recorded_function_calling_session(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record").assert_outcomes(passed=1)
    events = _recorded(project)
    results = [e for e in events if e.get("type") == "tool/result"]
    assert len(results) == 1
    assert "call_add_1" in json.dumps(results[0])  # the functionResponse found its call
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=1)


def test_gemini_calls_record_through_the_proxy_and_replay_without_the_server(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModel(PROVIDER).serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # not used
        monkeypatch.setenv("DSH_RECORD_API_KEY", "live-gemini-key-0123456789")
        monkeypatch.setenv("DSH_RECORD_GEMINI_BASE_URL", server.base_url)
        project.runpytest("--dsh-record").assert_outcomes(passed=1)
        requests = list(server.requests)
    assert [r.path for r in requests] == [
        "/v1/models/gemini-x:generateContent",
        "/v1/models/gemini-x:streamGenerateContent?alt=sse",
    ]
    for request in requests:
        assert request.headers["x-goog-api-key"] == "live-gemini-key-0123456789"
    second = requests[1].body["contents"]
    assert "functionResponse" in second[-1]["parts"][0]
    written = (project.path / "recordings" / "gemini-agent" / "session.jsonl").read_text()
    assert "live-gemini-key-0123456789" not in written
    assert ANSWER in written
    assert '"totalTokens":18' in written.replace(" ", "")
    monkeypatch.delenv("DSH_RECORD_GEMINI_BASE_URL")
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
