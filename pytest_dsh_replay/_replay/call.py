"""One replayed call's state and its waits (the replay model's internals).

A live session's binding (:class:`BoundSession`: script, cursor, cancellation epoch, waiters)
and one call (:class:`ReplayCall`), and the two waits a call may do until it is cancelled
(a ``hang`` entry, pacing): :func:`wait_cancelled` for threads and
:func:`await_cancelled` for asyncio tasks. ``model.cancel()`` wakes them through
:func:`wake`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast

from .._errors import PlaceholderError, ReplayedModelError, ScriptError
from .._format.events import StreamChunk
from .._scripts.entries import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry
from .._scripts.scenario import SessionScript

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "BoundSession",
    "ChunkStream",
    "ReplayCall",
    "SessionKey",
    "await_cancelled",
    "cut_reads",
    "describe_call",
    "describe_session",
    "entry_has_placeholders",
    "prepare_call",
    "read_chunks",
    "wait_cancelled",
    "wake",
    "write_ready_file",
]

# How often a synchronous wait that also watches a caller's threading.Event looks for a
# model.cancel() (the Event itself is seen at once).
_POLL_S: Final = 0.05

SessionKey: TypeAlias = "str | None"
_Waiter: TypeAlias = "threading.Event | tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]"


class BoundSession:
    """A live session's binding: its script and cursor (mutable, guarded by the lock)."""

    __slots__ = (
        "cursor",
        "entries",
        "epoch",
        "index",
        "key",
        "placeholders",
        "reading",
        "script",
        "waiters",
    )

    def __init__(self, key: SessionKey, index: int, script: SessionScript, flags: tuple[bool, ...]):
        self.key = key
        self.index = index
        self.script = script
        self.entries = script.entries
        self.placeholders = flags
        self.cursor = 0
        # model.cancel() increments the epoch: every call made before it is cancelled.
        self.epoch = 0
        self.waiters: set[_Waiter] = set()
        # Calls being read by read_chunks(): model.cancel() cuts their chunk lists.
        self.reading: set[ReplayCall] = set()


class ReplayCall:
    """One model call: what to replay, or the error to raise when it is read."""

    __slots__ = (
        "bound",
        "chunks",
        "cut",
        "entry",
        "epoch",
        "error",
        "flag",
        "messages",
        "number",
        "order",
        "placeholders",
        "rest",
    )

    def __init__(  # positional on the hot path (ReplayModel._call): cheaper than keywords
        self,
        bound: BoundSession | None = None,
        number: int = 0,
        entry: ReplayEntry | None = None,
        placeholders: bool = False,
        messages: object = None,
        flag: threading.Event | asyncio.Event | None = None,
        error: Exception | None = None,
        order: tuple[int, int] | None = None,
    ):
        self.bound = bound
        self.order = order  # (recorded session, call) when the recorded order is kept
        self.epoch = bound.epoch if bound is not None else 0
        self.number = number
        self.entry = entry
        self.placeholders = placeholders
        self.messages = messages
        self.flag = flag
        self.error = error
        # chunks, rest, cut: set by read_chunks() before cut_reads() can see the call
        # (its chunk list, the iterator over it, whether model.cancel() cut it).
        self.chunks: list[StreamChunk]
        self.rest: Iterator[StreamChunk]
        self.cut: bool

    def cancelled(self) -> bool:
        bound = self.bound
        if bound is not None and bound.epoch != self.epoch:
            return True
        return self.flag is not None and self.flag.is_set()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def wake(waiter: _Waiter) -> None:
    if isinstance(waiter, threading.Event):
        waiter.set()
        return
    loop, future = waiter
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        loop.call_soon_threadsafe(_settle, future)


