"""A session of the store: its header, its append-only event log and how events are built.

[`Session`][pytest_dsh_replay.Session] objects come from
[`SessionStore`][pytest_dsh_replay.SessionStore] (``create``, ``fork``, ``load``); each
append is checked (the event rules, lossless JSON, the surface rule) and written through the
store's backend. ``assistant/chunk`` events, the bulk of a log, can be appended cheaply
([`Session.append_chunk`][pytest_dsh_replay.Session.append_chunk]).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final, Protocol, overload

import orjson

from .._errors import DshReplayError, SessionStoreError
from .._format.chunk_rows import PACKED_TAGS
from .._format.events import Event, SessionHeader
from .._format.json_values import is_safe_integer, json_copy
from .backends.base import SessionBackend
from .log_rules import Surface, interrupted_turn_closers, quote
from .plain import PlainJSONEvents

__all__ = ["ChunkRun", "ChunkSource", "Session", "SessionOwner"]


class SessionOwner(Protocol):
    """What a [`Session`][pytest_dsh_replay.Session] asks of the store that owns it.

    A ``SessionStore`` hands its sessions an owner that holds no session, so a store and
    its sessions form no reference cycle: dropping them frees them at once, without the
    garbage collector ([docs/api/store.md#api-stores](store.md#api-stores)).
    """

    @property
    def backend(self) -> SessionBackend:
        """Where the session's events are written."""

    def now(self) -> int:
        """The store clock, Unix ms."""

    @property
    def closed(self) -> bool:
        """Whether the store was closed (its sessions are no longer live)."""


_ENVELOPE_ALIASES: Final[dict[str, str]] = {
    "sourceEventSeqs": "sourceEventSeqs",
    "source_event_seqs": "sourceEventSeqs",
    "surfaceOp": "surfaceOp",
    "surface_op": "surfaceOp",
    "ignorable": "ignorable",
    "time": "time",
}


def _build_event(
    kind: object, data: object, envelope: Mapping[str, Any], now: Callable[[], int]
) -> Event:
    """A new event from `Session.append`'s arguments, copied and checked."""
    if not isinstance(kind, str) or not kind:
        raise SessionStoreError(f"event type must be a non-empty string, got {kind!r}")
    if kind in PACKED_TAGS:
        raise SessionStoreError(
            f"{quote(kind)} is a packed chunk row tag (a storage encoding), not an event "
            "type; append assistant/chunk events and the backend packs them"
        )
    event: Event = {"type": kind, "seq": -1, "time": 0, "data": None}
    if not envelope:  # the common case (a chunk): no envelope fields to check
        event["time"] = now()
        event["data"] = json_copy(data, f"{kind} data")
        return event
    unknown = sorted(set(envelope) - set(_ENVELOPE_ALIASES))
    if unknown:
        raise SessionStoreError(
            f"{kind} has an invalid event envelope: unknown field(s) {', '.join(unknown)} "
            "(allowed: surfaceOp, sourceEventSeqs, ignorable, time)"
        )
    fields = {_ENVELOPE_ALIASES[k]: v for k, v in envelope.items() if v is not None}
    when = fields.pop("time", None)
    if when is None:
        when = now()
    elif not is_safe_integer(when):
        raise SessionStoreError(f"{kind}: time must be a safe integer (Unix ms), got {when!r}")
    event["time"] = int(when)
    event["data"] = json_copy(data, f"{kind} data")
    if "sourceEventSeqs" in fields:
        seqs = fields["sourceEventSeqs"]
        if not isinstance(seqs, list | tuple):
            raise SessionStoreError(
                f"{kind}: sourceEventSeqs must be a list of earlier seqs, got {seqs!r}"
            )
        event["sourceEventSeqs"] = json_copy(list(seqs), f"{kind} sourceEventSeqs")
    if "surfaceOp" in fields:
        event["surfaceOp"] = json_copy(fields["surfaceOp"], f"{kind} surfaceOp")
    ignorable = fields.get("ignorable", False)
    if ignorable is True:
        event["ignorable"] = True
    elif ignorable is not False:
        raise SessionStoreError(f"{kind}: ignorable may only be True, got {ignorable!r}")
    return event


class ChunkSource(Protocol):
    """A stream a `ChunkRun` follows.

    See [`Session.follow`][pytest_dsh_replay.Session.follow] and
    [docs/recording.md#lazy](../recording.md#lazy).

    The run logs what the stream handed out by asking, on each read or write of the
    session, instead of being handed each chunk.
    """

    def handed_out(self) -> list[Any]:
        """The chunks to log so far, in order (a new list; the objects stay unchanged)."""

    def done(self) -> bool:
        """Whether nothing more will be handed out."""

    def ended(self, run: ChunkRun) -> None:
        """Called once when `done`, after the run's events are built (lock held)."""

    def diverted(self, run: ChunkRun) -> None:
        """Called when another write ends the run before `done` (lock held).

        From then on the source adds each further chunk to the run itself.
        """


class ChunkRun:
    """One call's ``assistant/chunk`` events, added as they stream and built when read.

    From [`Session.chunk_run`][pytest_dsh_replay.Session.chunk_run].
    [`add`][pytest_dsh_replay.ChunkRun.add] keeps the chunk itself (no copy, no check), so
    the caller hands it over: nothing may change it afterwards. The events are built, in
    order and checked in one pass, on the session's next read or write, as
    [`Session.append_chunk`][pytest_dsh_replay.Session.append_chunk] would have built them
    one by one, except that the events built together share one ``time`` (when they are built).

    Attributes:
        chunks: The chunks added so far, in order (do not mutate).
    """

    __slots__ = ("_built", "_seqs", "_session", "_source", "chunks", "step", "turn")

    def __init__(self, session: Session, turn: object, step: object):
        self._session = session
        self.turn = turn
        self.step = step
        self.chunks: list[Any] = []
        self._built = 0  # how many chunks have events
        self._seqs: list[int] = []
        self._source: ChunkSource | None = None  # the stream it follows (Session.follow)

    def add(self, chunk: object) -> None:
        """Add the next chunk (handed over; see the class docstring).

        Raises:
            SessionStoreError: The session is no longer live.
        """
        session = self._session
        with session._lock:
            if self is session._chunk_run:
                self.chunks.append(chunk)
            else:  # ended: the chunk follows what came since
                self._seqs.append(session.append_chunk(self.turn, self.step, chunk, parsed=True))
                self.chunks.append(chunk)
                self._built += 1

    @property
    def seqs(self) -> list[int]:
        """The ``seq`` of each chunk's event (building the events of the run first)."""
        self._session._settle()
        return list(self._seqs)

    def _unbuilt(self) -> list[Any]:
        """The chunks without events yet."""
        return self.chunks[self._built :]


def _chunk_events(run: ChunkRun, chunks: list[Any], when: int, base: int) -> list[Event]:
    """The ``assistant/chunk`` events of a run's chunks from ``seq`` ``base``, checked.

    The check is one serialization of the whole run (lossless JSON); a doubtful run is
    checked event by event, and the copy of a doubtful value says what is wrong.
    """
    turn, step = run.turn, run.step
    try:
        blob = orjson.dumps([turn, step, chunks], option=orjson.OPT_STRICT_INTEGER)
    except TypeError:  # orjson.JSONEncodeError: json_copy names the problem
        blob = b"-0.0"
    if b"-0.0" in blob:
        datas = [
            json_copy({"turn": turn, "step": step, "chunk": chunk}, "assistant/chunk data")
            for chunk in chunks
        ]
        return [
            {"type": "assistant/chunk", "seq": base + i, "time": when, "data": data}
            for i, data in enumerate(datas)
        ]
    return [
        {
            "type": "assistant/chunk",
            "seq": base + i,
            "time": when,
            "data": {"turn": turn, "step": step, "chunk": chunk},
        }
        for i, chunk in enumerate(chunks)
    ]


class _EventsView(Sequence[Event]):
    """A read-only view of a session's events (the event dicts must not be mutated).

    ``settle`` is called before each read, so chunks appended with
    [`Session.append_chunk`][pytest_dsh_replay.Session.append_chunk] are there for views
    taken before them too.
    """

    __slots__ = ("_events", "_settle")

    def __init__(self, events: list[Event], settle: Callable[[], None]):
        self._events = events
        self._settle = settle

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        self._settle()
        return self._events[index]

    def __len__(self) -> int:
        self._settle()
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        self._settle()
        return iter(self._events[:])

    def __repr__(self) -> str:
        return f"<{len(self)} events>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _EventsView):
            return self[:] == other[:]
        if isinstance(other, list):
            return self[:] == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Session(PlainJSONEvents):
    """One session of a `SessionStore`: a header and an append-only event log.

    Get sessions from [`SessionStore.create`][pytest_dsh_replay.SessionStore.create],
    [`SessionStore.fork`][pytest_dsh_replay.SessionStore.fork] or
    [`SessionStore.load`][pytest_dsh_replay.SessionStore.load], never by constructing one. A
    session satisfies `SessionLike`, so ``write_scenario(path, store.sessions())`` writes a
    store's sessions as a scenario.

    Attributes:
        id: The session id.
        header: The [`SessionHeader`][pytest_dsh_replay.SessionHeader] (fixed for life).
        events: A read-only sequence of the event dicts, seq order; do not mutate them.
        seed_length: The header's ``seedLength`` (0 when absent): leading events
            inherited from a fork parent.
    """

    # __weakref__: a deferred write holds its session weakly (no reference cycle).
    __slots__ = (
        "__weakref__",
        "_batch_depth",
        "_chunk_run",
        "_deferred",
        "_deferring",
        "_events",
        "_header",
        "_lock",
        "_pending",
        "_persisted",
        "_run",
        "_run_times",
        "_store",
        "_surface",
        "_written",
    )

    def __init__(
        self,
        store: SessionOwner,
        header: SessionHeader,
        events: list[Event],
        *,
        persisted: bool,
    ):
        self._store = store
        self._header = header
        self._events = events
        self._lock = threading.RLock()
        self._surface = Surface()
        for i, event in enumerate(events):
            self._surface.apply(i, self._surface.plan(event, events))
        self._persisted = persisted
        self._written = len(events) if persisted else 0
        self._pending: list[Event] = []
        self._batch_depth = 0
        self._run: list[bytes] = []  # chunk event data from append_chunk, not built yet
        self._run_times: list[int] = []
        self._chunk_run: ChunkRun | None = None  # the open run of chunk_run, if any
        self._deferred: collections.deque[Callable[[], None]] = collections.deque()
        self._deferring = False  # a deferred write is running (in the lock's holder)
        if not persisted and events:
            self._write(list(events))  # a seed and its marker are written at once
        elif persisted:
            closers = interrupted_turn_closers(events)
            if closers:  # a turn a crash left open is closed, and that is persisted
                self._write(closers)
                for event in closers:
                    events.append(event)
                    self._surface.apply(event["seq"], self._surface.plan(event, events))

    @property
    def id(self) -> str:
        """The session id."""
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        """The session header."""
        return self._header

    @property
    def events(self) -> Sequence[Event]:
        """The events in seq order, a read-only live view."""
        return _EventsView(self._events, self._settle)

    @property
    def seed_length(self) -> int:
        """The header ``seedLength`` (0 when absent)."""
        return self._header.seed_length

    @property
    def parent_session(self) -> str | None:
        """The header ``parentSession``."""
        return self._header.parent_session

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, events={len(self.events)})"

    def append(self, type: str, data: object, **envelope: object) -> Event:
        """Append one event and persist it.

        Args:
            type: The event type, e.g. ``"turn/start"`` (not a packed-row tag).
            data: The payload: lossless JSON (no NaN, infinities, ``-0.0``, integers
                beyond 2**53 - 1, tuples or other objects). It is copied.
            **envelope: ``surfaceOp`` (``"append"`` or ``{"op": "replace", "start",
                "end"}``; required on ``user/message``, ``assistant/message`` and
                ``tool/result`` and allowed only there), ``sourceEventSeqs`` (earlier
                seqs; the same types only), ``ignorable=True``, and ``time`` (Unix ms;
                default: the store's clock). Snake-case spellings are accepted.

        Returns:
            The stored event ``{"type", "seq", "time", "data", ...}``; ``seq`` is its
            position in the log. Do not mutate it.

        Raises:
            SessionStoreError: The event is invalid (the message says which rule), the
                session is no longer live, or the write failed (nothing was appended).
        """
        event = _build_event(type, data, envelope, self._store.now)
        with self._lock:
            self._settle()  # an open ChunkRun's later chunks follow this event
            self._check_live()
            seq = len(self._events)
            event["seq"] = seq
            try:
                span = self._surface.plan(event, self._events)
            except ValueError as err:
                raise SessionStoreError(
                    f"session {quote(self.id)}: {type} at seq {seq}: {err}"
                ) from None
            if self._batch_depth:
                self._events.append(event)
                self._surface.apply(seq, span)
                self._pending.append(event)
                return event
            self._write([event])
            self._events.append(event)
            self._surface.apply(seq, span)
            return event

    def append_chunk(
        self, turn: object, step: object, chunk: object, *, parsed: bool = False
    ) -> int:
        """Append one ``assistant/chunk`` event ``{"turn", "step", "chunk"}``, cheaply.

        The same event [`append`][pytest_dsh_replay.Session.append] would store, for the
        bulk of a log: the data is serialized at once (so later changes to ``chunk`` do not
        reach the log) and the event is built, with every chunk appended since, on the next read of
        [`events`][pytest_dsh_replay.Session.events] or the next other write
        ([`append`][pytest_dsh_replay.Session.append],
        [`flush`][pytest_dsh_replay.Session.flush], the end of a
        [`batch`][pytest_dsh_replay.Session.batch]), in one backend write. Until then a
        crash loses the run, as the harness's write-behind window does.

        Args:
            turn: The event's ``turn``.
            step: The event's ``step``.
            chunk: The stream chunk: lossless JSON, as for
                [`append`][pytest_dsh_replay.Session.append].
            parsed: The caller vouches that ``chunk`` holds only what a JSON parser
                makes (dicts, lists, strings, ints, floats, booleans, ``None``), as a
                replayed chunk does; then only lone surrogates, unsafe integers and
                ``-0.0`` are checked, which is much cheaper than the whole check.

        Returns:
            The event's ``seq``.

        Raises:
            SessionStoreError: The data is not lossless JSON (nothing was appended), or
                the session is no longer live.
        """
        data = {"turn": turn, "step": step, "chunk": chunk}
        try:
            blob = orjson.dumps(data, option=orjson.OPT_STRICT_INTEGER)
        except TypeError:  # orjson.JSONEncodeError: what json_copy names in words
            blob = b""
        if not blob or b"-0.0" in blob or not (parsed or orjson.loads(blob) == data):
            blob = orjson.dumps(json_copy(data, "assistant/chunk data"))
        when = self._store.now()
        with self._lock:
            if self._deferred:
                self._run_deferred()
            if self._chunk_run is not None:
                self._settle_chunk_run(end=True)
            self._check_live()
            self._run.append(blob)
            self._run_times.append(when)
            return len(self._events) + len(self._run) - 1

    def defer(self, write: Callable[[], None]) -> None:
        """Run ``write`` when the session is next read or written.

        See [docs/recording.md#lazy](../recording.md#lazy).

        ``write`` makes the session's own writes (``append``,
        [`follow`][pytest_dsh_replay.Session.follow], ...) that nobody has needed yet; it
        runs, with the session's lock held, before anything else reads or writes the
        session, after the writes deferred before it, so what a reader sees is what it would
        see had ``write`` run now. It must not take locks that are held while the session is
        written elsewhere (it may be run by any thread that reads the session); what it
        raises reaches that reader.

        Raises:
            SessionStoreError: The session is no longer live.
        """
        with self._lock:
            self._check_live()
            self._deferred.append(write)

    def only_deferred(self) -> tuple[Callable[[], None], ...] | None:
        """The deferred writes, when they are all the session holds beyond its header.

        See [docs/checks.md#by-reference](../checks.md#by-reference): no event built,
        appended or pending (no seed either), only what [`defer`][pytest_dsh_replay.Session.defer]
        queued, in order; ``None`` otherwise. Call it with the session held.
        """
        with self._lock:
            if self._events or self._run or self._pending or self._chunk_run is not None:
                return None
            if self._deferring:
                return None
            return tuple(self._deferred)

    def replace_deferred(
        self, writes: tuple[Callable[[], None], ...], write: Callable[[], None]
    ) -> bool:
        """Put ``write`` in place of the deferred writes ``writes``, if they are still queued.

        For a writer that has worked out what ``writes`` would write (the log check by
        reference, [docs/checks.md#by-reference](../checks.md#by-reference)); ``write``
        then runs when they would have run.

        Returns:
            Whether the queue held exactly ``writes`` (then it holds ``write`` alone).
        """
        with self._lock:
            queued = self._deferred
            if self._deferring or len(queued) != len(writes):
                return False
            if any(a is not b for a, b in zip(queued, writes, strict=True)):
                return False
            queued.clear()
            queued.append(write)
            return True

    @contextmanager
    def held(self) -> Iterator[Session]:
        """Hold the session's lock: no other thread reads, writes or runs a deferred write.

        For a writer whose several writes must not be interleaved with the deferred
        writes of [`defer`][pytest_dsh_replay.Session.defer] (which run with this lock
        held). Reentrant.
        """
        with self._lock:
            yield self

    def chunk_run(self, turn: object, step: object) -> ChunkRun:
        """Open a `ChunkRun`: the cheapest way to log a call's chunks as they stream.

        Each added chunk becomes the ``assistant/chunk`` event ``{"turn", "step",
        "chunk"}``, as with [`append_chunk`][pytest_dsh_replay.Session.append_chunk], but
        the event is built (and the data checked) only on the next read or write of the
        session; the chunks added after another event follow that event. A session has
        one open run: the next
        [`chunk_run`][pytest_dsh_replay.Session.chunk_run] or
        [`append_chunk`][pytest_dsh_replay.Session.append_chunk] ends it (its later chunks
        are then appended one by one, still in order).

        Args:
            turn: The events' ``turn``.
            step: The events' ``step``.

        Returns:
            The run.

        Raises:
            SessionStoreError: The session is no longer live.
        """
        with self._lock:
            self._settle()
            if self._chunk_run is not None and self._chunk_run._source is not None:
                self._settle_chunk_run(end=True)
            self._check_live()
            run = self._chunk_run = ChunkRun(self, turn, step)
            return run

    def follow(self, turn: object, step: object, source: ChunkSource) -> ChunkRun:
        """Open a `ChunkRun` that follows ``source``.

        See [docs/recording.md#lazy](../recording.md#lazy).

        Like [`chunk_run`][pytest_dsh_replay.Session.chunk_run], but nothing is added: on
        each read or write of the session the run takes the chunks ``source`` handed out
        since, and builds their events as [`chunk_run`][pytest_dsh_replay.Session.chunk_run]
        would have; once ``source`` is done it calls ``source.ended(run)`` and stops
        following. A write that ends the run earlier
        ([`append_chunk`][pytest_dsh_replay.Session.append_chunk], another
        [`chunk_run`][pytest_dsh_replay.Session.chunk_run] or
        [`follow`][pytest_dsh_replay.Session.follow]) calls ``source.diverted(run)``
        instead: the source then adds the rest itself.

        Raises:
            SessionStoreError: The session is no longer live.
        """
        run = self.chunk_run(turn, step)
        run._source = source
        return run

    def stop_following(self, run: ChunkRun) -> None:
        """Build the events of what ``run``'s source handed out, and stop following it.

        Calls ``source.ended(run)`` if the source is done; otherwise the source's later
        chunks are no longer logged by the run. Nothing happens to a run that no longer
        follows.
        """
        with self._lock:
            if run._source is None:
                return
            if run is self._chunk_run:
                self._settle_chunk_run()
            if run._source is not None:
                run._source = None
                if run is self._chunk_run:
                    self._chunk_run = None

    def _live(self) -> bool:
        """Whether the session is still its store's: the store is not closed.

        A store never replaces a live session (``load`` refuses one), so a session is
        live from its creation or loading until the store closes.
        """
        return not self._store.closed

    def _check_live(self) -> None:
        """Raise `SessionStoreError` unless the session is `_live`."""
        if not self._live():
            raise SessionStoreError(f"session {quote(self.id)} is not live in this store")

    def _run_deferred(self) -> None:
        """Run the deferred writes in order (the lock is held; see `defer`).

        A write's own reads and writes of the session do not start the next one.
        """
        if self._deferring:
            return
        self._deferring = True
        try:
            while self._deferred:
                self._deferred.popleft()()
        finally:
            self._deferring = False

    def _settle(self) -> None:
        """Run the deferred writes, then build the events of the pending chunks and write them.

        The open [`ChunkRun`][pytest_dsh_replay.ChunkRun]'s come first:
        [`append_chunk`][pytest_dsh_replay.Session.append_chunk] ends it.
        """
        with self._lock:  # a reader waits for a deferred write another thread runs
            if not self._live():
                return  # closed: what it held was written when its store closed
            if self._deferred:
                self._run_deferred()
            if self._chunk_run is not None:
                self._settle_chunk_run()
            run, times = self._run, self._run_times
            if not run:
                return
            self._run, self._run_times = [], []
            base = len(self._events)
            datas = orjson.loads(b"[" + b",".join(run) + b"]")
            events: list[Event] = [
                {"type": "assistant/chunk", "seq": base + i, "time": when, "data": data}
                for i, (when, data) in enumerate(zip(times, datas, strict=True))
            ]
            if self._batch_depth:
                self._events.extend(events)
                self._pending.extend(events)
                return
            self._write(events)
            self._events.extend(events)

    def _settle_chunk_run(self, *, end: bool = False) -> None:
        """Build the open `ChunkRun`'s new events and write them (the lock is held)."""
        run = self._chunk_run
        assert run is not None
        source = run._source
        done = False
        if source is not None:
            done = source.done()  # first: what it handed out then is all it hands out
            run.chunks = source.handed_out()
        if end or done:
            self._chunk_run = None
        self._build_run(run)
        if source is not None and (end or done):
            run._source = None
            if done:
                source.ended(run)
            else:
                source.diverted(run)

    def _build_run(self, run: ChunkRun) -> None:
        """Build and write the events of ``run``'s chunks without events (the lock is held)."""
        chunks = run._unbuilt()
        if not chunks:
            return
        base = len(self._events)
        events = _chunk_events(run, chunks, self._store.now(), base)
        run._built += len(chunks)
        run._seqs.extend(range(base, base + len(events)))
        if self._batch_depth:
            self._events.extend(events)
            self._pending.extend(events)
            return
        self._write(events)
        self._events.extend(events)

    @contextmanager
    def batch(self) -> Iterator[Session]:
        """Group appends into one write (one packed batch, one transaction).

        Appends inside the block are visible at once in
        [`events`][pytest_dsh_replay.Session.events] and written together when the outermost
        block exits, also when it exits with an exception; delta runs are packed per batch,
        so batching gives the compact layout the harness's write-behind window gives.
        Appends from other threads during the block join the batch.

        Raises:
            SessionStoreError: The write failed; the batch's events are removed again.
        """
        with self._lock:
            self._batch_depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._batch_depth -= 1
                if not self._batch_depth:
                    self.flush()

    def flush(self) -> None:
        """Write the events appended inside `batch` blocks that are not written yet.

        Raises:
            SessionStoreError: The write failed; those events are removed again.
        """
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        # The chunks appended since join what is pending, after it: written directly,
        # they would land before the batch's earlier appends (out of seq order).
        self._batch_depth += 1
        try:
            self._settle()
        finally:
            self._batch_depth -= 1
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self._write(pending)
        except BaseException:
            del self._events[self._written :]
            self._surface = Surface()
            for i, event in enumerate(self._events):
                self._surface.apply(i, self._surface.plan(event, self._events))
            raise

    def _persist_header(self) -> None:
        """Write the header now if nothing of the session is stored yet (an unseeded session).

        `SessionStore.fork` calls it on the source, so a child's ``parentSession`` always
        names a stored session ([docs/scenarios.md#store-fork](../scenarios.md#store-fork)).
        Events appended inside an open `batch` stay pending.

        Raises:
            SessionStoreError: The write failed.
        """
        with self._lock:
            if not self._persisted:
                self._write([])

    def _write(self, events: list[Event]) -> None:
        backend = self._store.backend
        try:
            backend.append(self._header, events, create=not self._persisted)
        except DshReplayError:
            raise
        except (OSError, ValueError) as err:
            raise SessionStoreError(
                f"session {quote(self.id)}: cannot persist {len(events)} event(s) to "
                f"{backend.describe()}: {err}"
            ) from err
        self._persisted = True
        self._written += len(events)
