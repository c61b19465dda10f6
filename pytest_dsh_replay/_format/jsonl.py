r"""Session-log text <-> header and events ([docs/format.md#lines](../format.md#lines)).

Reading follows the dsh harness's replay parser's lenient rules: records are split on ``\\n``
only (a trailing ``\\r`` is dropped, so CRLF files read the same), blank lines are
skipped, a UTF-8 byte-order mark before the header is tolerated, the header is the first
non-blank line, projected records get their ``seq``/``time`` (or ``seq0``/``time0``)
synthesized, and packed chunk rows are expanded. Strings holding U+2028, U+2029 or
``\\x1e`` are kept intact because nothing splits on them.

Files named ``*.jsonl.zst`` / ``*.jsonl.zstd`` (or any file starting with the zstd frame
magic) are a sequence of zstd frames, decompressed by `pytest_dsh_replay._format.zstd`; a
name's format generation is checked against the header (`pytest_dsh_replay._format.log_names`).

Limits (refused with a [`SessionLogError`][pytest_dsh_replay.SessionLogError] naming the file
and line, before the input can exhaust memory): one record may be at most
[`MAX_LINE_BYTES`][pytest_dsh_replay.MAX_LINE_BYTES] long, checked before it is parsed
(plain files are read line by line, never whole), and may nest at most
[`MAX_NESTING`][pytest_dsh_replay.MAX_NESTING] arrays and objects deep.
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from itertools import count, islice
from typing import IO, Any, Final, cast

import orjson

from .._errors import SessionLogError
from .chunk_rows import (
    PACKED_TAGS,
    PackedRow,
    expand_records,
    pack_chunk_runs,
    validate_packed_row,
)
from .events import (
    Event,
    HeaderMode,
    JSONObject,
    SessionHeader,
    SessionLog,
    header_problem,
    header_version,
)
from .formats import lenient_spec
from .json_values import ABSENT, MAX_NESTING, describe_json, holds_non_finite
from .log_names import check_log_name
from .typed import ROW_LINE_PREFIXES, STREAM_LINE_PREFIXES, decode_call_line
from .zstd import (
    ZSTD_MAGIC,
    check_compressed_size,
    decompress_frames,
    is_zstd_log,
    iter_frames,
)

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_NESTING",
    "body_digests",
    "dump_session_log",
    "fsync_dir",
    "head_digest",
    "header_line",
    "iter_log_lines",
    "iter_records",
    "open_log",
    "open_session_log",
    "parse_session_header",
    "parse_session_log",
    "project_record",
    "read_header",
    "read_log_bytes",
    "read_session_log",
]

MAX_LINE_BYTES: Final[int] = 64 * 1024 * 1024
"""The longest record (one line, without its newline) a log may hold: 64 MiB.

A longer line is refused before it is parsed, and a plain file is never read further
than that into the line, so a damaged or hostile file (a multi-gigabyte line without a
newline) cannot exhaust memory.
"""

_BOM: Final = b"\xef\xbb\xbf"
_ENVELOPE_KEYS: Final = ("seq", "time", "seq0", "time0")


def _as_bytes(text: str | bytes) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    return bytes(text)


def _json_problem(err: orjson.JSONDecodeError) -> str:
    if err.msg.startswith("depth limit exceeded"):
        return (
            f"it nests arrays and objects deeper than {MAX_NESTING} levels, the limit "
            f"(column {err.colno})"
        )
    return f"{err.msg} at column {err.colno}"


def too_long(source: str | None, lineno: int) -> SessionLogError:
    """The error for a line longer than [`MAX_LINE_BYTES`][pytest_dsh_replay.MAX_LINE_BYTES]."""
    return SessionLogError(
        f"line is longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB ({MAX_LINE_BYTES} "
        "bytes), the limit for one record; it was refused before parsing (is this a "
        "session log?)",
        path=source,
        line=lineno,
    )


_WHOLE_READ_BYTES: Final = 1 << 20


def raw_lines(data: bytes | bytearray | memoryview | Iterable[bytes]) -> Iterator[bytes]:
    r"""The raw lines of a log, each ending in ``\n`` except perhaps the last.

    A log of at most 1 MiB (bytes, or a file that small) is split at once; a larger one
    is read at most [`MAX_LINE_BYTES`][pytest_dsh_replay.MAX_LINE_BYTES] + 1 bytes at a
    time, so an overlong line is never read whole (`line_too_long` spots it).

    Args:
        data: The log as bytes, a binary file object, or an iterable of raw lines.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        readline = getattr(data, "readline", None)
        if readline is None:
            return iter(data)
        whole = _small_file(data)
        if whole is None:
            return iter(partial(readline, MAX_LINE_BYTES + 1), b"")
        data = whole
    if len(data) > _WHOLE_READ_BYTES:
        return iter(partial(io.BytesIO(data).readline, MAX_LINE_BYTES + 1), b"")
    pieces = bytes(data).split(b"\n")
    last = pieces.pop()
    lines = [piece + b"\n" for piece in pieces]
    if last:
        lines.append(last)
    return iter(lines)


