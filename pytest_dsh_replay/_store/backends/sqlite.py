"""The dsh SQLite session store: schema 18, reject never migrate.

[`SqliteBackend`][pytest_dsh_replay.SqliteBackend] is the
[`SessionBackend`][pytest_dsh_replay.SessionBackend] over a store file (its schema and row
encoding: `sqlite_rows`). A file with any other version, another application id or changed
schema objects is refused with [`SchemaVersionError`][pytest_dsh_replay.SchemaVersionError]
and left untouched.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..._errors import SchemaVersionError, SessionLogError, SessionStoreError
from ..._format.chunk_rows import (
    SQLITE_MAX_DATA_BYTES,
    SQLITE_MAX_MEMBERS,
    PackedRow,
    expand_records,
    pack_chunk_runs,
)
from ..._format.events import Event, SessionHeader, SessionLog
from ..log_rules import check_record_size
from .base import StoredLog
from .sqlite_rows import (
    APPLICATION_ID,
    EVENT_COLUMNS,
    INSERT_EVENT,
    SCHEMA,
    SCHEMA_VERSION,
    SESSION_COLUMNS,
    DataTooLong,
    decode_row,
    encode_record,
    header_from_row,
    record_size,
    scan_rows,
    schema_objects,
    session_row,
    user_objects,
)

__all__ = ["SqliteBackend"]

# --- the backend ---------------------------------------------------------------------------


def _schema_error(path: str, reason: str, found: object) -> SchemaVersionError:
    return SchemaVersionError(
        reason,
        path=path,
        found=found,
        required=f"user_version {SCHEMA_VERSION}, application_id {APPLICATION_ID}, schema "
        f"{SCHEMA_VERSION} objects",
    )


def _check_identity(conn: sqlite3.Connection, path: str) -> bool:
    """Check version, application id and schema; ``True`` for a new, empty file.

    See [docs/format.md#sqlite-store](../format.md#sqlite-store).

    Raises:
        SchemaVersionError: Naming the file, what it holds and what this build needs.
    """
    schema = conn.execute("PRAGMA user_version").fetchone()[0]
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    try:
        objects = user_objects(conn)
    except UnicodeDecodeError:
        raise SessionLogError(
            "damaged SQLite session store: its schema text is not valid UTF-8; expected a "
            f"dsh SQLite store (schema {SCHEMA_VERSION})",
            path=path,
        ) from None
    if schema == 0:
        if app_id == 0 and not objects:
            return True
        raise SchemaVersionError(
            f"session database has an unversioned schema or application identity "
            f"(user_version 0, application id {app_id}, {len(objects)} schema objects); "
            "it is not a dsh session store",
            path=path,
            found=0,
            required=SCHEMA_VERSION,
        )
    if schema != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"session database has schema version {schema}, incompatible with this build "
            f"({SCHEMA_VERSION}); stores are refused, never migrated: re-record it or open it "
            "with a matching build",
            path=path,
            found=schema,
            required=SCHEMA_VERSION,
        )
    if app_id != APPLICATION_ID:
        raise SchemaVersionError(
            f"session database has application id {app_id}, expected {APPLICATION_ID} "
            '("DSHP"); it is not a dsh session store',
            path=path,
            found=app_id,
            required=APPLICATION_ID,
        )
    canonical = schema_objects()
    if tuple(objects) != canonical:
        extra = sorted({o[1] for o in objects} ^ {o[1] for o in canonical})
        changed = sorted({o[1] for o in objects if o not in canonical} - set(extra))
        detail = "; ".join(
            part
            for part in (
                f"unexpected or missing: {', '.join(extra)}" if extra else "",
                f"changed: {', '.join(changed)}" if changed else "",
            )
            if part
        )
        raise _schema_error(
            path,
            f"session database does not contain the required schema objects ({detail})",
            found=objects,
        )
    return False


class SqliteBackend:
    """Sessions in a dsh SQLite store file, schema 18.

    Opening a file checks it first: ``user_version`` must be 18, ``application_id``
    ``0x44534850`` and the schema objects exactly the canonical ones; anything else is
    refused (never migrated) and the file left unchanged. A missing or empty file is
    initialized (unless ``read_only``) in one transaction: schema, a random
    ``store_id``, then the application id and version.

    Writable connections use WAL, ``synchronous=FULL``, ``foreign_keys=ON``,
    ``trusted_schema=OFF`` and ``mmap_size=0``, each read back and verified. Every
    append is one ``BEGIN IMMEDIATE`` transaction that re-checks the schema, checks that
    the batch continues the stored log, inserts the rows (delta runs packed into rows of
    3 to 1024 members and at most 1 MiB) and bumps the session's ``revision``.

    Args:
        path: The store file.
        read_only: Open with SQLite's ``immutable=1``: nothing is ever written, no
            ``-wal``/``-shm`` file is created, so read-only directories work. When a
            writer left a non-empty ``-wal`` beside the file, a private copy of both is
            read instead. A torn tail is then skipped, not removed.

    Raises:
        SchemaVersionError: The file has another version, application id or schema.
        SessionLogError: The file is not a SQLite database (or is missing when
            ``read_only``).
        SessionStoreError: The connection cannot be set up.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        self._source = str(self.path)
        self._lock = threading.RLock()
        self._empty = False
        self._table_counts: dict[str, int] | None = None  # set by check_pages
        self._snapshot: tempfile.TemporaryDirectory[str] | None = None
        self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        source = self._source
        try:
            if self.read_only:
                if not self.path.is_file():
                    raise SessionLogError("no SQLite session store here", path=source)
                conn = sqlite3.connect(
                    self._read_only_uri(), uri=True, isolation_level=None, check_same_thread=False
                )
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(
                    source, isolation_level=None, check_same_thread=False, timeout=5.0
                )
        except (sqlite3.Error, OSError) as err:
            raise SessionStoreError(f"cannot open SQLite session store {source}: {err}") from None
        try:
            try:
                empty = _check_identity(conn, source)
            except sqlite3.DatabaseError as err:
                raise SessionLogError(
                    f"not a SQLite session store ({err}); expected a dsh SQLite store "
                    f"(schema {SCHEMA_VERSION})",
                    path=source,
                ) from None
            conn.execute("PRAGMA trusted_schema = OFF")
            if self.read_only:
                self._empty = empty
                return conn
            self._configure(conn)
            if empty:
                self._initialize(conn)
        except BaseException:
            conn.close()
            if self._snapshot is not None:
                self._snapshot.cleanup()
            raise
        return conn

    def _configure(self, conn: sqlite3.Connection) -> None:
        expected = {
            "trusted_schema": 0,
            "mmap_size": 0,
            "foreign_keys": 1,
            "journal_mode": "wal",
            "synchronous": 2,
        }
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            conn.execute("PRAGMA mmap_size = 0")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            got = {k: conn.execute(f"PRAGMA {k}").fetchone()[0] for k in expected}
        except sqlite3.Error as err:
            raise SessionStoreError(
                f"cannot configure SQLite session store {self._source}: {err}"
            ) from None
        if got != expected:
            raise SessionStoreError(
                f"SQLite session store {self._source}: connection settings did not take "
                f"effect (expected {expected}, got {got})"
            )

    def _initialize(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                if _check_identity(conn, self._source):  # nobody initialized it meanwhile
                    for sql in SCHEMA:
                        conn.execute(sql)
                    conn.execute(
                        "INSERT INTO persistence_state (singleton, store_id) VALUES (1, ?)",
                        (str(uuid.uuid4()),),
                    )
                    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as err:
            raise SessionStoreError(
                f"cannot initialize SQLite session store {self._source}: {err} "
                "(SQLite 3.37 or later is needed for STRICT tables)"
            ) from None

    # -- the protocol ----------------------------------------------------------------------

    def describe(self) -> str:
        """``SQLite store at <path>``."""
        return f"SQLite store at {self.path}"

    def __enter__(self) -> SqliteBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (WAL files are checkpointed and removed by SQLite)."""
        with self._lock:
            self._conn.close()
            if self._snapshot is not None:
                self._snapshot.cleanup()
                self._snapshot = None

    def _read_only_uri(self) -> str:
        """The URI a read-only open uses: the file itself with ``immutable=1``.

        ``immutable=1`` ignores a write-ahead log. When a non-empty ``-wal`` file lies
        beside the store (a writer has not checkpointed yet), the store and its log are
        copied to a private temporary directory and the copy is read instead, so no
        committed transaction is missed and nothing is created beside the original.
        """
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            pending = wal.stat().st_size > 0
        except OSError:
            pending = False
        if not pending:
            return self.path.resolve().as_uri() + "?immutable=1"
        self._snapshot = tempfile.TemporaryDirectory(prefix="dsh-store-")
        copy = Path(self._snapshot.name) / self.path.name
        shutil.copyfile(self.path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
        return copy.as_uri() + "?mode=ro"

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        if self._empty:
            return []
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except (sqlite3.Error, UnicodeDecodeError) as err:  # a damaged file
                raise SessionLogError(f"cannot read the store ({err})", path=self._source) from None

    def check_pages(self) -> None:
        """Check the file's pages, which no checksum guards, before its sessions are read.

        Four checks ([docs/format.md#sqlite-store](../format.md#sqlite-store)): SQLite's
        ``quick_check`` over the b-tree pages; ``integrity_check`` of the ``sessions``
        table, which also compares it with the index every session is found by
        (``quick_check`` compares no index with its table, and a damaged index entry or
        session id would hide a session); each session's rows counted in the ``events``
        table itself, which every later read of that session through the index must match (a
        damaged index page can hide a session's last rows); and no event rows of a session
        the store does not hold. A damaged store would otherwise read as fewer sessions or a
        shorter log.

        Raises:
            SessionLogError: The store's pages are damaged, naming the store.
        """
        found = self._query("PRAGMA quick_check(1)")
        if found and found[0][0] != "ok":
            raise self._damaged(f"its pages are damaged ({found[0][0]})")
        found = self._query("PRAGMA integrity_check(sessions)")
        if found and found[0][0] != "ok":
            raise self._damaged(f"its sessions table is damaged ({found[0][0]})")
        counted = self._query(
            "SELECT session_id, count(*) FROM events NOT INDEXED GROUP BY session_id"
        )
        self._table_counts = {str(sid): int(n) for sid, n in counted}
        held = {str(r[0]) for r in self._query("SELECT id FROM sessions NOT INDEXED")}
        orphans = sorted(set(self._table_counts) - held)
        if orphans:
            raise self._damaged(
                f"{self._table_counts[orphans[0]]} event rows belong to session "
                f"{orphans[0]!r}, which its sessions table does not hold (a damaged "
                "session id or row)"
            )

    def _damaged(self, reason: str) -> SessionLogError:
        return SessionLogError(f"corrupt SQLite store: {reason}", path=self._source)

    def exists(self, session_id: str) -> bool:
        """Whether the store has a row for this session."""
        return bool(self._query("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    def session_ids(self) -> list[str]:
        """Every stored session id, in the order the sessions were first written."""
        return [r[0] for r in self._query("SELECT id FROM sessions ORDER BY rowid")]

    def _rows(self, session_id: str) -> list[tuple[Any, ...]]:
        rows = self._query(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        if self._table_counts is not None:  # checked: the index must give every row
            in_table = self._table_counts.get(session_id, 0)
            if in_table != len(rows):
                raise SessionLogError(
                    f"corrupt SQLite store: session {session_id} has {in_table} event rows "
                    f"in its table but {len(rows)} through its index (a damaged index page)",
                    path=self._source,
                )
        return rows

    def header(self, session_id: str) -> SessionHeader | None:
        """A stored session's header, or ``None`` when the store does not hold it.

        Raises:
            SessionLogError: A stored header value is invalid.
        """
        rows = self._query(f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return header_from_row(rows[0], self._source) if rows else None

    def logs(self) -> Iterator[SessionLog]:
        """Every stored session's header and committed events, in the order written.

        Raises:
            SessionLogError: A stored value is invalid or committed rows are damaged.
        """
        for sid in self.session_ids():
            header = self.header(sid)
            if header is not None:
                yield SessionLog(header, expand_records(self.records(sid)))

    def records(self, session_id: str, *, complete: bool = False) -> list[Event | PackedRow]:
        """A session's committed records (events and packed rows), a torn tail left out.

        Args:
            session_id: The session.
            complete: Refuse a torn tail instead of leaving it out: a scenario is a
                finished recording, and every write to a store is one transaction, so
                rows that do not read after the last ``turn/end`` are damage there.

        Raises:
            SessionLogError: Committed rows are damaged (names the store and the seq),
                or ``complete`` and the session has a torn tail.
        """
        source = f"{self._source}#{session_id}"
        records, _, torn = scan_rows(self._rows(session_id), source)
        if complete and torn is not None:
            raise SessionLogError(
                f"corrupt SQLite store: the rows of session {session_id} from seq {torn} "
                "on do not read (a torn or damaged tail after its last turn/end); a "
                "scenario store must hold complete sessions",
                path=source,
            )
        return records

    def _records(
        self, session_id: str
    ) -> tuple[SessionHeader, list[Event | PackedRow], int | None] | None:
        header = self.header(session_id)
        if header is None:
            return None
        records, _, torn = scan_rows(self._rows(session_id), f"{self._source}#{session_id}")
        return header, records, torn

    def read(self, session_id: str) -> StoredLog | None:
        """Read a session's committed events; delete a torn tail unless read-only.

        Raises:
            SessionLogError: A stored value is invalid, or committed rows are damaged.
        """
        with self._lock:
            found = self._records(session_id)
            if found is None:
                return None
            header, records, torn = found
            if torn is not None and not self.read_only:
                self._transaction(
                    lambda c: c.execute(
                        "DELETE FROM events WHERE session_id = ? AND seq >= ?", (session_id, torn)
                    )
                )
        source = f"{self._source}#{session_id}"
        log = SessionLog(header, expand_records(records))
        return StoredLog(*log, source, repaired=torn is not None)

    def _transaction(self, body: Callable[[sqlite3.Connection], object]) -> None:
        if self.read_only:
            raise SessionStoreError(f"{self.describe()} is open read-only")
        conn = self._conn
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                _check_identity(conn, self._source)
                body(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as err:
            raise SessionStoreError(f"{self.describe()}: write failed: {err}") from None

    def _next_seq(self, conn: sqlite3.Connection, session_id: str) -> int:
        row = conn.execute(
            f"SELECT {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return 0
        try:
            return int(row[0]) + record_size(decode_row(row))
        except (ValueError, SessionLogError) as err:
            raise SessionStoreError(
                f"session {session_id} has an invalid physical tail at seq {row[0]} ({err}); "
                "load() the session to repair it"
            ) from None

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Append one batch in one transaction; the first creates the session row.

        Raises:
            SessionStoreError: The session exists (``create``) or not, the batch does
                not continue the stored log, or the write failed (nothing is stored).
        """
        records = pack_chunk_runs(
            events, max_members=SQLITE_MAX_MEMBERS, max_data_bytes=SQLITE_MAX_DATA_BYTES
        )
        sid = header.id
        rows = []
        for record in records:
            try:
                rows.append(encode_record(sid, record))
            except DataTooLong as err:  # a row reading would refuse
                check_record_size(err.size, record)

        def body(conn: sqlite3.Connection) -> None:
            found = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
            if create:
                if found:
                    raise SessionStoreError(f"session {sid!r} already exists in {self.describe()}")
                conn.execute(
                    f"INSERT INTO sessions ({SESSION_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                    session_row(header),
                )
            elif not found:
                raise SessionStoreError(f"session {sid!r} is not stored in {self.describe()}")
            stored_next = self._next_seq(conn, sid)
            first = events[0]["seq"] if events else stored_next
            if first != stored_next:
                raise SessionStoreError(
                    f"session {sid} append starts at seq {first}, stored next seq is {stored_next}"
                )
            conn.executemany(INSERT_EVENT, rows)
            conn.execute("UPDATE sessions SET revision = revision + 1 WHERE id = ?", (sid,))

        with self._lock:
            self._transaction(body)
