"""Injected faults: a provider failure on one call attempt of one session, never recorded.

See [docs/recording.md#faults](../recording.md#faults).

A test queues a [`Fault`][pytest_dsh_replay.Fault] with ``dsh_replay.inject(fault,
session=None, call=1)``; the fixture's recorder asks its `FaultQueue` at the start of
every model call (`FaultQueue.take`), before anything is logged or replayed. A fault
that fires answers that attempt itself (`fault_stream`, `afault_stream`):

- ``rate_limit`` and ``server_error`` raise
  [`ReplayedModelError`][pytest_dsh_replay.ReplayedModelError] with the code, the HTTP
  status and the retry delay (the model endpoint answers it as the wire's HTTP error,
  ``Retry-After`` included);
- ``disconnect`` hands out the first chunks of the answer the call would get (peeked,
  the cursor does not move), then raises with code ``NETWORK`` (the endpoint drops the
  connection there);
- ``latency`` waits, then makes the call as usual; a cancel during the wait (the
  client's read timeout, the client gone, the test's end) raises
  [`ReplayCancelledError`][pytest_dsh_replay.ReplayCancelledError] and nothing is
  made.

A faulted attempt is not a call: the recording's cursor does not move, nothing is
logged, and the session's next attempt is the same call again.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from .._errors import FaultError, ReplayCancelledError, ReplayedModelError
from .._format.events import StreamChunk

if TYPE_CHECKING:
    from .options import CallOptions

__all__ = [
    "MAX_FAULT_SECONDS",
    "Fault",
    "FaultKind",
    "FaultQueue",
    "afault_stream",
    "fault_stream",
]

FaultKind = Literal["rate_limit", "server_error", "disconnect", "latency"]
"""What a [`Fault`][pytest_dsh_replay.Fault] does."""

MAX_FAULT_SECONDS: Final = 3600.0
"""The longest ``retry_after`` and ``latency`` a fault takes, in seconds."""

_KINDS: Final = ("rate_limit", "server_error", "disconnect", "latency")
_INJECTED: Final = "injected by dsh_replay.inject"


def _seconds(name: str, value: object, *, positive: bool = False) -> float:
    """``value`` as seconds: a finite number, >= 0 (> 0 if ``positive``), at most an hour."""
    least = "> 0" if positive else ">= 0"
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
        or value > MAX_FAULT_SECONDS
    ):
        raise FaultError(
            f"{name} must be a number of seconds {least} and at most {MAX_FAULT_SECONDS:g}, "
            f"got {value!r}"
        )
    return float(value)


def _count(name: str, value: object, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise FaultError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Fault:
    """A provider failure to inject on one call attempt (``dsh_replay.inject``).

    Made by its constructors: `rate_limit`, `server_error`, `disconnect` and
    `latency` ([docs/recording.md#faults](../recording.md#faults)).

    Attributes:
        kind: ``"rate_limit"``, ``"server_error"``, ``"disconnect"`` or ``"latency"``.
        status: The HTTP status answered: 429 for a rate limit, 500-599 for a server
            error, ``None`` for the others.
        retry_after: The delay the answer asks for, in seconds (the ``Retry-After``
            and ``retry-after-ms`` headers), or ``None`` (no header).
        after_chunks: For a disconnect: how many of the answer's chunks go out before
            the connection closes.
        seconds: For a latency: how long the answer is held back, in seconds.

    Raises:
        FaultError: A field is out of range or does not belong to ``kind`` (the
            message names the argument and what is accepted).
    """

    kind: FaultKind
    status: int | None = None
    retry_after: float | None = None
    after_chunks: int | None = None
    seconds: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise FaultError(f"kind must be one of {', '.join(_KINDS)}, got {self.kind!r}")
        if self.retry_after is not None:
            _seconds("retry_after", self.retry_after)
        self._check_status()
        if self.kind == "disconnect":
            _count("after_chunks", self.after_chunks, 0)
        elif self.after_chunks is not None:
            raise FaultError(f"only a disconnect has after_chunks (this is a {self.kind})")
        if self.kind == "latency":
            _seconds("seconds", self.seconds, positive=True)
        elif self.seconds is not None:
            raise FaultError(f"only a latency has seconds (this is a {self.kind})")

    def _check_status(self) -> None:
        status = self.status
        if self.kind == "server_error":
            if isinstance(status, bool) or not isinstance(status, int) or not 500 <= status <= 599:
                raise FaultError(f"status must be an HTTP status 500-599, got {status!r}")
        elif self.kind == "rate_limit":
            if status != 429:
                raise FaultError(f"a rate limit's status is 429, got {status!r}")
        elif status is not None or self.retry_after is not None:
            raise FaultError(f"a {self.kind} has no status and no retry_after")

    @classmethod
    def rate_limit(cls, retry_after: float = 0.0) -> Fault:
        """A 429 that asks the client to wait ``retry_after`` seconds (0 to 3600).

        Over HTTP: the wire's rate-limit error body, ``Retry-After`` (seconds) and
        ``retry-after-ms``; in process: ``ReplayedModelError`` with code ``RATE_LIMIT``.

        Raises:
            FaultError: ``retry_after`` is not a finite number of seconds from 0 to 3600.
        """
        return cls("rate_limit", status=429, retry_after=_seconds("retry_after", retry_after))

    @classmethod
    def server_error(cls, status: int = 500, *, retry_after: float | None = None) -> Fault:
        """A server error: HTTP ``status`` (500-599), optionally asking for a ``retry_after`` delay.

        Code ``OVERLOADED`` for 503 and 529, else ``SERVER``.

        Raises:
            FaultError: ``status`` is not an integer from 500 to 599, or ``retry_after``
                is not a finite number of seconds from 0 to 3600.
        """
        if retry_after is not None:
            retry_after = _seconds("retry_after", retry_after)
        return cls("server_error", status=status, retry_after=retry_after)

    @classmethod
    def disconnect(cls, after_chunks: int = 0) -> Fault:
        """The connection closes after ``after_chunks`` chunks of the answer (an integer >= 0).

        The chunks are the first of the answer the call would get (never its
        ``finish``); ``0`` closes it before the response starts.

        Raises:
            FaultError: ``after_chunks`` is not an integer >= 0.
        """
        return cls("disconnect", after_chunks=_count("after_chunks", after_chunks, 0))

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        """The answer starts ``seconds`` later (> 0, at most 3600); then it is the call's own.

        Raises:
            FaultError: ``seconds`` is not a finite number > 0 and at most 3600.
        """
        return cls("latency", seconds=_seconds("seconds", seconds, positive=True))

    def __repr__(self) -> str:
        if self.kind == "rate_limit":
            return f"Fault.rate_limit(retry_after={self.retry_after:g})"
        if self.kind == "server_error":
            after = "" if self.retry_after is None else f", retry_after={self.retry_after:g}"
            return f"Fault.server_error(status={self.status}{after})"
        if self.kind == "disconnect":
            return f"Fault.disconnect(after_chunks={self.after_chunks})"
        return f"Fault.latency(seconds={self.seconds:g})"

    def error(self) -> ReplayedModelError:
        """The provider failure this fault raises in process.

        ``code``: ``RATE_LIMIT``; ``OVERLOADED`` (503, 529) or ``SERVER``; ``NETWORK``
        for a disconnect. ``status`` and ``retry_after_ms`` as the HTTP answer has them.

        Raises:
            FaultError: The fault is a latency (it raises nothing).
        """
        if self.kind == "latency":
            raise FaultError("a latency raises no error: it holds the answer back")
        retry = None if self.retry_after is None else math.ceil(self.retry_after * 1000)
        if self.kind == "rate_limit":
            message = f"Rate limit reached, retry after {self.retry_after:g} s ({_INJECTED})"
            return ReplayedModelError(message, "RATE_LIMIT", status=429, retry_after_ms=retry)
        if self.kind == "server_error":
            code = "OVERLOADED" if self.status in (503, 529) else "SERVER"
            message = f"The server had an error (HTTP {self.status}, {_INJECTED})"
            return ReplayedModelError(message, code, status=self.status, retry_after_ms=retry)
        message = f"the connection closed after {self.after_chunks} chunk(s) ({_INJECTED})"
        return ReplayedModelError(message, "NETWORK")


def _described(session: str | None, call: int) -> str:
    who = "the primary session" if session is None else f"session {session!r}"
    return f"{who}, call {call}"


class FaultQueue:
    """One test's injected faults and each live session's calls so far (thread-safe).

    ``session`` ``None`` names the primary: the first live session that calls the model.
    A call's number counts the session's calls that went to the model (1-based); a
    faulted attempt does not count, so faults queued for one call happen on its
    successive attempts, in the order injected.
    """

    __slots__ = ("_calls", "_closed", "_lock", "_primary", "_queued", "_waits")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[tuple[str | None, int], deque[Fault]] = {}
        self._calls: dict[str | None, int] = {}
        self._primary: list[str | None] = []  # the first caller, once known
        self._waits: set[threading.Event] = set()
        self._closed = False

    def inject(self, fault: Fault, *, session: str | None = None, call: int = 1) -> None:
        """Queue ``fault`` for ``session``'s ``call``-th call (see the class docstring).

        Raises:
            FaultError: ``fault`` is no `Fault`, ``session`` no string (or ``None``),
                ``call`` no integer >= 1.
        """
        if not isinstance(fault, Fault):
            raise FaultError(
                "inject() takes a Fault (Fault.rate_limit(), Fault.server_error(), "
                f"Fault.disconnect(), Fault.latency()), got {type(fault).__name__}"
            )
        if session is not None and not isinstance(session, str):
            raise FaultError(f"session must be a live session id (a str) or None, got {session!r}")
        _count("call", call, 1)
        with self._lock:
            self._queued.setdefault((session, call), deque()).append(fault)

    def take(self, session_id: str | None) -> Fault | None:
        """The fault for this attempt of ``session_id``, or ``None`` (the call is counted)."""
        with self._lock:
            primary = self._primary
            if not primary:
                primary.append(session_id)
            number = self._calls.get(session_id, 0) + 1
            if self._queued:
                keys = [(session_id, number)]
                if session_id == primary[0] and session_id is not None:
                    keys.append((None, number))
                for key in keys:
                    queued = self._queued.get(key)
                    if queued:
                        fault = queued.popleft()
                        if not queued:
                            del self._queued[key]
                        return fault
            self._calls[session_id] = number
            return None

    def proceed(self, session_id: str | None) -> None:
        """Count a call that goes to the model after its fault (a latency that ended)."""
        with self._lock:
            self._calls[session_id] = self._calls.get(session_id, 0) + 1

    def unfired(self) -> list[str]:
        """The faults still queued, one line each: the fault, its session and call."""
        if not self._queued:  # most tests inject none: no lock, no list to build
            return []
        with self._lock:
            return [
                f"{fault!r} for {_described(session, call)}"
                for (session, call), queued in self._queued.items()
                for fault in queued
            ]

    def wait(self, seconds: float, cancel: object) -> None:
        """Wait ``seconds`` (a latency) on ``cancel`` (a ``threading.Event``, or a new one).

        Raises:
            ReplayCancelledError: ``cancel`` was set (the client went away, its read
                timeout passed) or the test ended (`close`) before the time was up.
        """
        event = cancel if isinstance(cancel, threading.Event) else threading.Event()
        with self._lock:
            if self._closed:
                event.set()
            self._waits.add(event)
        try:
            if event.wait(seconds):
                raise ReplayCancelledError(
                    f"the call was cancelled during an injected latency of {seconds:g} s"
                )
        finally:
            with self._lock:
                self._waits.discard(event)

    def close(self) -> None:
        """End every latency being waited (the test ended); later ones end at once."""
        with self._lock:
            self._closed = True
            waits = list(self._waits)
        for event in waits:
            event.set()


def _cut(chunks: Sequence[StreamChunk], count: int) -> list[StreamChunk]:
    """The first ``count`` chunks before the ``finish``, as copies."""
    out: list[StreamChunk] = []
    for chunk in chunks:
        if len(out) >= count or chunk.get("type") == "finish":
            break
        out.append(dict(chunk))
    return out


def fault_stream(
    faults: FaultQueue,
    fault: Fault,
    options: CallOptions,
    call: Callable[[], Iterator[StreamChunk]],
    peek: Callable[[], Sequence[StreamChunk]],
) -> Iterator[StreamChunk]:
    """The attempt ``fault`` answers (read lazily, as a model's stream).

    Args:
        faults: The queue it came from (a latency's wait, its call counted).
        fault: The fault.
        options: The call's options (a latency waits on its ``cancel``).
        call: Makes the call as usual (after a latency).
        peek: The chunks the call would get (a disconnect hands out the first ones).
    """
    if fault.kind == "latency":
        assert fault.seconds is not None
        faults.wait(fault.seconds, options.cancel)
        faults.proceed(options.session_id)
        yield from call()
        return
    if fault.kind == "disconnect":
        yield from _cut(peek(), fault.after_chunks or 0)
    raise fault.error()


async def afault_stream(
    faults: FaultQueue,
    fault: Fault,
    options: CallOptions,
    call: Callable[[], AsyncIterator[StreamChunk]],
    peek: Callable[[], Sequence[StreamChunk]],
) -> AsyncIterator[StreamChunk]:
    """`fault_stream` for an async caller; a latency awaits its ``asyncio.Event`` cancel."""
    if fault.kind == "latency":
        import asyncio

        assert fault.seconds is not None
        cancel = options.cancel
        if isinstance(cancel, asyncio.Event):
            try:
                await asyncio.wait_for(cancel.wait(), fault.seconds)
            except asyncio.TimeoutError:
                pass
            else:
                raise ReplayCancelledError(
                    f"the call was cancelled during an injected latency of {fault.seconds:g} s"
                )
        else:
            await asyncio.sleep(fault.seconds)
        faults.proceed(options.session_id)
        async for chunk in call():
            yield chunk
        return
    if fault.kind == "disconnect":
        for chunk in _cut(peek(), fault.after_chunks or 0):
            yield chunk
    raise fault.error()
