"""Real recorded scenarios replayed through the dsh_replay fixture (issue: the main job).

A small agent loop (``agent_loop.Agent``) drives the dsh harness's own recordings from
``../shared/corpus/dsh-harness`` in place: spawn children, several children, a fork
child that must receive its own chunks (not its inherited parent's), a mix of both, a
compaction recovery, and a retried empty response.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.agent_loop import Agent
from support.corpus_support import HARNESS, require_corpus


@pytest.fixture
def corpus() -> None:
    """Requested before dsh_replay: skip (or fail under CI) when the corpus is absent."""
    require_corpus()


def scenario(name: str, agent: str = "acp-agent") -> pytest.MarkDecorator:
    """The harness's recording ``name``, replayed without the replayed-log check.

    The harness's logs hold what the harness logs (runtime context, titles, inbox
    splices); this small agent loop sends other requests, so only calls are compared.
    """
    path = str(HARNESS / f"examples__{agent}__tests__snapshots__{name}")
    return pytest.mark.dsh_scenario(path, compare_logs=False)


@scenario("subagent-spawn-in-process")
def test_spawn_child(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Spawn a child.") == "PARENT_DONE"
    assert [child.turn_texts for child in agent.children] == [["CHILD_OK"]]


@scenario("subagent-spawn-in-process", agent="jsonrpc-agent")
def test_spawn_child_jsonrpc_agent(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Spawn a child.") == "child answer 42."


@scenario("subagent-multi")
def test_two_spawn_children(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Spawn two children.") == "PARENT_DONE"
    assert [child.turn_texts for child in agent.children] == [["ALPHA"], ["BETA"]]


@scenario("subagent-fork-in-process")
def test_fork_child_gets_its_own_chunks(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Remember MARMALADE.") == "OK"
    assert agent.turn("Fork and recall.") == "PARENT_DONE"
    (fork,) = agent.children
    # Without seedLength slicing the fork would be served the parent's first call ("OK").
    assert fork.turn_texts == ["MARMALADE"]
    binding = dsh_replay.model.bindings[fork.session_id]
    assert (binding.file, binding.cursor, binding.length) == ("session.1.jsonl", 1, 1)


@scenario("subagent-mixed")
def test_spawn_and_fork_in_one_transcript(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Remember SAFFRON.") == "OK"
    assert agent.turn("Spawn, then fork.") == "PARENT_DONE"
    assert [child.turn_texts for child in agent.children] == [["ALPHA"], ["SAFFRON"]]


@scenario("compaction-recovery", agent="headless-agent")
def test_compaction_recovery(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Run the command.") == "COMPACTION RECOVERED"
    assert agent.compactions == 1


@scenario("empty-response-retry")
def test_empty_response_is_retried(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert agent.turn("Say something.") == "Recovered."
    assert agent.failed_calls == 1


@pytest.mark.asyncio
@scenario("subagent-mixed")
async def test_async_callers_replay_the_same_scenario(corpus: None, dsh_replay: Any) -> None:
    agent = Agent(dsh_replay.model)
    assert await agent.aturn("Remember SAFFRON.") == "OK"
    assert await agent.aturn("Spawn, then fork.") == "PARENT_DONE"
    assert [child.turn_texts for child in agent.children] == [["ALPHA"], ["SAFFRON"]]
