"""Synthetic dsh runtime logs (format 4) of sessions that send each other messages.

The runtime's inbox, as ``tests/e2e`` recordings show it: a message to an idle session
is spliced with ``target: next-turn`` and opens a turn (``turn/start``, then a take-in:
``removedCount``); a message to a session running a turn is spliced ``next-step`` and
the end of the running step takes it in, so the turn goes on with another step. A
child's ``subagent-settled`` notice names the child as ``senderSessionId``.

:class:`LogBuilder` writes such logs event by event, with the runtime's envelope
(``seq``, ``time``) and calls whose stream a scenario loads, so tests can build the
shapes of the runtime's interleavings without the runtime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

_MODEL = {"kind": "model", "provider": "deepseek-official", "model": "deepseek-flash"}


class LogBuilder:
    """One session's log, written event by event on a millisecond clock of its own.

    Args:
        session_id: The session's id.
        parent: The parent's id (a child), or ``None`` (the primary).
        start: The clock's start, Unix ms.
    """

    def __init__(self, session_id: str, parent: str | None = None, start: int = 1_000_000):
        self.id = session_id
        self.header: dict[str, Any] = {
            "type": "session",
            "version": 4,
            "id": session_id,
            "createdAt": start,
            "cwd": "{{cwd}}",
            **({"parentSession": parent} if parent else {}),
            "isSeeded": False,
            **({"origin": "subagent"} if parent else {}),
            "delegationDepth": 1 if parent else 0,
        }
        self.events: list[dict[str, Any]] = []
        self.clock = start

    def add(self, kind: str, data: dict[str, Any], *, at: int | None = None) -> int:
        """Append one event (``at``: its time, else one ms after the last); its index."""
        self.clock = self.clock + 1 if at is None else at
        self.events.append(
            {"type": kind, "seq": len(self.events), "time": self.clock, "data": data}
        )
        return len(self.events) - 1

    def message(
        self, text: str, *, kind: str = "user", sender: str | None = None
    ) -> dict[str, Any]:
        source: dict[str, Any] = {"kind": kind}
        if sender is not None:
            source.update(form="notice", senderSessionId=sender)
        return {
            "content": [{"type": "text", "text": text}],
            "source": source,
            "role": "user",
            "id": f"msg-{self.id}-{len(self.events)}",
        }

    def splice(self, target: str, *messages: dict[str, Any], at: int | None = None) -> int:
        """Messages arriving in the inbox."""
        data = {"target": target, "start": 0, "inserted": list(messages)}
        return self.add("agent/inbox/spliced", data, at=at)

    def take_in(self, target: str, count: int = 1) -> int:
        """The session takes ``count`` waiting messages in."""
        data = {"target": target, "start": 0, "removedCount": count, "inserted": []}
        return self.add("agent/inbox/spliced", data)

    def settled(self, sender: str) -> dict[str, Any]:
        """A child's ``subagent-settled`` notice."""
        text = f"Background subagent {sender} finished."
        return self.message(text, kind="subagent-settled", sender=sender)

    def notice(self, sender: str, target: str, *, at: int | None = None) -> int:
        """A child's ``subagent-settled`` notice arriving."""
        return self.splice(target, self.settled(sender), at=at)

    def call(self, turn: int, step: int, text: str) -> int:
        """One settled model call answering ``text``."""
        t = self.clock + 1
        stream = [
            {
                "type": "chunk",
                "time": t,
                "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
            },
            {"type": "text-chunks", "time0": t, "index": 0, "dt": [], "texts": [text]},
            {
                "type": "chunk",
                "time": t,
                "chunk": {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
            },
            {"type": "chunk", "time": t, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
        ]
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "source": _MODEL,
            "id": f"answer-{self.id}-{len(self.events)}",
        }
        return self.add(
            "assistant/message", {"turn": turn, "step": step, "message": message, "stream": stream}
        )

    def step(self, turn: int, step: int, text: str, *users: str | dict[str, Any]) -> int:
        """A whole step: its start, the messages it shows, one call, its end; the call's index.

        ``users``: the user's texts, or messages (as :meth:`settled` makes them).
        """
        self.add("step/start", {"turn": turn, "step": step})
        for user in users:
            self.add("user/message", self.message(user) if isinstance(user, str) else user)
        index = self.call(turn, step, text)
        self.add("step/end", {"turn": turn, "step": step})
        return index

    def announce(self, turn: int, step: int, call_id: str, child: str) -> int:
        """The tool result of a ``subagent`` call that started ``child``."""
        message = {
            "role": "tool",
            "source": {"kind": "tool", "callId": call_id},
            "toolCallId": call_id,
            "content": [{"type": "text", "text": f"started subagent {child}"}],
            "isError": False,
            "id": f"result-{call_id}",
        }
        return self.add("tool/result", {"turn": turn, "step": step, "message": message})

    def turn(self, turn: int, *, end: bool = True) -> int:
        """``turn/end`` of ``turn`` (``end``), else its ``turn/start``."""
        if end:
            return self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        return self.add("turn/start", {"turn": turn})

    def text(self, upto: int | None = None) -> bytes:
        """The log as the runtime writes it (header, one event per line), up to ``upto``."""
        lines = [self.header, *self.events[:upto]]
        return b"".join(orjson.dumps(line) + b"\n" for line in lines)

    def write(self, path: Path, upto: int | None = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.text(upto))
        return path


def two_workers(*, together: bool = False, late: bool = False) -> list[LogBuilder]:
    """A primary whose two spawned workers finish close together (issue 40's shape).

    Turn 2 starts ``worker-a`` and ``worker-b`` (tool calls ``call_a``, ``call_b``);
    each worker answers once. Worker a's notice opens the primary's turn 3; worker b's
    arrives while turn 3 runs (``next-step``), before the step's answer, and the end of
    step 1 takes it into step 2.

    Args:
        together: Both notices arrive while the primary is idle and open turn 3
            together (one take-in of two): the race no gate decides.
        late: Worker b's notice arrives after step 1 ended, before the take-in (no
            call of the primary between): the other race.

    Returns:
        The primary, worker a, worker b.
    """
    main = LogBuilder("sess-main")
    a = LogBuilder("worker-a", parent="sess-main", start=1_000_100)
    b = LogBuilder("worker-b", parent="sess-main", start=1_000_100)
    for turn, text in ((1, "WARMUP"), (2, "MAIN_TASK")):
        main.splice("next-turn", main.message(text))
        main.turn(turn, end=False)
        main.take_in("next-turn")
        main.step(turn, 1, "OK" if turn == 1 else "DELEGATING", text)
        if turn == 2:
            main.announce(2, 1, "call_a", "worker-a")
            main.announce(2, 1, "call_b", "worker-b")
            main.step(2, 2, "DELEGATED")
        main.turn(turn)
    for worker, text in ((a, "TASK a"), (b, "TASK b")):
        worker.clock = main.clock + 10
        worker.splice("next-turn", worker.message(text))
        worker.turn(1, end=False)
        worker.take_in("next-turn")
        worker.step(1, 1, f"DONE {worker.id}", text)
        worker.turn(1)
    main.clock = max(a.clock, b.clock) + 20
    main.notice("worker-a", "next-turn")
    if together:
        main.notice("worker-b", "next-turn")
        main.turn(3, end=False)
        main.take_in("next-turn", 2)
        main.step(3, 1, "NOTED BOTH", main.settled("worker-a"), main.settled("worker-b"))
        main.turn(3)
        return [main, a, b]
    main.turn(3, end=False)
    main.take_in("next-turn")
    if not late:
        main.notice("worker-b", "next-step")
    main.step(3, 1, "NOTED a", main.settled("worker-a"))
    if late:
        main.notice("worker-b", "next-step")
    main.take_in("next-step")
    main.step(3, 2, "NOTED b", main.settled("worker-b"))
    main.turn(3)
    return [main, a, b]


def write_scenario_dir(directory: Path, logs: list[LogBuilder]) -> Path:
    """The logs as a scenario directory: the primary, then the children in order."""
    for k, log in enumerate(logs):
        log.write(directory / ("session.jsonl" if k == 0 else f"session.{k}.jsonl"))
    return directory
