"""The recorded order of model calls across sessions, kept while concurrent agents replay.

A recording of concurrent sessions (a parent and its children running at once) holds
more than each session's calls: it holds how they interleaved. An agent reacts to that
interleaving: a child that finishes while its parent's call is in flight is noticed in
that turn's next step, one that finishes later starts another turn. Served as fast as
possible, a replay interleaves differently and the agent takes another path.

`OrderGate` keeps the recorded interleaving. Every recorded call has two points
on the recording's clock: its **start** (the runtime's ``delivery-accepted`` receipt of
the call, else its first streamed chunk, else the call's event) and its **end** (the
settled ``assistant/message`` or ``assistant/attempt``). Replaying, a call's start is
reached when the call arrives, its end when its last chunk has been served. A call is
served only when every point of *other* sessions that the recording shows before its
end has been reached, and not before the recorded time between the latest of them and
its end has passed (capped by ``max_gap``), so what took the agent a moment to react to
in the recording gets that moment again. Calls of one session follow each other anyway.

Which of two children whose last calls end close together the dsh runtime notices first
is a race inside the runtime (its ``subagent-settled`` notice follows a child's last call
by some 20 to 60 ms): the parent's log holds the order the notices reached it, and that
order can differ from the order of the calls' ends. So the children's settling calls
are served in notice order instead, each ``max_gap`` after the one before it (unless that
would make two calls wait for each other).

Times come from logs of formats 2 to 5 (the dsh runtime's, in milliseconds); a session
whose log has no such times takes no part. The estimates of a start are never earlier
than the real one, so a call never waits for something that can only happen after it.

Times order calls; they cannot order what the runtime does between calls. Where the
runtime's live logs can be read while it runs (it writes them as it goes),
`LogOrderGate` keeps the recorded interleaving exactly instead: a message one
session sends another (a child's ``subagent-settled`` notice) lands in the receiver's
inbox, and the receiver's next step boundary takes it in (``next-step``: at the end of
the running step; ``next-turn``: an idle session opens a turn). `inbox_plan` reads
from the recording, per such message, the window of the receiver's log it landed in and
makes two waits of it: the sender's call before the message is answered only once the
receiver's live log has reached the window's start (so the message cannot land
earlier), and the receiver's call that ends the window's step is answered only once the
message is in its live log (so it cannot land later). Windows no call closes (two
messages that opened one turn together) are races inside the runtime; the plan names
them (`InboxRace`), see [docs/limits.md#runtime-races](../limits.md#runtime-races).
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias

from .._errors import DshReplayError, ReplayOrderError
from .._format.events import Event
from .._format.jsonl import read_session_log
from .._format.stream_records import STREAM_EVENTS
from .._scripts.builder import SUMMARY_EVENTS
from .._scripts.scenario import SessionScript

if TYPE_CHECKING:
    from .._format.events import StreamChunk
    from .call import ReplayCall

__all__ = [
    "CallTimes",
    "InboxPlan",
    "InboxRace",
    "LiveLogs",
    "LogOrderGate",
    "LogWait",
    "OrderGate",
    "call_times",
    "inbox_plan",
    "log_marks",
    "scenario_plan",
    "settled_order",
]

_ACCEPTED: Final = "session-log-deepseek/delivery-accepted"
_SPLICED: Final = "agent/inbox/spliced"
_SETTLED: Final = "subagent-settled"
_POLL_S: Final = 0.01


@dataclass(frozen=True, slots=True)
class CallTimes:
    """When one recorded call started and ended, in the recording's Unix milliseconds."""

    start: int
    end: int


