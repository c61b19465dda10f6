"""SDK agents recorded through the endpoint's proxy in a subprocess, then replayed (e2e).

The agents of ``tests/plugin/test_sdk_agents.py`` (a spawn child in a thread and a fork
child from the completed turns, at once) and the same agents whose fork is made while
the parent waits for its tools (``[*messages[:-1], question]``) are recorded in one
subprocess, each twice: with the ``x-dsh-session-id`` / ``x-dsh-parent-session-id``
headers and without them (content routing). The two recordings of a shape must hold the
same sessions with the same parents and seeds; then every recording replays with no
server and no key in an xdist worker (one: the summary's merge of several workers is
tests/plugin/test_fixture.py's), writing the transcripts it then checks.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from support.paths import SUPPORT, TESTS

from pytest_dsh_replay import load_scenario

pytestmark = pytest.mark.e2e

WAITING = """
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


AGENTS = {"openai": WaitingOpenAI, "anthropic": WaitingAnthropic}


def cases():
    return [
        pytest.param(
            sdk, identify,
            marks=pytest.mark.dsh_scenario(f"waiting-{sdk}-{'headers' if identify else 'content'}"),
        )
        for sdk in AGENTS
        for identify in (True, False)
    ]


@pytest.mark.parametrize(("sdk", "identify"), cases())
def test_waiting_agent(sdk, identify, dsh_replay):
    client = (
        dsh_replay.openai_client(max_retries=0)
        if sdk == "openai"
        else dsh_replay.anthropic_client(max_retries=0)
    )
    agent = AGENTS[sdk](client, identify=identify)
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


def test_sdk_agents_record_through_the_proxy_by_headers_and_by_content_then_replay(
    pytester: pytest.Pytester,
) -> None:
    # Recorded in a subprocess: in process, the SDKs' lazily imported modules would be
    # dropped from sys.modules after the inner run, and later tests would meet stale ones.
    # The replay's controller runs in process (its workers are processes of their own):
    # the test module is copied under another name so that it does not meet
    # tests/plugin/test_sdk_agents.py.
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(TESTS / "plugin" / "test_sdk_agents.py", pytester.path / "test_sdk_agents_copy.py")
    pytester.makepyfile(test_waiting=WAITING)
    pytester.makeini(
        "[pytest]\ndsh_snapshot_dir = recordings\nasyncio_mode = strict\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    pytester._monkeypatch.delenv("DSH_RECORD_BASE_URL", raising=False)
    recorded = pytester.runpytest_subprocess(
        "--dsh-record", "--snapshot-update", "-k", "not async", "-p", "no:randomly"
    )
    recorded.assert_outcomes(passed=8)
    root = pytester.path / "recordings"
    assert sorted(p.name for p in root.iterdir()) == [
        f"{shape}-{sdk}-{identity}"
        for shape in ("sdk", "waiting")
        for sdk in ("anthropic", "openai")
        for identity in ("content", "headers")
    ]
    for sdk in ("openai", "anthropic"):
        for shape in ("sdk", "waiting"):  # the fork from the completed turns; while waiting
            headers = structure(load_scenario(root / f"{shape}-{sdk}-headers"))
            content = structure(load_scenario(root / f"{shape}-{sdk}-content"))
            assert content == headers, f"{shape}-{sdk}"
            primary_task = headers[0][3]
            children = [(parent, seed > 0) for _, parent, seed, *_ in headers[1:]]
            assert sorted(children) == [(primary_task, False), (primary_task, True)]
    # Replayed with no server and no key, in an xdist worker (a process of its own).
    replayed = pytester.runpytest("-n", "1", "--snapshot-update")  # the async ones' too
    replayed.assert_outcomes(passed=12)
    replayed.stdout.fnmatch_lines(["*scenarios: 12 replayed, 0 recorded, 0 missing, 0 unused*"])
