"""Whatever shape an agent takes, what recording wrote is what replay binds.

See docs/scenarios.md#binding.

Agent programs are generated: a primary of one to three turns, each turn's steps a mix
of a plain tool, spawned children (with tools and children of their own) and forks (the
agent's latest request plus a question, asked while it waits for its tools), at any
step, before and after tool steps, run one by one or in parallel threads, with the
model's tool-call ids kept or rewritten by the agent, sessions named by headers or told
apart by content alone, on every wire. Each program is recorded against the planning
model, then replayed with no model: every session binds, every recorded call is served,
the replayed logs equal the recording (kind, parent and seed included), and every agent
gets the answers it got while recording.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.wire_agent import DIALECTS, WireAgent, endpoint_sender, plan_model, task

from pytest_dsh_replay._fixture.dsh_replay import DshReplay

Plan = list[list[dict[str, Any]]]


@st.composite
def plans(draw: st.DrawFn, label: str, depth: int, twins: bool) -> Plan:
    """A task's plan: steps of tool uses; spawned tasks nest up to ``depth``.

    A spawn may come twice in one answer (the same task): twins. Content alone cannot
    tell apart the children of twins (two identical conversations delegating at once),
    so without ``twins`` (sessions named by headers) only twins that delegate nothing.
    """
    steps: Plan = []
    for k in range(draw(st.integers(0, 3 if depth else 2))):
        uses: list[dict[str, Any]] = []
        kinds = ["add", "fork"] + (["spawn"] if depth else [])
        for n, kind in enumerate(draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=3))):
            where = f"{label}.{k}.{n}"
            if kind == "add":
                uses.append({"t": "add"})
            elif kind == "fork":
                uses.append({"t": "fork", "q": f"q{where}"})
            else:
                sub = draw(plans(where, depth - 1, twins))
                uses.append({"t": "spawn", "task": task(where, sub)})
            if kind == "spawn" and (twins or not delegates(uses[-1])) and draw(st.booleans()):
                uses.append(uses[-1])  # a twin: the same task twice in one answer
        steps.append(uses)
    return steps


def delegates(use: dict[str, Any]) -> bool:
    """Whether a spawn's task starts children of its own."""
    text = str(use.get("task", ""))
    return '"spawn"' in text or '"fork"' in text


@st.composite
def programs(draw: st.DrawFn) -> dict[str, Any]:
    identify = draw(st.booleans())
    turns = [draw(plans(f"t{i}", 2, identify)) for i in range(draw(st.integers(1, 3)))]
    return {
        "turns": turns,
        "wire": draw(st.sampled_from(sorted(DIALECTS))),
        "identify": identify,
        "rewrite": draw(st.booleans()),
        "parallel": draw(st.booleans()),
    }


def run(dsh: DshReplay, program: dict[str, Any]) -> Any:
    agent = WireAgent(
        endpoint_sender(dsh._http.endpoint),
        DIALECTS[program["wire"]],
        identify=program["identify"],
        rewrite=program["rewrite"],
        parallel=program["parallel"],
    )
    for i, plan in enumerate(program["turns"]):
        agent.run(task(f"t{i}", plan))
    dsh.close()
    dsh.finish()  # replay: every call consumed, the logs equal the recording
    return agent.tree()


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=programs())
def test_every_recorded_agent_shape_replays(program: dict[str, Any], tmp_path: Path) -> None:
    scenario = tmp_path / f"s{id(program)}"
    recording = DshReplay.record(scenario, live=plan_model(), workdir=scenario.with_suffix(".r"))
    recorded = run(recording, program)
    replay = DshReplay.open(scenario, workdir=scenario.with_suffix(".p"))
    assert run(replay, program) == recorded
    assert replay.scenario is not None
    assert len(replay.model.bindings) == len(replay.scenario.scripts)
