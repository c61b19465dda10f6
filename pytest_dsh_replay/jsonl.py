r"""Session-log text <-> header and events (SPEC 1.2, 1.5, 4).

Reading follows the reference replay parser's lenient rules: records are split on ``\\n``
only (a trailing ``\\r`` is dropped, so CRLF files read the same), blank lines are
skipped, a UTF-8 byte-order mark before the header is tolerated, the header is the first
non-blank line, projected records get their ``seq``/``time`` (or ``seq0``/``time0``)
synthesized, and packed chunk rows are expanded. Strings holding U+2028, U+2029 or
``\\x1e`` are kept intact because nothing splits on them.

Files named ``*.jsonl.zst`` / ``*.jsonl.zstd`` (or any file starting with the zstd frame
magic) are a sequence of zstd frames and are read through the ``zstandard`` package.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

import orjson

from .chunk_rows import (
    PACKED_TAGS,
    PackedRow,
    expand_packed_row,
    pack_chunk_runs,
    validate_packed_row,
)
from .errors import SessionLogError
from .events import Event, JSONObject, SessionHeader

__all__ = [
    "ZSTD_SUFFIXES",
    "dump_session_log",
    "iter_log_lines",
    "iter_records",
    "parse_session_header",
    "parse_session_log",
    "project_record",
    "read_log_bytes",
    "read_session_log",
]

ZSTD_SUFFIXES: Final[tuple[str, ...]] = (".zst", ".zstd")
"""File name suffixes of zstd-compressed logs (``session.jsonl.zst``, ``.jsonl.zstd``)."""

_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_BOM: Final = b"\xef\xbb\xbf"
_ENVELOPE_KEYS: Final = ("seq", "time", "seq0", "time0")


def _as_bytes(text: str | bytes) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    return bytes(text)


def _json_problem(err: orjson.JSONDecodeError) -> str:
    return f"{err.msg} at column {err.colno}"


def iter_log_lines(
    data: bytes | Iterable[bytes], *, source: str | None = None
) -> Iterator[tuple[int, Any]]:
    r"""Yield ``(line_number, value)`` for every non-blank line of a log, header included.

    Args:
        data: The whole log as bytes, or an iterable of raw lines each ending in
            ``\\n`` (a binary file object works).
        source: The file name used in error messages.

    Yields:
        The 1-based physical line number (blank lines counted) and the parsed JSON
        value. Nothing is checked beyond JSON syntax.

    Raises:
        SessionLogError: A line is not valid JSON (a final line without ``\\n`` is
            reported as a truncated last line).
    """
    lines: Iterable[bytes] = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    loads = orjson.loads
    lineno = 0
    for raw in lines:
        lineno += 1
        line = raw
        if lineno == 1 and line.startswith(_BOM):
            line = line[3:]
        try:
            yield lineno, loads(line)
            continue
        except orjson.JSONDecodeError as err:
            problem = err
        if not line.strip() or not line.decode("utf-8", "replace").strip():
            continue  # blank or whitespace-only: skipped, as the reference does
        if not raw.endswith(b"\n"):
            raise SessionLogError(
                "truncated last line: the file ends inside a record "
                f"({_json_problem(problem)}); expected a complete JSON object ending in a "
                "newline (was the recording interrupted?)",
                path=source,
                line=lineno,
            ) from None
        raise SessionLogError(
            f"invalid JSON ({_json_problem(problem)}); expected one JSON object per line",
            path=source,
            line=lineno,
        ) from None


def header_from(value: Any, lineno: int, source: str | None) -> SessionHeader:
    if not isinstance(value, dict):
        raise SessionLogError(
            "the first line must be the session header, a JSON object like "
            '{"type":"session","id":...}, got ' + _describe(value),
            path=source,
            line=lineno,
        )
    return SessionHeader.from_json(value)


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def _empty(source: str | None) -> SessionLogError:
    return SessionLogError(
        "empty session log: expected a session header line (a JSON object) first",
        path=source,
    )


def parse_session_header(text: str | bytes, *, source: str | None = None) -> SessionHeader:
    """Read the header of a session log, leniently (SPEC 1.3, R ``parseSessionHeader``).

    Args:
        text: The whole log, or just its first line.
        source: The file name used in error messages.

    Returns:
        The header of the first non-blank line; ``id``, ``created_at`` and
        ``seed_length`` default to ``""``, ``0`` and ``0`` when absent or mistyped.

    Raises:
        SessionLogError: The log is empty, or its first line is not a JSON object.
    """
    data = _as_bytes(text)
    # Only the header line is parsed, however long the log.
    for lineno, value in iter_log_lines(_first_lines(data), source=source):
        return header_from(value, lineno, source)
    raise _empty(source)


def _first_lines(data: bytes) -> Iterator[bytes]:
    """Yield the lines of ``data`` lazily, so header-only reads stop early."""
    start = 0
    n = len(data)
    while start < n:
        end = data.find(b"\n", start)
        if end < 0:
            yield data[start:]
            return
        yield data[start : end + 1]
        start = end + 1


def iter_records(
    lines: Iterator[tuple[int, Any]], *, source: str | None = None
) -> Iterator[tuple[int, Event | PackedRow]]:
    """Turn body lines into records with their envelopes filled in (SPEC 1.5, 4.2).

    Args:
        lines: ``(line_number, value)`` pairs after the header, from
            :func:`iter_log_lines`.
        source: The file name used in error messages.

    Yields:
        ``(line_number, record)``: an ordinary event (``seq`` set to the number of
        logical events before it and ``time`` to 0 when absent), or a validated
        :class:`~pytest_dsh_replay.chunk_rows.PackedRow` standing for its members.

    Raises:
        SessionLogError: A line is not a JSON object, or a packed row is malformed.
    """
    next_seq = 0
    for lineno, value in lines:
        if value.__class__ is not dict:
            raise SessionLogError(
                f"each line after the header must be a JSON object (an event), got "
                f"{_describe(value)}",
                path=source,
                line=lineno,
            )
        tag = value.get("type")
        if tag.__class__ is str and tag in PACKED_TAGS:
            if "seq0" not in value:
                value["seq0"] = next_seq
            if "time0" not in value:
                value["time0"] = 0
            try:
                row = validate_packed_row(value)
            except SessionLogError as err:
                raise err.at(path=source, line=lineno) from None
            yield lineno, row
            next_seq += len(row.payload)
        else:
            if "seq" not in value:
                value["seq"] = next_seq
            if "time" not in value:
                value["time"] = 0
            yield lineno, value
            next_seq += 1


def _expand(records: Iterator[tuple[int, Event | PackedRow]]) -> list[Event]:
    events: list[Event] = []
    for _, record in records:
        if isinstance(record, PackedRow):
            events.extend(expand_packed_row(record))
        else:
            events.append(record)
    return events


def parse_session_log(text: str | bytes, *, source: str | None = None) -> list[Event]:
    """Decode a session log into its events, leniently (SPEC 1.2, 1.5; R ``parseSessionLog``).

    Args:
        text: The whole log (header line first). ``bytes`` must be UTF-8.
        source: The file name used in error messages.

    Returns:
        The events after the header, in log order. Projected records get ``seq`` set to
        the number of events decoded before them and ``time`` set to 0; packed chunk
        rows are expanded into one ``assistant/chunk`` event per member. Ordinary
        events are not validated (the reference does not validate them either).

    Raises:
        SessionLogError: The log is empty, a line is not valid JSON, a body line is not
            a JSON object, or a packed row is malformed; the error names ``source`` and
            the physical line.
    """
    lines = iter_log_lines(_as_bytes(text), source=source)
    if next(lines, None) is None:
        raise _empty(source)
    return _expand(iter_records(lines, source=source))


def read_log_bytes(path: str | os.PathLike[str]) -> bytes:
    """Read a log file's text, decompressing zstd logs (SPEC 1.1, 1.6).

    Args:
        path: A ``.jsonl`` file, or a ``.jsonl.zst``/``.jsonl.zstd`` file holding a
            sequence of zstd frames. A file that starts with the zstd frame magic is
            decompressed whatever its name.

    Returns:
        The UTF-8 log text as bytes.

    Raises:
        SessionLogError: The file cannot be read, zstd support is missing, or the zstd
            container is damaged (a torn or corrupt frame), naming the file and offset.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise SessionLogError(
            f"cannot read session log: {err.strerror or err}", path=str(p)
        ) from None
    if p.name.endswith(ZSTD_SUFFIXES) or data.startswith(_ZSTD_MAGIC):
        return _decompress_frames(data, str(p))
    return data


