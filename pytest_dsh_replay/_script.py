"""Replay scripts: one entry per recorded model call (SPEC 7, 8.2).

:func:`derive_replay_script` turns a session's events into its script: the chunks of
each ``stream()`` call, split at ``finish`` (SPEC 7). The override sidecar
(``replay.override.json``, SPEC 8.2) replaces or patches a derived script with entries
that cannot be derived from a log: a ``throw`` (a provider error before or during a
stream) or a ``hang`` (a stream that is cancelled).

Entries store their chunks compactly, in serialized form, and hand out new chunk
objects on every access: a consumer that mutates what it was given cannot change what a
later replay yields, and a large script costs about what its log costs.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, TypeAlias

import orjson

from ._chunk_rows import (
    PACKED_TAGS,
    PackedRow,
    fast_row_fields,
    validate_packed_row,
)
from ._errors import OverrideError, ScriptError, SessionLogError
from ._events import CHUNK_TYPES, Event, JSONObject, StreamChunk, is_safe_integer
from ._jsonl import (
    MAX_LINE_BYTES,
    bad_line,
    line_too_long,
    not_an_event,
    read_failed,
    too_long,
)

__all__ = [
    "ChunksEntry",
    "HangEntry",
    "Override",
    "ReplayEntry",
    "ThrowEntry",
    "apply_override",
    "derive_replay_script",
    "entry_from_json",
    "last_user_text",
    "load_override",
    "message_text",
    "parse_override",
]


# --- entries -----------------------------------------------------------------------------

MAX_CHUNK_NESTING: Final = 253
"""The deepest nesting of arrays and objects inside one stream chunk.

Entries keep their chunks serialized; the serializer stops at 255 levels, and a call's
chunk list adds one. A log line holding a deeper chunk is refused when the script is
derived, naming the line.
"""

# A compact item (an element of an entry's serialized chunk list) is one of:
#   {chunk}                                      one chunk object
#   [chunk_type, index, payload]                 text-delta / reasoning-delta members
#   [chunk_type, index, payload, id]             tool-call-delta members without name
#   [chunk_type, index, payload, id, name]       tool-call-delta members with name
_Item: TypeAlias = Any


def _materialize(items: list[_Item]) -> list[StreamChunk]:
    out: list[StreamChunk] = []
    append = out.append
    extend = out.extend
    for item in items:
        if item.__class__ is dict:
            append(item)
            continue
        kind, index, payload = item[0], item[1], item[2]
        if kind == "tool-call-delta":
            if len(item) == 5:
                cid, name = item[3], item[4]
                extend(
                    {"type": kind, "index": index, "id": cid, "name": name, "argumentsDelta": a}
                    for a in payload
                )
            else:
                cid = item[3]
                extend(
                    {"type": kind, "index": index, "id": cid, "argumentsDelta": a} for a in payload
                )
        else:
            extend({"type": kind, "index": index, "text": t} for t in payload)
    return out


def _serialize_chunks(chunks: Iterable[StreamChunk], where: str) -> tuple[bytes, int]:
    items = list(chunks)
    try:
        return orjson.dumps(items), len(items)
    except TypeError as err:
        raise ScriptError(f"{where}: chunks must be JSON values ({err})") from None


class _ChunkHolder:
    __slots__ = ("_blob", "_count")

    _blob: bytes
    _count: int

    @property
    def chunks(self) -> list[StreamChunk]:
        """The call's stream chunks, as new objects on every access."""
        return _materialize(orjson.loads(self._blob))

    @property
    def chunk_count(self) -> int:
        """How many chunks the call streams (before a ``throw`` entry raises)."""
        return self._count

    @property
    def has_placeholders(self) -> bool:
        """Whether a ``{{fromRequest:...}}`` placeholder occurs anywhere in the entry."""
        return b"{{fromRequest:" in self._blob


