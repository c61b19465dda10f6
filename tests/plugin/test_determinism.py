"""A replay is the same whatever order concurrent children reach the model in.

The SDK planner of ``sdk_agent.py`` runs a spawn child in a thread and a fork child in
its own thread of control at once. Here each replay forces which child's first request
arrives first, both ways, many times, and every run must give one transcript and one
events snapshot: sessions are numbered and ordered by the recorded session each one
replays (docs/checks.md#session-order), never by arrival.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from support.paths import EXAMPLES, SUPPORT
from support.sdk_agent import ANSWERS, TURNS

# Each child is forced first in half the runs, so numbering by arrival shows at once
# (two transcripts); the repetitions catch any other run-to-run difference.
RUNS_PER_ORDER = 3
COMMITTED = Path(__file__).parent / "__snapshots__" / "test_sdk_agents"

ORDERED_AGENT = """
import threading
from pathlib import Path

import pytest
from support.sdk_agent import OpenAIAgent

OUT = Path({out!r})
TURNS = {turns!r}
ANSWERS = {answers!r}


class OrderedAgent(OpenAIAgent):
    \"\"\"Its children start their turns in a forced order: ``first`` before the other.\"\"\"

    def __init__(self, *args, first=None, gates=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.first = first
        self.gates = gates if gates is not None else {{}}

    def child(self, name):
        child = super().child(name)
        gates, first = self.gates, self.first
        done = gates.setdefault(name, threading.Event())
        other = "subagent_fork" if name == "subagent" else "subagent"
        run = child.run

        def ordered_run(prompt):
            if name != first:  # wait until the other child's turn has ended
                assert gates.setdefault(other, threading.Event()).wait(10)
            try:
                return run(prompt)
            finally:
                done.set()

        child.run = ordered_run
        return child


@pytest.mark.parametrize("run", range({runs}))
@pytest.mark.parametrize("first", ["subagent", "subagent_fork"])
@pytest.mark.parametrize(
    ("scenario", "identify"),
    [
        pytest.param(scenario, identify, marks=pytest.mark.dsh_scenario(scenario))
        for scenario, identify in {scenarios!r}
    ],
)
def test_ordered(scenario, identify, first, run, dsh_replay):
    client = dsh_replay.openai_client(max_retries=0)
    agent = OrderedAgent(client, identify=identify, first=first)
    assert [agent.run(turn) for turn in TURNS] == ANSWERS
    out = OUT / scenario
    out.mkdir(parents=True, exist_ok=True)
    name = f"{{first}}-{{run}}"
    (out / f"{{name}}.md").write_text(dsh_replay.transcript())
    (out / f"{{name}}.jsonl").write_text(dsh_replay.events_snapshot())
"""


SCENARIOS = [("sdk-openai-content", False), ("sdk-openai-headers", True)]
"""The recordings replayed: sessions told apart by content alone, and by our headers."""


def test_concurrent_children_in_either_order_give_one_transcript_and_one_events_snapshot(
    pytester: pytest.Pytester,
) -> None:
    # Both recordings in one inner run: one subprocess (the SDKs keep lazily imported
    # modules an in-process run would drop) for the 2 x 2 x RUNS_PER_ORDER replays.
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    shutil.copytree(SUPPORT, pytester.path / "support")
    for scenario, _ in SCENARIOS:
        shutil.copytree(EXAMPLES / scenario, pytester.path / "recordings" / scenario)
    out = pytester.path / "out"
    pytester.makepyfile(
        test_ordered=ORDERED_AGENT.format(
            out=str(out), turns=TURNS, answers=ANSWERS, runs=RUNS_PER_ORDER, scenarios=SCENARIOS
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=len(SCENARIOS) * 2 * RUNS_PER_ORDER)
    for scenario, _ in SCENARIOS:
        runs = out / scenario
        transcripts = {p.read_text() for p in runs.glob("*.md")}
        events = {p.read_text() for p in runs.glob("*.jsonl")}
        assert len(list(runs.glob("*.md"))) == 2 * RUNS_PER_ORDER, scenario
        assert len(transcripts) == 1, f"{scenario}: the transcript depends on the order"
        committed = COMMITTED / f"test_sdk_agent[openai-{scenario.rsplit('-', 1)[1]}].md"
        assert transcripts == {committed.read_text()}, f"{scenario}: the replay differs"
        assert len(events) == 1, f"{scenario}: the events snapshot depends on the order"


TWO_CONVERSATIONS_CONFTEST = """
from pytest_dsh_replay import Answer, Rule, ScriptedModel

MODEL = ScriptedModel(
    [
        Rule(Answer(text="The capital is Paris."), prompt="capital"),
        Rule(Answer(text="Berlin it is."), prompt="Germany"),
    ]
)


def pytest_dsh_replay_live_model(config, scenario_path):
    return MODEL
"""

TWO_CONVERSATIONS_TEST = """
import os

import pytest

QUESTIONS = ["What is the capital of France?", "And Germany?"]


@pytest.mark.dsh_scenario("two")
def test_two(dsh_replay, dsh_transcript):
    client = dsh_replay.openai_client()
    order = QUESTIONS[::-1] if os.environ.get("OTHER_FIRST") else QUESTIONS
    answers = {
        question: client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": question}]
        ).choices[0].message.content
        for question in order
    }
    assert answers == {QUESTIONS[0]: "The capital is Paris.", QUESTIONS[1]: "Berlin it is."}
    assert dsh_replay.transcript() == dsh_transcript
