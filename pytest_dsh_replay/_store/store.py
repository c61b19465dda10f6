"""The session store: create, append, fork and reload sessions over a backend.

Agents under test persist their sessions through a
[`SessionStore`][pytest_dsh_replay.SessionStore]; record mode harvests them. The store keeps
every live session in memory and writes each append through a backend that satisfies
[`SessionBackend`][pytest_dsh_replay.SessionBackend]:

- [`JsonlBackend`][pytest_dsh_replay.JsonlBackend]: the dsh harness's on-disk
  JSONL layout, plain or zstd-compressed, with packed chunk rows and crash repair;
- [`SqliteBackend`][pytest_dsh_replay.SqliteBackend]: the harness's SQLite store;
- [`MemoryBackend`][pytest_dsh_replay.MemoryBackend]: nothing written anywhere.

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
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from .._errors import SessionForkError, SessionLogError, SessionStoreError
from .._format.events import (
    END_SEED,
    Event,
    JSONObject,
    SessionHeader,
    header_problem,
)
from .._format.json_values import as_safe_integer, is_safe_integer, json_copy
from .backends.base import SessionBackend
from .log_rules import check_session_id, quote, validate_log
from .session import Session

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


def _now_ms() -> int:
    return _time.time_ns() // 1_000_000


# --- headers ------------------------------------------------------------------------------


def _meta_fields(meta: Mapping[str, object] | None) -> dict[str, object]:
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
            fields[key] = as_safe_integer(fields[key])  # a count: checked above
    return fields


def _make_header(session_id: str, created_at: int, fields: Mapping[str, object]) -> SessionHeader:
    obj: JSONObject = {"type": "session", "version": 0, "id": session_id, "createdAt": created_at}
    for key in _META_KEYS:
        if key in fields:
            obj[key] = fields[key]
    return SessionHeader.from_json(obj)


class _Owner:
    """What a store's sessions ask of it (a `SessionOwner`), holding no session.

    Sessions keep this rather than the store, so a store and its sessions form no
    reference cycle ([docs/api/store.md#api-stores](store.md#api-stores)).
    """

    __slots__ = ("backend", "clock", "closed")

    def __init__(self, backend: SessionBackend, clock: Callable[[], int]):
        self.backend = backend
        self.clock = clock
        self.closed = False

    def now(self) -> int:
        """The clock's current time, Unix ms (see `SessionStore.now`)."""
        if self.clock is _now_ms:
            return _time.time_ns() // 1_000_000
        value = self.clock()
        if not is_safe_integer(value) or value < 0:  # a header's createdAt is never negative
            raise SessionStoreError(
                f"the store clock must return Unix ms as an int >= 0, got {value!r}"
            )
        return int(value)


def _check_inner_seed_end(events: list[Event], seed_length: int) -> None:
    """A ``seedLength`` inside a longer seed must stand at that seed's ``session/end-seed``.

    A resumed fork child's seed is its whole stored log, which holds the fork's marker at
    seq ``seedLength``; any other count inside the seed is one the loader refuses
    ([docs/scenarios.md#seeds](../scenarios.md#seeds)), so it is refused here, before
    anything is written.
    """
    at, before = events[seed_length]["type"], events[seed_length - 1]["type"]
    if END_SEED not in (at, before):
        raise SessionStoreError(
            f"seedLength {seed_length} does not end the seed's inherited part: a fork "
            f"child's seed is followed by session/end-seed at seq seedLength, and the "
            f"seed holds {at!r} there; give seedLength = len(seed) (the marker is added "
            "after the seed) or a resumed log that holds its fork's marker"
        )


class SessionStore:
    """Live sessions over a persistence backend.

    Args:
        backend: Where sessions are persisted: a [`JsonlBackend`][pytest_dsh_replay.JsonlBackend], a
            `SqliteBackend`, or anything satisfying
            [`SessionBackend`][pytest_dsh_replay.SessionBackend].
        clock: Returns the current time in Unix milliseconds (an ``int`` >= 0); used for
            ``createdAt``, event ``time`` and ``session/end-seed``. Default: the wall
            clock. Inject a fake one for deterministic logs.

    Raises:
        SessionStoreError: ``backend`` has not the methods of a `SessionBackend` (a path
            given where ``JsonlBackend(path)`` was meant).

    Every method is thread-safe. A session created without a seed reaches the backend
    with its first append (the dsh harness writes nothing before), or its header alone
    when it is forked first; a seeded session is written at once, seed and
    ``session/end-seed`` together.
    """

    def __init__(self, backend: SessionBackend, *, clock: Callable[[], int] | None = None):
        if not isinstance(backend, SessionBackend):  # a path given for a backend, say
            raise SessionStoreError(
                "SessionStore takes a backend (JsonlBackend(root), SqliteBackend(path) or "
                f"a SessionBackend), got {backend!r}"
            )
        self._owner = _Owner(backend, clock or _now_ms)
        self._backend = backend
        self._lock = threading.RLock()
        self._live: dict[str, Session] = {}

    @property
    def backend(self) -> SessionBackend:
        """The persistence backend."""
        return self._backend

    @property
    def _closed(self) -> bool:
        return self._owner.closed

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
            self._owner.closed = True
            self._live.clear()
            self._backend.close()

    # -- internals ---------------------------------------------------------------------------

    def now(self) -> int:
        """The store clock's current time, Unix ms.

        Raises:
            SessionStoreError: The injected clock returned something else than an int >= 0.
        """
        return self._owner.now()

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
            raise SessionStoreError(f"create(seed=...): {err}") from None

    # -- the API -----------------------------------------------------------------------------

    def create(
        self,
        session_id: str | None = None,
        *,
        seed: Iterable[Event] | None = None,
        meta: Mapping[str, object] | None = None,
    ) -> Session:
        """Create a session.

        Args:
            session_id: The id; ``None`` mints a fresh UUID.
            seed: Events to start from, seqs contiguous from 0 with valid envelopes
                (deep-copied). A seed, even an empty one, is followed by
                ``session/end-seed`` (``data: {}``, seq ``len(seed)``) unless its last
                event already is one; the seed and marker are persisted at once. No seed
                means no marker, and nothing is written before the first append (or a
                `fork` of the session, which writes its header).
            meta: Header fields: ``cwd`` (absolute), ``parentSession``, ``seedLength``
                (at most ``len(seed)``; a smaller one must stand at the seed's own
                ``session/end-seed``, as a resumed fork child's does), ``origin`` (``"subagent"``),
                ``delegationDepth``, ``agentPreset``, ``owner``. ``createdAt`` comes from
                the clock.

        Returns:
            The new live session.

        Raises:
            SessionStoreError: The id is taken (live or stored), not a non-empty string,
                or one the backend cannot hold (a JSONL store's directory name is at most
                255 bytes: [docs/format.md#jsonl-store](../format.md#jsonl-store)); a meta
                field or seed event is invalid (a ``seedLength`` inside the seed where
                no ``session/end-seed`` stands); or the seed cannot be written.
        """
        fields = _meta_fields(meta)
        events = self._copy_seed(seed) if seed is not None else None
        seed_length = fields.get("seedLength")
        if isinstance(seed_length, int) and seed_length > len(events or ()):
            raise SessionStoreError(
                f"seedLength {seed_length} exceeds the seed's {len(events or ())} "
                "events; seedLength counts inherited events at the start of the seed"
            )
        if events and isinstance(seed_length, int) and 0 < seed_length < len(events):
            _check_inner_seed_end(events, seed_length)
        with self._lock:
            if self._closed:
                raise SessionStoreError("this session store is closed")
            if session_id is None:
                sid = self._new_id()
            else:
                sid = check_session_id(session_id)
                if sid in self._live or self._backend.exists(sid):
                    raise SessionStoreError(f"session {quote(sid)} already exists")
            header = _make_header(sid, self.now(), fields)
            if events is not None and (not events or events[-1]["type"] != END_SEED):
                events.append(
                    {"type": END_SEED, "seq": len(events), "time": self.now(), "data": {}}
                )
            session = Session(self._owner, header, events or [], persisted=False)
            self._live[sid] = session
            return session

    def _fork_source(self, source: Session | str) -> Session:
        """The live session ``source`` names (the lock is held; see `fork`).

        Raises:
            SessionForkError: ``SESSION_NOT_FOUND`` or ``SESSION_NOT_LIVE``.
        """
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
            return live
        found = self._live.get(source) if isinstance(source, str) else None
        if found is None:
            raise SessionForkError(
                "SESSION_NOT_FOUND", f"session {source!r} not found in this store"
            )
        return found

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

        Before these checks, a ``child_session_id`` that `create` would refuse as no
        session id (not a non-empty string, too long for the backend) is refused alike.

        The child is ``create(child_session_id, seed=<events 0..boundary, deep-copied>,
        meta={cwd (when the source has one), parentSession: source id, seedLength})``:
        its log is the seed, then ``session/end-seed`` at seq ``seedLength``. ``origin``
        and ``delegationDepth`` are not stamped. A source that was never written gets
        its header written first, so the child's ``parentSession`` names a stored
        session ([docs/scenarios.md#store-fork](../scenarios.md#store-fork)).

        Returns:
            The child session.

        Raises:
            SessionForkError: With ``.code`` as above and the dsh harness's message.
            SessionStoreError: The store is closed; ``child_session_id`` is no session id
                the backend can hold, or the source's header or the child cannot be written.
        """
        if child_session_id is not None:
            check_session_id(child_session_id)
        with self._lock:
            if self._closed:
                raise SessionStoreError("this session store is closed")
            if child_session_id is not None and (
                child_session_id in self._live or self._backend.exists(child_session_id)
            ):
                raise SessionForkError(
                    "SESSION_ALREADY_EXISTS", f"session {quote(child_session_id)} already exists"
                )
            live = self._fork_source(source)
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
            meta: dict[str, object] = {"parentSession": sid, "seedLength": len(seed)}
            if live.header.cwd is not None:
                meta["cwd"] = live.header.cwd
            live._persist_header()  # the child's parentSession names a stored session
            return self.create(child_session_id, seed=seed, meta=meta)

    def get(self, session_id: str) -> Session | None:
        """The live session with this id, or ``None``."""
        # One dict lookup, without the store's lock: a session's writes check that they
        # are live with it while they hold the session's lock, and the store takes a
        # session's lock while it holds its own (close, fork).
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
        [`interrupted_turn_closers`][pytest_dsh_replay.interrupted_turn_closers] are
        appended and persisted. No ``session/end-seed`` is added.

        Loading takes the session over, as the harness's reopen does: it writes (the
        repair, the closers, every later append), so a session has one writer at a time.
        Never load a session another store or process is still writing: its log would get
        two writers and two tails. To only read a log, use the backend's ``read`` or
        [`load_scenario`][pytest_dsh_replay.load_scenario], which write nothing; a
        read-only store (``SqliteBackend(read_only=True)``) loads only sessions that
        need no repair ([docs/format.md#jsonl-store](../format.md#jsonl-store)).

        Returns:
            The live session.

        Raises:
            SessionStoreError: The session is already live here, or not stored; or its
                repair cannot be written (a read-only store).
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
            session = Session(self._owner, stored.header, events, persisted=True)
            self._live[session_id] = session
            return session