def _decompress_frames(data: bytes, source: str) -> bytes:
    try:
        import zstandard
    except ImportError:
        raise SessionLogError(
            "this log is zstd-compressed and the zstandard package is not installed; "
            "install it with: pip install 'pytest-dsh-replay[zstd]'",
            path=source,
        ) from None
    if not data:
        raise SessionLogError("empty zstd session log: expected at least one frame", path=source)
    decompressor = zstandard.ZstdDecompressor()
    out: list[bytes] = []
    offset = 0
    while offset < len(data):
        if not data.startswith(_ZSTD_MAGIC, offset):
            raise SessionLogError(
                f"corrupt zstd session log: invalid frame magic at byte {offset}", path=source
            )
        obj = decompressor.decompressobj()
        try:
            out.append(obj.decompress(data[offset:]))
        except zstandard.ZstdError as err:
            raise SessionLogError(
                f"corrupt zstd session log: frame at byte {offset} does not decode ({err})",
                path=source,
            ) from None
        if not obj.eof:
            raise SessionLogError(
                f"torn zstd session log: the frame at byte {offset} is incomplete "
                "(was the recording interrupted?)",
                path=source,
            )
        offset = len(data) - len(obj.unused_data)
    return b"".join(out)


def read_session_log(path: str | os.PathLike[str]) -> tuple[SessionHeader, list[Event]]:
    """Read a log file: its header and its events (plain or zstd; SPEC 1).

    Raises:
        SessionLogError: As :func:`read_log_bytes`, :func:`parse_session_header` and
            :func:`parse_session_log`, naming the file.
    """
    source = str(path)
    data = read_log_bytes(path)
    lines = iter_log_lines(data, source=source)
    first = next(lines, None)
    if first is None:
        raise _empty(source)
    header = header_from(first[1], first[0], source)
    return header, _expand(iter_records(lines, source=source))