"""


def test_two_conversations_replay_whichever_calls_first(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two unrelated conversations (as ``asyncio.gather`` starts them) in either order."""
    pytester.makeconftest(TWO_CONVERSATIONS_CONFTEST)
    pytester.makepyfile(test_two=TWO_CONVERSATIONS_TEST)
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    recorded = pytester.runpytest("--dsh-record=all", "--snapshot-update", "-p", "no:randomly")
    recorded.assert_outcomes(passed=1)
    for other_first in ("", "1"):
        monkeypatch.setenv("OTHER_FIRST", other_first)
        result = pytester.runpytest("-p", "no:randomly")
        result.assert_outcomes(passed=1)


THREE_CONVERSATIONS_CONFTEST = """
from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall


def respond(request):
    topic = request.messages[0][1].split()[1]
    if not request.tool_results:
        return Answer(tool_calls=[ToolCall("lookup", {"topic": topic})])
    return Answer(text=f"{topic}: {request.tool_results[-1]}")


MODEL = ScriptedModel([Rule(respond)])


def pytest_dsh_replay_live_model(config, scenario_path):
    return MODEL
"""

THREE_CONVERSATIONS_TEST = """
import os

import pytest

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


@pytest.mark.dsh_scenario("three")
def test_three(dsh_replay, dsh_transcript):
    client = dsh_replay.openai_client()
    talks = {t: [{"role": "user", "content": f"Research {t}"}] for t in ("Rome", "Oslo", "Lima")}
    order = [list(talks)[int(k)] for k in os.environ.get("ORDER", "012")]
    for topic in order:  # each asks, and waits on its tool, before the next starts
        message = client.chat.completions.create(model="m", messages=talks[topic], tools=TOOLS)
        call = message.choices[0].message.tool_calls[0]
        talks[topic] += [
            message.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": f"data on {topic}"},
        ]
    for topic in order:
        answer = client.chat.completions.create(model="m", messages=talks[topic], tools=TOOLS)
        assert answer.choices[0].message.content == f"{topic}: data on {topic}"
    assert dsh_replay.transcript() == dsh_transcript
"""


def test_three_conversations_filed_as_a_chain_replay_in_any_order(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Content cannot tell the recorder which session started an unrelated conversation:
    # each was filed under the one waiting on its tool, a chain. A replay where the
    # second was not known yet when the third called gave the third the wrong
    # delegationDepth, and the log check failed.
    pytester.makeconftest(THREE_CONVERSATIONS_CONFTEST)
    pytester.makepyfile(test_three=THREE_CONVERSATIONS_TEST)
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    recorded = pytester.runpytest("--dsh-record=all", "--snapshot-update", "-p", "no:randomly")
    recorded.assert_outcomes(passed=1)
    depths = sorted(
        orjson.loads(log.read_bytes().split(b"\n", 1)[0]).get("delegationDepth", 0)
        for log in (pytester.path / "recordings" / "three").glob("session*.jsonl")
    )
    assert depths == [0, 1, 2]  # a chain, as the recorder guessed it
    for order in ("012", "021", "102", "120", "201", "210"):
        monkeypatch.setenv("ORDER", order)
        result = pytester.runpytest("-p", "no:randomly")
        assert result.ret == 0, (order, result.stdout.str())