def _small_file(f: Any) -> bytes | None:
    """A whole file object's remaining bytes when they are at most 1 MiB, else ``None``."""
    if isinstance(f, io.BytesIO):
        view = f.getbuffer()
        small = len(view) - f.tell() <= _WHOLE_READ_BYTES
        view.release()
        return f.read() if small else None
    try:
        size = os.fstat(f.fileno()).st_size - f.tell()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    if size > _WHOLE_READ_BYTES:
        return None
    data: bytes = f.read()
    return data


def line_too_long(raw: bytes) -> bool:
    """Whether a raw line holds more than `MAX_LINE_BYTES` before its newline."""
    return len(raw) > MAX_LINE_BYTES and len(raw.rstrip(b"\n")) > MAX_LINE_BYTES


def bad_line(
    raw: bytes, err: orjson.JSONDecodeError, source: str | None, lineno: int
) -> SessionLogError | None:
    """The error for a line that does not parse; ``None`` when it is blank (skipped)."""
    line = raw[3:] if lineno == 1 and raw.startswith(_BOM) else raw
    if not line.strip() or not line.decode("utf-8", "replace").strip():
        return None  # blank or whitespace-only: skipped, as the dsh harness does
    if not raw.endswith(b"\n"):
        return SessionLogError(
            "truncated last line: the file ends inside a record "
            f"({_json_problem(err)}); expected a complete JSON object ending in "
            "a newline (was the recording interrupted?)",
            path=source,
            line=lineno,
        )
    if "UTF-8" in err.msg:
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as bad:  # orjson names neither the byte nor its place
            return SessionLogError(
                f"not UTF-8 text: byte {bad.start + 1} of the line (0x{line[bad.start]:02x}) "
                "is not valid UTF-8 there; a log is UTF-8 text (was it saved in another "
                "encoding, or is it no session log?)",
                path=source,
                line=lineno,
            )
    if err.lineno > 1:  # at the line's own newline: the column of its end, not line 2's
        try:
            orjson.loads(raw.rstrip(b"\r\n"))
        except orjson.JSONDecodeError as at_end:
            err = at_end
    return SessionLogError(
        f"invalid JSON ({_json_problem(err)}); expected one JSON object per line",
        path=source,
        line=lineno,
    )


def _with_lone_surrogates(raw: bytes, err: orjson.JSONDecodeError) -> Any:
    r"""A line whose only fault is a lone surrogate escape (``"\ud83d"``), parsed.

    JavaScript writes the halves of a surrogate pair split across two stream deltas as
    two lone escapes; ``orjson`` refuses them, the standard library's parser keeps them
    (the script builder joins the halves again). Anything else stays refused: the result
    is then `ABSENT`.
    """
    if "surrogate" not in err.msg:
        return ABSENT
    import json  # only for such a line: not on the cold path

    try:
        return json.loads(raw.removeprefix(_BOM))
    except (ValueError, RecursionError):
        return ABSENT


