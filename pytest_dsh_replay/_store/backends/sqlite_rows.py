"""The dsh SQLite store's schema 18 and row encoding.

A store file holds three ``STRICT`` tables: ``persistence_state`` (one row, the store's
random id), ``sessions`` (one row per session: the header fields, an ``incarnation`` UUID
and a ``revision`` counter) and ``events`` (one physical row per scalar event or per
packed chunk run). The file carries ``PRAGMA user_version = 18`` and
``PRAGMA application_id = 0x44534850`` ("DSHP").

Row encoding:

- ``data`` is the JSON text of the event's ``data`` (or a packed row's ``data``); when
  that text is at least 4096 bytes it is stored as one zstd frame (level 3, with its
  content checksum) if that is smaller, as a BLOB.
- ``source_event_seqs`` is a BLOB of unsigned LEB128 varints: the first seq, then the
  ZigZag code of each difference (`encode_source_event_seqs`).
- ``surface_op`` is the JSON text of ``surfaceOp``; ``ignorable`` is 1, NULL, or 0, the
  sentinel of a packed row (3 to 1024 members, ``data`` at most 1 MiB).

`scan_rows` turns a session's rows into records (events and packed rows), the
same records the JSONL reader yields.
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

import orjson

from ..._errors import SessionLogError
from ..._format.chunk_rows import (
    PACKED_TAGS,
    SQLITE_MAX_DATA_BYTES,
    SQLITE_MAX_MEMBERS,
    PackedRow,
    validate_packed_row,
)
from ..._format.events import Event, JSONObject, SessionHeader, header_problem
from ..._format.json_values import MAX_SAFE_INTEGER
from ..._format.jsonl import MAX_LINE_BYTES
from ..._format.zstd import ZSTD_MAGIC, OutputLimitError, compress_frame, decompress_frame

__all__ = [
    "APPLICATION_ID",
    "COMPRESS_MIN_BYTES",
    "EVENT_COLUMNS",
    "INSERT_EVENT",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SESSION_COLUMNS",
    "DataTooLong",
    "decode_row",
    "decode_source_event_seqs",
    "encode_record",
    "encode_source_event_seqs",
    "header_from_row",
    "normalize_sql",
    "record_size",
    "scan_rows",
    "schema_objects",
    "session_row",
    "user_objects",
]

SCHEMA_VERSION: Final = 18
"""The only ``PRAGMA user_version`` this build reads or writes."""

APPLICATION_ID: Final = 0x44534850
"""``PRAGMA application_id`` of a dsh store: ASCII ``DSHP`` = 1146308688."""

COMPRESS_MIN_BYTES: Final = 4096
"""``data`` JSON at least this long (UTF-8 bytes) is zstd-compressed when that is smaller."""

_ZSTD_LEVEL: Final = 3

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
"""The schema 18 ``CREATE`` statements, as the harness writes them.

