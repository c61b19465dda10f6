"""Recording by content alone gives the sessions, parents and seeds the headers give (e2e).

Each SDK agent shape is recorded twice through the endpoint's recording proxy, once
with the ``x-dsh-session-id`` / ``x-dsh-parent-session-id`` headers and once without
(content routing): a spawn child in a thread and a fork child from the completed turns
at once (parallel children), and the same with the fork made while the parent waits for
its tools (``[*messages[:-1], question]``). The two recordings of a shape must hold the
same sessions with the same parents and seeds, and both must replay.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from support.paths import SUPPORT, TESTS

from pytest_dsh_replay import load_scenario

pytestmark = pytest.mark.e2e

AGENTS = """
import pytest
from support.sdk_agent import ANSWERS, TURNS, AnthropicAgent, OpenAIAgent


class ForksWhileWaiting:
    \"\"\"A fork child starts from the parent's messages as they are, its answer left out.\"\"\"

    def child(self, name):
        child = super().child(name)
        if name == "subagent_fork":
            child.messages = list(self.messages[:-1])
            child.completed = len(child.messages)
        return child


class WaitingOpenAI(ForksWhileWaiting, OpenAIAgent):
    pass


class WaitingAnthropic(ForksWhileWaiting, AnthropicAgent):
    pass


AGENTS = {
    ("openai", "completed"): OpenAIAgent,
    ("anthropic", "completed"): AnthropicAgent,
    ("openai", "waiting"): WaitingOpenAI,
    ("anthropic", "waiting"): WaitingAnthropic,
}


def cases():
    return [
        pytest.param(
            sdk, shape, identify,
            marks=pytest.mark.dsh_scenario(f"{shape}-{sdk}-{'headers' if identify else 'content'}"),
        )
        for (sdk, shape) in AGENTS
        for identify in (True, False)
    ]


@pytest.mark.parametrize(("sdk", "shape", "identify"), cases())
def test_agent(sdk, shape, identify, dsh_replay):
    client = (
        dsh_replay.openai_client(max_retries=0)
        if sdk == "openai"
        else dsh_replay.anthropic_client(max_retries=0)
    )
    agent = AGENTS[(sdk, shape)](client, identify=identify)
    assert [agent.run(turn) for turn in TURNS] == ANSWERS
"""


def structure(scenario: Any) -> list[tuple[Any, ...]]:
    """Each session: its parent's and its own first user message, seed length and calls.

    Sorted: children started at once are stored in the order they were created, which
    differs between recordings.
    """
    first = {s.recorded_id: s.first_user_text for s in scenario.scripts}
    return sorted(
        (
            s.parent_session is not None,
            first.get(s.parent_session),
            s.seed_length,
            s.first_user_text,
            len(s.entries),
        )
        for s in scenario.scripts
    )


def test_content_and_headers_record_the_same_sessions_parents_and_seeds(
    pytester: pytest.Pytester,
) -> None:
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(test_shapes=AGENTS)
    pytester._monkeypatch.delenv("DSH_RECORD_BASE_URL", raising=False)
    recorded = pytester.runpytest_subprocess("--dsh-record", "-p", "no:randomly")
    recorded.assert_outcomes(passed=8)
    root = pytester.path / "recordings"
    for sdk in ("openai", "anthropic"):
        for shape in ("completed", "waiting"):
            headers = structure(load_scenario(root / f"{shape}-{sdk}-headers"))
            content = structure(load_scenario(root / f"{shape}-{sdk}-content"))
            assert content == headers, f"{shape}-{sdk}"
            primary_task = headers[0][3]
            children = [(parent, seed > 0) for _, parent, seed, *_ in headers[1:]]
            assert sorted(children) == [(primary_task, False), (primary_task, True)]
    replayed = pytester.runpytest("-p", "no:randomly")  # in process: no live SDK imported lazily
    replayed.assert_outcomes(passed=8)
