"""The anthropic SDK's tool runner in its default thread mode, recorded and replayed.

``client.beta.messages.tool_runner(...)`` continues its conversation by id
(``thread: {"type": "continue", "previous_message_id": ...}``) with only the tool
results. The endpoint reads each such request as the whole conversation it continues
(docs/wires.md#anthropic-threads), so the scripted live model, binding, the log and the
replayed-log check all see every message, whether the run records from the
``pytest_dsh_replay_live_model`` hook, records through the recording proxy, or replays.
"""

from __future__ import annotations

import pytest
from support.proxy_recording import record_through_proxy, recorded_logs, recording_project

pytest.importorskip("anthropic", reason="the anthropic SDK is needed")

KEY = "live-anthropic-key-0123456789"

USER_TEST = """
import os

import pytest

from support.tool_runner_agent import PLAN, plan_day

THREAD = os.environ.get("PLAN_THREAD", "default") == "default"


@pytest.mark.dsh_scenario("tool-runner")
def test_plan(dsh_replay):
    assert plan_day(dsh_replay.anthropic_client(max_retries=0), thread=THREAD) == PLAN


@pytest.mark.dsh_scenario("tool-runner-streamed")
def test_plan_streamed(dsh_replay):
    client = dsh_replay.anthropic_client(max_retries=0)
    assert plan_day(client, thread=THREAD, stream=True) == PLAN
"""

HOOK = """
from support.tool_runner_agent import trip_model

def pytest_dsh_replay_live_model(config, scenario_path):
    return trip_model()
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, USER_TEST)


def _replays(project: pytest.Pytester) -> None:
    """Both tests replay with no live model: every call served, the logs as recorded."""
    recorded = recorded_logs(project)
    assert sorted(recorded) == ["tool-runner-streamed/session.jsonl", "tool-runner/session.jsonl"]
    for log in recorded.values():  # one conversation: the task, two tool steps, the plan
        assert log.count('"type":"assistant/message"') == 3
        assert log.count('"type":"tool/result"') == 2
        assert log.count('"type":"user/message"') == 1
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2)  # assert_consumed and the log check ran after each
    result.stdout.fnmatch_lines(["*scenarios: 2 replayed, 0 recorded, 0 missing*"])
    assert recorded_logs(project) == recorded  # a replay writes nothing


def test_the_tool_runner_records_from_the_live_model_hook_and_replays(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makeconftest(HOOK)
    recorded = project.runpytest("--dsh-record=all", "-p", "no:randomly")
    recorded.assert_outcomes(passed=2)
    recorded.stdout.fnmatch_lines(["recorded *tool-runner: 1 session, 3 model calls"])
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays(project)
    monkeypatch.setenv("PLAN_THREAD", "off")  # the same recording, the whole history sent
    _replays(project)


def test_the_tool_runner_records_through_the_proxy_and_replays_without_the_server(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.tool_runner_agent import trip_model

    run = ("--dsh-record=all", "-p", "no:randomly")
    requests = record_through_proxy(project, monkeypatch, trip_model(), *run, key=KEY, passed=2)
    # the proxy forwards the runner's bodies unchanged: the live server continued them
    threads = [r.body.get("thread") for r in requests]
    assert threads.count({"type": "create"}) == 2
    continued = [t for t in threads if t and t.get("type") == "continue"]
    assert len(continued) == 4
    assert all(r.status == 200 for r in requests)
    _replays(project)


def test_a_recording_without_threads_replays_under_the_default_runner(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makeconftest(HOOK)
    monkeypatch.setenv("PLAN_THREAD", "off")  # tool_runner(..., thread=False)
    project.runpytest("--dsh-record=all", "-p", "no:randomly").assert_outcomes(passed=2)
    (project.path / "conftest.py").unlink()
    monkeypatch.delenv("PLAN_THREAD")  # the SDK's default: threads
    _replays(project)
