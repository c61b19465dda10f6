"""The session store: create, append, fork and reload sessions over a backend.

Agents under test persist their sessions through a :class:`SessionStore`; record mode
harvests them. The store keeps every live session in memory and writes each append
through a backend that satisfies :class:`SessionBackend`:

- :class:`~pytest_dsh_replay._jsonl_backend.JsonlBackend`: the dsh harness's on-disk
  JSONL layout, plain or zstd-compressed, with packed chunk rows and crash repair;
- :class:`~pytest_dsh_replay._sqlite.SqliteBackend`: the harness's SQLite store;
- :class:`~pytest_dsh_replay._backend.MemoryBackend`: nothing written anywhere.

Every operation is thread-safe: agents under test append from several threads.

Example::

    store = SessionStore(JsonlBackend(tmp_path / "sessions"))
    parent = store.create(meta={"cwd": "/work"})
    parent.append("turn/start", {"turn": 1})
    parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    child = store.fork(parent)              # seed = the whole log, then session/end-seed
    assert child.seed_length == 2 and child.events[2]["type"] == "session/end-seed"
"""

from __future__ import annotations

import threading
import time as _time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Final, overload

import orjson

from ._backend import SessionBackend
from ._chunk_rows import PACKED_TAGS
from ._errors import DshReplayError, SessionForkError, SessionLogError, SessionStoreError
from ._events import END_SEED, Event, JSONObject, SessionHeader, header_problem, is_safe_integer
from ._log_rules import (
    Surface,
    interrupted_turn_closers,
    json_copy,
    quote,
    validate_log,
)

__all__ = [
    "Session",
    "SessionBackend",
    "SessionStore",
]

_META_KEYS: Final = (
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
    "owner",
)
_ENVELOPE_ALIASES: Final[dict[str, str]] = {
    "sourceEventSeqs": "sourceEventSeqs",
    "source_event_seqs": "sourceEventSeqs",
    "surfaceOp": "surfaceOp",
    "surface_op": "surfaceOp",
    "ignorable": "ignorable",
    "time": "time",
}


def _now_ms() -> int:
    return _time.time_ns() // 1_000_000


# --- headers ------------------------------------------------------------------------------


