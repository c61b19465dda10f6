"""Nested agents run as tools in parallel: each grandchild under its own parent (issue 40, point 6).

An OpenAI Agents SDK planner runs two researchers as tools at once; each researcher runs
a scout of its own as a tool. Both researchers are one ``Agent`` object, so headers
could not tell them apart, and content alone used to guess the scouts' parents (and file
the museums scout under the cafes researcher). Each scout is now the child of the
researcher whose tool call announced it (docs/scenarios.md#announcement), when recording
and when replaying, and every replay shows one transcript.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inner_runs import imported_before_inner_runs

from pytest_dsh_replay import load_scenario

_sdks = imported_before_inner_runs("agents")

CONFTEST = """
import json
from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall

PLAN = {
    "Plan a day in Paris.": [
        ("researcher", {"input": "Find cafes."}), ("researcher", {"input": "Find museums."})
    ],
    "Find cafes.": [("scout", {"input": "List cafes near the Seine."})],
    "Find museums.": [("scout", {"input": "List museums near the Louvre."})],
}

def answer(request):
    users = [text for role, text in request.messages if role == "user"]
    if request.tool_results:
        return Answer(text="done: " + "; ".join(request.tool_results))
    if users and users[0] in PLAN:
        return Answer(tool_calls=[ToolCall(n, json.dumps(a)) for n, a in PLAN[users[0]]])
    return Answer(text="found: " + (users[0] if users else ""))

def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(answer)])
"""

SUITE = """
from pathlib import Path

import pytest
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled

RECORDED = Path(__file__).parent / "__snapshots__" / "test_nested" / "test_record.md"


@pytest.fixture
def planner(dsh_replay):
    set_tracing_disabled(True)
    set_default_openai_client(dsh_replay.async_openai_client(max_retries=0),
                              use_for_tracing=False)
    scout = Agent(name="scout", instructions="Scout.")
    researcher = Agent(name="researcher", instructions="Research.",
                       tools=[scout.as_tool(tool_name="scout", tool_description="Scout.")])
    return Agent(name="planner", instructions="Plan.",
                 tools=[researcher.as_tool(tool_name="researcher",
                                           tool_description="Research.")])


async def plan(planner):
    result = await Runner.run(planner, "Plan a day in Paris.")
    assert "List museums near the Louvre." in str(result.final_output)


@pytest.mark.asyncio
@pytest.mark.dsh_scenario("nested")
async def test_record(planner, dsh_replay, dsh_transcript):
    await plan(planner)
    assert dsh_replay.transcript() == dsh_transcript


@pytest.mark.asyncio
@pytest.mark.parametrize("n", range(10))
@pytest.mark.dsh_scenario("nested", record=False)
async def test_replay(n, planner, dsh_replay):
    await plan(planner)
    assert dsh_replay.transcript() == RECORDED.read_text()
"""


def test_each_grandchild_is_recorded_under_its_parent_and_replays_with_one_transcript(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(
        "[pytest]\ndsh_snapshot_dir = snapshots\nasyncio_default_fixture_loop_scope = function\n"
    )
    pytester.makepyfile(test_nested=SUITE)
    recorded = pytester.runpytest(
        "--dsh-record=all", "--snapshot-update", "-k", "record", "-p", "no:cacheprovider"
    )
    recorded.assert_outcomes(passed=1)
    scripts = load_scenario(Path(pytester.path) / "snapshots" / "nested").scripts
    ids = {script.first_user_text: script.recorded_id for script in scripts}
    parents = {script.first_user_text: script.parent_session for script in scripts}
    assert parents["List cafes near the Seine."] == ids["Find cafes."]
    assert parents["List museums near the Louvre."] == ids["Find museums."]
    assert parents["Find cafes."] == parents["Find museums."] == ids["Plan a day in Paris."]
    replayed = pytester.runpytest("-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=11)
