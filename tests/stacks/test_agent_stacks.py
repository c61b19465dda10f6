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
from support.inner_runs import imported_before_inner_runs

# When the first test runs, not at collection: a worker that runs neither never imports it.
_agents_sdk = imported_before_inner_runs(
    "agents", reason="the OpenAI Agents SDK (openai-agents) is needed"
)


@pytest.mark.asyncio
@pytest.mark.dsh_scenario("agents-sdk")
async def test_openai_agents_sdk_default_model(dsh_replay: Any, dsh_transcript: Any) -> None:
    from support.agents_sdk_agent import check_agents_sdk_app

    await check_agents_sdk_app(dsh_replay)
    assert dsh_replay.transcript() == dsh_transcript


@pytest.mark.asyncio
@pytest.mark.dsh_scenario("pydantic-ai-responses")
async def test_pydantic_ai_openai_responses_model(dsh_replay: Any, dsh_transcript: Any) -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is needed")
    from support.pydantic_ai_agent import check_pydantic_ai_agent

    await check_pydantic_ai_agent(dsh_replay)
    assert dsh_replay.transcript() == dsh_transcript