def _time(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_call(event: Event) -> bool:
    kind = event.get("type")
    data = event.get("data")
    if not isinstance(data, dict):
        return False
    if kind in STREAM_EVENTS:
        stream = data.get("stream")
        return isinstance(stream, list) and (bool(stream) or kind == "assistant/attempt")
    return kind in SUMMARY_EVENTS and data.get("llmStreamCall") is True


def _start(events: Sequence[Event], index: int, end: int) -> int:
    """A call's start: its delivery receipt, else its first chunk's time, else its end."""
    if index > 0 and events[index - 1].get("type") == _ACCEPTED:
        found = _time(events[index - 1].get("time"))
        if found is not None:
            return min(found, end)
    stream = events[index]["data"].get("stream")
    if isinstance(stream, list) and stream and isinstance(stream[0], dict):
        first = stream[0]
        found = _time(first.get("time", first.get("time0")))
        if found is not None:
            return min(found, end)
    return end


def _whole_events(script: SessionScript) -> list[Event] | None:
    """A session's whole log (a fork child's seed included), or ``None`` without times."""
    if script.path is None or not script.header.spec.whole_events or not script.path.is_file():
        return None
    try:
        _, events = read_session_log(script.path)
    except DshReplayError:
        return None
    return list(events)


def _own_events(script: SessionScript) -> list[Event] | None:
    """A session's own events (after a fork child's seed), or ``None`` without times."""
    events = _whole_events(script)
    return None if events is None else events[0 if script.primary else script.seed_length :]


def call_times(script: SessionScript) -> list[CallTimes] | None:
    """The start and end of each of a recorded session's own calls, in call order.

    Args:
        script: A session of a loaded scenario (its log is read again).

    Returns:
        One `CallTimes` per entry of ``script``, or ``None`` when they cannot be
        known: the log is not of format 2 to 5, is not a file, or its calls do not line
        up with the script's entries (an override sidecar changed them).
    """
    return _call_times(script, _own_events(script))


def _call_times(script: SessionScript, events: list[Event] | None) -> list[CallTimes] | None:
    """`call_times` from the session's own events (read once by the caller)."""
    if events is None:
        return None
    times: list[CallTimes] = []
    for index, event in enumerate(events):
        if not _is_call(event):
            continue
        end = _time(event.get("time"))
        if end is None:
            return None
        times.append(CallTimes(_start(events, index, end), end))
    return times if len(times) == len(script.entries) else None


def settled_order(
    scripts: Sequence[SessionScript], times: Sequence[Sequence[CallTimes] | None]
) -> list[list[tuple[int, int]]]:
    """Per parent, the children's settling calls in the order their notices reached it.

    The dsh runtime tells a parent that a child finished with a ``subagent-settled``
    notice (an ``agent/inbox/spliced`` insertion naming the child's ``senderSessionId``).
    Which of two children finishing close together is noticed first is a race inside
    the runtime (the notice follows the child's last call by some 20 to 60 ms), so the
    recording's order of the notices, not of the calls' ends, is what a replay must
    reproduce.

    Returns:
        Per parent with two or more timed notices, ``(child script, call)`` pairs in
        notice order: the call is the child's last one that ended before its notice.
    """
    return _settled_order(scripts, times, [_own_events(s) for s in scripts])


def _settled_order(
    scripts: Sequence[SessionScript],
    times: Sequence[Sequence[CallTimes] | None],
    own_events: Sequence[list[Event] | None],
) -> list[list[tuple[int, int]]]:
    """`settled_order` from each session's own events (read once by the caller)."""
    index = {script.recorded_id: i for i, script in enumerate(scripts) if script.recorded_id}
    groups: list[list[tuple[int, int]]] = []
    for own, events_of in zip(times, own_events, strict=True):
        events = events_of if own is not None else None
        group: list[tuple[int, int]] = []
        for event in events or ():
            data = event.get("data")
            at = _time(event.get("time"))
            if event.get("type") != _SPLICED or not isinstance(data, dict) or at is None:
                continue
            inserted = data.get("inserted")
            for message in inserted if isinstance(inserted, list) else ():
                source = message.get("source") if isinstance(message, dict) else None
                if not isinstance(source, dict) or source.get("kind") != _SETTLED:
                    continue
                child = index.get(str(source.get("senderSessionId")))
                calls = times[child] if child is not None else None
                ended = [k for k, t in enumerate(calls or ()) if t.end <= at]
                if child is not None and ended and (child, ended[-1]) not in group:
                    group.append((child, ended[-1]))
        if len(group) > 1:
            groups.append(group)
    return groups


_Point = tuple[int, int, bool]  # (script index, call index, is the end)
_Missing: TypeAlias = "_Point | LogWait"  # what a waiting call still waits for


class OrderGate:
    """Holds replayed calls until the recorded calls of other sessions before them happened.

    Thread-safe; async callers wait without blocking their loop.

    Args:
        times: Per recorded session (in scenario order), its calls' times, or ``None``
            for a session that takes no part.
        files: Per recorded session, its log's name (for messages).
        timeout: The longest a call waits, in seconds.
        max_gap: The longest recorded pause kept before a call, in seconds; also the
            time between two children's settling calls (see ``settled``).
        settled: Per parent, children's settling calls ``(script, call)`` in the order
            their notices reached it (`settled_order`): each is served only
            ``max_gap`` s after the one before it, whatever order their ends show.
    """

    def __init__(
        self,
        times: Sequence[Sequence[CallTimes] | None],
        files: Sequence[str],
        *,
        timeout: float,
        max_gap: float,
        settled: Sequence[Sequence[tuple[int, int]]] = (),
    ):
        self._files = list(files)
        self._timeout = timeout
        points: list[tuple[int, _Point]] = []
        for i, calls in enumerate(times):
            for k, t in enumerate(calls or ()):
                points += [(t.start, (i, k, False)), (t.end, (i, k, True))]
        points.sort()
        # Per call: the other sessions' points recorded strictly before its end, with the
        # pause (seconds) the recording shows between each of them and that end.
        self._before: dict[tuple[int, int], list[tuple[_Point, float]]] = {}
        for i, calls in enumerate(times):
            for k, t in enumerate(calls or ()):
                self._before[(i, k)] = [
                    (point, min((t.end - at) / 1000, max_gap))
                    for at, point in points
                    if at < t.end and point[0] != i
                ]
        self._noticed: set[tuple[tuple[int, int], tuple[int, int]]] = set()
        for group in settled:
            for first, then in pairwise(group):
                self._settle_after(first, then, max_gap)
        self._reached: dict[_Point, float] = {}
        self._poll_s = 0.05  # the longest a waiting call sleeps before it looks again
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def _settle_after(self, first: tuple[int, int], then: tuple[int, int], gap: float) -> None:
        """Serve call ``then`` ``gap`` s after call ``first`` (two children's settling calls).

        The end of ``first`` goes into the points ``then`` waits for, and what ``first``
        waited for of ``then``'s session from ``then`` on goes, unless that would make
        two calls wait for each other (then the recorded order of their ends stays).
        """
        if first not in self._before or then not in self._before or first[0] == then[0]:
            return
        (i, k), (j, m) = first, then
        kept = self._before[first], self._before[then]
        self._before[first] = [
            (point, pause)
            for point, pause in kept[0]
            if point[0] != j or point[1] < m or (point[1] == m and not point[2])
        ]
        self._before[then] = [*(e for e in kept[1] if e[0] != (i, k, True)), ((i, k, True), gap)]
        if self._acyclic():
            self._noticed.add((then, first))
        else:
            self._before[first], self._before[then] = kept

    def _acyclic(self) -> bool:
        """Whether no call waits, through the points it awaits, for itself."""
        after: dict[tuple[int, int], set[tuple[int, int]]] = {}
        for (i, k), points in self._before.items():
            needs = {(i, k - 1)} if k else set()
            for (j, m, end), _ in points:
                if end:
                    needs.add((j, m))
                elif m:
                    needs.add((j, m - 1))  # a session's call arrives after its previous one
            after[(i, k)] = needs & self._before.keys()
        done: set[tuple[int, int]] = set()
        for root in after:
            path: set[tuple[int, int]] = set()
            stack: list[tuple[tuple[int, int], Iterator[tuple[int, int]]]] = []
            if root in done:
                continue
            path.add(root)
            stack.append((root, iter(after[root])))
            while stack:
                node, rest = stack[-1]
                nxt = next(rest, None)
                if nxt is None:
                    stack.pop()
                    path.discard(node)
                    done.add(node)
                elif nxt in path:
                    return False
                elif nxt not in done:
                    path.add(nxt)
                    stack.append((nxt, iter(after[nxt])))
        return True

    @classmethod
    def of(cls, scripts: Sequence[SessionScript], *, timeout: float, max_gap: float) -> OrderGate:
        """The gate of a scenario's scripts, their times read from their logs.

        Raises:
            ValueError: ``timeout`` is not > 0 or ``max_gap`` is negative.
        """
        if not timeout > 0 or not max_gap >= 0:
            raise ValueError(
                f"keep_recorded_order(timeout > 0, max_gap >= 0), got {timeout!r}, {max_gap!r}"
            )
        own = [_own_events(script) for script in scripts]  # each log read once
        times = [_call_times(script, events) for script, events in zip(scripts, own, strict=True)]
        return cls(
            times,
            [script.file for script in scripts],
            timeout=timeout,
            max_gap=max_gap,
            settled=_settled_order(scripts, times, own),
        )

    @property
    def active(self) -> bool:
        """Whether any call has to wait for another session's (two or more sessions timed)."""
        return any(self._before.values())

    def arrived(self, script: int, call: int) -> None:
        """A call arrived: its recorded start is reached."""
        self._reach((script, call, False))

    def served(self, script: int, call: int) -> None:
        """A call's last chunk was served (or the call ended otherwise): its end is reached."""
        self._reach((script, call, True))

    def _reach(self, point: _Point) -> None:
        with self._changed:
            self._reached.setdefault(point, time.monotonic())
            self._changed.notify_all()

    def _ready_at(self, script: int, call: int) -> tuple[float | None, _Missing | None]:
        """When the call may go (monotonic seconds), or ``None`` and the point it awaits."""
        ready = 0.0
        for point, pause in self._before.get((script, call), ()):
            at = self._reached.get(point)
            if at is None:
                return None, point
            ready = max(ready, at + pause)
        return ready, None

    def _failure(self, call: tuple[int, int], point: _Missing) -> ReplayOrderError:
        assert isinstance(point, tuple)
        i, k, end = point
        shows = (
            f"the recording shows the notice that call #{k + 1} of {self._files[i]} "
            "settled reaching the parent before the one this call settles, so that call "
            "ends first"
            if (call, (i, k)) in self._noticed
            else f"the recording shows call #{k + 1} of {self._files[i]} "
            f"{'ending' if end else 'starting'} before this call ends"
        )
        return ReplayOrderError(
            f"waited {self._timeout:g} s for the recorded order of calls across sessions: "
            f"{shows}, and in this run it has not. The agent did not reach the recorded "
            "order (it made other calls or fewer); re-record with --dsh-record if its "
            "behaviour changed"
        )

    def wait(self, script: int, call: int, cancelled: Callable[[], bool] = lambda: False) -> bool:
        """Block until the call may be served.

        Args:
            script: The recorded session's index in the scenario.
            call: The call's index in that session.
            cancelled: Asked while waiting; ``True`` ends the wait.

        Returns:
            ``False`` when the call may be served, ``True`` when it was cancelled.

        Raises:
            ReplayOrderError: The recorded points before it did not all happen within
                the timeout.
        """
        deadline = time.monotonic() + self._timeout
        while True:
            self._refresh()
            with self._changed:
                if cancelled():
                    return True
                step = self._step(script, call, deadline)
                if step is None:
                    return False
                self._changed.wait(step)

    def _step(self, script: int, call: int, deadline: float) -> float | None:
        """How long to wait before looking again; ``None``: the call may go (lock held).

        Raises:
            ReplayOrderError: The deadline passed with a recorded point still missing.
        """
        ready, missing = self._ready_at(script, call)
        now = time.monotonic()
        if ready is not None and now >= ready:
            return None
        if now >= deadline:
            if missing is not None:
                raise self._failure((script, call), missing)
            return None  # only a pause was left: it ends at the deadline anyway
        step = deadline - now if ready is None else min(ready, deadline) - now
        return min(step, self._poll_s)

    def _refresh(self) -> None:
        """Look at what changed outside the process (nothing here; see LogOrderGate)."""

    async def await_ready(
        self, script: int, call: int, cancelled: Callable[[], bool] = lambda: False
    ) -> bool:
        """`wait` for async callers: the event loop keeps running meanwhile."""
        import asyncio  # only async callers pay for it

        deadline = time.monotonic() + self._timeout
        while True:
            if cancelled():
                return True
            self._refresh()
            with self._lock:
                step = self._step(script, call, deadline)
            if step is None:
                return False
            await asyncio.sleep(min(_POLL_S, step))

    def ordered(
        self,
        call: ReplayCall,
        chunks: Iterator[StreamChunk],
    ) -> Iterator[StreamChunk]:
        """A call's chunks, released when the recorded order lets it go.

        Args:
            call: The call (its ``order`` is set).
            chunks: Its chunks, not started yet.
        """
        order = call.order
        assert order is not None
        try:
            try:
                stopped = self.wait(*order, call.cancelled)
            except ReplayOrderError as error:
                raise ReplayOrderError(f"{call.describe()} {error}") from None
            if stopped:
                raise call.cancelled_error(" while it waited for the recorded order")
            yield from chunks
        finally:
            self.served(*order)

    async def aordered(
        self,
        call: ReplayCall,
        chunks: AsyncIterator[StreamChunk],
    ) -> AsyncIterator[StreamChunk]:
        """`ordered` for async callers."""
        order = call.order
        assert order is not None
        try:
            try:
                stopped = await self.await_ready(*order, call.cancelled)
            except ReplayOrderError as error:
                raise ReplayOrderError(f"{call.describe()} {error}") from None
            if stopped:
                raise call.cancelled_error(" while it waited for the recorded order")
            async for chunk in chunks:
                yield chunk
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
            self.served(*order)


# --- the recorded interleaving, kept on the runtime's live logs -------------------------------

_TURN_MARKS: Final = frozenset({"turn/start", "turn/end", "step/start", "step/end"})
_NEXT_STEP: Final = "next-step"
_NEXT_TURN: Final = "next-turn"
_INSERT: Final = "insert:"
_CALL: Final = "call"


def log_marks(event: Event) -> list[str]:
    """The milestones one event counts for in a session's position (see `LogWait`).

    ``turn/start``, ``turn/end``, ``step/start``, ``step/end``; ``call`` for a model call
    (a settled ``assistant/message`` or an ``assistant/attempt``); ``insert:<source kind>``
    once per message an ``agent/inbox/spliced`` event inserts (``insert:subagent-settled``
    for a child's notice). Other events (catalogs, titles, receipts) count for nothing:
    their order varies between runs.
    """
    kind = event.get("type")
    if kind in _TURN_MARKS:
        return [str(kind)]
    if _is_call(event):
        return [_CALL]
    if kind != _SPLICED:
        return []
    data = event.get("data")
    inserted = data.get("inserted") if isinstance(data, dict) else None
    return [_INSERT + _source_kind(m) for m in inserted] if isinstance(inserted, list) else []


def _source_kind(message: object) -> str:
    source = message.get("source") if isinstance(message, dict) else None
    kind = source.get("kind") if isinstance(source, dict) else None
    return kind if isinstance(kind, str) else "?"


def _counts(events: Sequence[Event], end: int) -> dict[str, int]:
    """How often each milestone occurs in ``events[:end]``."""
    counts: dict[str, int] = {}
    for event in events[:end]:
        for mark in log_marks(event):
            counts[mark] = counts.get(mark, 0) + 1
    return counts


@dataclass(frozen=True, slots=True)
class LogWait:
    """A position a session's live log must reach before a call is answered.

    Attributes:
        script: The recorded session (its index in the scenario) whose live log is read.
        counts: ``(milestone, least count)`` pairs (`log_marks`): the live log has
            reached the position when it holds at least that many of each.
        event: The index, in that session's recorded log, of the event the position
            stands for.
        what: That event, for messages (``"turn/end (turn 2)"``, ``"the subagent-settled
            notice of session.2.jsonl"``).
        needs: The recorded calls ``(script, call)`` that must have been answered for
            the position to be reachable (used to keep the waits free of cycles).
    """

    script: int
    counts: tuple[tuple[str, int], ...]
    event: int
    what: str
    needs: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class InboxRace:
    """A message between sessions whose place in the receiver's turns no gate decides.

    Attributes:
        script: The receiving session's index in the scenario.
        event: The index of the ``agent/inbox/spliced`` event in its recorded log.
        sender: The sending session's index.
        why: What the recording shows, for messages.
    """

    script: int
    event: int
    sender: int
    why: str


@dataclass(frozen=True, slots=True)
class InboxPlan:
    """What each recorded call waits for on the live logs, and the races left.

    Attributes:
        waits: ``(script, call)`` -> the positions it waits for.
        races: The messages whose place no wait decides, in scenario order.
    """

    waits: Mapping[tuple[int, int], tuple[LogWait, ...]]
    races: tuple[InboxRace, ...]


def _call_indices(script: SessionScript, events: Sequence[Event]) -> list[int] | None:
    """The log indices of a session's own calls.

    ``None`` when they do not line up with its entries (an override sidecar changed them).
    """
    start = 0 if script.primary else script.seed_length
    found = [i for i in range(start, len(events)) if _is_call(events[i])]
    return found if len(found) == len(script.entries) else None


def _describe(events: Sequence[Event], index: int) -> str:
    event = events[index]
    kind = str(event.get("type"))
    data = event.get("data")
    turn = data.get("turn") if isinstance(data, dict) else None
    step = data.get("step") if isinstance(data, dict) else None
    where = "" if turn is None else f" (turn {turn}" + ("" if step is None else f" step {step}")
    return f"event #{index} {kind}{where}{')' if where else ''}"


class _Plan:
    """The work of `inbox_plan`: the scenario's logs, read once."""

    def __init__(self, scripts: Sequence[SessionScript], logs: Sequence[Sequence[Event] | None]):
        self.scripts = scripts
        self.logs = logs
        self.calls = [
            None if log is None else _call_indices(script, log)
            for script, log in zip(scripts, logs, strict=True)
        ]
        self.index = {s.recorded_id: i for i, s in enumerate(scripts) if s.recorded_id}
        self.waits: dict[tuple[int, int], list[LogWait]] = {}
        self.races: list[InboxRace] = []
        self.later: list[tuple[tuple[int, int], LogWait, InboxRace]] = []

    def sender_call(self, sender: int, at: int) -> tuple[int, int] | None:
        """The sender's last call that ended at or before ``at`` (ms), if any."""
        log, calls = self.logs[sender], self.calls[sender]
        if log is None or calls is None:
            return None
        ends = [_time(log[i].get("time")) for i in calls]
        ended = [k for k, end in enumerate(ends) if end is not None and end <= at]
        return (sender, ended[-1]) if ended else None

    def senders(self, script: int, end: int, kind: str | None = None) -> list[tuple[int, int]]:
        """The sender calls of the session messages in ``logs[script][:end]``."""
        log = self.logs[script]
        found: list[tuple[int, int]] = []
        for event in log[:end] if log is not None else ():
            for sender, message in self.messages(event):
                call = self.sender_call(sender, _time(event.get("time")) or 0)
                if call is not None and (kind is None or _source_kind(message) == kind):
                    found.append(call)
        return found

    def messages(self, event: Event) -> list[tuple[int, dict[str, object]]]:
        """The messages an ``agent/inbox/spliced`` event inserts that a recorded session sent."""
        data = event.get("data")
        if event.get("type") != _SPLICED or not isinstance(data, dict):
            return []
        inserted = data.get("inserted")
        found = []
        for message in inserted if isinstance(inserted, list) else ():
            source = message.get("source") if isinstance(message, dict) else None
            sender = (
                self.index.get(str(source.get("senderSessionId")))
                if isinstance(source, dict)
                else None
            )
            if sender is not None:
                found.append((sender, message))
        return found

    def position(self, script: int, last: int) -> LogWait:
        """The position just after event ``last`` of a session (-1: its start)."""
        log = self.logs[script]
        assert log is not None
        calls = self.calls[script] or []
        needs = [(script, k) for k, i in enumerate(calls) if i <= last]
        return LogWait(
            script,
            tuple(sorted(_counts(log, last + 1).items())),
            last,
            "its start" if last < 0 else _describe(log, last),
            (*needs, *self.senders(script, last + 1)),
        )

    def receive(self, script: int, n: int) -> None:
        """Plan the waits of the messages that event ``n`` of session ``script`` inserts."""
        log = self.logs[script]
        assert log is not None
        messages = self.messages(log[n])
        if not messages:
            return
        target = log[n]["data"].get("target")  # messages() found a data object
        for sender, message in messages:
            call = self.sender_call(sender, _time(log[n].get("time")) or 0)
            if call is None:
                continue
            what = f"the {_source_kind(message)} message of {self.scripts[sender].file}"
            if target == _NEXT_TURN:
                self.next_turn(script, n, call, what)
            elif target == _NEXT_STEP:
                self.next_step(script, n, call, message, what)

    def next_turn(self, script: int, n: int, call: tuple[int, int], what: str) -> None:
        """A message to an idle session: it opens a turn, unless another one just did."""
        log = self.logs[script]
        assert log is not None
        ended = [i for i in range(n) if log[i].get("type") == "turn/end"]
        last = ended[-1] if ended else -1
        self.waits.setdefault(call, []).append(self.position(script, last))
        earlier = [i for i in range(last + 1, n) if self.messages(log[i])]
        if earlier:
            self.races.append(
                InboxRace(
                    script,
                    n,
                    call[0],
                    f"{what} reached {self.scripts[script].file} (event #{n}) while it was "
                    f"idle, after {_describe(log, earlier[0])} had inserted another message "
                    "that opened the turn: both opened one turn together, and which message "
                    "of two arriving that close the runtime takes into the turn it opens is "
                    "a race inside the runtime",
                )
            )

    def next_step(
        self, script: int, n: int, call: tuple[int, int], message: dict[str, object], what: str
    ) -> None:
        """A message to a running session: the next step end's take-in takes it in.

        The runtime looks at its inbox when a step ends: a message that arrived by then,
        even just after the ``step/end`` event, is taken in and the turn goes on with a
        step that shows it. So the message's window runs from the previous look (the
        turn's start, an earlier step end, an earlier take-in) to the look that took it
        in, and the session's last call before that look closes it.
        """
        log = self.logs[script]
        assert log is not None
        drains = [i for i in range(n + 1, len(log)) if self._drain(log[i]) == _NEXT_STEP]
        taken = drains[0] if drains else len(log)
        looked = max((i for i in range(taken) if log[i].get("type") == "step/end"), default=-1)
        bounds = [i for i in range(n) if self._opens_window(log[i]) and i != looked]
        last = bounds[-1] if bounds else -1
        self.waits.setdefault(call, []).append(self.position(script, last))
        closing = [k for k, i in enumerate(self.calls[script] or ()) if last < i < taken]
        reached = f"{what} reached {self.scripts[script].file} (event #{n})"
        if not drains or not closing:
            opened = _describe(log, last) if last >= 0 else "its start"
            self.races.append(
                InboxRace(
                    script,
                    n,
                    call[0],
                    f"{reached} after {opened}, and no model call of that session ends "
                    "between that and the step end that took it in: when the runtime ends "
                    "that step is its own",
                )
            )
            return
        kind = _INSERT + _source_kind(message)
        wait = LogWait(
            script,
            ((kind, _counts(log, n + 1).get(kind, 0)),),
            n,
            what,
            tuple(self.senders(script, n + 1, _source_kind(message))),
        )
        k = closing[-1]
        cycle = InboxRace(
            script,
            n,
            call[0],
            f"{reached} before the end of the step of its call #{k + 1}, but holding that "
            "call until it arrives would make calls wait for each other (messages that "
            "crossed): when it lands is the runtime's own",
        )
        self.later.append(((script, k), wait, cycle))

    @staticmethod
    def _drain(event: Event) -> str | None:
        """The target an ``agent/inbox/spliced`` event takes messages out for, if it does."""
        data = event.get("data")
        if event.get("type") != _SPLICED or not isinstance(data, dict):
            return None
        removed = data.get("removedCount")
        target = data.get("target")
        return str(target) if isinstance(removed, int) and removed > 0 else None

    def _opens_window(self, event: Event) -> bool:
        """Whether messages arriving after this event wait for a later step end.

        So they do once the running session's turn started, a step ended, or it took in
        earlier messages.
        """
        return event.get("type") in ("turn/start", "step/end") or self._drain(event) == _NEXT_STEP

    def acyclic(self) -> bool:
        """Whether no call waits, through the calls its positions need, for itself."""
        after: dict[tuple[int, int], set[tuple[int, int]]] = {}
        for i, calls in enumerate(self.calls):
            for k in range(len(calls or ())):
                after[(i, k)] = {(i, k - 1)} if k else set()
        for call, waits in self.waits.items():
            for wait in waits:
                after.setdefault(call, set()).update(n for n in wait.needs if n != call)
        state: dict[tuple[int, int], int] = {}  # 1: on the path, 2: done
        for root in after:
            stack = [(root, iter(after[root]))]
            if state.get(root):
                continue
            state[root] = 1
            while stack:
                node, rest = stack[-1]
                nxt = next(rest, None)
                if nxt is None:
                    stack.pop()
                    state[node] = 2
                elif state.get(nxt) == 1:
                    return False
                elif not state.get(nxt):
                    state[nxt] = 1
                    stack.append((nxt, iter(after.get(nxt, ()))))
        return True


def inbox_plan(
    scripts: Sequence[SessionScript], logs: Sequence[Sequence[Event] | None]
) -> InboxPlan:
    """What each recorded call waits for so that the sessions' messages land as recorded.

    For each message a recorded session sent another (an ``agent/inbox/spliced``
    insertion whose ``source.senderSessionId`` is a session of the scenario, as a
    child's ``subagent-settled`` notice), in the receiver's log:

    - ``next-step`` (the receiver was running a turn; the end of its running step takes
      the message in): the sender's last call before it waits for the receiver's
      position after the event that opened the window (its turn's start, the last step
      end, or the last take-in), and the receiver's last call before the step end that
      took the message in waits until the message is in the receiver's log;
    - ``next-turn`` (the receiver was idle; the message opens a turn): the sender's call
      waits for the receiver's position after its last ``turn/end``. A message that
      joined a turn another message opened is a race (`InboxRace`).

    A wait that would make calls wait for each other in a cycle is left out, and its
    message is a race.

    Args:
        scripts: The scenario's sessions.
        logs: Per session, its whole recorded log (fork seeds included), or ``None``
            when it takes no part.

    Returns:
        The plan.
    """
    plan = _Plan(scripts, logs)
    for script, log in enumerate(logs):
        if log is None or plan.calls[script] is None:
            continue
        start = 0 if scripts[script].primary else scripts[script].seed_length
        for n in range(start, len(log)):
            plan.receive(script, n)
    if not plan.acyclic():  # the senders' waits alone: a recording the runtime cannot make
        plan.waits.clear()
    for call, wait, race in plan.later:
        plan.waits.setdefault(call, []).append(wait)
        if not plan.acyclic():
            plan.waits[call].pop()
            plan.races.append(race)
    return InboxPlan(
        {call: tuple(waits) for call, waits in plan.waits.items() if waits},
        tuple(sorted(plan.races, key=lambda r: (r.script, r.event))),
    )


def scenario_plan(scripts: Sequence[SessionScript]) -> InboxPlan:
    """`inbox_plan` of a scenario's sessions, their logs read again.

    A session whose log is not of format 2 to 5 (no times, no inbox), is not a file or
    does not read takes no part.
    """
    return inbox_plan(scripts, [_whole_events(script) for script in scripts])


class LiveLogs(Protocol):
    """The logs the sessions under test are writing, per recorded session they replay.

    Attributes:
        poll_s: How long a waiting call sleeps before it looks again, in seconds (a
            source that tells the gate of each change, `LogOrderGate.changed`,
            may give a long one).
    """

    poll_s: float

    def refresh(self) -> None:
        """Read what the sessions logged since the last look (thread-safe)."""

    def events(self, script: int) -> Sequence[Event]:
        """The events the live session of recorded session ``script`` logged so far.

        Its whole log, a fork child's seed included; empty while it is not known.
        """

    def where(self, script: int) -> str:
        """The live log of recorded session ``script``, for messages."""


class LogOrderGate(OrderGate):
    """Holds replayed calls until the live logs reached the recorded positions.

    Each call of `InboxPlan.waits` is answered only once the live log of each
    session it waits for holds at least the recorded count of each milestone
    (`log_marks`); after ``timeout`` s it fails with
    [`ReplayOrderError`][pytest_dsh_replay.ReplayOrderError] naming the session, its live log and
    the recorded event it waited for.

    Args:
        plan: What each call waits for.
        files: Per recorded session, its log's name (for messages).
        live: The live logs.
        timeout: The longest a call waits, in seconds.
    """

    def __init__(self, plan: InboxPlan, files: Sequence[str], live: LiveLogs, *, timeout: float):
        super().__init__([None] * len(files), files, timeout=timeout, max_gap=0)
        self.plan = plan
        self._live = live
        self._poll_s = live.poll_s
        self._seen: dict[int, tuple[int, dict[str, int]]] = {}

    @classmethod
    def of_logs(
        cls, scripts: Sequence[SessionScript], live: LiveLogs, *, timeout: float
    ) -> LogOrderGate:
        """The gate of a scenario's scripts, their recorded logs read again.

        Raises:
            ValueError: ``timeout`` is not > 0.
        """
        if not timeout > 0:
            raise ValueError(f"keep_recorded_order(timeout > 0), got {timeout!r}")
        return cls(scenario_plan(scripts), [s.file for s in scripts], live, timeout=timeout)

    @property
    def active(self) -> bool:
        """Whether any call waits for a live log."""
        return bool(self.plan.waits)

    def changed(self) -> None:
        """Tell the waiting calls that a live log changed (they look again at once)."""
        with self._changed:
            self._changed.notify_all()

    def _refresh(self) -> None:
        self._live.refresh()

    def _count(self, script: int) -> dict[str, int]:
        """The milestones of a live log so far (lock held; read incrementally)."""
        events = self._live.events(script)
        seen, counts = self._seen.get(script, (0, {}))
        if len(events) < seen:
            seen, counts = 0, {}
        for event in events[seen:]:
            for mark in log_marks(event):
                counts[mark] = counts.get(mark, 0) + 1
        self._seen[script] = (len(events), counts)
        return counts

    def _ready_at(self, script: int, call: int) -> tuple[float | None, _Missing | None]:
        for wait in self.plan.waits.get((script, call), ()):
            have = self._count(wait.script)
            if any(have.get(mark, 0) < least for mark, least in wait.counts):
                return None, wait
        return 0.0, None

    def _failure(self, call: tuple[int, int], point: _Missing) -> ReplayOrderError:
        assert isinstance(point, LogWait)
        have = self._count(point.script)
        short = ", ".join(
            f"{mark} {have.get(mark, 0)} of {least}"
            for mark, least in point.counts
            if have.get(mark, 0) < least
        )
        return ReplayOrderError(
            f"waited {self._timeout:g} s for the live log of {self._files[point.script]} "
            f"({self._live.where(point.script)}) to reach the recorded position after "
            f"{point.what}: the recording shows that before this call was answered, and in "
            f"this run the live log has not got there ({short}). The agent did not reach "
            "the recorded order (it made other calls or fewer); re-record with --dsh-record "
            "if its behaviour changed"
        )
