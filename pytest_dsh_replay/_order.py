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

Times come from logs of formats 2 to 4 (the dsh runtime's, in milliseconds); a session
whose log has no such times takes no part. The estimates of a start are never earlier
than the real one, so a call never waits for something that can only happen after it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ._errors import DshReplayError, ReplayOrderError
from ._events import SEEDED_FORMAT, Event
from ._jsonl import read_session_log
from ._scenario import SessionScript
from ._script import SUMMARY_EVENTS
from ._stream import STREAM_EVENTS

if TYPE_CHECKING:
    from ._calls import ReplayCall
    from ._events import StreamChunk

__all__ = ["CallTimes", "OrderGate", "call_times"]

_ACCEPTED: Final = "session-log-deepseek/delivery-accepted"
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


def call_times(script: SessionScript) -> list[CallTimes] | None:
    """The start and end of each of a recorded session's own calls, in call order.

    Args:
        script: A session of a loaded scenario (its log is read again).

    Returns:
        One :class:`CallTimes` per entry of ``script``, or ``None`` when they cannot be
        known: the log is not of format 2 to 4, is not a file, or its calls do not line
        up with the script's entries (an override sidecar changed them).
    """
    if script.path is None or script.header.format < SEEDED_FORMAT or not script.path.is_file():
        return None
    try:
        _, events = read_session_log(script.path)
    except DshReplayError:
        return None
    times: list[CallTimes] = []
    for index in range(0 if script.primary else script.seed_length, len(events)):
        event = events[index]
        if not _is_call(event):
            continue
        end = _time(event.get("time"))
        if end is None:
            return None
        times.append(CallTimes(_start(events, index, end), end))
    return times if len(times) == len(script.entries) else None


_Point = tuple[int, int, bool]  # (script index, call index, is the end)


class OrderGate:
    """Holds replayed calls until the recorded calls of other sessions before them happened.

    Thread-safe; async callers wait without blocking their loop.

    Args:
        times: Per recorded session (in scenario order), its calls' times, or ``None``
            for a session that takes no part.
        files: Per recorded session, its log's name (for messages).
        timeout: The longest a call waits, in seconds.
        max_gap: The longest recorded pause kept before a call, in seconds.
    """

    def __init__(
        self,
        times: Sequence[Sequence[CallTimes] | None],
        files: Sequence[str],
        *,
        timeout: float,
        max_gap: float,
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
        self._reached: dict[_Point, float] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

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
        return cls(
            [call_times(script) for script in scripts],
            [script.file for script in scripts],
            timeout=timeout,
            max_gap=max_gap,
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

    def _failure(self, point: _Point) -> ReplayOrderError:
        i, k, end = point
        return ReplayOrderError(
            f"waited {self._timeout:g} s for the recorded order of calls across sessions: "
            f"the recording shows call #{k + 1} of {self._files[i]} "
            f"{'ending' if end else 'starting'} before this call ends, and in this run it "
            "has not. The agent did not reach the recorded order (it made other calls or "
            "fewer); re-record with --dsh-record if its behaviour changed"
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
                        raise self._failure(missing)
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
                    raise self._failure(missing)
                return False
            await asyncio.sleep(min(_POLL_S, deadline - now))

    def ordered(
        self,
        call: ReplayCall,
        chunks: Iterator[StreamChunk],
        where: str,
        cancelled: Callable[[ReplayCall, str], Exception],
    ) -> Iterator[StreamChunk]:
        """A call's chunks, released when the recorded order lets it go.

        Args:
            call: The call (its ``order`` is set).
            chunks: Its chunks, not started yet.
            where: Who is calling, for a :class:`ReplayOrderError`.
            cancelled: Builds the error of a call cancelled while it waited.
        """
        order = call.order
        assert order is not None
        try:
            try:
                stopped = self.wait(*order, call.cancelled)
            except ReplayOrderError as error:
                raise ReplayOrderError(f"{where} {error}") from None
            if stopped:
                raise cancelled(call, " while it waited for the recorded order")
            yield from chunks
        finally:
            self.served(*order)

    async def aordered(
        self,
        call: ReplayCall,
        chunks: AsyncIterator[StreamChunk],
        where: str,
        cancelled: Callable[[ReplayCall, str], Exception],
    ) -> AsyncIterator[StreamChunk]:
        """:meth:`ordered` for async callers."""
        order = call.order
        assert order is not None
        try:
            try:
                stopped = await self.await_ready(*order, call.cancelled)
            except ReplayOrderError as error:
                raise ReplayOrderError(f"{where} {error}") from None
            if stopped:
                raise cancelled(call, " while it waited for the recorded order")
            async for chunk in chunks:
                yield chunk
        finally:
            close = getattr(chunks, "aclose", None)
            if close is not None:
                await close()
            self.served(*order)
