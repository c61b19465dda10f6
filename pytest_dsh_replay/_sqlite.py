"""The dsh SQLite session store: schema 18, reject never migrate (SPEC 5).

A store file holds three ``STRICT`` tables: ``persistence_state`` (one row, the store's
random id), ``sessions`` (one row per session: the header fields, an ``incarnation`` UUID
and a ``revision`` counter) and ``events`` (one physical row per scalar event or per
packed chunk run). The file carries ``PRAGMA user_version = 18`` and
``PRAGMA application_id = 0x44534850`` ("DSHP"); a file with any other version, another
application id or changed schema objects is refused with
:class:`~pytest_dsh_replay.errors.SchemaVersionError` and left untouched.

Row encoding (SPEC 5):

- ``data`` is the JSON text of the event's ``data`` (or a packed row's ``data``); when
  that text is at least 4096 bytes it is stored as one zstd frame (level 3) if that is
  smaller, as a BLOB.
- ``source_event_seqs`` is a BLOB of unsigned LEB128 varints: the first seq, then the
  ZigZag code of each difference (:func:`encode_source_event_seqs`).
- ``surface_op`` is the JSON text of ``surfaceOp``; ``ignorable`` is 1, NULL, or 0, the
  sentinel of a packed row (3 to 1024 members, ``data`` at most 1 MiB).

:class:`SqliteBackend` is the :class:`~pytest_dsh_replay.store.SessionBackend` over such a
file; :func:`load_store_scenario` reads a store as a replay scenario (what
:func:`~pytest_dsh_replay.scenario.load_scenario` does for SQLite files).
"""

from __future__ import annotations

import functools
import os
import shutil
import sqlite3
import tempfile
import threading
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import orjson

from ._chunk_rows import (
    PACKED_TAGS,
    SQLITE_MAX_DATA_BYTES,
    SQLITE_MAX_MEMBERS,
    PackedRow,
    expand_records,
    pack_chunk_runs,
    validate_packed_row,
)
from ._errors import SchemaVersionError, SessionLogError, SessionStoreError
from ._events import MAX_SAFE_INTEGER, Event, JSONObject, SessionHeader
from ._log_rules import store_header
from ._store import StoredLog

__all__ = [
    "APPLICATION_ID",
    "COMPRESS_MIN_BYTES",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SqliteBackend",
    "decode_source_event_seqs",
    "encode_source_event_seqs",
    "normalize_sql",
    "schema_objects",
]

SCHEMA_VERSION: Final = 18
"""The only ``PRAGMA user_version`` this build reads or writes."""

APPLICATION_ID: Final = 0x44534850
"""``PRAGMA application_id`` of a dsh store: ASCII ``DSHP`` = 1146308688."""

COMPRESS_MIN_BYTES: Final = 4096
"""``data`` JSON at least this long (UTF-8 bytes) is zstd-compressed when that is smaller."""

_ZSTD_LEVEL: Final = 3
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"

SCHEMA: Final[tuple[str, ...]] = (
    """CREATE TABLE persistence_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  store_id  TEXT NOT NULL
) STRICT""",
    """CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  version          INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  cwd              TEXT,
  parent_session   TEXT,
  seed_length      INTEGER,
  origin           TEXT,
  delegation_depth INTEGER,
  agent_preset     TEXT,
  owner            TEXT,
  incarnation      TEXT NOT NULL,
  revision         INTEGER NOT NULL
) STRICT""",
    """CREATE TABLE events (
  session_id        TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq               INTEGER NOT NULL,
  type              TEXT NOT NULL,
  time              INTEGER NOT NULL,
  data              ANY NOT NULL,
  source_event_seqs ANY,
  surface_op        TEXT,
  ignorable         INTEGER CHECK (ignorable IS NULL OR ignorable IN (0, 1)),
  PRIMARY KEY (session_id, seq)
) STRICT""",
)
"""The schema 18 ``CREATE`` statements, as the harness writes them (SPEC 5)."""

