"""The recorded interleaving kept on live logs (``keep_recorded_order(live=...)``).

No runtime: the recordings are synthetic dsh runtime logs (``support.inbox_logs``) of
issue 40's shape, a primary whose two workers finish close together; the "live logs"
are lists the test appends to, as the runtime appends to its files. Calls wait in
threads; the test waits on events (a look at the live logs, a finished call), never on
a timer.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.hang_guard import deadline
from support.inbox_logs import LogBuilder, two_workers, write_scenario_dir

from pytest_dsh_replay import ReplayModel, ReplayOrderError, load_scenario
from pytest_dsh_replay._replay.order import InboxPlan, LogOrderGate, inbox_plan, log_marks

MAIN, A, B = 0, 1, 2  # the scenario's sessions: the primary, worker a, worker b


class FakeLive:
    """Live logs the test writes; each look at them is signalled.

    ``poll_s`` is long: a gate built here is told of each change (``changed``); the
    replay model's gate (not reachable from a test) gets ``short=True``.
    """

    def __init__(self, sessions: int, *, short: bool = False):
        self.poll_s = 0.005 if short else 30.0
        self.logs: list[list[dict[str, Any]]] = [[] for _ in range(sessions)]
        self.looked = threading.Event()

    def refresh(self) -> None:
        self.looked.set()

    def events(self, script: int) -> Sequence[dict[str, Any]]:
        return self.logs[script]

    def where(self, script: int) -> str:
        return f"<fake live log {script}>"

    def write(self, script: int, events: Sequence[dict[str, Any]]) -> None:
        """The session logged ``events`` (its whole log so far)."""
        self.logs[script] = list(events)


def scenario(tmp_path: Path, logs: list[LogBuilder]) -> Any:
    return load_scenario(write_scenario_dir(tmp_path / "scenario", logs))


def plan_of(tmp_path: Path, logs: list[LogBuilder]) -> InboxPlan:
    loaded = scenario(tmp_path, logs)
    return inbox_plan(loaded.scripts, [log.events for log in logs])


def index(log: LogBuilder, kind: str, nth: int = -1, **data: Any) -> int:
    """The index of the ``nth`` event of ``kind`` whose data holds ``data``."""
    found = [
        i
        for i, e in enumerate(log.events)
        if e["type"] == kind and all(e["data"].get(k) == v for k, v in data.items())
    ]
    return found[nth]


def notice(log: LogBuilder, sender: str) -> int:
    """The index of the event that inserted ``sender``'s notice."""
    return next(
        i
        for i, e in enumerate(log.events)
        if any(m["source"].get("senderSessionId") == sender for m in e["data"].get("inserted", ()))
    )