class ChunksEntry(_ChunkHolder):
    """A recorded call that streams its chunks and finishes.

    Args:
        chunks: The stream chunks in order (SPEC 3 shapes); the last is normally a
            ``finish``. They are copied: later changes to the given objects do not
            reach the entry.

    Raises:
        ScriptError: A chunk is not a JSON value.
    """

    __slots__ = ()
    kind: Final = "chunks"

    def __init__(self, chunks: Iterable[StreamChunk]):
        self._blob, self._count = _serialize_chunks(chunks, "chunks entry")

    @classmethod
    def _from_items(cls, items: list[_Item], count: int) -> ChunksEntry:
        entry = cls.__new__(cls)
        entry._blob = orjson.dumps(items)
        entry._count = count
        return entry

    def to_json(self) -> JSONObject:
        """The wire form: ``{"kind": "chunks", "chunks": [...]}``."""
        return {"kind": "chunks", "chunks": self.chunks}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChunksEntry):
            return NotImplemented
        return self._blob == other._blob or self.chunks == other.chunks

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ChunksEntry(<{self._count} chunks>)"


class ThrowEntry(_ChunkHolder):
    """A call that streams ``chunks`` and then fails with ``message``/``code`` (SPEC 8.2).

    Args:
        chunks: The prefix chunks streamed before the failure (often empty).
        message: The failure message (non-empty).
        code: The failure code (non-empty), e.g. ``AUTH``, ``RATE_LIMIT``.

    Raises:
        ScriptError: ``message`` or ``code`` is empty, or a chunk is not a JSON value.
    """

    __slots__ = ("code", "message")
    kind: Final = "throw"

    def __init__(self, chunks: Iterable[StreamChunk], message: str, code: str):
        if not isinstance(message, str) or not message:
            raise ScriptError("throw entry: message must be a non-empty string")
        if not isinstance(code, str) or not code:
            raise ScriptError("throw entry: code must be a non-empty string")
        self._blob, self._count = _serialize_chunks(chunks, "throw entry")
        self.message = message
        self.code = code

    def to_json(self) -> JSONObject:
        """The wire form: ``{"kind": "throw", "chunks": [...], "message", "code"}``."""
        return {"kind": "throw", "chunks": self.chunks, "message": self.message, "code": self.code}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ThrowEntry):
            return NotImplemented
        return (self.message, self.code, self.chunks) == (other.message, other.code, other.chunks)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ThrowEntry(<{self._count} chunks>, message={self.message!r}, code={self.code!r})"


@dataclass(frozen=True, slots=True)
class HangEntry:
    """A call that streams two fixed chunks and then blocks until cancelled (SPEC 8.2).

    Attributes:
        ready_file: A file written (empty) when the consumer asks for the third chunk, so
            a test can wait for the stream to be in flight; relative paths resolve
            against the scenario's working directory. ``None``: no file.
    """

    ready_file: str | None = None
    kind: ClassVar[Literal["hang"]] = "hang"
    PREFIX: ClassVar[tuple[StreamChunk, ...]] = (
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
    )

    @property
    def chunks(self) -> list[StreamChunk]:
        """The two chunks streamed before the hang, as new objects."""
        return [dict(c) for c in self.PREFIX]

    @property
    def has_placeholders(self) -> bool:
        """Whether ``ready_file`` holds a ``{{fromRequest:...}}`` placeholder."""
        return self.ready_file is not None and "{{fromRequest:" in self.ready_file

    def to_json(self) -> JSONObject:
        """The wire form: ``{"kind": "hang"}`` or ``{"kind": "hang", "readyFile": ...}``."""
        if self.ready_file is None:
            return {"kind": "hang"}
        return {"kind": "hang", "readyFile": self.ready_file}


ReplayEntry: TypeAlias = ChunksEntry | ThrowEntry | HangEntry
"""One recorded model call: a :class:`ChunksEntry`, :class:`ThrowEntry` or :class:`HangEntry`."""


# --- derivation (SPEC 7) -------------------------------------------------------------------