def project_record(record: JSONObject) -> JSONObject:
    """Return ``record`` without its top-level envelope keys (SPEC 1.5 committed form).

    ``seq``, ``time``, ``seq0`` and ``time0`` are removed at the top level only; nested
    fields with those names stay.
    """
    return {k: v for k, v in record.items() if k not in _ENVELOPE_KEYS}


def dump_session_log(
    header: SessionHeader | JSONObject,
    events: Iterable[Event],
    *,
    pack_chunks: bool = True,
    envelope: bool = True,
) -> bytes:
    r"""Serialize a session log (SPEC 1.2, 1.5, 4.3).

    Args:
        header: The header, as a :class:`SessionHeader` (written in the reference field
            order) or as the exact header object to write.
        events: The events in log order, each with ``seq`` and ``time``.
        pack_chunks: Pack delta runs of 3 or more into chunk rows, as the harness does.
        envelope: Keep ``seq``/``time`` (``seq0``/``time0``); ``False`` gives the
            committed ("projected") form, which replay reads back into the same events.

    Returns:
        UTF-8 bytes: one compact JSON record per line (keys in insertion order,
        non-ASCII kept raw), every line ending in ``\\n``.
    """
    head = header.to_json() if isinstance(header, SessionHeader) else header
    records: Iterable[JSONObject] = pack_chunk_runs(events) if pack_chunks else events
    dumps = orjson.dumps
    parts = [dumps(head)]
    if envelope:
        parts.extend(dumps(r) for r in records)
    else:
        parts.extend(dumps(project_record(r)) for r in records)
    parts.append(b"")
    return b"\n".join(parts)
