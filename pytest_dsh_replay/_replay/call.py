"""One replayed call: what it serves, how it paces and hangs, and how it is cancelled.

A live session's binding (`BoundSession`: its script, cursor, cancellation epoch
and waiters) and one call of it (`ReplayCall`). The replay model binds the session
and admits the call; from then on the call replays itself: `ReplayCall.stream` and
`ReplayCall.astream` hand out its chunks (placeholders resolved), wait when it is
paced or its entry hangs (`Pacing` says how), and end with its recorded failure.
``model.cancel()`` raises the session's epoch and wakes its waiters
(`BoundSession.cancel`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping
from itertools import chain
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast

from .._errors import (
    DshReplayError,
    PlaceholderError,
    ReplayCancelledError,
    ReplayedModelError,
    ScriptError,
)
from .._format.events import ChunkRun, StreamChunk
from .._format.log_names import parse_log_name
from .._scripts.entries import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry, materialize_runs
from .._scripts.scenario import SessionScript, sidecar_name
from .pace import chunk_waits

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "BoundSession",
    "ChunkStream",
    "Pacing",
    "ReplayCall",
    "SessionKey",
    "describe_session",
    "entry_has_placeholders",
]

# How often a synchronous wait that also watches a caller's threading.Event looks for a
# model.cancel() (the Event itself is seen at once).
_POLL_S: Final = 0.05

SessionKey: TypeAlias = "str | None"
_Waiter: TypeAlias = "threading.Event | tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]"


def describe_session(key: SessionKey) -> str:
    """How messages name a live session."""
    return "the anonymous session (calls without session_id)" if key is None else f"session {key!r}"


def entry_has_placeholders(entry: ReplayEntry) -> bool:
    """Whether an entry holds a ``{{fromRequest:...}}`` placeholder anywhere."""
    if entry.has_placeholders:
        return True
    if entry.__class__ is ChunksEntry or not isinstance(entry, ThrowEntry):
        return False
    from .placeholders import MARKER

    return MARKER in entry.message or MARKER in entry.code


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _wake(waiter: _Waiter) -> None:
    if isinstance(waiter, threading.Event):
        waiter.set()
        return
    loop, future = waiter
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        loop.call_soon_threadsafe(_settle, future)


class BoundSession:
    """A live session's binding: its script and cursor (mutable, guarded by the lock)."""

    __slots__ = (
        "cursor",
        "entries",
        "epoch",
        "index",
        "key",
        "lock",
        "reading",
        "redact",
        "script",
        "waiters",
    )

    def __init__(
        self,
        key: SessionKey,
        index: int,
        script: SessionScript,
        lock: threading.Lock,
        redact: Callable[[str], str] | None = None,
    ):
        self.key = key
        # The recording's redaction of a live text: placeholders that match nothing in
        # the live request are looked up in its text as the recording would hold it.
        self.redact = redact
        self.lock = lock  # the live sessions' lock: it guards the cursor and the waiters
        self.index = index
        self.script = script
        self.entries = script.entries
        self.cursor = 0
        # cancel() increments the epoch: every call made before it is cancelled.
        self.epoch = 0
        self.waiters: set[_Waiter] = set()
        # Calls being read from their chunk lists: cancel() cuts those lists.
        self.reading: set[ReplayCall] = set()

    def cancel(self) -> list[_Waiter]:
        """Cancel every call made so far (the model's lock is held); return the waiters.

        A call read from its chunk list stops before its next chunk (its list is cut); a
        call whose chunks were all handed out already is left to finish. The caller wakes
        the returned waiters (`wake_all`) once it released the lock.
        """
        self.epoch += 1
        for call in list(self.reading):
            if call.rest.__length_hint__():  # type: ignore[attr-defined]
                call.cut = True
                call.cut_list()
        return list(self.waiters)


def wake_all(waiters: list[_Waiter]) -> None:
    """Wake the waiters `BoundSession.cancel` returned."""
    for waiter in waiters:
        _wake(waiter)