def wait_cancelled(lock: threading.Lock, call: ReplayCall, timeout: float | None) -> bool:
    """Block until ``call`` is cancelled (True) or ``timeout`` seconds pass (False)."""
    bound = call.bound
    assert bound is not None
    flag = call.flag
    if isinstance(flag, threading.Event):
        # The caller's event is waited on directly; model.cancel() is polled.
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = _POLL_S
            if deadline is not None:
                step = min(step, deadline - time.monotonic())
                if step <= 0:
                    return call.cancelled()
            if flag.wait(step) or bound.epoch != call.epoch:
                return True
    event = threading.Event()
    with lock:
        if call.cancelled():
            return True
        bound.waiters.add(event)
    try:
        event.wait(timeout)
    finally:
        with lock:
            bound.waiters.discard(event)
    return call.cancelled()


async def await_cancelled(lock: threading.Lock, call: ReplayCall, timeout: float | None) -> bool:
    """Wait until ``call`` is cancelled (True) or ``timeout`` seconds pass (False).

    Task cancellation propagates as :class:`asyncio.CancelledError`.
    """
    bound = call.bound
    assert bound is not None
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    waiter = (loop, future)
    with lock:
        if call.cancelled():
            return True
        bound.waiters.add(waiter)
    timer = None if timeout is None else loop.call_later(timeout, _settle, future)
    watcher: asyncio.Task[Any] | None = None
    flag = call.flag
    if isinstance(flag, asyncio.Event):
        watcher = loop.create_task(flag.wait())
        watcher.add_done_callback(lambda _task: _settle(future))
    try:
        await future
    finally:
        with lock:
            bound.waiters.discard(waiter)
        if timer is not None:
            timer.cancel()
        if watcher is not None:
            watcher.cancel()
    return call.cancelled()


# --- what one call replays ----------------------------------------------------------------


def describe_session(key: SessionKey) -> str:
    """How messages name a live session."""
    return "the anonymous session (calls without session_id)" if key is None else f"session {key!r}"


def describe_call(call: ReplayCall) -> str:
    """How messages name a call: its session, number and recording."""
    assert call.bound is not None
    script = call.bound.script
    return (
        f"{describe_session(call.bound.key)}, call #{call.number} (recorded session "
        f"{script.recorded_id!r}, {script.file})"
    )


def entry_has_placeholders(entry: ReplayEntry) -> bool:
    """Whether an entry holds a ``{{fromRequest:...}}`` placeholder anywhere."""
    if entry.has_placeholders:
        return True
    if not isinstance(entry, ThrowEntry):
        return False
    from .placeholders import MARKER

    return MARKER in entry.message or MARKER in entry.code


def _resolve(call: ReplayCall, value: Any) -> Any:
    from .placeholders import resolve_placeholders  # only for calls that hold one

    try:
        return resolve_placeholders(value, call.messages)
    except PlaceholderError as err:
        assert call.bound is not None
        script = call.bound.script
        raise PlaceholderError(
            f"{describe_call(call)}: {err.reason}",
            path=str(script.path) if script.path is not None else script.file,
        ) from None


def prepare_call(
    call: ReplayCall,
) -> tuple[list[StreamChunk], str | None, str | None, str | None]:
    """The call's chunks, throw message and code, and readyFile, placeholders resolved.

    Raises:
        PlaceholderError: A placeholder does not resolve against the call's request.
    """
    entry = call.entry
    assert entry is not None
    if isinstance(entry, HangEntry):
        ready = entry.ready_file
        if call.placeholders and ready is not None:
            ready = _resolve(call, ready)
        return entry.chunks, None, None, ready
    if isinstance(entry, ThrowEntry):
        if call.placeholders:
            wire = _resolve(call, entry.to_json())
            return wire["chunks"], wire["message"], wire["code"], None
        return entry.chunks, entry.message, entry.code, None
    chunks = entry.chunks
    if call.placeholders:
        chunks = _resolve(call, chunks)
    return chunks, None, None, None


