"""Agent stacks on the Responses API recorded with ``--dsh-record``, as users run it.

The OpenAI Agents SDK on its default model (a function tool and an agent as a tool run
concurrently by ``Runner.run``, a handoff by ``Runner.run_streamed``) and a pydantic-ai
agent on ``OpenAIResponsesModel`` (``run`` and ``run_stream``) are recorded twice: from
the scripted live model the ``pytest_dsh_replay_live_model`` hook gives (its chunks go
out on the Responses wire), and through the recording proxy, which forwards
``POST /v1/responses`` to the package's scripted model served on 127.0.0.1. Each
recording then replays with no live model and no server: the agents' code is the same
in every run (``tests/support``), only the client comes from ``dsh_replay``.
"""

from __future__ import annotations

import pytest
from support.inner_runs import imported_before_inner_runs
from support.proxy_recording import record_through_proxy, recorded_logs, recording_project
from support.scripted import directive_model

_agents_sdk = imported_before_inner_runs(
    "agents", reason="the OpenAI Agents SDK (openai-agents) is needed"
)
_pydantic_ai = imported_before_inner_runs("pydantic_ai", reason="pydantic-ai is needed")

USER_TEST = """
import pytest

@pytest.mark.asyncio
@pytest.mark.dsh_scenario("agents-sdk")
async def test_agents_sdk(dsh_replay):
    from support.agents_sdk_agent import check_agents_sdk_app

    await check_agents_sdk_app(dsh_replay)

@pytest.mark.asyncio
@pytest.mark.dsh_scenario("pydantic-ai")
async def test_pydantic_ai(dsh_replay):
    from support.pydantic_ai_agent import check_pydantic_ai_agent

    await check_pydantic_ai_agent(dsh_replay)
"""

HOOK = """
from support.scripted import directive_model

def pytest_dsh_replay_live_model(config, scenario_path):
    return directive_model()
"""

KEY = "live-responses-key-0123456789"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, USER_TEST, ini="asyncio_mode = strict\n")


def _replays_without_a_live_model(project: pytest.Pytester) -> None:
    recorded = recorded_logs(project)
    assert sorted(recorded) == [
        "agents-sdk/session.1.jsonl",
        "agents-sdk/session.2.jsonl",
        "agents-sdk/session.jsonl",
        "pydantic-ai/session.1.jsonl",  # run_stream's conversation is its own
        "pydantic-ai/session.jsonl",
    ]
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    assert recorded_logs(project) == recorded  # a replay writes nothing


def test_responses_stacks_record_from_the_live_model_hook_and_replay(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(HOOK)
    project.runpytest("--dsh-record").assert_outcomes(passed=2)
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays_without_a_live_model(project)


def test_responses_stacks_record_through_the_proxy_and_replay_without_the_server(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = directive_model()
    requests = record_through_proxy(project, monkeypatch, model, "--dsh-record", key=KEY, passed=2)
    assert requests
    assert {r.path for r in requests} == {"/v1/responses"}
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in requests)
    streamed = [r for r in requests if r.body.get("stream")]
    assert streamed, "Runner.run_streamed and run_stream stream their calls"
    written = "".join(recorded_logs(project).values())
    assert KEY not in written
    assert "tool results: 9" in written
    _replays_without_a_live_model(project)
