"""An agent on pydantic-ai's ``OpenAIResponsesModel`` with a function tool.

Written only against pydantic-ai: the ``openai`` client it is given is the only seam (a
test hands it ``dsh_replay.async_openai_client()``).
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider

__all__ = ["PROMPTS", "check_pydantic_ai_agent", "pydantic_ai_agent"]

PROMPTS = ('[[tool add {"a": 4, "b": 5}]]', '[[tool add {"a": 1, "b": 2}]]')
"""What the user asks, run by run (the scripted server's directives ask for ``add``)."""


def pydantic_ai_agent(client: Any) -> Agent[None, str]:
    """The agent: ``add`` as its tool, on the Responses API through ``client``."""
    model = OpenAIResponsesModel("gpt-5.6-luna", provider=OpenAIProvider(openai_client=client))
    agent: Agent[None, str] = Agent(model, instructions="Use the tools.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return agent


async def check_pydantic_ai_agent(dsh_replay: Any) -> None:
    """``run`` and ``run_stream`` through ``dsh_replay``'s client, with their answers."""
    agent = pydantic_ai_agent(dsh_replay.async_openai_client(max_retries=0))
    assert (await agent.run(PROMPTS[0])).output == "tool results: 9"
    async with agent.run_stream(PROMPTS[1]) as streamed:
        assert await streamed.get_output() == "tool results: 3"