def _js_scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value)) if abs(value) < 1e21 else repr(value)
    if isinstance(value, int | float | str):
        return str(value)
    return "[object Object]"


def _js_str(value: Any) -> str:
    """Format a value as a JavaScript template literal would (for call keys).

    Arrays join their elements with ``,`` (``null`` elements are empty), nested arrays
    too; the walk keeps its own stack, so any nesting depth works.
    """
    if not isinstance(value, list):
        return _js_scalar(value)
    stack: list[tuple[Iterator[Any], list[str]]] = [(iter(value), [])]
    while True:
        items, parts = stack[-1]
        for item in items:
            if isinstance(item, list):
                stack.append((iter(item), []))
                break
            parts.append("" if item is None else _js_scalar(item))
        else:
            stack.pop()
            text = ",".join(parts)
            if not stack:
                return text
            stack[-1][1].append(text)


_MISSING: Final = object()


def _call_key(turn: Any, step: Any) -> str:
    """The reference's call key, ``f"{turn}/{step}"`` as JavaScript formats it."""
    return (
        f"{'undefined' if turn is _MISSING else _js_str(turn)}/"
        f"{'undefined' if step is _MISSING else _js_str(step)}"
    )


def message_text(message: object) -> str | None:
    """The text of a message, as binding compares it (dsh and OpenAI-style messages).

    Args:
        message: A message mapping, ``{"role", "content", ...}``.

    Returns:
        Its ``content`` when that is a string, else the concatenated ``text`` of its
        ``type: "text"`` blocks; ``None`` when it is not a message.
    """
    if not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(
            block["text"]
            for block in content
            if isinstance(block, Mapping)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        )
    return None


def last_user_text(messages: object) -> str | None:
    """The text of the last ``role: "user"`` message of a request's messages.

    Args:
        messages: The request's ``messages``: a sequence of message mappings (dsh and
            OpenAI-style shapes both work).

    Returns:
        Its ``content`` when that is a string, else the concatenated ``text`` of its
        ``type: "text"`` blocks; ``None`` when there is no user message.
    """
    if isinstance(messages, str) or not isinstance(messages, Sequence):
        return None
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return message_text(message)
    return None