class Pacing:
    """How a replay model's calls wait: the pause before each chunk and the wait functions.

    Attributes:
        pace_s: Seconds to wait before each chunk (``0``: no pacing).
        factor: What recorded chunk gaps are scaled by (``0``: not paced by them;
            [docs/scenarios.md#pacing](../scenarios.md#pacing)).
        paced: Whether a chunk may be waited for (``pace_s`` or ``factor``).
        sleep: The blocking wait of paced sync calls, called with seconds.
        asleep: The awaitable wait of paced async calls (``None``: ``asyncio.sleep``).
        default_sleep: ``sleep`` is ``time.sleep``: a cancel ends the wait at once.
        default_asleep: ``asleep`` is ``asyncio.sleep`` (or unset): the same.
        workdir: Where relative ``readyFile`` paths resolve (``None``: the working
            directory when the file is written).
    """

    __slots__ = (
        "asleep",
        "default_asleep",
        "default_sleep",
        "factor",
        "pace_s",
        "paced",
        "sleep",
        "workdir",
    )

    def __init__(
        self,
        pace_s: float = 0.0,
        sleep: Callable[[float], object] = time.sleep,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        default_sleep: bool = True,
        default_asleep: bool = True,
        workdir: os.PathLike[str] | str | None = None,
        factor: float = 0.0,
    ):
        self.pace_s = pace_s
        self.factor = factor
        self.paced = bool(pace_s or factor)
        self.sleep = sleep
        self.asleep = asleep
        self.default_sleep = default_sleep
        self.default_asleep = default_asleep
        self.workdir = workdir


NO_PACING: Final = Pacing()
"""No pause before chunks, the default waits, ready files in the working directory."""


