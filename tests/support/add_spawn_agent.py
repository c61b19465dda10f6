"""The live model of the Bedrock agent tests: ``add``, then a spawned child, then the answer.

The agent asks ``Add 2 and 3, then have a helper say hi.``; the model calls ``add``, then
``spawn`` with the task ``Say hi.`` (a child conversation, answered ``hi``), then answers
``Done: 5``. The hook's conftest and the proxy's scripted server both serve `answer`.
"""

from __future__ import annotations

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall

CONFTEST = """
from support.add_spawn_agent import model

def pytest_dsh_replay_live_model(config, scenario_path):
    return model()
"""


def answer(request: ScriptedRequest) -> Answer:
    """The answer to one request of the parent or its child."""
    if request.prompt == "Say hi.":
        return Answer(text="hi", usage={"inputTokens": 3, "outputTokens": 1})
    done = sum(1 for role, _ in request.messages if role == "tool")
    if done == 0:
        return Answer(tool_calls=[ToolCall("add", '{"a": 2, "b": 3}')])
    if done == 1:
        return Answer(tool_calls=[ToolCall("spawn", '{"task": "Say hi."}')])
    return Answer(text="Done: 5", usage={"inputTokens": 20, "outputTokens": 2})


def model() -> ScriptedModel:
    """A scripted model answering with `answer`."""
    return ScriptedModel([Rule(answer)])
