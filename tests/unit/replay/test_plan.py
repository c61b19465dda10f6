"""The replay plan: computed once per loaded scenario, shared by its models, never their state.

See docs/architecture.md#replay-plan and docs/scenarios.md#binding.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support.chunks import text_call

from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._replay.plan import ReplayPlan, plan_of
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript

REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}


def _script(
    file: str, calls: int, *, parent: str | None = None, seed: int = 0, task: str | None = None
) -> SessionScript:
    return SessionScript(
        file=file,
        recorded_id=file.removesuffix(".jsonl"),
        created_at=0,
        seed_length=seed,
        parent_session=parent,
        primary=file == "session.jsonl",
        entries=tuple(ChunksEntry(text_call(f"{file} {n}")) for n in range(calls)),
        first_user_text=task,
    )


def _ask(task: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": task}]}


# The corpus's shapes: spawned children (no seed), a fork (seeded), parallel children with
# the same task (arrival order), a grandchild (a child's own child).
SHAPES: dict[str, tuple[SessionScript, ...]] = {
    "spawn": (
        _script("session.jsonl", 2, task="main"),
        _script("session.1.jsonl", 1, parent="session", task="read the docs"),
        _script("session.2.jsonl", 1, parent="session", task="write the tests"),
    ),
    "fork": (
        _script("session.jsonl", 2, task="main"),
        _script("session.1.jsonl", 1, parent="session", seed=4, task="try again"),
        _script("session.2.jsonl", 1, parent="session", task="try again"),
    ),
    "parallel": (
        _script("session.jsonl", 1, task="main"),
        _script("session.1.jsonl", 2, parent="session", task="same task"),
        _script("session.2.jsonl", 2, parent="session", task="same task"),
        _script("session.3.jsonl", 1, parent="session.1", task="grandchild"),
    ),
}

Calls = list[tuple[str, str | None, str, int | None]]

# shape -> the calls (live session, live parent, task, seed length), in order -> the file
# each live session binds to (the rules of docs/scenarios.md#binding).
CASES: list[tuple[str, Calls, dict[str, str]]] = [
    ("spawn", [("m", None, "main", 0), ("b", "m", "write the tests", 0),
               ("a", "m", "read the docs", 0)],
     {"m": "session.jsonl", "b": "session.2.jsonl", "a": "session.1.jsonl"}),
    ("spawn", [("m", None, "main", 0), ("x", None, "x", 0), ("y", None, "y", 0)],
     {"m": "session.jsonl", "x": "session.1.jsonl", "y": "session.2.jsonl"}),
    ("fork", [("m", None, "main", 0), ("s", "m", "try again", 0),
              ("f", "m", "try again", 4)],
     {"m": "session.jsonl", "s": "session.2.jsonl", "f": "session.1.jsonl"}),
    ("parallel", [("m", None, "main", 0), ("p", "m", "same task", 0),
                  ("q", "m", "same task", 0), ("g", "p", "grandchild", 0)],
     {"m": "session.jsonl", "p": "session.1.jsonl", "q": "session.2.jsonl",
      "g": "session.3.jsonl"}),
    # a parent not live yet: the recording its opening matches, not the primary
    ("parallel", [("g", "nobody", "grandchild", 0), ("m", None, "main", 0)],
     {"g": "session.3.jsonl", "m": "session.jsonl"}),
    ("parallel", [("g", "nobody", "no recording opens so", 0), ("m", None, "main", 0)],
     {"g": "session.jsonl", "m": "session.1.jsonl"}),
]  # fmt: skip


def _bind(model: ReplayModel, calls: Calls) -> dict[str, str]:
    for key, parent, task, seed in calls:
        model.stream(_ask(task), session_id=key, parent_session_id=parent, seed_length=seed)
    return {key: binding.file for key, binding in model.bindings.items() if key is not None}


@pytest.mark.parametrize(("shape", "calls", "expected"), CASES)
def test_models_sharing_a_plan_bind_as_a_model_with_its_own(
    shape: str, calls: Calls, expected: dict[str, str]
) -> None:
    scenario = Scenario(Path(shape), SHAPES[shape])
    first = _bind(ReplayModel(scenario), calls)  # makes the plan
    plan = scenario.replay_plan
    assert isinstance(plan, ReplayPlan)
    again = _bind(ReplayModel(scenario), calls)  # reads it
    assert scenario.replay_plan is plan
    fresh = dataclasses.replace(scenario)  # a copy starts without a plan
    assert fresh.replay_plan is None
    assert first == again == _bind(ReplayModel(fresh), calls) == expected


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_plan_is_what_the_scripts_say(shape: str) -> None:
    scripts = SHAPES[shape]
    plan = plan_of(Scenario(Path(shape), scripts))
    assert plan.scripts == scripts
    assert plan.size == len(scripts)
    assert plan.others == tuple(i for i, s in enumerate(scripts) if not s.primary)
    by_parent: dict[str, list[int]] = {}
    for i, s in enumerate(scripts):
        if not s.primary and s.parent_session:
            by_parent.setdefault(s.parent_session, []).append(i)
    assert plan.children == {parent: tuple(kids) for parent, kids in by_parent.items()}


def test_one_models_progress_never_shows_in_another_over_the_same_scenario() -> None:
    scenario = Scenario(Path("spawn"), SHAPES["spawn"])
    one, two = ReplayModel(scenario), ReplayModel(scenario)
    for key in ("m", "c", "d"):  # one binds every recorded session, the first twice
        list(one.stream(REQUEST, session_id=key))
    list(one.stream(REQUEST, session_id="m"))
    one.assert_consumed()
    assert two.bindings == {}
    # two binds from the start: the primary is free for it, its cursor at 0
    assert list(two.stream(REQUEST, session_id="x")) == text_call("session.jsonl 0")
    assert two.bindings["x"].cursor == 1
    assert one.bindings["m"].cursor == 2
    with pytest.raises(Exception, match="was never replayed"):
        two.assert_consumed()
    one.assert_consumed()  # two's calls left it as it was
    # a third model, made after both moved, starts from nothing too
    assert ReplayModel(scenario).bindings == {}
    assert plan_of(scenario) is scenario.replay_plan


def test_a_scenario_s_value_ignores_its_plan() -> None:
    scenario = Scenario(Path("spawn"), SHAPES["spawn"])
    copy = Scenario(Path("spawn"), SHAPES["spawn"])
    ReplayModel(scenario)
    assert scenario.replay_plan is not None
    assert copy.replay_plan is None
    assert scenario == copy
    assert "replay_plan" not in repr(scenario)
