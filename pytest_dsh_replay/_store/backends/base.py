"""What the session store needs from persistence, and the simplest backend.

[`SessionBackend`][pytest_dsh_replay.SessionBackend] is the protocol every backend satisfies
(the JSONL files of [`JsonlBackend`][pytest_dsh_replay.JsonlBackend], the SQLite store of
[`SqliteBackend`][pytest_dsh_replay.SqliteBackend]);
[`MemoryBackend`][pytest_dsh_replay.MemoryBackend] keeps sessions in memory only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import orjson

from ..._errors import SessionStoreError
from ..._format.events import Event, SessionHeader, SessionLog
from ..log_rules import quote

__all__ = ["MemoryBackend", "SessionBackend", "StoredLog"]


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A session as a backend read it back: its committed, repaired prefix.

    Satisfies `SessionLike` (``header`` and
    ``events``); [`log`][pytest_dsh_replay.StoredLog.log] is the two as the one log type.

    Attributes:
        header: The stored header (its ``seedLength`` and ``createdAt`` as stored).
        events: The logical events, seqs contiguous from 0; a torn tail is already cut
            off (closers for an interrupted turn are *not* added here, the store does).
        source: Where it was read from, for messages (a file, or ``<store>#<id>``).
        repaired: Whether a torn tail was cut off (and, on disk, removed).
    """

    header: SessionHeader
    events: list[Event]
    source: str
    repaired: bool = False

    @property
    def log(self) -> SessionLog:
        """The header and events as a `SessionLog`."""
        return SessionLog(self.header, self.events)


@runtime_checkable
class SessionBackend(Protocol):
    """What [`SessionStore`][pytest_dsh_replay.SessionStore] needs from a persistence backend.

    Implementations must be safe to call from several threads; the store never calls
    [`append`][pytest_dsh_replay.SessionBackend.append] concurrently for one session.
    """

    def exists(self, session_id: str) -> bool:
        """Whether a session with this id is stored."""

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Durably append one batch of events (one transaction, one write).

        Args:
            header: The session's header.
            events: Logical events with contiguous seqs continuing the stored log.
            create: ``True`` for the session's first write: store the header with the
                batch, atomically, and refuse when the session already exists.

        Raises:
            SessionStoreError: The write was refused or failed; nothing was stored.
        """

    def read(self, session_id: str) -> StoredLog | None:
        """Read a stored session, repairing a torn tail; ``None`` if absent.

        Raises:
            SessionLogError: The stored data is damaged before its last ``turn/end``,
                or its header is invalid (names the file and position).
        """

    def session_ids(self) -> list[str]:
        """The ids of every stored session."""

    def describe(self) -> str:
        """A short description for messages (``JSONL store at /x``)."""

    def close(self) -> None:
        """Release files and connections; later calls may fail."""


class MemoryBackend:
    """Sessions kept in memory only: nothing is written anywhere.

    For throwaway stores whose logs are only read back in the same process: the
    ``dsh_replay`` fixture uses one while replaying, where a test's session logs live as
    long as the test. Satisfies [`SessionBackend`][pytest_dsh_replay.SessionBackend]; a
    store over it behaves exactly as over a file backend, except that nothing survives the process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, SessionLog] = {}

    def exists(self, session_id: str) -> bool:
        """Whether a session with this id is stored."""
        with self._lock:
            return session_id in self._logs

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Store one batch.

        The events are kept as given (the store hands them over and never changes them
        afterwards); [`read`][pytest_dsh_replay.MemoryBackend.read] returns copies.

        Raises:
            SessionStoreError: ``create`` for an existing session, or an append to a
                session that was never created.
        """
        batch = list(events)
        with self._lock:
            stored = self._logs.get(header.id)
            if create:
                if stored is not None:
                    raise SessionStoreError(f"session {quote(header.id)} already exists in memory")
                self._logs[header.id] = SessionLog(header, batch)
            elif stored is None:
                raise SessionStoreError(f"session {quote(header.id)} was never written")
            else:
                stored.events.extend(batch)

    def read(self, session_id: str) -> StoredLog | None:
        """A copy of a stored session, or ``None``."""
        with self._lock:
            stored = self._logs.get(session_id)
            if stored is None:
                return None
            events: list[Event] = orjson.loads(orjson.dumps(stored.events))
            return StoredLog(stored.header, events, f"<memory>#{session_id}")

    def session_ids(self) -> list[str]:
        """The stored ids, in the order they were first written."""
        with self._lock:
            return list(self._logs)

    def describe(self) -> str:
        """``in-memory store``."""
        return "in-memory store"

    def close(self) -> None:
        """Nothing to release."""
