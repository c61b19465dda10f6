"""A strands-agents ``Agent`` on its default model (``BedrockModel``), through the fixture.

The user's agent is ``Agent(tools=[add])``: no model named, so Strands makes its default
``strands.models.BedrockModel``, a boto3 ``bedrock-runtime`` client calling
``converse_stream``. The test points it at the fixture by setting ``dsh_replay.env`` in
the environment (``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, dummy keys, a region, which boto3
reads): no agent line changes. It is recorded from the ``pytest_dsh_replay_live_model``
hook (the agent calls the tool, then answers), then replayed with no live model.
"""

from __future__ import annotations

import importlib.util

import pytest
from support.inner_runs import InnerRun, runpytest_in_one_child
from support.proxy_recording import recorded_logs, recording_project

# Strands is imported by the inner run only (its own process): found, not imported, here.
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("strands") is None, reason="the Strands agent needs strands-agents"
)

USER_TEST = """
import pytest
from strands import Agent, tool


@tool
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b


@pytest.fixture
def bedrock_env(dsh_replay, monkeypatch):
    for name, value in dsh_replay.env.items():
        monkeypatch.setenv(name, value)


def test_agent(dsh_replay, bedrock_env):
    agent = Agent(tools=[add], callback_handler=None)  # Strands' default model: Bedrock
    result = agent("Add 2 and 3.")
    assert "5" in str(result)
    assert agent.messages[1]["content"][0]["toolUse"]["name"] == "add"
"""

CONFTEST = """
from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall


def answer(request):
    if not any(role == "tool" for role, _ in request.messages):
        return Answer(tool_calls=[ToolCall("add", '{"a": 2, "b": 3}')])
    return Answer(text="It is 5.", usage={"inputTokens": 20, "outputTokens": 4})


def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(answer)])
"""


def test_a_strands_agent_on_bedrock_records_from_the_hook_and_replays(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    project = recording_project(pytester, USER_TEST)
    project.makeconftest(CONFTEST)
    # Strands imports parts of pydantic lazily: its runs are a subprocess's, one for both.
    ran, result = runpytest_in_one_child(
        project,
        InnerRun(("--dsh-record",)),
        InnerRun(unlink=("conftest.py",)),  # replay: no live model at all
    )
    assert [(r.ret, r.outcomes) for r in ran] == [(0, {"passed": 1})] * 2, result.stdout.str()
    logs = recorded_logs(project)
    assert len(logs) == 1
    (text,) = logs.values()
    assert "Add 2 and 3." in text
    assert "It is 5." in text