class ReplayCall:
    """One model call: what to replay, or the error to raise when it is read."""

    __slots__ = (
        "bound",
        "chunks",
        "cut",
        "diverted",
        "entry",
        "epoch",
        "error",
        "flag",
        "kept",
        "number",
        "order",
        "over",
        "placeholders",
        "raised",
        "request",
        "rest",
        "runs",
        "started",
        "tail",
        "unbuilt",
    )

    def __init__(  # positional on the hot path (ReplayModel._call): cheaper than keywords
        self,
        bound: BoundSession | None = None,
        number: int = 0,
        entry: ReplayEntry | None = None,
        placeholders: bool = False,
        request: Mapping[str, Any] | None = None,
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
        self.request = request
        self.flag = flag
        self.error = error
        # chunks, rest, cut: set by _read() before BoundSession.cancel() can see the call
        # (its chunk list, the iterator over it, whether a cancel cut it); started says
        # they are (a flag: asking an unset slot raises, which costs more).
        self.started = False
        self.chunks: list[StreamChunk]
        self.rest: Iterator[StreamChunk]
        self.cut: bool
        # What a follower of the read sees (ChunkStream.handed_out, docs/recording.md#lazy):
        # the chunks handed out when the list was cut, the read's end and its error, and
        # the iterator the rest of a diverted list goes through.
        self.kept: list[StreamChunk] | None = None
        self.over = False
        self.raised: BaseException | None = None
        self.diverted: Callable[[StreamChunk], StreamChunk] | None = None
        self.tail: Iterator[StreamChunk] | None = None
        # Read to its end without its chunks built (read_unbuilt): they are built from
        # the entry when a follower asks for them.
        self.unbuilt = False
        # The entry's runs when read_runs read the call (the chunks are built from them).
        self.runs: list[ChunkRun] | None = None

    # --- what it is ---------------------------------------------------------------------

    def cancelled(self) -> bool:
        """Whether the call was cancelled (``model.cancel()`` or the caller's event)."""
        bound = self.bound
        if bound is not None and bound.epoch != self.epoch:
            return True
        return self.flag is not None and self.flag.is_set()

    def describe(self) -> str:
        """How messages name the call: its session, number and recording."""
        assert self.bound is not None
        script = self.bound.script
        return (
            f"{describe_session(self.bound.key)}, call #{self.number} (recorded session "
            f"{script.recorded_id!r}, {script.file})"
        )

    def cancelled_error(self, during: str = "") -> ReplayCancelledError:
        """The error a cancelled call raises (``during`` says where it was)."""
        return ReplayCancelledError(f"{self.describe()} was cancelled{during}")

    def _resolve(self, value: Any) -> Any:
        from .._wire.request import RequestView  # only for calls that hold a placeholder
        from .placeholders import resolve_placeholders

        bound = self.bound
        assert bound is not None
        try:
            return resolve_placeholders(
                value, RequestView.of(self.request or {}), redact=bound.redact
            )
        except PlaceholderError as err:
            raise PlaceholderError(
                f"{self.describe()}: {err.reason}", path=_placeholder_file(bound.script)
            ) from None

    def prepare(self) -> tuple[list[StreamChunk], str | None, str | None, str | None]:
        """The call's chunks, throw message and code, and readyFile, placeholders resolved.

        Raises:
            PlaceholderError: A placeholder does not resolve against the call's request.
            ScriptError: A ``throw`` entry's ``message`` or ``code`` resolves to an empty
                string (a literal one is refused when the sidecar loads:
                [docs/scenarios.md#override-entries](../scenarios.md#override-entries)).
        """
        entry = self.entry
        assert entry is not None
        if isinstance(entry, HangEntry):
            ready = entry.ready_file
            if self.placeholders and ready is not None:
                ready = self._resolve(ready)
            return entry.chunks, None, None, ready
        if isinstance(entry, ThrowEntry):
            if self.placeholders:
                wire = self._resolve(entry.to_json())
                for field in ("message", "code"):
                    if not wire[field]:
                        raise ScriptError(
                            f"{self.describe()}: the throw entry's {field} "
                            f"{getattr(entry, field)!r} resolves to an empty string; a "
                            "throw needs a non-empty message and code"
                        )
                return wire["chunks"], wire["message"], wire["code"], None
            return entry.chunks, entry.message, entry.code, None
        chunks = entry.chunks
        if self.placeholders:
            chunks = self._resolve(chunks)
        return chunks, None, None, None

    def write_ready_file(self, name: str, workdir: os.PathLike[str] | str | None) -> None:
        """Write a ``hang`` entry's ``readyFile`` (empty), inside ``workdir`` only.

        Args:
            name: The file name, relative to ``workdir``.
            workdir: The directory it must stay in (``None``: the working directory).

        Raises:
            ScriptError: The name holds a NUL byte, leaves ``workdir``, or cannot be written.
        """
        base = os.path.realpath(workdir if workdir is not None else os.getcwd())
        where = self.describe()
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

    # --- replaying it -------------------------------------------------------------------

    def stream(self, pacing: Pacing) -> Iterator[StreamChunk]:
        """The call's replay for a sync caller (see the module docstring)."""
        if not pacing.paced and self.flag is None and self.entry.__class__ is not HangEntry:
            # No frame per chunk: a list iterator hands them out (see _read).
            source = self._read()  # the ChunkStream, made here: one per call
            stream: ChunkStream = ChunkStream.from_iterable(source)  # type: ignore[assignment]
            stream._source = source
            stream._call = self
            return stream
        if not self._pauses(pacing):
            return self._steps(pacing)  # type: ignore[return-value]
        return self._paced(pacing)

    async def astream(self, pacing: Pacing) -> AsyncIterator[StreamChunk]:
        """The call's replay for an async caller: the same chunks, pauses and errors."""
        if not pacing.paced and self.flag is None and self.entry.__class__ is not HangEntry:
            # chain.from_iterable(self._read()) unrolled: each chunk is one C call fewer
            for chunks in self._read():
                for item in chunks:
                    yield item
            return
        if not self._pauses(pacing):
            for chunk in self._steps(pacing):
                yield chunk  # type: ignore[misc]
            return
        for step in self._steps(pacing):
            if not isinstance(step, _Pause):
                yield step
            elif step is _HANG:
                await self._await_cancelled(None)
            elif pacing.default_asleep:
                if await self._await_cancelled(step.seconds):
                    raise self.cancelled_error(" while pacing")
            else:
                assert pacing.asleep is not None
                await pacing.asleep(step.seconds)
                if self.cancelled():
                    raise self.cancelled_error(" while pacing")

    def _pauses(self, pacing: Pacing) -> bool:
        """Whether the call can pause at all (pacing, or a ``hang`` entry)."""
        return pacing.paced or isinstance(self.entry, HangEntry)

    def _steps(self, pacing: Pacing) -> Iterator[StreamChunk | _Pause]:
        """The replay, the same for both drivers: its chunks, and where it pauses.

        The sync and async drivers only carry out the pauses (a pacing wait before a
        chunk, or a ``hang`` entry's wait until the call is cancelled) their own way.
        """
        if self.error is not None:
            raise self.error
        chunks, message, code, ready = self.prepare()
        if isinstance(self.entry, HangEntry):
            yield chunks[0]
            yield chunks[1]
            if ready is not None:
                self.write_ready_file(ready, pacing.workdir)
            yield _HANG
            raise self.cancelled_error(" while its recorded stream hung")
        # Only paced calls and calls with a caller's event come here (see stream).
        for chunk, wait in zip(chunks, chunk_waits(self.entry, len(chunks), pacing), strict=True):
            if self.cancelled():
                raise self.cancelled_error()
            if wait:
                yield _Pause(wait)
            yield chunk
        if message is not None:
            assert code is not None
            raise ReplayedModelError(message, code)

    def _paced(self, pacing: Pacing) -> Iterator[StreamChunk]:
        for step in self._steps(pacing):
            if not isinstance(step, _Pause):
                yield step
            elif step is _HANG:
                self._wait_cancelled(None)
            elif pacing.default_sleep:
                if self._wait_cancelled(step.seconds):
                    raise self.cancelled_error(" while pacing")
            else:
                pacing.sleep(step.seconds)
                if self.cancelled():
                    raise self.cancelled_error(" while pacing")

    def cut_list(self) -> list[StreamChunk]:
        """Stop the list read where it is: keep what was handed out, return the rest.

        The list iterator ends at its next read (the reader then raises the
        cancellation, or goes on through `diverted`).
        """
        chunks = self.chunks
        handed = self.handed_count()
        self.kept = chunks[:handed]
        rest = chunks[handed:]
        del chunks[:]
        return rest

    def divert(self, log: Callable[[StreamChunk], StreamChunk]) -> None:
        """Hand out every chunk not handed out yet through ``log`` first.

        For a follower that can no longer follow the read by counting (see
        `ChunkStream.divert`).
        """
        self.diverted = log
        if not self.started:
            return  # not started: the whole list goes through log
        rest = self.cut_list()
        self.chunks = rest
        self.rest = iter(rest)
        self.tail = map(log, self.rest)

    def handed_count(self) -> int:
        """How many chunks the caller was handed so far."""
        kept = self.kept
        if kept is not None:
            return len(kept)
        if self.unbuilt:
            return cast(ChunksEntry, self.entry).chunk_count
        if not self.started:  # not read yet
            return 0
        chunks = self.chunks
        return len(chunks) - self.rest.__length_hint__()  # type: ignore[attr-defined, no-any-return]

    def handed_out(self) -> list[StreamChunk]:
        """The chunks the caller was handed so far, in order (a new list)."""
        kept = self.kept
        if kept is not None:
            return kept
        if self.unbuilt:  # read without building them: built now, as the read would have
            runs = self.runs
            entry = cast(ChunksEntry, self.entry)
            self.kept = kept = entry.chunks if runs is None else materialize_runs(runs)
            return kept
        if not self.started:  # not read yet
            return []
        return self.chunks[: self.handed_count()]

    def read_unbuilt(self) -> int | None:
        """Count the whole call as read without building its chunk objects.

        For a caller that needs none of them (the model endpoint serving an encoding it
        kept for the entry, [docs/wires.md#encoded-once](../wires.md#encoded-once)): the
        call ends as a list read that handed out every chunk ends, and a follower of the
        read gets the entry's chunks, built when it asks (`handed_out`).

        Returns:
            How many chunks the call counts as handed out; ``None`` (nothing changed)
            unless the call replays a chunks entry without placeholders, unread, not
            diverted and not cancelled.
        """
        entry = self._unread_entry()
        if entry is None:
            return None
        count = entry.chunk_count
        self.unbuilt = True
        self.over = True
        return count

    def read_runs(self) -> list[ChunkRun] | None:
        """Read the whole call as its entry's chunk runs, without building its chunks.

        As `read_unbuilt`, for a caller that reads the runs themselves (the model
        endpoint, for a wire whose encoder frames them,
        [docs/wires.md#encoded-once](../wires.md#encoded-once)); a follower of the read
        gets the chunks built from these runs when it asks (`handed_out`), so the
        caller must not change them.

        Returns:
            The entry's runs (`ChunksEntry.runs`); ``None`` (nothing changed) unless
            `read_unbuilt` could read the call and the entry's one ``finish`` is its
            last chunk, and the entry's stream reads without error.
        """
        entry = self._unread_entry()
        if entry is None:
            return None
        try:
            if not entry.ends_with_finish:
                return None
            runs = entry.runs()
        except DshReplayError:  # a raw payload that breaks a rule: the usual read raises it
            return None
        self.runs = runs
        self.unbuilt = True
        self.over = True
        return runs

    def as_recorded(self) -> ChunksEntry | None:
        """The call's entry when its chunks go out as recorded, else ``None``.

        A chunks entry without placeholders, on a call not diverted: what a whole read
        (`read_unbuilt`) and the log check by reference (`FollowedRead.whole_entry`) start from.
        """
        entry = self.entry
        if entry.__class__ is not ChunksEntry or self.placeholders or self.diverted is not None:
            return None
        assert isinstance(entry, ChunksEntry)
        return entry

    def _unread_entry(self) -> ChunksEntry | None:
        """The call's entry when it can be read whole at once (see `read_unbuilt`)."""
        entry = self.as_recorded()
        if (
            entry is None
            or self.error is not None
            or self.over
            or self.started  # the read started
            or self.cancelled()
        ):
            return None
        return entry

    def _read(self) -> Generator[Iterator[StreamChunk], None, None]:
        """The replay for ``itertools.chain.from_iterable``: one iterator over the chunks.

        For a call that neither paces, hangs nor watches a caller's event: the chunks are
        handed out by a list iterator, and `BoundSession.cancel` empties the list,
        so the next read raises the cancellation instead of a chunk. ``over`` and
        ``raised`` tell a follower of the read (`ChunkStream`) that it ended and how.
        One generator, no inner one: it is made for every call.

        Raises:
            Exception: ``error``; what `prepare` raises; the cancellation when the
                call was cancelled before a chunk;
                [`ReplayedModelError`][pytest_dsh_replay.ReplayedModelError] at the end of a
                ``throw`` entry.
        """
        try:
            if self.error is not None:
                raise self.error
            entry = self.entry
            if entry.__class__ is ChunksEntry and not self.placeholders:
                chunks, message, code = entry.chunks, None, None  # prepare(), without branches
            else:
                chunks, message, code, _ready = self.prepare()
            if chunks:
                bound = self.bound
                assert bound is not None
                self.rest = rest = iter(chunks)  # first: a follower reads chunks, then rest
                self.chunks = chunks
                self.cut = False
                self.started = True
                reading = bound.reading
                reading.add(self)
                try:
                    # After registering: a cancel() that missed this call raised the epoch
                    # first.
                    if bound.epoch != self.epoch:
                        raise self.cancelled_error()
                    yield rest if self.diverted is None else map(self.diverted, rest)
                    if self.tail is not None:  # diverted during the read (see divert)
                        yield self.tail
                except GeneratorExit:  # closed: the rest of the list is not handed out
                    self._closed()
                    raise
                finally:
                    reading.discard(self)
                if self.cut:
                    raise self.cancelled_error()
            if message is not None:
                assert code is not None
                raise ReplayedModelError(message, code)
        except GeneratorExit:
            raise
        except BaseException as error:
            self.raised = error
            raise
        finally:
            self.over = True

    def _closed(self) -> None:
        """The list read was closed: the rest of the list is not handed out."""
        if self.kept is None:
            self.cut_list()
        else:  # cut before (diverted): the rest is the list the tail reads
            del self.chunks[:]

    # --- waiting until cancelled --------------------------------------------------------

    def _wait_cancelled(self, timeout: float | None) -> bool:
        """Block until the call is cancelled (True) or ``timeout`` seconds pass (False)."""
        bound = self.bound
        assert bound is not None
        flag = self.flag
        if isinstance(flag, threading.Event):
            # The caller's event is waited on directly; model.cancel() is polled.
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                step = _POLL_S
                if deadline is not None:
                    step = min(step, deadline - time.monotonic())
                    if step <= 0:
                        return self.cancelled()
                if flag.wait(step) or bound.epoch != self.epoch:
                    return True
        event = threading.Event()
        lock = bound.lock
        with lock:
            if self.cancelled():
                return True
            bound.waiters.add(event)
        try:
            event.wait(timeout)
        finally:
            with lock:
                bound.waiters.discard(event)
        return self.cancelled()

    async def _await_cancelled(self, timeout: float | None) -> bool:
        """Wait until the call is cancelled (True) or ``timeout`` seconds pass (False).

        Task cancellation propagates as `asyncio.CancelledError`.
        """
        bound = self.bound
        assert bound is not None
        import asyncio

        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = (loop, future)
        lock = bound.lock
        with lock:
            if self.cancelled():
                return True
            bound.waiters.add(waiter)
        timer = None if timeout is None else loop.call_later(timeout, _settle, future)
        watcher: asyncio.Task[Any] | None = None
        flag = self.flag
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
        return self.cancelled()


class _Pause:
    """A step of a replayed call where the driver waits (see ``ReplayCall._steps``).

    Attributes:
        seconds: How long to wait before the next chunk (`_HANG`: until cancelled).
    """

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


_HANG: Final = _Pause(0.0)  # wait until the call is cancelled


class ChunkStream(chain[StreamChunk]):
    """``chain.from_iterable`` over a call's reader that can be closed like a generator.

    The chunks still come from C (no Python frame per chunk); `close` closes the
    underlying reader, which hands out nothing more afterwards. Made by
    `ReplayCall.stream` (``from_iterable`` over the call's reader, then its two slots).
    """

    __slots__ = ("_call", "_source")
    _source: Generator[Iterator[StreamChunk], None, None]
    _call: ReplayCall

    def close(self) -> None:
        """End the stream, as ``generator.close()`` would."""
        self._source.close()

    def read_unbuilt(self) -> int | None:
        """Read the whole stream at once without building its chunks; nothing more comes.

        See `ReplayCall.read_unbuilt`.

        Returns:
            How many chunks the call counts as handed out, or ``None`` when it cannot
            be read so (the stream is unchanged: read it as usual).
        """
        count = self._call.read_unbuilt()
        if count is not None:
            self._source.close()  # not started: the chain ends at its first read
        return count

    def read_runs(self) -> list[ChunkRun] | None:
        """Read the whole stream at once as its entry's chunk runs; nothing more comes.

        See `ReplayCall.read_runs` (the runs are not to be changed).

        Returns:
            The runs, or ``None`` when the stream cannot be read so (it is unchanged:
            read it as usual).
        """
        runs = self._call.read_runs()
        if runs is not None:
            self._source.close()
        return runs

    # --- following the read (docs/recording.md#lazy) --------------------------------------

    def followable(self) -> bool:
        """Whether a follower can log this read by counting what it handed out.

        True for a call that raises before its first chunk, and for a chunks entry
        without placeholders whose one ``finish`` is its last chunk.
        """
        call = self._call
        if call.error is not None:
            return True
        entry = call.entry
        if entry.__class__ is not ChunksEntry or call.placeholders:
            return False
        assert isinstance(entry, ChunksEntry)
        return entry.ends_with_finish

    def followed(self) -> FollowedRead:
        """What a follower needs of this read; it does not keep the stream alive.

        A stream the caller drops is closed then (as a dropped generator is), and the
        follower sees a read that ended where the caller left it.
        """
        return FollowedRead(self._call)


class FollowedRead:
    """A read of a `ReplayCall` as its follower sees it.

    See [docs/recording.md#lazy](../recording.md#lazy).

    Made by `ChunkStream.followed`; holds the call, not the stream, so the caller
    may drop the stream.
    """

    __slots__ = ("_call", "_recorded")

    def __init__(self, call: ReplayCall):
        self._call = call
        self._recorded: list[StreamChunk] | None = None

    def handed_out(self, *, copies: bool = False) -> list[StreamChunk]:
        """The chunks handed out so far, in order (a new list).

        Args:
            copies: New objects with the recorded values instead of the very objects
                the caller got (which it may have changed since).
        """
        if not copies:
            return self._call.handed_out()
        count = self._call.handed_count()
        if not count:
            return []
        recorded = self._recorded
        if recorded is None:
            entry = self._call.entry
            assert entry is not None
            recorded = self._recorded = entry.chunks
        return recorded[:count]

    def whole_entry(self, copies: bool) -> ChunksEntry | None:
        """The entry this read replayed whole and unchanged, else ``None``.

        A chunks entry without placeholders whose every chunk was handed out, the read
        neither raising nor diverted; with ``copies`` ``False`` (the caller's own chunk
        objects are what is logged) only a read that built no chunk for the caller
        (`ReplayCall.read_unbuilt`, `ReplayCall.read_runs`). Then what the read logs is
        the entry's chunks as recorded: the log check by reference takes the entry for
        them ([docs/checks.md#by-reference](../checks.md#by-reference)).
        """
        call = self._call
        entry = call.as_recorded()
        if (
            entry is None
            or call.raised is not None
            or not (copies or call.unbuilt)
            or call.handed_count() != entry.chunk_count
        ):
            return None
        return entry

    def done(self) -> bool:
        """Whether nothing more will be handed out: the read ended, or its last chunk went."""
        call = self._call
        if call.over:
            return True
        entry = call.entry
        return isinstance(entry, ChunksEntry) and call.handed_count() == entry.chunk_count

    def error(self) -> BaseException | None:
        """What the read raised, if it raised."""
        return self._call.raised

    def divert(self, log: Callable[[StreamChunk], StreamChunk]) -> None:
        """From now on hand every chunk through ``log`` first (the follower logs them)."""
        self._call.divert(log)


def _placeholder_file(script: SessionScript) -> str:
    """Where a script's placeholders are written: its override sidecar, when it has one.

    Placeholders are usually written into a sidecar
    ([docs/placeholders.md](../placeholders.md)); without one, the log itself.
    """
    path = script.path
    if path is None:
        return script.file
    parsed = parse_log_name(path.name)
    child = None if parsed is None else parsed.child
    sidecar = path.with_name(sidecar_name(child or 0))
    return str(sidecar if sidecar.is_file() else path)
