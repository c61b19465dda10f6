"""Agent stacks on their default wires, replayed through the model endpoint.

Each agent is written only against its framework; the one seam is the client a test
hands it from ``dsh_replay``. The recordings in ``example_snapshots/`` were made through
the endpoint's recording proxy against the scripted loopback server (see
``tests/conftest.py``)::

    python3 -m pytest tests/stacks --dsh-record

and replay here with no server. These tests use the plugin as a user's suite does (no
``pytester``), so the frameworks are imported once and stay.
"""

from __future__ import annotations

from typing import Any

import pytest

agents = pytest.importorskip("agents", reason="the OpenAI Agents SDK (openai-agents) is needed")


@pytest.mark.asyncio
@pytest.mark.dsh_scenario("agents-sdk")
async def test_openai_agents_sdk_default_model(dsh_replay: Any, dsh_transcript: Any) -> None:
    from support.agents_sdk_agent import TURNS, AgentsSdkApp

    app = AgentsSdkApp(dsh_replay.async_openai_client(max_retries=0))
    # Runner.run: a function tool and an agent as a tool, run concurrently
    assert await app.run(TURNS[0]) == "tool results: 5; echo: Reply ALPHA."
    # Runner.run_streamed: a handoff to the reviewer
    output, agent = await app.run_streamed(TURNS[1])
    assert (output, agent) == ('tool results: {"assistant": "reviewer"}', "reviewer")
    if dsh_replay.mode == "replay":
        # the researcher (an agent as a tool) is a child; so is the reviewer after the
        # handoff: its instructions differ, so its requests start a conversation of its own
        files = sorted(binding.file for binding in dsh_replay.model.bindings.values())
        assert files == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    assert dsh_replay.transcript() == dsh_transcript


@pytest.mark.asyncio
@pytest.mark.dsh_scenario("pydantic-ai-responses")
async def test_pydantic_ai_openai_responses_model(dsh_replay: Any, dsh_transcript: Any) -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is needed")
    from support.pydantic_ai_agent import PROMPTS, pydantic_ai_agent

    agent = pydantic_ai_agent(dsh_replay.async_openai_client(max_retries=0))
    assert (await agent.run(PROMPTS[0])).output == "tool results: 9"
    async with agent.run_stream(PROMPTS[1]) as streamed:
        assert await streamed.get_output() == "tool results: 3"
    assert dsh_replay.transcript() == dsh_transcript
