"""An agent on the OpenAI Agents SDK with its default model (the Responses API).

A planner with a function tool (``add``), an agent as a tool (``researcher``, run
concurrently with ``add`` when the model asks for both) and a handoff (to ``reviewer``).
It is written only against the Agents SDK: the client it is given is the only seam, set
as the SDK's default client; a test hands it ``dsh_replay.async_openai_client()``.
"""

from __future__ import annotations

from typing import Any

from agents import (
    Agent,
    Runner,
    function_tool,
    set_default_openai_client,
    set_tracing_disabled,
)

__all__ = ["TURNS", "AgentsSdkApp", "check_agents_sdk_app"]

TURNS = [
    '[[tool add {"a": 2, "b": 3}]][[tool researcher {"input": "Reply ALPHA."}]]',
    "[[tool transfer_to_reviewer {}]]",
]
"""What the user says, turn by turn (the scripted server's directives pick the tools)."""


@function_tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class AgentsSdkApp:
    """The planner, its researcher tool and its reviewer handoff, on one client."""

    def __init__(self, client: Any):
        set_tracing_disabled(True)  # the SDK would export traces to the network
        set_default_openai_client(client, use_for_tracing=False)
        researcher = Agent(name="researcher", instructions="Answer briefly.")
        reviewer = Agent(name="reviewer", instructions="Review the work.")
        self.planner = Agent(
            name="planner",
            instructions="Plan the work.",
            tools=[
                add,
                researcher.as_tool(tool_name="researcher", tool_description="Research."),
            ],
            handoffs=[reviewer],
        )
        self.history: list[Any] = []

    def _input(self, text: str) -> Any:
        return [*self.history, {"role": "user", "content": text}]

    async def run(self, text: str) -> str:
        """One turn with ``Runner.run``: the final output."""
        result = await Runner.run(self.planner, self._input(text))
        self.history = result.to_input_list()
        return str(result.final_output)

    async def run_streamed(self, text: str) -> tuple[str, str]:
        """One turn with ``Runner.run_streamed``: the final output and the agent's name."""
        result = Runner.run_streamed(self.planner, self._input(text))
        async for _ in result.stream_events():
            pass
        self.history = result.to_input_list()
        return str(result.final_output), result.last_agent.name


async def check_agents_sdk_app(dsh_replay: Any) -> None:
    """Both turns through ``dsh_replay``'s client, with what each must answer.

    ``Runner.run`` calls a function tool and an agent as a tool concurrently;
    ``Runner.run_streamed`` hands off to the reviewer. On replay, the researcher and the
    reviewer (whose instructions differ, so its requests start a conversation of their
    own) are children of the planner's session.
    """
    app = AgentsSdkApp(dsh_replay.async_openai_client(max_retries=0))
    assert await app.run(TURNS[0]) == "tool results: 5; echo: Reply ALPHA."
    output, agent = await app.run_streamed(TURNS[1])
    assert (output, agent) == ('tool results: {"assistant": "reviewer"}', "reviewer")
    if dsh_replay.mode == "replay":
        files = sorted(binding.file for binding in dsh_replay.model.bindings.values())
        assert files == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
