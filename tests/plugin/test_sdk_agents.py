"""SDK agents replayed through the model endpoint: one changed line, the client.

The agents of ``sdk_agent.py`` are written only against the ``openai`` and
``anthropic`` SDKs; here each gets a client from ``dsh_replay`` and nothing else
changes. Sessions are told apart by our headers (``identify=True``) or by content alone.
The recordings in ``example_snapshots/sdk-*`` were made through the endpoint's
recording proxy against the scripted loopback server (see ``tests/conftest.py``)::

    python3 -m pytest tests/plugin/test_sdk_agents.py --dsh-record

and replay here with no server. The async agents replay the same recordings.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.sdk_agent import ANSWERS, TURNS, AnthropicAgent, OpenAIAgent

AGENTS: dict[str, Any] = {"openai": OpenAIAgent, "anthropic": AnthropicAgent}


def cases(**marker: Any) -> list[Any]:
    return [
        pytest.param(
            sdk,
            identify,
            marks=pytest.mark.dsh_scenario(f"sdk-{sdk}-{identity}", **marker),
            id=f"{sdk}-{identity}",
        )
        for sdk in AGENTS
        for identify, identity in ((True, "headers"), (False, "content"))
    ]


def check(agent: Any, dsh_replay: Any) -> None:
    assert [type(child) for child in agent.children] == [type(agent)] * 2
    spawn, fork = agent.children
    assert spawn.answers == ["echo: Reply ALPHA."]
    assert fork.answers == ["echo: Recall the codeword."]
    assert fork.messages[:2] == agent.messages[:2]  # the fork started from turn 1
    if dsh_replay.mode == "replay":
        bindings = dsh_replay.model.bindings
        assert len(bindings) == 3
        scripts = {script.file: script for script in dsh_replay.scenario.scripts}
        # Each child replays its own recording (its task, fork or not), and is logged
        # under the live primary: with headers and with content alone, every run.
        primary = next(key for key, b in bindings.items() if b.file == "session.jsonl")
        tasks = {}
        for key, binding in bindings.items():
            if key != primary:
                script = scripts[binding.file]
                tasks[script.first_user_text] = script.seed_length > 0
                assert dsh_replay._replayer._sessions.live_parent(key) == primary
                assert dsh_replay.sessions.get(key).header.parent_session == primary
        assert tasks == {"Reply ALPHA.": False, "Recall the codeword.": True}
        if agent.identify:  # our headers name the sessions
            assert primary == agent.session_id
            assert scripts[bindings[spawn.session_id].file].first_user_text == "Reply ALPHA."
            assert scripts[bindings[fork.session_id].file].seed_length > 0


@pytest.mark.parametrize(("sdk", "identify"), cases())
def test_sdk_agent(sdk: str, identify: bool, dsh_replay: Any, dsh_transcript: Any) -> None:
    client = (
        dsh_replay.openai_client(max_retries=0)
        if sdk == "openai"
        else dsh_replay.anthropic_client(max_retries=0)
    )
    agent = AGENTS[sdk](client, identify=identify)
    assert [agent.run(turn) for turn in TURNS] == ANSWERS
    check(agent, dsh_replay)
    assert dsh_replay.transcript() == dsh_transcript


@pytest.mark.asyncio
@pytest.mark.parametrize(("sdk", "identify"), cases(record=False))  # recorded above
async def test_async_sdk_agent(
    sdk: str, identify: bool, dsh_replay: Any, dsh_transcript: Any
) -> None:
    client = (
        dsh_replay.async_openai_client(max_retries=0)
        if sdk == "openai"
        else dsh_replay.async_anthropic_client(max_retries=0)
    )
    agent = AGENTS[sdk](client, identify=identify)
    assert [await agent.arun(turn) for turn in TURNS] == ANSWERS
    check(agent, dsh_replay)
    assert dsh_replay.transcript() == dsh_transcript