def waiting(gate: LogOrderGate, live: FakeLive, script: int, call: int) -> threading.Thread:
    """Start a thread that waits for the call's turn; returns once it has looked."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["cancelled"] = gate.wait(script, call)
        except ReplayOrderError as err:  # pragma: no cover - reported by the test
            outcome["error"] = err

    live.looked.clear()
    thread = threading.Thread(target=run, daemon=True)
    thread.outcome = outcome  # type: ignore[attr-defined]
    thread.start()
    assert live.looked.wait(30)
    return thread


def test_the_plan_holds_the_late_worker_and_the_step_its_notice_joined(tmp_path: Path) -> None:
    main, _, _ = logs = two_workers()
    plan = plan_of(tmp_path, logs)
    assert plan.races == ()
    # Worker a's notice opened turn 3 of an idle primary: its call waits for turn 2's end.
    (wait_a,) = plan.waits[(A, 0)]
    assert (wait_a.script, wait_a.event) == (MAIN, index(main, "turn/end", turn=2))
    assert dict(wait_a.counts)["turn/end"] == 2
    assert wait_a.what == f"event #{wait_a.event} turn/end (turn 2)"
    # Worker b's notice came while turn 3 ran: its call waits for turn 3's start ...
    (wait_b,) = plan.waits[(B, 0)]
    assert (wait_b.script, wait_b.event) == (MAIN, index(main, "turn/start", turn=3))
    assert dict(wait_b.counts)["insert:subagent-settled"] == 1
    # ... and the primary's call of step 1, whose end took the notice in, waits for it.
    (wait_step,) = plan.waits[(MAIN, 3)]
    assert wait_step.counts == (("insert:subagent-settled", 2),)
    assert wait_step.what == "the subagent-settled message of session.2.jsonl"
    assert set(plan.waits) == {(A, 0), (B, 0), (MAIN, 3)}


def test_a_notice_arriving_just_after_its_step_ended_is_held_by_that_steps_call(
    tmp_path: Path,
) -> None:
    # The runtime looks at its inbox once a step ended: a notice logged after the
    # step/end event but before that look is taken in at that step's end all the same.
    main, _, _ = logs = two_workers(late=True)
    assert index(main, "step/end", turn=3, step=1) < notice(main, "worker-b")
    plan = plan_of(tmp_path, logs)
    assert plan.races == ()
    assert plan.waits[(MAIN, 3)][0].counts == (("insert:subagent-settled", 2),)
    assert plan.waits[(B, 0)][0].event == index(main, "turn/start", turn=3)


def test_two_notices_that_opened_one_turn_are_a_race_the_plan_names(tmp_path: Path) -> None:
    main, _, _ = logs = two_workers(together=True)
    plan = plan_of(tmp_path, logs)
    (race,) = plan.races
    assert (race.script, race.event, race.sender) == (MAIN, notice(main, "worker-b"), B)
    assert "opened one turn together" in race.why
    assert "race inside the runtime" in race.why
    # Both workers still wait for the primary to be idle, as the recording shows it.
    assert plan.waits[(A, 0)][0].event == plan.waits[(B, 0)][0].event


def test_log_marks_count_turns_steps_calls_and_inserted_messages() -> None:
    main, _, _ = two_workers()
    marks = [m for e in main.events for m in log_marks(e)]
    assert marks.count("turn/start") == 3
    assert marks.count("call") == 5
    assert marks.count("insert:user") == 2
    assert marks.count("insert:subagent-settled") == 2
    assert not log_marks({"type": "subagent/catalog", "data": {}})


def test_the_gate_answers_a_call_once_the_live_log_reached_the_recorded_position(
    tmp_path: Path,
) -> None:
    main, _, _ = logs = two_workers()
    live = FakeLive(3)
    gate = LogOrderGate(plan_of(tmp_path, logs), ["m", "a", "b"], live, timeout=30)
    assert gate.active
    turn_3 = index(main, "turn/start", turn=3)
    with deadline(60):
        live.write(MAIN, main.events[:turn_3])  # turn 3 not started yet
        held = waiting(gate, live, B, 0)
        assert held.is_alive()  # it looked, and waits
        live.write(MAIN, main.events[: turn_3 + 1])
        gate.changed()
        held.join()
    assert held.outcome == {"cancelled": False}  # type: ignore[attr-defined]
    assert gate.wait(A, 0) is False  # turn 2 ended long ago
    assert gate.wait(MAIN, 0) is False  # a call nothing is planned for


def test_the_primarys_step_waits_until_the_notice_is_in_its_live_log(tmp_path: Path) -> None:
    main, _, _ = logs = two_workers()
    live = FakeLive(3)
    gate = LogOrderGate(plan_of(tmp_path, logs), ["m", "a", "b"], live, timeout=30)
    second_notice = notice(main, "worker-b")
    with deadline(60):
        live.write(MAIN, main.events[:second_notice])  # step 1 asked, b's notice not in
        held = waiting(gate, live, MAIN, 3)
        assert held.is_alive()
        live.write(MAIN, main.events[: second_notice + 1])
        gate.changed()
        held.join()
    assert held.outcome == {"cancelled": False}  # type: ignore[attr-defined]


def test_a_position_never_reached_fails_naming_the_session_its_log_and_the_event(
    tmp_path: Path,
) -> None:
    main, _, _ = logs = two_workers()
    live = FakeLive(3)
    live.write(MAIN, main.events[:5])
    gate = LogOrderGate(plan_of(tmp_path, logs), ["session.jsonl", "a", "b"], live, timeout=0.05)
    with pytest.raises(ReplayOrderError) as caught:
        gate.wait(B, 0)
    message = str(caught.value)
    turn_3 = index(main, "turn/start", turn=3)
    assert "the live log of session.jsonl (<fake live log 0>)" in message
    assert f"after event #{turn_3} turn/start (turn 3)" in message
    assert "turn/start 1 of 3" in message  # what the live log lacks
    assert "waited 0.05 s" in message
    assert gate.wait(B, 0, cancelled=lambda: True) is True


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_the_replay_model_holds_calls_on_the_live_logs(tmp_path: Path) -> None:
    main, _, _ = logs = two_workers()
    model = ReplayModel(scenario(tmp_path, logs))
    live = FakeLive(3, short=True)
    assert model.keep_recorded_order(timeout=30, live=live) is True
    done: dict[str, threading.Event] = {"b": threading.Event(), "main": threading.Event()}

    def worker_b() -> None:
        list(model.stream(ask("TASK b"), session_id="b", parent_session_id="sess-main"))
        done["b"].set()

    def primary_step() -> None:
        list(model.stream(ask("x"), session_id="sess-main"))
        done["main"].set()

    turn_3 = index(main, "turn/start", turn=3)
    second_notice = notice(main, "worker-b")
    with deadline(60):
        for _ in range(3):  # turns 1 and 2: nothing waits
            list(model.stream(ask("x"), session_id="sess-main"))
        live.write(MAIN, main.events[: index(main, "turn/end", turn=2) + 1])
        list(model.stream(ask("TASK a"), session_id="a", parent_session_id="sess-main"))
        live.looked.clear()
        held = threading.Thread(target=worker_b)
        held.start()
        assert live.looked.wait(30)
        assert not done["b"].is_set()  # b waits for turn 3 to start
        live.write(MAIN, main.events[: turn_3 + 1])
        held.join()
        assert done["b"].is_set()
        live.looked.clear()
        step = threading.Thread(target=primary_step)
        step.start()
        assert live.looked.wait(30)
        assert not done["main"].is_set()  # step 1 waits for b's notice
        live.write(MAIN, main.events[: second_notice + 1])
        step.join()
    list(model.stream(ask("x"), session_id="sess-main"))
    model.assert_consumed()


def test_async_calls_wait_on_the_live_logs_without_blocking_their_loop(tmp_path: Path) -> None:
    main, _, _ = logs = two_workers()
    model = ReplayModel(scenario(tmp_path, logs))
    live = FakeLive(3, short=True)
    model.keep_recorded_order(timeout=30, live=live)
    order: list[str] = []

    async def worker_b() -> None:
        stream = model.astream(ask("TASK b"), session_id="b", parent_session_id="sess-main")
        async for _ in stream:
            pass
        order.append("b")

    async def runtime() -> None:
        await asyncio.to_thread(live.looked.wait, 30)  # b is waiting
        order.append("turn 3")
        live.write(MAIN, main.events[: index(main, "turn/start", turn=3) + 1])

    async def both() -> None:
        await asyncio.gather(worker_b(), runtime())

    for _ in range(3):
        list(model.stream(ask("x"), session_id="sess-main"))
    live.write(MAIN, main.events[: index(main, "turn/end", turn=2) + 1])
    list(model.stream(ask("TASK a"), session_id="a", parent_session_id="sess-main"))
    live.looked.clear()
    with deadline(60):
        asyncio.run(both())
    assert order == ["turn 3", "b"]


def test_two_waits_that_would_hold_each_other_leave_one_message_a_named_race(
    tmp_path: Path,
) -> None:
    # Each session's tools sent the other a message while the other's call was already
    # answered: P's message reached X before X's step ended, X's reached P before P's
    # step ended. Holding both answers for the messages would make each wait for the
    # other; the later wait is left out and its message is a race.
    p, x = LogBuilder("p"), LogBuilder("x", parent="p")
    for log in (p, x):
        log.turn(1, end=False)
        log.add("step/start", {"turn": 1, "step": 1}, at=1_000_002)
    p.call(1, 1, "P ANSWERED")  # ends at 1_000_003
    x.splice("next-step", x.message("from p", kind="agent-message", sender="p"), at=1_000_004)
    x.call(1, 1, "X ANSWERED")  # ends at 1_000_005
    p.splice("next-step", p.message("from x", kind="agent-message", sender="x"), at=1_000_006)
    for log, text in ((p, "P AGAIN"), (x, "X AGAIN")):
        log.add("step/end", {"turn": 1, "step": 1}, at=1_000_007)
        log.take_in("next-step")
        log.step(1, 2, text)
        log.turn(1)
    plan = plan_of(tmp_path, [p, x])
    # P's first call waits for X's message; X's first call does not wait for P's.
    assert plan.waits[(0, 0)][-1].counts == (("insert:agent-message", 1),)
    assert all(w.counts != (("insert:agent-message", 1),) for w in plan.waits.get((1, 0), ()))
    (race,) = plan.races
    assert (race.script, race.event, race.sender) == (1, 2, 0)
    assert race.why.startswith("the agent-message message of session.jsonl reached session.1.jsonl")
    assert "would make calls wait for each other" in race.why