_SESSION_COLUMNS: Final = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, owner, incarnation, revision"
)
_EVENT_COLUMNS: Final = "seq, type, time, data, source_event_seqs, surface_op, ignorable"
_INSERT_EVENT: Final = (
    f"INSERT INTO events (session_id, {_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def normalize_sql(sql: str | None) -> str | None:
    """Collapse every whitespace run to one space (how schema objects are compared)."""
    return None if sql is None else " ".join(sql.split())


def _user_objects(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema "
        "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY type, name"
    ).fetchall()
    return [(t, n, tb, normalize_sql(s)) for t, n, tb, s in rows]


@functools.lru_cache(maxsize=1)
def schema_objects() -> tuple[tuple[str, str, str, str | None], ...]:
    """The canonical schema objects ``(type, name, tbl_name, normalized sql)``, sorted.

    Objects SQLite names ``sqlite_*`` (the automatic indexes) are left out, as in the
    comparison the harness makes.
    """
    conn = sqlite3.connect(":memory:")
    try:
        for sql in SCHEMA:
            conn.execute(sql)
        return tuple(_user_objects(conn))
    finally:
        conn.close()


# --- source_event_seqs varints (SPEC 5) ---------------------------------------------------


def _varint(value: int, out: bytearray) -> None:
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def encode_source_event_seqs(seqs: Sequence[int]) -> bytes:
    r"""Encode ``sourceEventSeqs`` as the SQLite store does (SPEC 5).

    Args:
        seqs: Non-negative safe integers, in their order.

    Returns:
        The first seq as an unsigned LEB128 varint, then for each later seq the ZigZag
        code of its difference from the previous one (``2d`` for ``d >= 0``, ``-2d - 1``
        otherwise), as varints; ``b""`` for ``[]``. Example: ``[9, 10, 11]`` ->
        ``b"\x09\x02\x02"``.

    Raises:
        ValueError: A seq is negative, not an integer or beyond 2**53 - 1.
    """
    out = bytearray()
    prev = 0
    for i, seq in enumerate(seqs):
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SAFE_INTEGER:
            raise ValueError(f"sourceEventSeqs entry {seq!r} is not a non-negative safe integer")
        if i == 0:
            _varint(seq, out)
        else:
            d = seq - prev
            _varint(2 * d if d >= 0 else -2 * d - 1, out)
        prev = seq
    return bytes(out)


def _malformed_seqs(reason: str) -> ValueError:
    return ValueError(f"malformed source_event_seqs storage value: {reason}")


def decode_source_event_seqs(blob: bytes) -> list[int]:
    """Decode a ``source_event_seqs`` BLOB (the inverse of :func:`encode_source_event_seqs`).

    Raises:
        ValueError: ``malformed source_event_seqs storage value: <reason>`` for a
            non-canonical varint (a final ``0x00`` after a continuation byte), a varint
            longer than 9 bytes (``varint is out of range``), a ``truncated varint``, or
            a ``decoded seq is out of range`` (below 0 or beyond 2**53 - 1).
    """
    seqs: list[int] = []
    pos, n = 0, len(blob)
    while pos < n:
        value = shift = 0
        while True:
            if pos >= n:
                raise _malformed_seqs("truncated varint")
            if shift > 56:
                raise _malformed_seqs("varint is out of range")
            byte = blob[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if byte == 0 and shift:
                    raise _malformed_seqs("non-canonical varint")
                break
            shift += 7
        delta = value >> 1 if not value & 1 else -((value + 1) >> 1)
        seq = seqs[-1] + delta if seqs else value
        if not 0 <= seq <= MAX_SAFE_INTEGER:
            raise _malformed_seqs("decoded seq is out of range")
        seqs.append(seq)
    return seqs


# --- data column ------------------------------------------------------------------------------


def _zstandard() -> Any:
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


def _encode_data(value: Any) -> str | bytes:
    text = orjson.dumps(value)
    if len(text) >= COMPRESS_MIN_BYTES:
        zstd = _zstandard()
        if zstd is not None:  # without zstandard, TEXT is still a valid encoding
            packed = zstd.ZstdCompressor(level=_ZSTD_LEVEL).compress(text)
            if len(packed) < len(text):
                return bytes(packed)
    return text.decode("utf-8")


def _decode_data(value: Any, limit: int | None) -> tuple[Any, int]:
    """Decode a ``data`` cell; return the value and its JSON size in bytes."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, bytes):
        if not value.startswith(_ZSTD_MAGIC):
            raise ValueError("data BLOB is not a zstd frame")
        zstd = _zstandard()
        if zstd is None:
            raise ValueError(
                "data is zstd-compressed and the zstandard package is not installed; install "
                "it with: pip install 'pytest-dsh-replay[zstd]'"
            )
        try:
            obj = zstd.ZstdDecompressor().decompressobj()
            raw = obj.decompress(value)
        except zstd.ZstdError as err:
            raise ValueError(f"data BLOB does not decompress ({err})") from None
        if not obj.eof or obj.unused_data:
            raise ValueError("data BLOB is not exactly one complete zstd frame")
        if limit is not None and len(raw) > limit:
            raise ValueError(f"data exceeds {limit} UTF-8 bytes")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("data is not valid UTF-8") from None
    else:
        raise ValueError(f"data must be TEXT or a zstd BLOB, got {type(value).__name__}")
    try:
        return orjson.loads(raw), len(raw)
    except orjson.JSONDecodeError as err:
        raise ValueError(f"data is not valid JSON ({err.msg})") from None


def _decode_row(row: tuple[Any, ...]) -> Event | PackedRow:
    """Decode one physical ``events`` row (SPEC 5 ``decodeRow``).

    Raises:
        ValueError: The reason the row is invalid.
    """
    seq, kind, time, data, sources, surface_op, ignorable = row
    if ignorable == 0 and not isinstance(ignorable, bool):
        if kind not in PACKED_TAGS:
            raise ValueError(
                f"malformed {kind} storage row: packed discriminator requires a chunk tag"
            )
        if sources is not None or surface_op is not None:
            raise ValueError(f"malformed {kind} storage row: packed surface fields must be null")
        try:
            value, size = _decode_data(data, SQLITE_MAX_DATA_BYTES)
        except ValueError as err:
            raise ValueError(f"malformed {kind} storage row: {err}") from None
        if size > SQLITE_MAX_DATA_BYTES:
            raise ValueError(
                f"malformed {kind} storage row: data exceeds {SQLITE_MAX_DATA_BYTES} UTF-8 bytes"
            )
        packed = validate_packed_row({"type": kind, "seq0": seq, "time0": time, "data": value})
        if not 3 <= len(packed.payload) <= SQLITE_MAX_MEMBERS:
            key = "args" if kind == "tool-call-chunks" else "texts"
            raise ValueError(
                f"malformed {kind} storage row: {key} must contain 3..{SQLITE_MAX_MEMBERS} strings"
            )
        return packed
    if ignorable is not None and ignorable != 1:
        raise ValueError("stored event ignorable must be 0, 1, or null")
    value, _ = _decode_data(data, None)
    event: Event = {"type": kind, "seq": seq, "time": time, "data": value}
    if sources is not None:
        if not isinstance(sources, bytes):
            raise _malformed_seqs("expected a BLOB")
        event["sourceEventSeqs"] = decode_source_event_seqs(sources)
    if surface_op is not None:
        try:
            event["surfaceOp"] = orjson.loads(surface_op)
        except orjson.JSONDecodeError:
            raise ValueError("stored surface_op is not valid JSON") from None
    if ignorable == 1:
        event["ignorable"] = True
    return event


def _size(record: Event | PackedRow) -> int:
    return len(record.payload) if isinstance(record, PackedRow) else 1


def _scan_rows(
    rows: Sequence[tuple[Any, ...]], source: str
) -> tuple[list[Event | PackedRow], int, int | None]:
    """Decode a session's rows; return (records, event count, torn-from seq or None).

    A row that is invalid or out of sequence at or before the last row holding a valid
    ``turn/end`` is committed damage; after it, a torn tail (SPEC 5 ``scanRows``).

    Raises:
        SessionLogError: ``corrupt session log: invalid committed physical row at seq N``.
    """
    decoded: list[tuple[int, Event | PackedRow | None, str | None]] = []
    for row in rows:
        try:
            decoded.append((row[0], _decode_row(row), None))
        except (ValueError, SessionLogError) as err:
            decoded.append((row[0], None, str(err)))
    last_end = -1
    for i in range(len(decoded) - 1, -1, -1):
        record = decoded[i][1]
        if isinstance(record, dict) and record["type"] == "turn/end":
            last_end = i
            break
    records: list[Event | PackedRow] = []
    expected = 0
    for i, (seq, record, problem) in enumerate(decoded):
        if record is None or seq != expected:
            if i <= last_end:
                why = problem or f"expected seq {expected}"
                raise SessionLogError(
                    f"corrupt session log: invalid committed physical row at seq {seq} ({why})",
                    path=source,
                )
            return records, expected, seq
        records.append(record)
        expected += _size(record)
    return records, expected, None


def _header_from_row(row: tuple[Any, ...], source: str) -> SessionHeader:
    """A stored ``sessions`` row as a header, checked by the store's header rules."""
    sid, version, created_at, cwd, parent, seed_length, origin, depth, preset, owner = row[:10]
    obj: JSONObject = {"type": "session", "version": version, "id": sid, "createdAt": created_at}
    for key, value in (
        ("cwd", cwd),
        ("parentSession", parent),
        ("seedLength", seed_length),
        ("origin", origin),
        ("delegationDepth", 0 if depth is None else depth),
        ("agentPreset", preset),
        ("owner", owner),
    ):
        if value is not None:
            obj[key] = value
    if not isinstance(sid, str) or not sid:
        raise SessionLogError(
            f"session {sid!r}: stored session id must be a non-empty string", path=source
        )
    try:
        header = store_header(obj, f"{source}#{sid}")
    except SessionLogError as err:
        raise SessionLogError(f"session {sid!r}: stored {err.reason}", path=source) from None
    if depth is None:
        obj.pop("delegationDepth")
        header = SessionHeader.from_json(obj)
    return header


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
    """Check version, application id and schema; ``True`` for a new, empty file (SPEC 5).

    Raises:
        SchemaVersionError: Naming the file, what it holds and what this build needs.
    """
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    try:
        objects = _user_objects(conn)
    except UnicodeDecodeError:
        raise SessionLogError(
            "damaged SQLite session store: its schema text is not valid UTF-8; expected a "
            f"dsh SQLite store (schema {SCHEMA_VERSION})",
            path=path,
        ) from None
    if version == 0:
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
    if version != SCHEMA_VERSION:
        raise SchemaVersionError(
            f"session database has schema version {version}, incompatible with this build "
            f"({SCHEMA_VERSION}); stores are refused, never migrated: re-record it or open it "
            "with a matching build",
            path=path,
            found=version,
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
    """Sessions in a dsh SQLite store file, schema 18 (SPEC 5).

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

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        if self._empty:
            return []
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except (sqlite3.Error, UnicodeDecodeError) as err:  # a damaged file
                raise SessionLogError(f"cannot read the store ({err})", path=self._source) from None

    def exists(self, session_id: str) -> bool:
        """Whether the store has a row for this session."""
        return bool(self._query("SELECT 1 FROM sessions WHERE id = ?", (session_id,)))

    def session_ids(self) -> list[str]:
        """Every stored session id, in the order the sessions were first written."""
        return [r[0] for r in self._query("SELECT id FROM sessions ORDER BY rowid")]

    def _rows(self, session_id: str) -> list[tuple[Any, ...]]:
        return self._query(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )

    def header(self, session_id: str) -> SessionHeader | None:
        """A stored session's header, or ``None`` when the store does not hold it.

        Raises:
            SessionLogError: A stored header value is invalid.
        """
        rows = self._query(f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE id = ?", (session_id,))
        return _header_from_row(rows[0], self._source) if rows else None

    def logs(self) -> Iterator[tuple[SessionHeader, list[Event]]]:
        """Every stored session's header and committed events, in the order written.

        Raises:
            SessionLogError: A stored value is invalid or committed rows are damaged.
        """
        for sid in self.session_ids():
            header = self.header(sid)
            if header is not None:
                yield header, expand_records(self.records(sid))

    def records(self, session_id: str) -> list[Event | PackedRow]:
        """A session's committed records (events and packed rows), a torn tail left out.

        Raises:
            SessionLogError: Committed rows are damaged (names the store and the seq).
        """
        return _scan_rows(self._rows(session_id), f"{self._source}#{session_id}")[0]

    def _records(
        self, session_id: str
    ) -> tuple[SessionHeader, list[Event | PackedRow], int | None] | None:
        header = self.header(session_id)
        if header is None:
            return None
        records, _, torn = _scan_rows(self._rows(session_id), f"{self._source}#{session_id}")
        return header, records, torn

    def read(self, session_id: str) -> StoredLog | None:
        """Read a session's committed events; delete a torn tail unless read-only (SPEC 5).

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
        return StoredLog(header, expand_records(records), source, repaired=torn is not None)

    def _transaction(self, body: Any) -> None:
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
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        if row is None:
            return 0
        try:
            return int(row[0]) + _size(_decode_row(row))
        except (ValueError, SessionLogError) as err:
            raise SessionStoreError(
                f"session {session_id} has an invalid physical tail at seq {row[0]} ({err}); "
                "load() the session to repair it"
            ) from None

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Append one batch in one transaction (SPEC 5); the first creates the session row.

        Raises:
            SessionStoreError: The session exists (``create``) or not, the batch does
                not continue the stored log, or the write failed (nothing is stored).
        """
        records = pack_chunk_runs(
            events, max_members=SQLITE_MAX_MEMBERS, max_data_bytes=SQLITE_MAX_DATA_BYTES
        )
        sid = header.id
        rows = [_encode_record(sid, r) for r in records]

        def body(conn: sqlite3.Connection) -> None:
            found = conn.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone()
            if create:
                if found:
                    raise SessionStoreError(f"session {sid!r} already exists in {self.describe()}")
                conn.execute(
                    f"INSERT INTO sessions ({_SESSION_COLUMNS}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)",
                    _session_row(header),
                )
            elif not found:
                raise SessionStoreError(f"session {sid!r} is not stored in {self.describe()}")
            stored_next = self._next_seq(conn, sid)
            first = events[0]["seq"] if events else stored_next
            if first != stored_next:
                raise SessionStoreError(
                    f"session {sid} append starts at seq {first}, stored next seq is {stored_next}"
                )
            conn.executemany(_INSERT_EVENT, rows)
            conn.execute("UPDATE sessions SET revision = revision + 1 WHERE id = ?", (sid,))

        with self._lock:
            self._transaction(body)


def _session_row(header: SessionHeader) -> tuple[Any, ...]:
    return (
        header.id,
        0 if header.version is None else header.version,
        header.created_at,
        header.cwd,
        header.parent_session,
        header.seed_length if header.seeded else None,
        header.origin,
        header.delegation_depth,
        header.agent_preset,
        header.owner,
        str(uuid.uuid4()),
    )


def _encode_record(session_id: str, record: JSONObject) -> tuple[Any, ...]:
    if "seq0" in record and record.get("type") in PACKED_TAGS:
        return (
            session_id,
            record["seq0"],
            record["type"],
            record["time0"],
            _encode_data(record["data"]),
            None,
            None,
            0,
        )
    sources = record.get("sourceEventSeqs")
    surface = record.get("surfaceOp")
    return (
        session_id,
        record["seq"],
        record["type"],
        record["time"],
        _encode_data(record["data"]),
        None if sources is None else encode_source_event_seqs(sources),
        None if surface is None else orjson.dumps(surface).decode("utf-8"),
        1 if record.get("ignorable") is True else None,
    )
