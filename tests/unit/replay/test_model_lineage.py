"""Concurrent children bind deterministically (beyond the reference; see docs/scenarios.md#binding).

A synthetic scenario is written to disk as real session logs: one parent and three
children, whose ``createdAt`` order differs from the order their tasks are named in. The
children start from threads, in a different shuffled order every run, all at once; each
must bind to the recording of its own task, the same way in all 50 runs.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from support.chunks import chunk_events, text_call, user_event

from pytest_dsh_replay import load_scenario
from pytest_dsh_replay._format.jsonl import dump_session_log
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.scenario import Scenario

PARENT = "aaaaaaaa-0000-4000-8000-000000000000"
# task -> (recorded child id, createdAt): "three" was created first, "one" last.
CHILDREN = {
    "one": ("cccccccc-0000-4000-8000-000000000003", 1_700_000_000_300),
    "two": ("bbbbbbbb-0000-4000-8000-000000000002", 1_700_000_000_200),
    "three": ("dddddddd-0000-4000-8000-000000000001", 1_700_000_000_100),
}


def reply_events(text: str, turn: int, first_seq: int) -> list[dict[str, Any]]:
    return chunk_events(text_call(text), turn=turn, first_seq=first_seq)


def write_log(path: Path, header: dict[str, Any], turns: list[tuple[str, str]]) -> None:
    events: list[dict[str, Any]] = []
    for turn, (prompt, answer) in enumerate(turns, start=1):
        events.append(user_event(prompt, len(events)))
        events.extend(reply_events(answer, turn, len(events)))
    path.write_bytes(dump_session_log(header, events))


@pytest.fixture
def family(tmp_path: Path) -> Scenario:
    base = {"type": "session", "version": 0, "delegationDepth": 0}
    write_log(
        tmp_path / "session.jsonl",
        {**base, "id": PARENT, "createdAt": 1_700_000_000_000},
        [("start three subagents", "spawning"), ("summarize", "all done")],
    )
    for n, (task, (rid, created)) in enumerate(CHILDREN.items(), start=1):
        write_log(
            tmp_path / f"session.{n}.jsonl",
            {
                **base,
                "id": rid,
                "createdAt": created,
                "parentSession": PARENT,
                "origin": "subagent",
                "delegationDepth": 1,
            },
            [(f"task {task}", f"answer {task}")],
        )
    return load_scenario(tmp_path)


def test_the_scenario_orders_children_by_created_at(family: Scenario) -> None:
    assert [s.first_user_text for s in family.scripts] == [
        "start three subagents",
        "task three",
        "task two",
        "task one",
    ]


def one_run(family: Scenario, seed: int) -> tuple[dict[str, str], dict[str, str]]:
    model = ReplayModel(family)
    parent_messages = [{"role": "user", "content": "start three subagents"}]
    assert list(model.stream({"messages": parent_messages}, session_id="parent"))
    order = list(CHILDREN)
    random.Random(seed).shuffle(order)
    barrier = threading.Barrier(len(order))
    answers: dict[str, str] = {}

    def child(task: str) -> None:
        messages = [
            {"role": "system", "content": "you are a subagent"},
            {"role": "user", "content": [{"type": "text", "text": f"task {task}"}]},
        ]
        barrier.wait()
        stream = model.stream(
            {"messages": messages}, session_id=f"live-{task}", parent_session_id="parent"
        )
        answers[task] = "".join(c["text"] for c in stream if c["type"] == "text-delta")

    threads = [threading.Thread(target=child, args=(task,)) for task in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()
    list(model.stream({"messages": parent_messages}, session_id="parent"))
    model.assert_consumed()
    bound = {live: b.recorded_id for live, b in model.bindings.items() if live is not None}
    return bound, answers


def test_concurrent_children_bind_identically_across_50_runs(family: Scenario) -> None:
    runs = [one_run(family, seed) for seed in range(50)]
    first = runs[0]
    assert all(run == first for run in runs)
    bound, answers = first
    assert bound == {
        "parent": PARENT,
        **{f"live-{task}": rid for task, (rid, _) in CHILDREN.items()},
    }
    assert answers == {task: f"answer {task}" for task in CHILDREN}