def _meta_fields(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``create``'s ``meta`` by the store's header rules; the fields to stamp.

    Raises:
        SessionStoreError: ``meta`` is not a mapping, has an unknown field, or a field
            breaks the header rules (the message names it).
    """
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise SessionStoreError(f"meta must be a mapping of header fields, got {type(meta)}")
    unknown = sorted(set(meta) - set(_META_KEYS))
    if unknown:
        raise SessionStoreError(
            f"unknown session meta field(s) {', '.join(map(repr, unknown))}; allowed: "
            + ", ".join(_META_KEYS)
        )
    fields = {k: v for k, v in meta.items() if v is not None}
    problem = header_problem(
        {"type": "session", "version": 0, "id": "", "createdAt": 0, "delegationDepth": 0} | fields,
        "store",
    )
    if problem is not None:
        raise SessionStoreError(f"session header {problem}")
    for key in ("seedLength", "delegationDepth"):
        if key in fields:
            fields[key] = int(fields[key])
    return fields


def _make_header(session_id: str, created_at: int, fields: Mapping[str, Any]) -> SessionHeader:
    obj: JSONObject = {"type": "session", "version": 0, "id": session_id, "createdAt": created_at}
    for key in _META_KEYS:
        if key in fields:
            obj[key] = fields[key]
    return SessionHeader.from_json(obj)


# --- sessions ------------------------------------------------------------------------------


def _build_event(
    kind: Any, data: Any, envelope: Mapping[str, Any], now: Callable[[], int]
) -> Event:
    """A new event from :meth:`Session.append`'s arguments, copied and checked."""
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


class _EventsView(Sequence[Event]):
    """A read-only view of a session's events (the event dicts must not be mutated).

    ``settle`` is called before each read, so chunks appended with
    :meth:`Session.append_chunk` are there for views taken before them too.
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


class Session:
    """One session of a :class:`SessionStore`: a header and an append-only event log.

    Get sessions from :meth:`SessionStore.create`, :meth:`SessionStore.fork` or
    :meth:`SessionStore.load`, never by constructing one. A session satisfies
    :class:`~pytest_dsh_replay.scenario.SessionLike`, so
    ``write_scenario(path, store.sessions())`` writes a store's sessions as a scenario.

    Attributes:
        id: The session id.
        header: The :class:`~pytest_dsh_replay.events.SessionHeader` (fixed for life).
        events: A read-only sequence of the event dicts, seq order; do not mutate them.
        seed_length: The header's ``seedLength`` (0 when absent): leading events
            inherited from a fork parent.
    """

    __slots__ = (
        "_batch_depth",
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
        store: SessionStore,
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

    def append(self, type: str, data: Any, **envelope: Any) -> Event:
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
            self._settle()
            if self._store.get(self.id) is not self:
                raise SessionStoreError(f"session {quote(self.id)} is not live in this store")
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

    def append_chunk(self, turn: Any, step: Any, chunk: Any, *, parsed: bool = False) -> int:
        """Append one ``assistant/chunk`` event ``{"turn", "step", "chunk"}``, cheaply.

        The same event :meth:`append` would store, for the bulk of a log: the data is
        serialized at once (so later changes to ``chunk`` do not reach the log) and the
        event is built, with every chunk appended since, on the next read of
        :attr:`events` or the next other write (:meth:`append`, :meth:`flush`, the end
        of a :meth:`batch`), in one backend write. Until then a crash loses the run, as
        the harness's write-behind window does.

        Args:
            turn: The event's ``turn``.
            step: The event's ``step``.
            chunk: The stream chunk: lossless JSON, as for :meth:`append`.
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
            if self._store.get(self.id) is not self:
                raise SessionStoreError(f"session {quote(self.id)} is not live in this store")
            self._run.append(blob)
            self._run_times.append(when)
            return len(self._events) + len(self._run) - 1

    def _settle(self) -> None:
        """Build the events of the pending :meth:`append_chunk` run and write them."""
        if not self._run:
            return
        with self._lock:
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

    @contextmanager
    def batch(self) -> Iterator[Session]:
        """Group appends into one write (one packed batch, one transaction).

        Appends inside the block are visible at once in :attr:`events` and written
        together when the outermost block exits, also when it exits with an exception;
        delta runs are packed per batch, so batching gives the compact
        layout the harness's write-behind window gives. Appends from other threads
        during the block join the batch.

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
        """Write the events appended inside :meth:`batch` blocks that are not written yet.

        Raises:
            SessionStoreError: The write failed; those events are removed again.
        """
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        self._settle()
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


class SessionStore:
    """Live sessions over a persistence backend.

    Args:
        backend: Where sessions are persisted: a :class:`JsonlBackend`, a
            :class:`~pytest_dsh_replay.sqlite.SqliteBackend`, or anything satisfying
            :class:`SessionBackend`.
        clock: Returns the current time in Unix milliseconds (an ``int``); used for
            ``createdAt``, event ``time`` and ``session/end-seed``. Default: the wall
            clock. Inject a fake one for deterministic logs.

    Every method is thread-safe. A session created without a seed reaches the backend
    with its first append (the reference writes nothing before); a seeded session is
    written at once, seed and ``session/end-seed`` together.
    """

    def __init__(self, backend: SessionBackend, *, clock: Callable[[], int] | None = None):
        self._backend = backend
        self._clock = clock or _now_ms
        self._lock = threading.RLock()
        self._live: dict[str, Session] = {}
        self._closed = False

    @property
    def backend(self) -> SessionBackend:
        """The persistence backend."""
        return self._backend

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write pending batches, detach every session and close the backend."""
        with self._lock:
            if self._closed:
                return
            for session in list(self._live.values()):
                session.flush()
            self._closed = True
            self._live.clear()
            self._backend.close()

    # -- internals ---------------------------------------------------------------------------

    def now(self) -> int:
        """The store clock's current time, Unix ms.

        Raises:
            SessionStoreError: The injected clock returned something else than an int.
        """
        if self._clock is _now_ms:
            return _time.time_ns() // 1_000_000
        value = self._clock()
        if not is_safe_integer(value):
            raise SessionStoreError(f"the store clock must return Unix ms as an int, got {value!r}")
        return int(value)

    def _new_id(self) -> str:
        while True:
            candidate = str(uuid.uuid4())
            if candidate not in self._live and not self._backend.exists(candidate):
                return candidate

    def _copy_seed(self, seed: Iterable[Event]) -> list[Event]:
        if isinstance(seed, str | bytes | Mapping) or not isinstance(seed, Iterable):
            raise SessionStoreError(f"seed must be a sequence of events, got {type(seed).__name__}")
        events = [json_copy(e, f"seed event at index {i}") for i, e in enumerate(seed)]
        try:
            return validate_log(events, what="seed event")
        except ValueError as err:
            raise SessionStoreError(f"{err}; seed must be contiguous from 0") from None

    # -- the API -----------------------------------------------------------------------------

    def create(
        self,
        session_id: str | None = None,
        *,
        seed: Iterable[Event] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create a session.

        Args:
            session_id: The id; ``None`` mints a fresh UUID.
            seed: Events to start from, seqs contiguous from 0 with valid envelopes
                (deep-copied). A seed, even an empty one, is followed by
                ``session/end-seed`` (``data: {}``, seq ``len(seed)``) unless its last
                event already is one; the seed and marker are persisted at once. No seed
                means no marker, and nothing is written before the first append.
            meta: Header fields: ``cwd`` (absolute), ``parentSession``, ``seedLength``
                (at most ``len(seed)``), ``origin`` (``"subagent"``),
                ``delegationDepth``, ``agentPreset``, ``owner``. ``createdAt`` comes from
                the clock.

        Returns:
            The new live session.

        Raises:
            SessionStoreError: The id is taken (live or stored) or empty, a meta field
                or seed event is invalid, or the seed cannot be written.
        """
        fields = _meta_fields(meta)
        events = self._copy_seed(seed) if seed is not None else None
        if "seedLength" in fields and fields["seedLength"] > len(events or ()):
            raise SessionStoreError(
                f"seedLength {fields['seedLength']} exceeds the seed's {len(events or ())} "
                "events; seedLength counts inherited events at the start of the seed"
            )
        with self._lock:
            if self._closed:
                raise SessionStoreError("this session store is closed")
            if session_id is None:
                sid = self._new_id()
            elif not isinstance(session_id, str) or not session_id:
                raise SessionStoreError(
                    f"a session id must be a non-empty string, got {session_id!r}"
                )
            else:
                sid = session_id
                if sid in self._live or self._backend.exists(sid):
                    raise SessionStoreError(f"session {quote(sid)} already exists")
            header = _make_header(sid, self.now(), fields)
            if events is not None and (not events or events[-1]["type"] != END_SEED):
                events.append(
                    {"type": END_SEED, "seq": len(events), "time": self.now(), "data": {}}
                )
            session = Session(self, header, events or [], persisted=False)
            self._live[sid] = session
            return session

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_session_id: str | None = None,
    ) -> Session:
        """Fork a live session at an inclusive boundary.

        Checks, in order: a given ``child_session_id`` that is taken
        (``SESSION_ALREADY_EXISTS``); the source (``SESSION_NOT_FOUND`` for an id or
        object that is not live, ``SESSION_NOT_LIVE`` for a stale object whose id is
        live on another); the boundary (default: the last event's seq; an empty source
        gives an empty seed) must be a non-negative safe integer naming an existing,
        contiguous seq (``INVALID_BOUNDARY``); and it must not fall inside an open turn:
        the last ``turn/start``/``turn/end`` at or before it must not be a ``turn/start``
        (``OPEN_TURN``). It need not be a ``turn/end`` itself.

        The child is ``create(child_session_id, seed=<events 0..boundary, deep-copied>,
        meta={cwd (when the source has one), parentSession: source id, seedLength})``:
        its log is the seed, then ``session/end-seed`` at seq ``seedLength``. ``origin``
        and ``delegationDepth`` are not stamped.

        Returns:
            The child session.

        Raises:
            SessionForkError: With ``.code`` as above and the reference's message.
        """
        with self._lock:
            if child_session_id is not None and (
                child_session_id in self._live or self._backend.exists(child_session_id)
            ):
                raise SessionForkError(
                    "SESSION_ALREADY_EXISTS", f"session {quote(child_session_id)} already exists"
                )
            if isinstance(source, Session):
                live = self._live.get(source.id)
                if live is None:
                    raise SessionForkError(
                        "SESSION_NOT_FOUND", f"session {quote(source.id)} not found in this store"
                    )
                if live is not source:
                    raise SessionForkError(
                        "SESSION_NOT_LIVE", f"session {quote(source.id)} is not live in this store"
                    )
            else:
                found = self._live.get(source) if isinstance(source, str) else None
                if found is None:
                    raise SessionForkError(
                        "SESSION_NOT_FOUND", f"session {source!r} not found in this store"
                    )
                live = found
            sid = live.id
            events = list(live.events)
            if boundary is None and not events:
                seed: list[Event] = []
            else:
                b = events[-1]["seq"] if boundary is None else boundary
                if not is_safe_integer(b) or b < 0:
                    raise SessionForkError(
                        "INVALID_BOUNDARY",
                        f"fork boundary for session {quote(sid)} must be a non-negative safe "
                        f"integer, got {b!r}",
                    )
                b = int(b)
                if b >= len(events):
                    last = len(events) - 1 if events else "none"
                    raise SessionForkError(
                        "INVALID_BOUNDARY",
                        f"fork boundary {b} does not exist in session {quote(sid)} "
                        f"(last seq: {last})",
                    )
                if events[b].get("seq") != b:
                    raise SessionForkError(
                        "INVALID_BOUNDARY",
                        f"fork boundary {b} in session {quote(sid)} does not match a contiguous "
                        "event seq",
                    )
                for event in reversed(events[: b + 1]):
                    kind = event.get("type")
                    if kind == "turn/end":
                        break
                    if kind == "turn/start":
                        turn = (
                            event["data"].get("turn") if isinstance(event["data"], dict) else None
                        )
                        raise SessionForkError(
                            "OPEN_TURN",
                            f"fork boundary {b} in session {quote(sid)} ends inside open "
                            f"turn {turn}",
                        )
                seed = events[: b + 1]
            meta: dict[str, Any] = {"parentSession": sid, "seedLength": len(seed)}
            if live.header.cwd is not None:
                meta["cwd"] = live.header.cwd
            return self.create(child_session_id, seed=seed, meta=meta)

    def get(self, session_id: str) -> Session | None:
        """The live session with this id, or ``None``."""
        with self._lock:
            return self._live.get(session_id)

    def sessions(self) -> list[Session]:
        """Every live session, in the order they were created or loaded."""
        with self._lock:
            return list(self._live.values())

    def stored_ids(self) -> list[str]:
        """The ids of every session the backend holds (live or not)."""
        return self._backend.session_ids()

    def load(self, session_id: str) -> Session:
        """Reopen a stored session from the backend's log.

        The header is kept as stored: ``seedLength`` and ``createdAt`` are never
        recomputed (a seed's length is not the lineage boundary). A torn tail is cut
        off on disk and, when a turn was left open, the closers of
        :func:`interrupted_turn_closers` are appended and persisted. No
        ``session/end-seed`` is added.

        Returns:
            The live session.

        Raises:
            SessionStoreError: The session is already live here, or not stored.
            SessionLogError: The stored log is damaged or fails validation (names the
                file and the event index).
        """
        with self._lock:
            if self._closed:
                raise SessionStoreError("this session store is closed")
            if session_id in self._live:
                raise SessionStoreError(
                    f"session {quote(session_id)} is already live in this store; use get()"
                )
            stored = self._backend.read(session_id)
            if stored is None:
                raise SessionStoreError(
                    f"session {quote(session_id)} not found in {self._backend.describe()}"
                )
            try:
                events = validate_log(stored.events, what="stored event")
            except ValueError as err:
                raise SessionLogError(
                    f"stored session {quote(session_id)} failed validation: {err}",
                    path=stored.source,
                ) from None
            session = Session(self, stored.header, events, persisted=True)
            self._live[session_id] = session
            return session