See [docs/format.md#sqlite-store](../format.md#sqlite-store).
"""

SESSION_COLUMNS: Final = (
    "id, version, created_at, cwd, parent_session, seed_length, origin, delegation_depth, "
    "agent_preset, owner, incarnation, revision"
)
EVENT_COLUMNS: Final = "seq, type, time, data, source_event_seqs, surface_op, ignorable"
INSERT_EVENT: Final = (
    f"INSERT INTO events (session_id, {EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def normalize_sql(sql: str | None) -> str | None:
    """Collapse every whitespace run to one space (how schema objects are compared)."""
    return None if sql is None else " ".join(sql.split())


def user_objects(conn: sqlite3.Connection) -> list[tuple[str, str, str, str | None]]:
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
        return tuple(user_objects(conn))
    finally:
        conn.close()


# --- source_event_seqs varints (docs/format.md#sqlite-store) ------------------------------


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
    r"""Encode ``sourceEventSeqs`` as the SQLite store does.

    See [docs/format.md#sqlite-store](../format.md#sqlite-store).

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
    """Decode a ``source_event_seqs`` BLOB (the inverse of `encode_source_event_seqs`).

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


def _zstandard() -> ModuleType | None:
    try:
        import zstandard
    except ImportError:
        return None
    return zstandard


class DataTooLong(ValueError):
    """A record's data serializes to more than `MAX_LINE_BYTES` (reading would refuse it)."""

    def __init__(self, size: int):
        super().__init__(f"data of {size} bytes")
        self.size = size


def _encode_data(value: object) -> str | bytes:
    text = orjson.dumps(value)
    if len(text) > MAX_LINE_BYTES:
        raise DataTooLong(len(text))
    if len(text) >= COMPRESS_MIN_BYTES:
        zstd = _zstandard()
        if zstd is not None:  # without zstandard, TEXT is still a valid encoding
            packed = compress_frame(zstd, text, _ZSTD_LEVEL)
            if len(packed) < len(text):
                return bytes(packed)
    return text.decode("utf-8")


def _decode_data(value: object, limit: int | None) -> tuple[Any, int]:
    """Decode a ``data`` cell; return the value and its JSON size in bytes."""
    if isinstance(value, str):
        raw = value.encode("utf-8", "surrogatepass")
    elif isinstance(value, bytes):
        if not value.startswith(ZSTD_MAGIC):
            raise ValueError("data BLOB is not a zstd frame")
        zstd = _zstandard()
        if zstd is None:
            raise ValueError(
                "data is zstd-compressed and the zstandard package is not installed; install "
                "it with: pip install 'pytest-dsh-replay[zstd]'"
            )
        try:  # a cell holds one record's data: at most a line's bytes (docs/limits.md)
            raw, end = decompress_frame(zstd, value, 0, MAX_LINE_BYTES if limit is None else limit)
        except OutputLimitError as err:
            raise ValueError(f"data exceeds {err.limit} UTF-8 bytes") from None
        except zstd.ZstdError as err:
            raise ValueError(f"data BLOB does not decompress ({err})") from None
        if end != len(value):
            raise ValueError("data BLOB is not exactly one complete zstd frame")
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


def decode_row(row: tuple[Any, ...]) -> Event | PackedRow:
    """Decode one physical ``events`` row.

    See [docs/format.md#sqlite-store](../format.md#sqlite-store); the dsh harness's ``decodeRow``.

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


def record_size(record: Event | PackedRow) -> int:
    return len(record.payload) if isinstance(record, PackedRow) else 1


def scan_rows(
    rows: Sequence[tuple[Any, ...]], source: str
) -> tuple[list[Event | PackedRow], int, int | None]:
    """Decode a session's rows; return (records, event count, torn-from seq or None).

    A row that is invalid or out of sequence at or before the last row holding a valid
    ``turn/end`` is committed damage; after it, a torn tail
    ([docs/format.md#sqlite-store](../format.md#sqlite-store); the dsh harness's ``scanRows``).

    Raises:
        SessionLogError: ``corrupt session log: invalid committed physical row at seq N``.
    """
    decoded: list[tuple[int, Event | PackedRow | None, str | None]] = []
    for row in rows:
        try:
            decoded.append((row[0], decode_row(row), None))
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
        expected += record_size(record)
    return records, expected, None


def header_from_row(row: tuple[Any, ...], source: str) -> SessionHeader:
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
    problem = header_problem(obj, "store")
    if problem is not None and problem.startswith("session "):  # its format version
        raise SessionLogError(f"session {sid!r}: stored {problem}", path=source)
    if problem is not None:  # a store has no lines: its sessions row is what is wrong
        raise SessionLogError(
            f"session {sid!r}: its row in the sessions table is damaged ({problem})",
            path=source,
        )
    header = SessionHeader.from_json(obj)
    if depth is None:
        obj.pop("delegationDepth")
        header = SessionHeader.from_json(obj)
    return header


def session_row(header: SessionHeader) -> tuple[object, ...]:
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


def encode_record(session_id: str, record: JSONObject) -> tuple[object, ...]:
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