class ScriptBuilder:
    """Incremental script derivation shared by every reader (SPEC 7).

    Feed it events in log order (or packed rows, which stand for their members) and
    call :meth:`finish`. ``skip`` logical events at the start are counted but not
    derived: a fork child's inherited seed (SPEC 6.5). :meth:`feed` takes the parsed
    body lines of a log directly, which is how :func:`~pytest_dsh_replay.load_scenario`
    reads logs: one pass, packed rows never expanded.

    Not part of the public API; :func:`derive_replay_script` is.
    """

    __slots__ = (
        "_count",
        "_entries",
        "_items",
        "_lines",
        "_n_chunks",
        "_start_index",
        "_start_line",
        "_step",
        "_turn",
        "derive",
        "first_user_text",
        "skip",
        "source",
    )

    def __init__(self, *, skip: int = 0, source: str | None = None, derive: bool = True):
        self.skip = skip
        self.source = source
        self.derive = derive
        self.first_user_text: str | None = None
        self._count = 0
        self._entries: list[ReplayEntry] = []
        # The open call: its compact items, the line of each, its chunk count, and the
        # (turn, step) it was opened with (the key is formatted only when needed).
        self._items: list[_Item] = []
        self._lines: list[int | None] = []
        self._n_chunks = 0
        self._turn: Any = _MISSING
        self._step: Any = _MISSING
        self._start_index = 0
        self._start_line: int | None = None

    @property
    def event_count(self) -> int:
        """How many logical events were fed so far (seed included)."""
        return self._count

    @property
    def _key(self) -> str:
        return _call_key(self._turn, self._step)

    def _same_call(self, turn: Any, step: Any) -> bool:
        """Whether (turn, step) has the open call's key (as the reference compares keys)."""
        t0, s0 = self._turn, self._step
        if (
            turn.__class__ is int
            and step.__class__ is int
            and t0.__class__ is int
            and s0.__class__ is int
        ):
            return bool(turn == t0 and step == s0)
        return _call_key(turn, step) == _call_key(t0, s0)

    def _open(self, turn: Any, step: Any, index: int, line: int | None) -> None:
        self._turn = turn
        self._step = step
        self._start_index = index
        self._start_line = line

    def _unterminated(self) -> ScriptError:
        n = len(self._entries) + 1
        return ScriptError(
            f"model call {self._key} (call #{n} of this session) ended without a finish "
            "chunk (a thrown or cancelled stream), so it cannot be replayed from the log; "
            'this scenario needs a replay.override.json sidecar: a "throw" or "hang" entry '
            f"for this call (patch at {n - 1})",
            path=self.source,
            line=self._start_line,
            call=self._key,
            event_index=self._start_index,
        )

    def _close(self) -> None:
        items = self._items
        try:
            blob = orjson.dumps(items)
        except TypeError:
            raise self._unstorable() from None
        entry = ChunksEntry.__new__(ChunksEntry)
        entry._blob = blob
        entry._count = self._n_chunks
        self._entries.append(entry)
        items.clear()  # in place: feed_raw() holds these lists
        self._lines.clear()
        self._n_chunks = 0

    def _unstorable(self) -> ScriptError:
        """The error for an open call whose chunks cannot be serialized (too deep)."""
        for item, line in zip(self._items, self._lines, strict=True):
            try:
                orjson.dumps([item])  # as in the list of the call's items
            except TypeError as err:
                return ScriptError(
                    f"the stream chunk of model call {self._key} on this line cannot be "
                    f"stored ({err}): a chunk may nest at most {MAX_CHUNK_NESTING} levels "
                    "of arrays and objects",
                    path=self.source,
                    line=line,
                    call=self._key,
                )
        raise AssertionError("unreachable: the call's chunks serialized one by one")

    def event(self, event: Event, line: int | None = None) -> None:
        """Feed one logical event."""
        index = self._count
        self._count = index + 1
        if index < self.skip:
            return
        kind = event.get("type")
        if kind == "assistant/chunk" and self.derive:
            data = event.get("data")
            chunk = data.get("chunk") if isinstance(data, dict) else None
            if not isinstance(chunk, dict):
                raise ScriptError(
                    "assistant/chunk event must carry data.chunk, a stream chunk object",
                    path=self.source,
                    line=line,
                    event_index=index,
                )
            assert isinstance(data, dict)
            turn = data.get("turn", _MISSING)
            step = data.get("step", _MISSING)
            if self._items:
                if not self._same_call(turn, step):
                    raise self._unterminated()
            else:
                self._open(turn, step, index, line)
            self._items.append(chunk)
            self._lines.append(line)
            self._n_chunks += 1
            if chunk.get("type") == "finish":
                self._close()
        elif kind == "compaction/summary" and self.derive:
            if self._items:
                raise self._unterminated()
            data = event.get("data")
            if data.__class__ is dict and data.get("llmStreamCall") is True:
                assert isinstance(data, dict)
                self._entries.append(self._summary_call(data, index, line))
        elif kind == "user/message" and self.first_user_text is None:
            self.first_user_text = message_text(event.get("data"))

    def packed(self, row: PackedRow, line: int | None = None) -> None:
        """Feed a validated packed row: its members, without expanding them."""
        self._members(
            row.payload, row.turn, row.step, row.chunk_type, row.index, row.id, row.name,
            row.has_name, line,
        )  # fmt: skip

    def _members(
        self,
        payload: list[str],
        turn: Any,
        step: Any,
        chunk_type: str,
        index: Any,
        cid: str | None,
        name: str | None,
        has_name: bool,
        line: int | None,
    ) -> None:
        n = len(payload)
        first = self._count
        self._count = first + n
        start = self.skip - first
        if start < 0:
            start = 0
        elif start >= n:
            return
        if not self.derive:
            return
        if self._items:
            if not self._same_call(turn, step):
                raise self._unterminated()
        else:
            self._open(turn, step, first + start, line)
        if start:
            payload = payload[start:]
        if cid is None:
            item: list[Any] = [chunk_type, index, payload]
        elif has_name:
            item = [chunk_type, index, payload, cid, name]
        else:
            item = [chunk_type, index, payload, cid]
        self._items.append(item)
        self._lines.append(line)
        self._n_chunks += len(payload)

    def feed(self, lines: Iterable[tuple[int, Any]]) -> None:
        """Feed a log's body lines: ``(line number, parsed value)`` after the header.

        Does what :func:`~pytest_dsh_replay.jsonl.iter_records` does (packed rows get a
        missing ``seq0``/``time0`` filled in, then validated) and feeds each record.

        Raises:
            SessionLogError: A line is not a JSON object, or a packed row is malformed.
            ScriptError: A call cannot be derived.
        """
        for lineno, value in lines:
            self._record(value, lineno)

    def feed_raw(self, lines: Iterator[bytes], lineno: int) -> None:
        r"""Parse and feed a log's remaining raw lines, in one pass (the fast path).

        The same as :func:`~pytest_dsh_replay.jsonl.iter_log_lines` followed by
        :meth:`feed`, without a generator per line and without building a
        :class:`~pytest_dsh_replay.chunk_rows.PackedRow` per packed row. Ordinary
        events are not given a synthesized ``seq``/``time``: nothing here reads them.

        Args:
            lines: The raw lines after the header (:func:`~pytest_dsh_replay.jsonl.raw_lines`).
            lineno: The physical line number of the line before the first of ``lines``.

        Raises:
            SessionLogError: A line is not valid JSON, too long, not a JSON object, or a
                malformed packed row; or the file cannot be read.
            ScriptError: A call cannot be derived.
        """
        # The loop inlines the common cases of event() and _members() (an assistant/chunk
        # event or a packed row of the open or a new call, past the seed, while deriving);
        # everything else goes through those methods, which hold the rules.
        source = self.source
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        limit = MAX_LINE_BYTES
        skip = self.skip
        fast = self.derive
        items = self._items
        item_lines = self._lines
        count = self._count  # kept in a local; self._count is set around every method call
        try:
            for raw in lines:
                lineno += 1
                if len(raw) > limit and line_too_long(raw):
                    raise too_long(source, lineno)
                try:
                    value = loads(raw)
                except decode_error as err:
                    error = bad_line(raw, err, source, lineno)
                    if error is None:
                        continue
                    raise error from None
                if value.__class__ is not dict:
                    raise not_an_event(value, source, lineno)
                tag = value.get("type")
                if tag == "assistant/chunk" and fast and count >= skip:
                    data = value.get("data")
                    if type(data) is dict and type(chunk := data.get("chunk")) is dict:
                        turn = data.get("turn", _MISSING)
                        step = data.get("step", _MISSING)
                        if items:
                            t0, s0 = self._turn, self._step
                            if not (
                                turn.__class__ is int
                                and step.__class__ is int
                                and t0.__class__ is int
                                and s0.__class__ is int
                                and turn == t0
                                and step == s0
                            ) and not self._same_call(turn, step):
                                raise self._unterminated()
                        else:
                            self._open(turn, step, count, lineno)
                        count += 1
                        items.append(chunk)
                        item_lines.append(lineno)
                        self._n_chunks += 1
                        if chunk.get("type") == "finish":
                            self._close()
                        continue
                elif tag.__class__ is str and tag in PACKED_TAGS:
                    if "seq0" not in value:
                        value["seq0"] = count
                    if "time0" not in value:
                        value["time0"] = 0
                    self._count = count
                    fields = fast_row_fields(value)
                    if fields is None:
                        self._record(value, lineno)  # the reference's checks and errors
                    else:
                        chunk_type, index, payload, cid, name, has_name, turn, step, _ = fields
                        self._members(
                            payload, turn, step, chunk_type, index, cid, name, has_name, lineno
                        )
                    count = self._count
                    continue
                elif tag != "user/message" and tag != "compaction/summary":
                    count += 1  # an event replay does not read
                    continue
                self._count = count
                self.event(value, lineno)
                count = self._count
        except OSError as err:
            raise read_failed(err, source, lineno + 1) from None
        finally:
            self._count = count

    def _record(self, value: Any, lineno: int) -> None:
        if value.__class__ is not dict:
            raise not_an_event(value, self.source, lineno)
        tag = value.get("type")
        if tag.__class__ is str and tag in PACKED_TAGS:
            if "seq0" not in value:
                value["seq0"] = self._count
            if "time0" not in value:
                value["time0"] = 0
            try:
                row = validate_packed_row(value)
            except SessionLogError as err:
                raise err.at(path=self.source, line=lineno) from None
            self.packed(row, lineno)
        else:
            self.event(value, lineno)

    def _summary_call(self, data: JSONObject, index: int, line: int | None) -> ChunksEntry:
        if "rawOutput" not in data:
            raise ScriptError(
                "compaction/summary marks an LLM stream call (llmStreamCall: true) but has no "
                "rawOutput, so the summarizer's output cannot be replayed; re-record the "
                "scenario or add a replay.override.json entry for this call",
                path=self.source,
                line=line,
                event_index=index,
            )
        raw = data["rawOutput"]
        if not isinstance(raw, list):
            raise ScriptError(
                "compaction/summary rawOutput must be an array of content blocks, got "
                f"{type(raw).__name__}",
                path=self.source,
                line=line,
                event_index=index,
            )
        chunks: list[StreamChunk] = []
        for i, block in enumerate(raw):
            start: StreamChunk = {"type": "block-start", "index": i}
            if isinstance(block, dict) and "type" in block:
                start["blockType"] = block["type"]
            chunks.append(start)
            chunks.append({"type": "block-end", "index": i, "block": block})
        if "usage" in data:
            chunks.append({"type": "usage", "usage": data["usage"]})
        chunks.append({"type": "finish", "reason": {"kind": "stop"}})
        try:
            return ChunksEntry._from_items(chunks, len(chunks))
        except TypeError as err:
            raise ScriptError(
                f"compaction/summary rawOutput or usage cannot be stored ({err}): a chunk "
                f"may nest at most {MAX_CHUNK_NESTING} levels of arrays and objects",
                path=self.source,
                line=line,
                event_index=index,
            ) from None

    def finish(self) -> list[ReplayEntry]:
        """Close the script; a trailing call without ``finish`` raises.

        Raises:
            ScriptError: The last call has no ``finish`` chunk.
        """
        if self._items:
            raise self._unterminated()
        return self._entries


