"""The recorded order of model calls across sessions, kept while concurrent agents replay.

A recording of concurrent sessions (a parent and its children running at once) holds
more than each session's calls: it holds how they interleaved. An agent reacts to that
interleaving: a child that finishes while its parent's call is in flight is noticed in
that turn's next step, one that finishes later starts another turn. Served as fast as
possible, a replay interleaves differently and the agent takes another path.

:class:`OrderGate` keeps the recorded interleaving. Every recorded call has two points
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

Times come from logs of formats 2 to 4 (the dsh runtime's, in milliseconds); a session
whose log has no such times takes no part. The estimates of a start are never earlier
than the real one, so a call never waits for something that can only happen after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Final

from .._errors import DshReplayError, ReplayOrderError
from .._format.events import SEEDED_FORMAT, Event
from .._format.jsonl import read_session_log
from .._format.stream_records import STREAM_EVENTS
from .._scripts.builder import SUMMARY_EVENTS
from .._scripts.scenario import SessionScript

if TYPE_CHECKING:
    from .._format.events import StreamChunk
    from .call import ReplayCall

__all__ = ["CallTimes", "OrderGate", "call_times", "settled_order"]

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


def _own_events(script: SessionScript) -> list[Event] | None:
    """A session's own events (after a fork child's seed), or ``None`` without times."""
    if script.path is None or script.header.format < SEEDED_FORMAT or not script.path.is_file():
        return None
    try:
        _, events = read_session_log(script.path)
    except DshReplayError:
        return None
    return list(events[0 if script.primary else script.seed_length :])


def call_times(script: SessionScript) -> list[CallTimes] | None:
    """The start and end of each of a recorded session's own calls, in call order.

    Args:
        script: A session of a loaded scenario (its log is read again).

    Returns:
        One :class:`CallTimes` per entry of ``script``, or ``None`` when they cannot be
        known: the log is not of format 2 to 4, is not a file, or its calls do not line
        up with the script's entries (an override sidecar changed them).
    """
    return _call_times(script, _own_events(script))


def _call_times(script: SessionScript, events: list[Event] | None) -> list[CallTimes] | None:
    """:func:`call_times` from the session's own events (read once by the caller)."""
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
    """:func:`settled_order` from each session's own events (read once by the caller)."""
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
            their notices reached it (:func:`settled_order`): each is served only
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

    def _ready_at(self, script: int, call: int) -> tuple[float | None, _Point | None]:
        """When the call may go (monotonic seconds), or ``None`` and the point it awaits."""
        ready = 0.0
        for point, pause in self._before.get((script, call), ()):
            at = self._reached.get(point)
            if at is None:
                return None, point
            ready = max(ready, at + pause)
        return ready, None

    def _failure(self, call: tuple[int, int], point: _Point) -> ReplayOrderError:
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
        with self._changed:
            while True:
                if cancelled():
                    return True
                ready, missing = self._ready_at(script, call)
                now = time.monotonic()
                if ready is not None and now >= ready:
                    return False
                if now >= deadline:
                    assert missing is not None or ready is not None
                    if missing is not None:
                        raise self._failure((script, call), missing)
                    return False  # only a pause was left: it ends at the deadline anyway
                step = deadline - now if ready is None else min(ready, deadline) - now
                self._changed.wait(min(step, 0.05))

    async def await_ready(
        self, script: int, call: int, cancelled: Callable[[], bool] = lambda: False
    ) -> bool:
        """:meth:`wait` for async callers: the event loop keeps running meanwhile."""
        import asyncio  # only async callers pay for it

        deadline = time.monotonic() + self._timeout
        while True:
            if cancelled():
                return True
            with self._lock:
                ready, missing = self._ready_at(script, call)
            now = time.monotonic()
            if ready is not None and now >= ready:
                return False
            if now >= deadline:
                if missing is not None:
                    raise self._failure((script, call), missing)
                return False
            await asyncio.sleep(min(_POLL_S, deadline - now))

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
        """:meth:`ordered` for async callers."""
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
