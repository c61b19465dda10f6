"""The recorded order of calls across concurrent sessions (``keep_recorded_order``).

The scenario is the project's own recording of the real dsh runtime,
``example_snapshots/runtime-mixed``: the primary delegates to a spawn child and a fork
child at once; the fork child finishes first and its notice starts the primary's call
#4; the spawn child finishes after that call, and its notice starts call #5. Replaying
it, those calls must wait for the children's calls, however the sessions are scheduled.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.hang_guard import deadline
from support.paths import EXAMPLES

from pytest_dsh_replay import ReplayModel, ReplayOrderError, load_scenario
from pytest_dsh_replay._replay.order import CallTimes, OrderGate, call_times, settled_order

MIXED = EXAMPLES / "runtime-mixed"


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class Run:
    """Drives the runtime-mixed recording in process: the primary, then its children."""

    def __init__(self, scenario: Path = MIXED, **order: Any):
        self.scenario = load_scenario(scenario)
        self.model = ReplayModel(self.scenario)
        self.keeps = self.model.keep_recorded_order(**order) if order else False
        self.done: dict[str, float] = {}
        spawn, fork = self.scenario.scripts[1:]
        assert fork.seed_length > 0
        assert spawn.seed_length == 0
        self.texts = {"spawn": spawn.first_user_text, "fork": fork.first_user_text}

    def primary(self, calls: int = 1) -> None:
        for _ in range(calls):
            list(self.model.stream(ask("WARMUP"), session_id="main"))
        self.done["main"] = time.monotonic()

    def child(self, kind: str, delay: float = 0.0) -> None:
        time.sleep(delay)
        seed = 17 if kind == "fork" else 0
        request = ask(str(self.texts[kind]))
        list(
            self.model.stream(request, session_id=kind, parent_session_id="main", seed_length=seed)
        )
        self.done[kind] = time.monotonic()

    def later(self, kind: str, delay: float = 0.0) -> threading.Thread:
        thread = threading.Thread(target=self.child, args=(kind, delay))
        thread.start()
        return thread

    def held(self, script: int, call: int) -> threading.Event:
        """Set once the gate holds call ``call`` of session ``script`` (it decided to wait).

        The signal a test waits on before it makes the call the held one awaits, so
        that call provably comes second, whatever the scheduling.
        """
        gate = self.model._gate
        assert gate is not None
        event = threading.Event()
        step = gate._step

        def watched(at: int, k: int, until: float) -> float | None:
            found = step(at, k, until)
            if (at, k) == (script, call) and found is not None:
                event.set()
            return found

        gate._step = watched  # type: ignore[method-assign,assignment]
        return event

    def primary_later(self) -> threading.Thread:
        """One primary call in a thread; ``done["main"]`` is unset until it ends."""
        self.done.pop("main", None)
        thread = threading.Thread(target=self.primary)
        thread.start()
        return thread


def test_call_times_are_the_runtime_receipts_and_settled_events() -> None:
    scenario = load_scenario(MIXED)
    primary, spawn, fork = (call_times(s) for s in scenario.scripts)
    assert primary is not None
    assert spawn is not None
    assert fork is not None
    assert [len(primary), len(spawn), len(fork)] == [5, 1, 1]
    assert all(t.start <= t.end for t in [*primary, *spawn, *fork])
    # The story the recording tells: fork ends, call #4 starts; spawn ends, #5 starts.
    assert fork[0].end < primary[3].start < spawn[0].end < primary[4].start


def test_logs_without_times_keep_no_order() -> None:
    scenario = load_scenario(EXAMPLES / "mixed")  # committed form: no seq, no time
    assert [call_times(s) for s in scenario.scripts] == [None, None, None]
    assert ReplayModel(scenario).keep_recorded_order() is False


def test_a_parent_call_waits_for_the_child_the_recording_shows_before_it() -> None:
    run = Run(timeout=10, max_gap=0)
    assert run.keeps
    with deadline(30):
        run.primary(3)
        held = run.held(0, 3)
        main = run.primary_later()  # call #4 comes early: it waits for the fork child's call
        assert held.wait(20)
        assert "main" not in run.done
        run.child("fork")
        main.join()
        assert run.done["fork"] <= run.done["main"]
        held = run.held(0, 4)
        main = run.primary_later()  # call #5 waits for the spawn child's call
        assert held.wait(20)
        run.child("spawn")
        main.join()
        assert run.done["spawn"] <= run.done["main"]
    run.model.assert_consumed()


def test_a_child_call_waits_until_the_parent_call_before_it_started() -> None:
    # The spawn child ended while the primary's call #4 was in flight: replayed, it is
    # held until call #4 has arrived, so its notice lands after that call again.
    run = Run(timeout=10, max_gap=0)
    with deadline(30):
        run.primary(3)
        run.child("fork")
        held = run.held(1, 0)
        spawn = run.later("spawn")
        assert held.wait(20)
        assert "spawn" not in run.done
        run.primary()
        spawn.join()
        assert run.done["main"] <= run.done["spawn"]


def test_the_recorded_pause_before_a_call_is_kept_up_to_max_gap() -> None:
    run = Run(timeout=10, max_gap=0.1)
    with deadline(30):
        run.primary(3)
        run.child("fork")
        start = time.monotonic()
        run.primary()
        waited = time.monotonic() - start
    times = call_times(run.scenario.scripts[0])
    fork_times = call_times(run.scenario.scripts[2])
    assert times is not None
    assert fork_times is not None
    pause = min((times[3].end - fork_times[0].end) / 1000, 0.1)
    assert waited >= pause * 0.9


def test_an_agent_that_never_makes_the_recorded_call_fails_with_a_typed_error() -> None:
    run = Run(timeout=0.05, max_gap=0)
    run.primary(3)
    started = time.monotonic()
    with deadline(30), pytest.raises(ReplayOrderError) as caught:
        run.primary()  # the fork child never calls
    assert 0.05 <= time.monotonic() - started < 5
    message = str(caught.value)
    assert "session 'main', call #4" in message
    assert "call #1 of session.2.jsonl" in message
    assert "did not reach the recorded order" in message


def test_without_keep_recorded_order_nothing_waits() -> None:
    run = Run()
    with deadline(30):
        run.primary(5)  # calls #4 and #5 without any child: served at once
    assert not run.keeps


def test_async_callers_wait_without_blocking_their_loop() -> None:
    run = Run(timeout=10, max_gap=0)
    run.primary(3)
    assert run.texts["fork"] is not None
    order: list[str] = []
    held = run.held(0, 3)

    async def primary() -> None:
        async for _ in run.model.astream(ask("x"), session_id="main"):
            pass
        order.append("main")

    async def fork() -> None:
        while not held.is_set():  # the primary's call is held first, on this same loop
            await asyncio.sleep(0)
        request = ask(str(run.texts["fork"]))
        stream = run.model.astream(
            request, session_id="fork", parent_session_id="main", seed_length=17
        )
        async for _ in stream:
            pass
        order.append("fork")

    async def both() -> None:
        await asyncio.gather(primary(), fork())

    with deadline(30):
        asyncio.run(both())
    assert order == ["fork", "main"]


def test_the_gate_only_orders_points_of_other_sessions() -> None:
    times = [[CallTimes(0, 10), CallTimes(20, 30)], [CallTimes(12, 15)], None]
    gate = OrderGate(times, ["a", "b", "c"], timeout=1, max_gap=0)
    assert gate.active
    assert gate.wait(0, 0) is False  # nothing of another session before it
    assert gate.wait(2, 0) is False  # a session without times never waits
    with pytest.raises(ReplayOrderError, match="call #1 of b starting"):
        OrderGate(times, ["a", "b", "c"], timeout=0.05, max_gap=0).wait(0, 1)
    gate.arrived(1, 0)
    gate.served(1, 0)
    assert gate.wait(0, 1) is False
    assert gate.wait(1, 0, cancelled=lambda: True) is True


def _shift_times(event: dict[str, Any], by: int) -> None:
    if isinstance(event.get("time"), int):
        event["time"] += by
    data = event.get("data")
    for item in data.get("stream", []) if isinstance(data, dict) else []:
        for key in ("time", "time0"):
            if isinstance(item.get(key), int):
                item[key] += by


@pytest.fixture
def close_finish(tmp_path: Path) -> Path:
    """runtime-mixed with the spawn child's log 294 ms earlier: its call now overlaps the
    fork child's and ends 1 ms before it, yet the parent still got the fork child's notice
    first (the runtime's race between two children finishing close together)."""
    shutil.copytree(MIXED, tmp_path / "close", ignore=shutil.ignore_patterns("*.md"))
    spawn = tmp_path / "close" / "session.1.jsonl"
    header, *events = [json.loads(line) for line in spawn.read_text().splitlines()]
    for event in events:
        _shift_times(event, -294)
    spawn.write_text("".join(json.dumps(e) + "\n" for e in [header, *events]))
    return tmp_path / "close"


def test_settled_order_is_the_order_the_parent_got_the_notices(close_finish: Path) -> None:
    scenario = load_scenario(close_finish)
    times = [call_times(s) for s in scenario.scripts]
    _, spawn, fork = times
    assert spawn is not None
    assert fork is not None
    assert spawn[0].start < fork[0].start < spawn[0].end < fork[0].end  # spawn ends first
    assert settled_order(scenario.scripts, times) == [[(2, 0), (1, 0)]]  # fork noticed first


def test_children_finishing_close_together_settle_in_the_order_they_were_noticed(
    close_finish: Path,
) -> None:
    # Both children's last calls are in flight at once; served in the recorded order of
    # their ends (spawn, then fork 1 ms later) the runtime notices either first. The
    # recording's notice order is kept instead, with max_gap between the two calls.
    run = Run(close_finish, timeout=10, max_gap=0.1)
    with deadline(30):
        run.primary(3)
        held = run.held(1, 0)
        spawn = run.later("spawn")
        assert held.wait(20)  # the spawn child's call comes first and is held
        fork = run.later("fork")
        spawn.join()
        fork.join()
    assert run.done["fork"] < run.done["spawn"]
    assert run.done["spawn"] - run.done["fork"] >= 0.1 * 0.9


def test_a_child_noticed_first_that_never_settles_fails_with_a_typed_error(
    close_finish: Path,
) -> None:
    run = Run(close_finish, timeout=0.05, max_gap=0)
    run.primary(3)
    with deadline(30), pytest.raises(ReplayOrderError) as caught:
        run.child("spawn")  # the fork child never calls
    message = str(caught.value)
    assert "notice that call #1 of session.2.jsonl settled reaching the parent" in message


def test_a_notice_order_that_would_deadlock_keeps_the_recorded_ends() -> None:
    # c's call ended between b's and a's ends: a waits for c, c waits for b. Making b
    # settle after a (a noticed first) would make b wait for a: it is not applied.
    times = [[CallTimes(0, 30)], [CallTimes(1, 10)], [CallTimes(2, 20)]]
    gate = OrderGate(times, ["a", "b", "c"], timeout=0.05, max_gap=0, settled=[[(0, 0), (1, 0)]])
    for session in range(3):
        gate.arrived(session, 0)
    assert gate.wait(1, 0) is False  # b is served first, as its recorded end shows
    gate.served(1, 0)
    assert gate.wait(2, 0) is False
    gate.served(2, 0)
    assert gate.wait(0, 0) is False
    # Without c in between, the notice order holds: b waits for a, a no longer for b.
    two = OrderGate(times[:2], ["a", "b"], timeout=0.05, max_gap=0, settled=[[(0, 0), (1, 0)]])
    two.arrived(0, 0)
    two.arrived(1, 0)
    with pytest.raises(ReplayOrderError, match="notice that call #1 of a settled"):
        two.wait(1, 0)
    assert two.wait(0, 0) is False