def derive_replay_script(
    events: Iterable[Event], *, source: str | None = None
) -> list[ReplayEntry]:
    """Derive a session's replay script from its events (SPEC 7).

    Each model call is the run of ``assistant/chunk`` chunks up to and including its
    ``finish`` chunk; retries under the same (turn, step) are separate calls. A
    ``compaction/summary`` with ``llmStreamCall: true`` is a synthetic call at its log
    position (block-start/block-end per ``rawOutput`` block, the recorded ``usage``,
    then a ``stop`` finish). Every other event is ignored.

    Args:
        events: Logical events in log order (as :func:`parse_session_log` returns them).
            Slice a fork child's seed off first (``events[seed_length:]``).
        source: The file name used in error messages.

    Returns:
        One :class:`ChunksEntry` per call, in call order; ``[]`` when there is no call.

    Raises:
        ScriptError: A call ends without ``finish`` (its (turn, step) changes, a
            ``compaction/summary`` arrives, or the log ends while it is open), a marked
            summary has no ``rawOutput``, or an ``assistant/chunk`` has no chunk object.
            ``call`` names the call as ``turn/step`` and ``event_index`` where it began.
    """
    builder = ScriptBuilder(source=source)
    for event in events:
        if event.__class__ is not dict:
            raise ScriptError(
                f"events must be JSON objects, got {type(event).__name__}",
                path=source,
                event_index=builder.event_count,
            )
        builder.event(event)
    return builder.finish()