def write_ready_file(call: ReplayCall, name: str, workdir: Any) -> None:
    """Write a ``hang`` entry's ``readyFile`` (empty), inside ``workdir`` only.

    Args:
        call: The hanging call.
        name: The file name, relative to ``workdir``.
        workdir: The directory it must stay in (``None``: the working directory).

    Raises:
        ScriptError: The name holds a NUL byte, leaves ``workdir``, or cannot be written.
    """
    base = os.path.realpath(workdir if workdir is not None else os.getcwd())
    where = describe_call(call)
    if "\x00" in name:
        raise ScriptError(f"{where}: the hang entry's readyFile {name!r} contains a NUL byte")
    target = os.path.realpath(os.path.join(base, name))
    if target == base or os.path.commonpath([base, target]) != base:
        place = "which is" if target == base else "outside"
        raise ScriptError(
            f"{where}: the hang entry's readyFile {name!r} resolves to "
            f"{target}, {place} the working directory {base}; use a file name inside it"
        )
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb"):
            pass
    except OSError as err:
        raise ScriptError(
            f"{where}: cannot write the hang entry's readyFile {target}: {err.strerror or err}"
        ) from None


# --- reading a call without a frame per chunk -----------------------------------------


def read_chunks(
    call: ReplayCall, cancelled: Callable[[ReplayCall], Exception]
) -> Generator[Iterator[StreamChunk], None, None]:
    """A call's replay for ``itertools.chain.from_iterable``: one iterator over its chunks.

    For a call that neither paces, hangs nor watches a caller's event: the chunks are
    handed out by a list iterator, and :func:`cut_reads` (``model.cancel()``) empties
    the list, so the next read raises the cancellation instead of a chunk.

    Args:
        call: The call (``call.error`` set: raised at the first read).
        cancelled: Builds the error of a cancelled call.

    Raises:
        Exception: ``call.error``; what :func:`prepare_call` raises; ``cancelled(call)``
            when the call was cancelled before a chunk; :class:`ReplayedModelError` at
            the end of a ``throw`` entry.
    """
    if call.error is not None:
        raise call.error
    entry = call.entry
    if entry.__class__ is ChunksEntry and not call.placeholders:
        chunks, message, code = entry.chunks, None, None  # prepare_call, without its branches
    else:
        chunks, message, code, _ready = prepare_call(call)
    if chunks:
        bound = call.bound
        assert bound is not None
        call.chunks = chunks
        call.rest = rest = iter(chunks)
        call.cut = False
        reading = bound.reading
        reading.add(call)
        try:
            # After registering: a cancel() that missed this call raised the epoch first.
            if bound.epoch != call.epoch:
                raise cancelled(call)
            yield rest
        except GeneratorExit:  # closed: the rest of the list is not handed out
            del chunks[:]
            raise
        finally:
            reading.discard(call)
        if call.cut:
            raise cancelled(call)
    if message is not None:
        assert code is not None
        raise ReplayedModelError(message, code)


def cut_reads(bound: BoundSession) -> None:
    """Stop every call of ``bound`` read by :func:`read_chunks` before its next chunk.

    Called by ``model.cancel()`` (under the model's lock) after it raised the epoch. A
    call whose chunks were all handed out already is left to finish.
    """
    for call in list(bound.reading):
        if call.rest.__length_hint__():  # type: ignore[attr-defined]
            call.cut = True
            del call.chunks[:]


class ChunkStream(chain[StreamChunk]):
    """``chain.from_iterable`` over :func:`read_chunks` that can be closed like a generator.

    The chunks still come from C (no Python frame per chunk); :meth:`close` closes the
    underlying reader, which hands out nothing more afterwards.
    """

    __slots__ = ("_source",)
    _source: Generator[Iterator[StreamChunk], None, None]

    @classmethod
    def of(cls, source: Generator[Iterator[StreamChunk], None, None]) -> ChunkStream:
        stream = cast(ChunkStream, cls.from_iterable(source))
        stream._source = source
        return stream

    def close(self) -> None:
        """End the stream, as ``generator.close()`` would."""
        self._source.close()
