"""The project's own example scenarios: recorded by this project, replayed keyless.

Each test runs ``example_agent.ExampleAgent`` against ``dsh_replay.model`` and
``dsh_replay.sessions``. In the normal run the scenarios in ``example_snapshots/`` are
replayed: every recorded call must be used, the session logs the agent writes must match
the recording (replayed-log check), and the transcript must match the committed one
(``tests/plugin/__snapshots__/test_examples/``). The async tests replay the same recordings
through ``astream``.

Re-record every example (a scripted OpenAI-compatible server on 127.0.0.1 answers, see
``tests/conftest.py``)::

    python3 -m pytest tests/plugin/test_examples.py --dsh-record --snapshot-update
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.example_agent import ExampleAgent


def tool(name: str, **arguments: Any) -> str:
    return f"[[tool {name} {json.dumps(arguments)}]]"


EXAMPLES: dict[str, list[str]] = {
    "spawn": [tool("subagent", prompt="Name the capital of France.") + " Delegate this."],
    "multi-spawn": [
        tool("subagent", prompt="Reply ALPHA.") + tool("subagent", prompt="Reply BETA."),
    ],
    "fork": [
        "Remember: the codeword is MARMALADE.",
        tool("subagent_fork", prompt="What is the codeword?") + " Ask a fork.",
    ],
    "mixed": [
        "Remember: the codeword is SAFFRON.",
        tool("subagent", prompt="Reply ALPHA.") + tool("subagent_fork", prompt="Recall it."),
    ],
    "retry": ["[[fail 429]] Say hello."],
    "tool-call": [tool("lookup", key="capital_of_france") + tool("add", a=2, b=3)],
}
ANSWERS: dict[str, list[str]] = {
    "spawn": ["tool results: echo: Name the capital of France."],
    "multi-spawn": ["tool results: echo: Reply ALPHA.; echo: Reply BETA."],
    "fork": [
        "echo: Remember: the codeword is MARMALADE.",
        "tool results: echo: What is the codeword?",
    ],
    "mixed": [
        "echo: Remember: the codeword is SAFFRON.",
        "tool results: echo: Reply ALPHA.; echo: Recall it.",
    ],
    "retry": ["echo: Say hello."],
    "tool-call": ["tool results: Paris; 5"],
}
SHAPES: dict[str, list[str]] = {  # the children each example must create
    "spawn": ["spawn"],
    "multi-spawn": ["spawn", "spawn"],
    "fork": ["fork"],
    "mixed": ["spawn", "fork"],
    "retry": [],
    "tool-call": [],
}


def check_run(name: str, dsh_replay: Any, answers: list[str], agent: ExampleAgent) -> None:
    assert answers == ANSWERS[name]
    kinds = ["fork" if c.session.seed_length else "spawn" for c in agent.children]
    assert kinds == SHAPES[name]


def examples(**marker: Any) -> list[Any]:
    """One param per example, each pointing the fixture at its scenario."""
    return [
        pytest.param(name, marks=pytest.mark.dsh_scenario(name, **marker), id=name)
        for name in EXAMPLES
    ]


@pytest.mark.parametrize("name", examples())
def test_example(name: str, dsh_replay: Any, dsh_transcript: Any) -> None:
    agent = ExampleAgent(dsh_replay.model, dsh_replay.sessions)
    answers = [agent.run(prompt) for prompt in EXAMPLES[name]]
    check_run(name, dsh_replay, answers, agent)
    assert dsh_replay.transcript() == dsh_transcript


@pytest.mark.asyncio
@pytest.mark.parametrize("name", examples(record=False))  # recorded by test_example
async def test_example_async(name: str, dsh_replay: Any) -> None:
    agent = ExampleAgent(dsh_replay.model, dsh_replay.sessions)
    answers = [await agent.arun(prompt) for prompt in EXAMPLES[name]]
    check_run(name, dsh_replay, answers, agent)


@pytest.mark.dsh_scenario("fork", record=False)
def test_fork_example_child_replays_its_own_call(dsh_replay: Any) -> None:
    (_, fork) = dsh_replay.scenario.scripts
    assert fork.seed_length > 0
    assert len(fork.entries) == 1  # the inherited turn's call is not the fork's own
    agent = ExampleAgent(dsh_replay.model, dsh_replay.sessions)
    for prompt in EXAMPLES["fork"]:
        agent.run(prompt)
    (child,) = agent.children
    assert dsh_replay.model.bindings[child.session.id].file == fork.file