def parse_json_text(raw: bytes) -> Any:
    """``raw`` parsed as the reader parses a line (lone surrogates kept), or ABSENT.

    Returns:
        The value, or `ABSENT` when the
        text is not JSON (the reader refuses such a line).
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        return _with_lone_surrogates(raw, err)


def line_error(source: str | None, lineno: int | None) -> SessionLogError | None:
    """The error the reader gives line ``lineno`` of the log ``source``, read again now.

    For a payload kept as the log's text whose text turns out not to parse when it is
    first used ([docs/format.md#raw-payloads](../format.md#raw-payloads)): the reader's
    message names the column in the whole line. ``None`` when the file cannot be read or the
    line now parses.
    """
    if source is None or lineno is None:
        return None
    try:
        with open_log(source) as f:
            raw = next(islice(raw_lines(f), lineno - 1, None), None)
    except (OSError, SessionLogError):
        return None
    if raw is None:
        return None
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        if _with_lone_surrogates(raw, err) is ABSENT:
            return bad_line(raw, err, source, lineno)
    return None


def read_failed(err: OSError, source: str | None, lineno: int | None = None) -> SessionLogError:
    """The error for a log file that cannot be read."""
    return SessionLogError(
        f"cannot read session log: {err.strerror or err}", path=source, line=lineno
    )


def iter_log_lines(
    data: bytes | Iterable[bytes], *, source: str | None = None, calls: bool = False
) -> Generator[tuple[int, Any], None, None]:
    r"""Yield ``(line_number, value)`` for every non-blank line of a log, header included.

    Args:
        data: The whole log as bytes, a binary file object (read line by line), or an
            iterable of raw lines each ending in ``\n``.
        source: The file name used in error messages.
        calls: Decode packed rows and ``assistant/message``/``assistant/attempt`` events
            with `decode_call_line` when it is certain of
            them (the script builder's fast path); such lines are yielded as a
            `PackedRow` or a
            `StreamLine`, already checked.

    Yields:
        The 1-based physical line number (blank lines counted) and the parsed JSON
        value (or, with ``calls``, a decoded call line). Nothing is checked beyond JSON
        syntax and the limits.

    Raises:
        SessionLogError: A line is not valid JSON (a final line without ``\n`` is
            reported as a truncated last line), is longer than
            [`MAX_LINE_BYTES`][pytest_dsh_replay.MAX_LINE_BYTES], nests deeper than
            [`MAX_NESTING`][pytest_dsh_replay.MAX_NESTING], or the file cannot be read.
    """
    loads = orjson.loads
    prefixes: tuple[bytes, ...] = ()  # the header (the first value) is never a call line
    lineno = 0
    try:
        for raw in raw_lines(data):
            lineno += 1
            if len(raw) > MAX_LINE_BYTES and line_too_long(raw):
                raise too_long(source, lineno)
            if prefixes and raw.startswith(prefixes):
                decoded = decode_call_line(raw)
                if decoded is not None:
                    yield lineno, decoded
                    continue
            try:
                value = loads(raw[3:] if lineno == 1 and raw.startswith(_BOM) else raw)
            except orjson.JSONDecodeError as err:
                value = _with_lone_surrogates(raw, err)
                if value is ABSENT:
                    error = bad_line(raw, err, source, lineno)
                    if error is not None:
                        raise error from None
                    continue  # a blank line
            if calls and not prefixes:  # after the header: its format says which lines
                version = value.get("version") if value.__class__ is dict else None
                spec = lenient_spec(version if version.__class__ is int else None)
                prefixes = STREAM_LINE_PREFIXES if spec.streams_in_message else ROW_LINE_PREFIXES
            yield lineno, value
    except OSError as err:  # reading the file failed (not the consumer: it runs outside)
        raise read_failed(err, source, lineno + 1) from None


def read_header(
    value: object, lineno: int, source: str | None, *, mode: HeaderMode = "replay"
) -> SessionHeader:
    """Validate a parsed header line (`header_problem`).

    Raises:
        SessionLogError: The header breaks a rule of ``mode``, naming the file and line.
    """
    problem = header_problem(value, mode)
    if problem is not None:
        raise SessionLogError(problem, path=source, line=lineno)
    return SessionHeader.from_json(value)


def header_line(data: bytes, *, source: str | None = None) -> tuple[bytes, Any]:
    r"""A log's header line exactly as found, and its parsed value.

    The header is the first non-blank line, as `iter_log_lines` reads it; the line
    comes without its ``\n``, a trailing ``\r`` and a leading byte-order mark.

    Raises:
        SessionLogError: The log is empty, or its first non-blank line does not parse.
    """
    first = next(iter_log_lines(data, source=source), None)
    if first is None:
        raise _empty(source)
    lineno, value = first
    raw = next(islice(raw_lines(data), lineno - 1, None))
    return raw.removesuffix(b"\n").rstrip(b"\r").removeprefix(_BOM), value


def not_an_event(value: object, source: str | None, lineno: int) -> SessionLogError:
    """The error for a body line that is not a JSON object."""
    return SessionLogError(
        f"each line after the header must be a JSON object (an event), got {describe_json(value)}",
        path=source,
        line=lineno,
    )


def _empty(source: str | None) -> SessionLogError:
    return SessionLogError(
        "empty session log: expected a session header line (a JSON object) first",
        path=source,
    )


def parse_session_header(text: str | bytes, *, source: str | None = None) -> SessionHeader:
    """Read the header of a session log, leniently.

    Args:
        text: The whole log, or just its first line.
        source: The file name used in error messages.

    Returns:
        The header of the first non-blank line; ``id``, ``created_at`` and
        ``seed_length`` default to ``""``, ``0`` and ``0`` when absent or mistyped.

    Raises:
        SessionLogError: The log is empty, or its first line is not a JSON object.
        TypeError: ``text`` is neither ``str`` nor bytes.
    """
    if not isinstance(text, str | bytes | bytearray | memoryview):
        raise TypeError(f"parse_session_header takes the log as str or bytes, got {text!r:.80}")
    data = _as_bytes(text)
    if not data.endswith(b"\n"):  # a first line alone needs no newline: never "truncated"
        data += b"\n"
    # Only the header line is read and parsed, however long the log.
    for lineno, value in iter_log_lines(data, source=source):
        return read_header(value, lineno, source, mode="lenient")
    raise _empty(source)


def iter_records(
    lines: Iterator[tuple[int, Any]], *, source: str | None = None
) -> Iterator[tuple[int, Event | PackedRow]]:
    """Turn body lines into records with their envelopes filled in.

    See [docs/format.md#committed-form](../format.md#committed-form).

    Args:
        lines: ``(line_number, value)`` pairs after the header, from
            `iter_log_lines`.
        source: The file name used in error messages.

    Yields:
        ``(line_number, record)``: an ordinary event (``seq`` set to the number of
        logical events before it and ``time`` to 0 when absent), or a validated
        `PackedRow` standing for its members.

    Raises:
        SessionLogError: A line is not a JSON object, or a packed row is malformed.
    """
    next_seq = 0
    for lineno, value in lines:
        if value.__class__ is not dict:
            raise not_an_event(value, source, lineno)
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


def parse_session_log(text: str | bytes, *, source: str | None = None) -> list[Event]:
    """Decode a session log into its events, leniently.

    Args:
        text: The whole log (header line first). ``bytes`` must be UTF-8.
        source: The file name used in error messages.

    Returns:
        The events after the header, in log order. Projected records get ``seq`` set to
        the number of events decoded before them and ``time`` set to 0; packed chunk
        rows are expanded into one ``assistant/chunk`` event per member. Ordinary
        events are not validated (nor does the dsh harness).

    Raises:
        SessionLogError: The log is empty, a line is not valid JSON, a line (the header
            included) is not a JSON object, or a packed row is malformed; the error names
            ``source`` and the physical line.
    """
    lines = iter_log_lines(_as_bytes(text), source=source)
    first = next(lines, None)
    if first is None:
        raise _empty(source)
    lineno, header = first
    read_header(header, lineno, source, mode="lenient")  # only its being an object
    return expand_records(r for _, r in iter_records(lines, source=source))


def read_log_bytes(path: str | os.PathLike[str]) -> bytes:
    """Read a log file's text, decompressing zstd logs ([docs/format.md#zstd](../format.md#zstd)).

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
    with open_log(path) as f:
        try:
            return f.read()
        except OSError as err:
            raise read_failed(err, str(path)) from None


def event_line(path: str | os.PathLike[str], index: int, events: int) -> int | None:
    """The line of the log file at ``path`` that holds its event ``index``, for messages.

    Args:
        path: The log file (plain or zstd; a zstd log's lines are those of its text).
        index: The event's index, 0-based, the header not counted.
        events: How many events the log holds, as read.

    Returns:
        The 1-based line number (a packed chunk row's line for each of its members);
        ``None`` for an index past the end, a file that cannot be read, or one that
        no longer holds ``events`` events.
    """
    source = os.fspath(path)
    found = None
    total = 0
    try:
        lines = iter_log_lines(read_log_bytes(path), source=source)
        if next(lines, None) is None:
            return None
        for lineno, record in iter_records(lines, source=source):
            count = len(record.payload) if isinstance(record, PackedRow) else 1
            if total <= index < total + count:
                found = lineno
            total += count
    except SessionLogError:
        return None
    return found if total == events else None


_READ_BUFFER: Final = 1 << 16


def open_log(path: str | os.PathLike[str]) -> IO[bytes]:
    """Open a log file for reading its plain text, line by line.

    See [docs/format.md#zstd](../format.md#zstd).

    A plain log is streamed from disk, so only the line being parsed is in memory; a
    zstd log (by name or by its frame magic) is decompressed whole first (its frames
    must all be checked anyway), up to
    [`MAX_DECOMPRESSED_BYTES`][pytest_dsh_replay.MAX_DECOMPRESSED_BYTES] of text. Use the
    result in a ``with`` block and pass it to `iter_log_lines`.

    Args:
        path: A ``.jsonl``, ``.jsonl.zst`` or ``.jsonl.zstd`` file.

    Returns:
        A binary file object positioned at the start of the log text.

    Raises:
        SessionLogError: The file cannot be opened, zstd support is missing, the zstd
            container is damaged, or it holds more text than the limit.
    """
    name = os.fspath(path)
    try:
        f = cast(io.BufferedReader, open(name, "rb", buffering=_READ_BUFFER))  # noqa: SIM115
    except OSError as err:
        raise read_failed(err, name) from None
    try:
        if is_zstd_log(name, f.peek(4)):
            with f:
                check_compressed_size(os.fstat(f.fileno()).st_size, name)
                return io.BytesIO(decompress_frames(f.read(), name))
    except OSError as err:
        f.close()
        raise read_failed(err, name) from None
    except BaseException:
        f.close()
        raise
    return f


TYPED_MIN_BYTES: Final = 1 << 20
"""The smallest log (plain text bytes) whose call lines the script builder decodes typed."""

_PLAIN_READS: ContextVar[bool] = ContextVar("plain_reads", default=False)


@contextmanager
def plain_reads() -> Iterator[None]:
    """Within it, every log is read the plain way, whatever its size.

    Every payload is then checked at the load, in log order
    ([docs/format.md#raw-payloads](../format.md#raw-payloads)), as ``dsh-replay check`` needs.
    """
    token = _PLAIN_READS.set(True)
    try:
        yield
    finally:
        _PLAIN_READS.reset(token)


def _log_size(f: IO[bytes]) -> int:
    if isinstance(f, io.BytesIO):
        return len(f.getbuffer())
    try:
        return os.fstat(f.fileno()).st_size
    except (OSError, ValueError):
        return 0


def _parsed_small_log(f: IO[bytes], source: str) -> Iterator[tuple[int, Any]] | None:
    """`iter_log_lines` of a small log whose every line parses, all parsed at once.

    ``None`` (after rewinding ``f``) when the log is larger than 1 MiB or any line does
    not parse as it is (a blank line, a byte-order mark, a lone surrogate, bad JSON):
    `iter_log_lines` then reads it and raises its errors.
    """
    start = f.tell()
    try:
        data = _small_file(f)
    except OSError as err:
        raise read_failed(err, source, 1) from None
    if data is None or data.startswith(_BOM):
        f.seek(start)
        return None
    pieces = data.split(b"\n")
    if not pieces[-1]:
        pieces.pop()
    try:
        values = list(map(orjson.loads, pieces))
    except orjson.JSONDecodeError:
        f.seek(start)
        return None
    return zip(count(1), values)


@contextmanager
def open_session_log(
    path: str | os.PathLike[str],
    *,
    mode: HeaderMode = "replay",
    calls: bool = False,
    text: list[IO[bytes]] | None = None,
) -> Iterator[tuple[SessionHeader, int, Iterator[tuple[int, Any]]]]:
    """Open a log file and read its header; the body follows as parsed lines.

    Args:
        path: A log (plain or zstd).
        mode: How strictly the header is checked (`HeaderMode`).
        calls: Decode call lines typed (see `iter_log_lines`) when the log holds
            `TYPED_MIN_BYTES` or more: for the script builder only.
        text: A list that receives the file object of the log's plain text, to read
            its head again (`head_digest`) while the log is open.

    Yields:
        ``(header, header_line, body)``: the validated header, its line number, and
        the body's ``(line number, value)`` pairs from `iter_log_lines`.

    Raises:
        SessionLogError: The file is unreadable or empty, its header breaks a rule of
            ``mode``, or its name's generation disagrees with the header.
    """
    source = os.fspath(path)
    with open_log(path) as f:
        if text is not None:
            text.append(f)
        if calls:  # typed decoding pays for importing msgspec only in a large log
            calls = _log_size(f) >= TYPED_MIN_BYTES and not _PLAIN_READS.get()
        parsed = None if calls else _parsed_small_log(f, source)
        lines = parsed if parsed is not None else iter_log_lines(f, source=source, calls=calls)
        first = next(lines, None)
        if first is None:
            raise _empty(source)
        header = read_header(first[1], first[0], source, mode=mode)
        if mode != "lenient":
            check_log_name(header, source, first[0])
        yield header, first[0], lines


def head_digest(f: IO[bytes], lines: int) -> tuple[int, int] | None:
    """The size and digest of a log's lines 2 to ``lines - 1``, its header on line 1.

    What a fork child's seed is compared by
    ([docs/scenarios.md#structure](../scenarios.md#structure)): two logs whose seed lines
    are the same bytes hold the same seed events, without reading them as events.

    Args:
        f: The log's plain text (`open_log`), read again from its start.
        lines: The physical line where the region ends (excluded).

    Returns:
        ``(bytes, CRC-32)`` of the region; ``None`` when the header is not
        the first line, or the region has a line longer than
        [`MAX_LINE_BYTES`][pytest_dsh_replay.MAX_LINE_BYTES] or ends without a newline.
    """
    f.seek(0)
    if not f.readline(MAX_LINE_BYTES + 1).startswith(b"{"):
        return None  # a byte-order mark or blank lines before the header
    crc = 0
    size = 0
    for _ in range(lines - 2):
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line.endswith(b"\n"):
            return None
        crc = zlib.crc32(line, crc)
        size += len(line)
    return size, crc


def body_digests(path: str | os.PathLike[str], sizes: Iterable[int]) -> dict[int, int] | None:
    """The digests of the first ``size`` bytes after a log's header line, for each size.

    A fork parent's side of `head_digest`: only the head of the log that the
    largest size needs is read (a zstd log's later frames are never decompressed).

    Returns:
        ``{size: CRC-32}``; ``None`` when the header is not the first line or
        the log's body is shorter than a size.

    Raises:
        SessionLogError: The file cannot be read or its zstd container is damaged.
    """
    wanted = sorted(set(sizes))
    need = wanted[-1] if wanted else 0
    source = os.fspath(path)
    try:
        with open(source, "rb") as f:
            magic = f.read(len(ZSTD_MAGIC))
            if is_zstd_log(source, magic):
                check_compressed_size(os.fstat(f.fileno()).st_size, source)
                first, body = _zstd_head(magic + f.read(), source, need)
            else:
                f.seek(0)
                first = f.readline(MAX_LINE_BYTES + 1)
                body = f.read(need)
    except OSError as err:
        raise read_failed(err, source) from None
    if not first.startswith(b"{") or not first.endswith(b"\n") or len(body) < need:
        return None
    found: dict[int, int] = {}
    crc = done = 0
    view = memoryview(body)
    for size in wanted:
        crc = zlib.crc32(view[done:size], crc)
        done = size
        found[size] = crc
    return found


def _zstd_head(data: bytes, source: str, need: int) -> tuple[bytes, bytes]:
    """A zstd log's first line, and at most ``need`` bytes after it: only those decompressed."""
    text = bytearray()
    start = 0
    for _, piece, _ in iter_frames(data, source):
        text += piece
        if not start:
            start = text.find(b"\n") + 1
        if start and len(text) - start >= need:
            break
    if not start:
        return bytes(text), b""
    return bytes(text[:start]), bytes(text[start : start + need])


def read_session_log(path: str | os.PathLike[str]) -> SessionLog:
    """Read a log file: its header and its events (plain or zstd, any format 0 to 5).

    Args:
        path: A log file (``.jsonl``, ``.jsonl.zst``, ``.jsonl.zstd``).

    Returns:
        ``(header, events)`` as a `SessionLog`:
        the validated header and the logical events (packed rows expanded; projected
        records get their ``seq``/``time``).

    Raises:
        SessionLogError: As `read_log_bytes`,
            [`parse_session_header`][pytest_dsh_replay.parse_session_header] and
            [`parse_session_log`][pytest_dsh_replay.parse_session_log], naming the file; a
            header another format version's rules refuse.
    """
    with open_session_log(path) as (header, _, lines):
        return SessionLog(
            header, expand_records(r for _, r in iter_records(lines, source=os.fspath(path)))
        )


def session_log_from_body(
    header: SessionHeader, body: Iterable[tuple[int, Any]], *, source: str
) -> SessionLog:
    """`read_session_log`'s result from a log's body lines read before.

    Args:
        header: The log's header, as `open_session_log` read it.
        body: The body lines as `iter_log_lines` gave them (plain parsed values,
            not typed ones), e.g. kept while the log's script was derived.
        source: The file name used in error messages.

    Raises:
        SessionLogError: As [`read_session_log`][pytest_dsh_replay.read_session_log].
    """
    return SessionLog(header, expand_records(r for _, r in iter_records(iter(body), source=source)))


def project_record(record: JSONObject) -> JSONObject:
    """Return ``record`` without its top-level envelope keys.

    See [docs/format.md#committed-form](../format.md#committed-form).

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
    r"""Serialize a session log.

    Args:
        header: The header, as a [`SessionHeader`][pytest_dsh_replay.SessionHeader] (written
            in its format's field order) or as the exact header object to write. A format
            2-5 header keeps every event as it is (``seq``/``time`` kept, nothing packed):
            those formats have no other form.
        events: The events in log order, each with ``seq`` and ``time``.
        pack_chunks: Pack delta runs of 3 or more into chunk rows, as the harness does.
        envelope: Keep ``seq``/``time`` (``seq0``/``time0``); ``False`` gives the
            committed ("projected") form, which replay reads back into the same events.

    Returns:
        UTF-8 bytes: one compact JSON record per line (keys in insertion order,
        non-ASCII kept raw), every line ending in ``\\n``.

    Raises:
        SessionLogError: The header is neither a `SessionHeader` nor a JSON object, or
            the header or an event is not serializable JSON (a value that
            is not a JSON type, a NaN or infinite float, an integer beyond 64 bits, a
            string with a lone surrogate, or nesting deeper than 254 levels).
    """
    if not isinstance(header, SessionHeader | dict):
        raise SessionLogError(
            "cannot write session log: the header must be a SessionHeader or a JSON object, "
            f"got {header!r:.80}"
        )
    head = header.to_json() if isinstance(header, SessionHeader) else header
    if lenient_spec(header_version(head)).whole_events:
        # Formats 2 to 5 have no packed rows and no committed form without seq/time.
        pack_chunks, envelope = False, True
    records: Iterable[JSONObject] = pack_chunk_runs(events) if pack_chunks else events
    dumps = orjson.dumps
    parts: list[bytes] = []
    try:
        parts.append(_dumped(dumps, head))
        for record in records:
            if not envelope and isinstance(record, dict):
                record = project_record(record)
            parts.append(_dumped(dumps, record))
    except orjson.JSONEncodeError as err:
        what = f"record {len(parts)}" if parts else "the header"
        raise SessionLogError(
            f"cannot write session log: {what} (line {len(parts) + 1}) is not serializable "
            f"as JSON ({err})"
        ) from None
    parts.append(b"")
    return b"\n".join(parts)


def _dumped(dumps: Any, record: object) -> bytes:
    """``dumps(record)``, refusing a NaN or infinite float (``orjson`` writes ``null``).

    Raises:
        orjson.JSONEncodeError: ``record`` is not serializable, or holds such a float.
    """
    line: bytes = dumps(record)
    if b"null" in line and holds_non_finite(record):
        raise orjson.JSONEncodeError("a float is NaN or infinite, which JSON cannot hold")
    return line


def fsync_dir(directory: str | os.PathLike[str]) -> None:
    """Flush a directory's entries to disk, so a rename or link in it survives a crash.

    Best effort: where directories cannot be opened or synced (some platforms and file
    systems), nothing happens.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