# --- entries from JSON and the override sidecar (SPEC 8.2) -----------------------------


def _entry_error(where: str, loc: str, detail: str) -> OverrideError:
    return OverrideError(f"invalid override: {loc} {detail}", path=where)


_THROW_KEYS: Final = frozenset({"kind", "chunks", "message", "code"})
_CHUNKS_KEYS: Final = frozenset({"kind", "chunks"})


def _read_chunks(value: Any, where: str, loc: str) -> list[StreamChunk]:
    if not isinstance(value, list):
        raise _entry_error(where, loc, "chunks must be an array")
    for j, chunk in enumerate(value):
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if not isinstance(kind, str) or kind not in CHUNK_TYPES:
            raise _entry_error(
                where,
                f"{loc}.chunks[{j}]",
                "must have a known StreamChunk type (one of "
                + ", ".join(sorted(CHUNK_TYPES))
                + ")",
            )
    return value


def _json_text(value: Any, limit: int = 80) -> str:
    """``value`` as JSON text for a message, shortened; never fails."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = f"<{type(value).__name__} nested too deep to show>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _stored(build: Callable[[], ReplayEntry], where: str, loc: str) -> ReplayEntry:
    """Build an entry; chunks that cannot be stored (too deep) are an override error."""
    try:
        return build()
    except ScriptError as err:
        raise _entry_error(
            where,
            loc,
            f"has chunks that cannot be stored: {err.reason}; a chunk may nest at most "
            f"{MAX_CHUNK_NESTING} levels of arrays and objects",
        ) from None


def entry_from_json(value: Any, *, where: str = "<entry>", loc: str = "entry") -> ReplayEntry:
    """Validate and build one entry from its wire form (SPEC 8.2 table).

    Args:
        value: ``{"kind":"chunks","chunks":[...]}``,
            ``{"kind":"throw","chunks":[...],"message":str,"code":str}`` or
            ``{"kind":"hang"}`` / ``{"kind":"hang","readyFile":str}``.
        where: The file name used in error messages.
        loc: The location used in error messages (``entry 3``, ``patch 0.entry``).

    Returns:
        The entry. Only each chunk's ``type`` is checked, as the reference does.

    Raises:
        OverrideError: ``invalid override: <loc> <detail>`` as in the SPEC 8.2 table.
    """
    if not isinstance(value, dict):
        raise _entry_error(where, loc, "must be an object")
    kind = value.get("kind")
    keys = value.keys()
    if kind == "chunks":
        if keys != _CHUNKS_KEYS:
            raise _entry_error(
                where, loc, "has invalid chunks-entry fields (expected kind, chunks)"
            )
        return _stored(lambda: ChunksEntry(_read_chunks(value["chunks"], where, loc)), where, loc)
    if kind == "throw":
        if keys != _THROW_KEYS:
            raise _entry_error(
                where, loc, "has invalid throw-entry fields (expected kind, chunks, message, code)"
            )
        message, code = value["message"], value["code"]
        if not isinstance(message, str) or not message:
            raise _entry_error(where, loc, "message must be a non-empty string")
        if not isinstance(code, str) or not code:
            raise _entry_error(where, loc, "code must be a non-empty string")
        chunks = _read_chunks(value["chunks"], where, loc)
        return _stored(lambda: ThrowEntry(chunks, message, code), where, loc)
    if kind == "hang":
        if keys != {"kind"} and keys != {"kind", "readyFile"}:
            raise _entry_error(
                where, loc, "has invalid hang-entry fields (expected kind and optional readyFile)"
            )
        ready = value.get("readyFile")
        if "readyFile" in value and (not isinstance(ready, str) or not ready):
            raise _entry_error(where, loc, "readyFile must be a non-empty string")
        return HangEntry(ready_file=ready)
    raise _entry_error(
        where,
        loc,
        f'has unknown kind {_json_text(kind)} (expected "chunks", "throw" or "hang")',
    )


@dataclass(frozen=True, slots=True)
class Override:
    """A parsed override sidecar (SPEC 8.2).

    Attributes:
        path: The sidecar file (used in messages).
        replace: The whole replacement script, for the bare-array form; else ``None``.
        patches: ``(at, entry)`` pairs in file order, for the ``{patches}`` form.
    """

    path: str
    replace: tuple[ReplayEntry, ...] | None = None
    patches: tuple[tuple[int, ReplayEntry], ...] = ()


def parse_override(value: Any, *, path: str) -> Override:
    """Validate a parsed sidecar document (SPEC 8.2).

    Args:
        value: The parsed JSON: an array of entries, or ``{"patches": [{"at", "entry"}...]}``.
        path: The sidecar file, for messages.

    Raises:
        OverrideError: The first validation failure of the SPEC 8.2 table.
    """
    if isinstance(value, list):
        return Override(
            path=path,
            replace=tuple(
                entry_from_json(v, where=path, loc=f"entry {i}") for i, v in enumerate(value)
            ),
        )
    if (
        not isinstance(value, dict)
        or value.keys() != {"patches"}
        or not isinstance(value["patches"], list)
    ):
        raise _entry_error(
            path, "document", "must be a ReplayEntry[] or { patches: [{at, entry}...] }"
        )
    patches: list[tuple[int, ReplayEntry]] = []
    for i, patch in enumerate(value["patches"]):
        if not isinstance(patch, dict) or patch.keys() != {"at", "entry"}:
            raise _entry_error(path, f"patch {i}", "must contain exactly at and entry")
        at = patch["at"]
        if not is_safe_integer(at) or at < 0:
            raise _entry_error(path, f"patch {i}", "at must be a non-negative safe integer")
        patches.append(
            (int(at), entry_from_json(patch["entry"], where=path, loc=f"patch {i}.entry"))
        )
    return Override(path=path, patches=tuple(patches))


def load_override(path: str | os.PathLike[str]) -> Override:
    """Read and validate an override sidecar file (SPEC 8.2).

    Raises:
        OverrideError: The file cannot be read, is not valid JSON (with line and column),
            or fails validation.
    """
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise OverrideError(
            f"cannot read override sidecar: {err.strerror or err}", path=where
        ) from None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise OverrideError(
            f"invalid JSON ({err.msg} at column {err.colno}); expected a ReplayEntry[] "
            "or { patches: [...] } document",
            path=where,
            line=err.lineno,
        ) from None
    return parse_override(value, path=where)


def apply_override(derived: Sequence[ReplayEntry], override: Override) -> list[ReplayEntry]:
    """Apply a sidecar to a derived script (SPEC 8.2 "Applying patches").

    A bare array replaces the script. Patches apply in file order; ``at`` is checked
    against the length before any patch, so ``at == len(derived)`` appends one entry and
    nothing beyond it is allowed.

    Raises:
        OverrideError: A patch index is out of range or repeated.
    """
    if override.replace is not None:
        return list(override.replace)
    script = list(derived)
    n = len(derived)
    seen: set[int] = set()
    for at, entry in override.patches:
        if at > n:
            raise OverrideError(
                f"override patch index {at} out of range (derived script has {n} call(s); "
                f"at == {n} appends one call)",
                path=override.path,
            )
        if at in seen:
            raise OverrideError(f"duplicate override patch index {at}", path=override.path)
        seen.add(at)
        if at == len(script):
            script.append(entry)
        else:
            script[at] = entry
    return script
