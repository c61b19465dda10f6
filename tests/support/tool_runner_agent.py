"""An agent on the anthropic SDK's tool runner, and the scripted model it records against.

:func:`plan_day` is the code under test: ``client.beta.messages.tool_runner(...)`` with
two ``@beta_tool`` functions, run to its final message. In its default thread mode
(anthropic >= 2.2) the runner creates a server-held thread on its first request and
continues it with ``thread: {"type": "continue", "previous_message_id": ...}`` and only
the tool results: no history, no ``system``, no ``tools`` (docs/wires.md#anthropic-threads).

:func:`trip_model` answers only requests that show the whole conversation (the system
prompt, the tools, the task first, the earlier tool results), so a recording made from
anything less fails with the model's "no rule" error.
"""

from __future__ import annotations

from typing import Any

from anthropic import beta_tool

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall

MODEL = "claude-sonnet-4-5"
SYSTEM = "You plan trips."
TASK = "Plan a day in Paris."
WEATHER = "Sunny in Paris."
MUSEUM = "The Louvre is open in Paris."
PLAN = "Morning at the Louvre, then a sunny walk along the Seine."


@beta_tool
def get_weather(city: str) -> str:
    """The weather in a city today.

    Args:
        city: The city's name.
    """
    return f"Sunny in {city}."


@beta_tool
def find_museum(city: str) -> str:
    """A museum open today in a city.

    Args:
        city: The city's name.
    """
    return f"The Louvre is open in {city}."


def plan_day(client: Any, *, thread: bool = True, stream: bool = False) -> str:
    """Plan the day with the tool runner; the text of its final message.

    Args:
        client: An ``anthropic.Anthropic`` client (``dsh_replay.anthropic_client()``).
        thread: ``False`` runs the runner without a server-held thread (the whole
            history on every request); ``True`` is the SDK's default.
        stream: Stream each request (``tool_runner(stream=True)``).
    """
    options: dict[str, Any] = {} if thread else {"thread": False}
    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=512,
        system=SYSTEM,
        tools=[get_weather, find_museum],
        messages=[{"role": "user", "content": TASK}],
        stream=stream,
        **options,
    )
    if stream:
        for message_stream in runner:
            for _event in message_stream:
                pass
    final = runner.until_done()
    return "".join(block.text for block in final.content if block.type == "text")


def _whole_conversation(request: ScriptedRequest) -> bool:
    return (
        request.system == SYSTEM
        and request.tools == ("get_weather", "find_museum")
        and request.messages[:1] == (("user", TASK),)
    )


def trip_model() -> ScriptedModel:
    """The live model: weather first, then a museum, then the plan.

    Each rule needs the whole conversation; the last also needs the first tool result
    among the earlier messages (a continuation of a continuation).
    """
    return ScriptedModel(
        [
            Rule(
                Answer(
                    text="Let me check the weather.",
                    tool_calls=[ToolCall("get_weather", {"city": "Paris"})],
                ),
                when=lambda r: _whole_conversation(r) and len(r.messages) == 1,
            ),
            Rule(
                Answer(tool_calls=[ToolCall("find_museum", {"city": "Paris"})]),
                when=lambda r: _whole_conversation(r) and r.tool_results == (WEATHER,),
            ),
            Rule(
                Answer(text=PLAN),
                when=lambda r: (
                    _whole_conversation(r)
                    and r.tool_results == (MUSEUM,)
                    and ("tool", WEATHER) in r.messages
                ),
            ),
        ]
    )
