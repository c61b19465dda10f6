"""The live model of the Vertex AI agent tests: a tool call, a spawned child, an answer."""

from __future__ import annotations

from pytest_dsh_replay import Answer, ScriptedRequest, ToolCall

TASK = "Plan a day in Paris."
QUESTION = "What should we wear?"


def answer(request: ScriptedRequest) -> Answer:
    """Weather first, then a child spawned on `QUESTION`, then the plan.

    The child (whose prompt is `QUESTION`) answers ``Comfortable shoes.``.
    """
    if request.prompt == QUESTION:
        return Answer(text="Comfortable shoes.")
    done = sum(1 for role, _ in request.messages if role == "tool")
    if not done:
        return Answer(tool_calls=[ToolCall("weather", "{}")])
    if done == 1:
        return Answer(tool_calls=[ToolCall("spawn", f'{{"task": "{QUESTION}"}}')])
    return Answer(text="Louvre, then a walk.")
