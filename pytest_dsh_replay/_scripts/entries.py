"""Replay entries: what one recorded model call replays.

A [`ChunksEntry`][pytest_dsh_replay.ChunksEntry] streams its chunks and finishes; a
[`ThrowEntry`][pytest_dsh_replay.ThrowEntry] streams a prefix and then fails; a
[`HangEntry`][pytest_dsh_replay.HangEntry] streams two chunks and blocks until it is
cancelled. Entries store their chunks compactly, in serialized form, and hand out new chunk
objects on every access: a consumer that mutates what it was given cannot change what a
later replay yields, and a large script costs about what its log costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, TypeAlias

import orjson

from .._errors import OverrideError, ScriptError
from .._format.events import CHUNK_TYPES, ChunkRun, JSONObject, StreamChunk
from .._format.json_values import holds_non_finite
from .._format.reply import Reply, assemble_reply
from .timing import Gaps, RawTimes, gaps_of

__all__ = [
    "MAX_CHUNK_NESTING",
    "ChunksEntry",
    "EntryRun",
    "HangEntry",
    "ReplayEntry",
    "ThrowEntry",
    "entry_from_json",
    "invalid_entry",
    "materialize_runs",
]

# --- entries -----------------------------------------------------------------------------

MAX_CHUNK_NESTING: Final = 253
"""The deepest nesting of arrays and objects inside one stream chunk.

Entries keep their chunks serialized; the serializer stops at 255 levels, and a call's
chunk list adds one. A log line holding a deeper chunk is refused when the script is
derived, naming the line.
"""

# An entry stores its chunks as a serialized list of chunk runs (ChunkRun): single
# chunk objects, or runs of deltas of one block that materialize into one chunk each.


def materialize_runs(items: list[ChunkRun]) -> list[StreamChunk]:
    """The chunks that chunk runs stand for, as new objects.

    A chunk object among ``items`` is one of the chunks as it is; ``items`` itself is
    the list of chunks when it holds no run of deltas.
    """
    if list not in map(type, items):  # chunk objects only: nothing to build
        return items
    out: list[StreamChunk] = []
    append = out.append
    for item in items:
        if item.__class__ is dict:
            append(item)
            continue
        # Each member is a copy of one template with its payload key set: a dict copy
        # is cheaper than building the dict from a display, and keeps the key order.
        kind = item[0]
        if kind == "tool-call-delta":
            key = "argumentsDelta"
            if len(item) == 5:
                template = {
                    "type": kind,
                    "index": item[1],
                    "id": item[3],
                    "name": item[4],
                    key: None,
                }
            else:
                template = {"type": kind, "index": item[1], "id": item[3], key: None}
        else:
            key = "text"
            template = {"type": kind, "index": item[1], key: None}
        copy = template.copy
        for member in item[2]:
            chunk = copy()
            chunk[key] = member
            append(chunk)
    return out


def _reply_of_runs(runs: list[ChunkRun]) -> Reply:
    """`assemble_reply` of the chunks ``runs`` stand for, the deltas' chunks not built.

    The reply joins a block's delta texts: a run of text or reasoning deltas counts as
    one delta of their joined text.
    """
    compact: list[StreamChunk] = []
    for item in runs:
        if item.__class__ is not list:
            compact.append(item)
            continue
        if item[0] != "tool-call-delta":
            try:
                compact.append({"type": item[0], "index": item[1], "text": "".join(item[2])})
                continue
            except TypeError:  # a member that is no string: as its chunks
                pass
        compact.extend(materialize_runs([item]))
    return assemble_reply(compact)


def _is_finish(chunk: object) -> bool:
    """Whether a chunk (or a chunk run, which never is one) is a ``finish`` chunk."""
    if type(chunk) is dict:  # the common cases before the costlier test below
        return bool(chunk.get("type") == "finish")
    if type(chunk) is list:
        return False
    return isinstance(chunk, Mapping) and chunk.get("type") == "finish"


_FINISH_TEXT: Final = b'"type":"finish"'


def _finishes_at_end(items: list[Any], blob: bytes | None = None) -> bool:
    """Whether the last of ``items`` (chunks or chunk runs) is their only ``finish``.

    ``blob``: the items serialized (`orjson.dumps`). When the last item is a ``finish``
    and the blob spells a ``"type":"finish"`` member once, that one is the last item's
    own, so no earlier item is a ``finish``: the items need no walk.
    """
    if not items or not _is_finish(items[-1]):
        return False
    if blob is not None and blob.count(_FINISH_TEXT) == 1:
        return True
    return not any(map(_is_finish, items[:-1]))


def _kept(blob: bytes) -> bytes:
    """``blob`` in a buffer of its own size, to be kept.

    The serializer hands out its output in a buffer of at least 64 KiB; an entry keeps
    its blob as long as the script lives, so it keeps a copy of the bytes alone.
    """
    return bytes(memoryview(blob))


def _serialize_chunks(chunks: Iterable[StreamChunk], where: str) -> tuple[bytes, int]:
    items = list(chunks)
    try:
        blob = orjson.dumps(items)
    except TypeError as err:
        raise ScriptError(f"{where}: chunks must be JSON values ({err})") from None
    if b"null" in blob and holds_non_finite(items):
        raise ScriptError(
            f"{where}: chunks must be JSON values (a float is NaN or infinite, which JSON "
            "cannot hold)"
        )
    return _kept(blob), len(items)


class _ChunkHolder:
    # __weakref__: layers above keep what they derive from an entry beside it (the model
    # endpoint's encodings, docs/wires.md#encoded-once), for as long as it lives.
    __slots__ = ("__weakref__", "_blob", "_count", "_gaps", "_marked", "_verify")

    _blob: bytes
    _count: int
    # The recorded pause before each chunk in ms (docs/scenarios.md#pacing), one per
    # chunk, or the times they are made of until first asked for; None: every pause is
    # 0 or unknown (the common case costs nothing).
    _gaps: Gaps | RawTimes | None
    _marked: bool | None  # whether the blob holds a placeholder (None: not looked yet)
    # Reads what a reader left raw (docs/format.md#raw-payloads) as the plain reader
    # would, raising its error, and gives the entry to keep and the fresh runs it was
    # built from (None: not those runs); run on first use, then None.
    _verify: Callable[[], tuple[ChunksEntry, list[ChunkRun] | None]] | None

    def _verified(self) -> list[ChunkRun] | None:
        verify = self._verify
        if verify is None:
            return None
        done, runs = verify()
        self._blob, self._count, self._marked = done._blob, done._count, None
        self._gaps = done._gaps
        if isinstance(self, ChunksEntry):
            self._finished = done._finished
        self._verify = None  # last: a reader that sees None finds the kept blob
        return runs

    def verify(self) -> None:
        """Check now what a large log's reader left to be checked on first use.

        A format 2-5 log of 1 MiB or more keeps each call's stream as its text until
        the call is first used ([docs/format.md#raw-payloads](../format.md#raw-payloads));
        this reads it now. For any other entry it does nothing.

        Raises:
            SessionLogError: A record or chunk of the stream breaks a rule of the format
                (the message, file and line a small log's load gives).
            ScriptError: A chunk nests deeper than
                [`MAX_CHUNK_NESTING`][pytest_dsh_replay.MAX_CHUNK_NESTING], or the call
                never finished.
        """
        if self._verify is not None:
            self._verified()

    @property
    def chunks(self) -> list[StreamChunk]:
        """The call's stream chunks, as new objects on every access.

        Raises:
            SessionLogError: On first access, a payload of a large log that was left
                raw when it was read breaks a rule of the format
                ([docs/format.md#raw-payloads](../format.md#raw-payloads)).
            ScriptError: On first access, such a payload cannot be stored.
        """
        return materialize_runs(self.runs())

    def runs(self) -> list[ChunkRun]:
        """The call's chunks as stored: chunk runs (``ChunkRun``), new objects on every call.

        Single chunk objects, and runs of deltas of one block
        (``[chunk_type, index, members, ...]``) that `materialize_runs` turns into one
        chunk each; what `chunks` is built from, for a reader that can use the runs as
        they are (an encoder that frames a run of texts,
        [docs/wires.md#encoded-once](../wires.md#encoded-once)).

        Raises:
            SessionLogError: As `chunks`, for a payload left raw.
            ScriptError: As `chunks`.
        """
        if self._verify is not None:
            runs = self._verified()
            if runs is not None:  # parsed for the check, referenced by nothing else
                return runs
        return orjson.loads(self._blob)  # type: ignore[no-any-return]

    @property
    def chunk_count(self) -> int:
        """How many chunks the call streams (before a ``throw`` entry raises).

        Raises:
            SessionLogError: As `chunks`, for a payload left raw.
        """
        self.verify()
        return self._count

    @property
    def gaps_ms(self) -> list[int]:
        """The recorded pause before each chunk, in milliseconds (what pacing replays).

        One integer >= 0 per chunk (`chunk_count` of them): the first is the gap from the
        call's start (its ``step/start`` or ``llm/retry-started`` event) to its first
        chunk, each next one the gap from the chunk before. A gap the log does not
        know (a committed recording keeps only the gaps inside its packed rows), a
        negative one (times are not monotonic) and every gap of an entry that was not
        read from a log are 0 ([docs/scenarios.md#pacing](../scenarios.md#pacing)).

        Raises:
            SessionLogError: As `chunks`, for a payload left raw.
        """
        self.verify()
        gaps = self._gaps
        if isinstance(gaps, tuple):  # the times as read (RawTimes): read now, once
            gaps = self._gaps = gaps_of(gaps, self._count)
        return [0] * self._count if gaps is None else list(gaps)

    @property
    def response_id(self) -> str | None:
        """The provider's id of the recorded answer, when the recording holds one.

        The dsh runtime logs it in the ``finish`` chunk's
        ``replayState.response.responseId``
        ([docs/wires.md#provider-ids](../wires.md#provider-ids)); ``None`` when the call has
        no such string.
        """
        self.verify()
        if b'"responseId"' not in self._blob:  # most entries: no parse
            return None
        for chunk in reversed(self.chunks):
            if chunk.get("type") == "finish":
                state = chunk.get("replayState")
                response = state.get("response") if isinstance(state, dict) else None
                found = response.get("responseId") if isinstance(response, dict) else None
                return found if isinstance(found, str) and found else None
        return None

    @property
    def has_placeholders(self) -> bool:
        """Whether a ``{{fromRequest:...}}`` placeholder occurs anywhere in the entry.

        Raises:
            SessionLogError: As `chunks`, for a payload left raw.
        """
        marked = self._marked
        if marked is None:  # set only here, after the check: a marked entry is verified
            self.verify()
            marked = self._marked = b"{{fromRequest:" in self._blob
        return marked


class ChunksEntry(_ChunkHolder):
    """A recorded call that streams its chunks and finishes.

    Args:
        chunks: The stream chunks in order; the last is normally a
            ``finish``. They are copied: later changes to the given objects do not
            reach the entry.

    Raises:
        ScriptError: ``chunks`` is not a list (an iterable) of chunks, or a chunk is not
            a JSON value.
    """

    __slots__ = ("_finished", "_reply", "origin")
    kind: Final = "chunks"
    _finished: bool
    _reply: Reply | None
    #: The lines of the log this entry was derived from, ``(first, last)``, when its
    #: chunks are that log's own parsed values, in order and unchanged (no placeholder
    #: rewrite, no surrogate join, nothing left out): what the log check by reference
    #: compares a replayed run with ([docs/checks.md#by-reference](../checks.md#by-reference)).
    #: ``None`` for any other entry.
    origin: tuple[int, int] | None

    def __init__(self, chunks: Iterable[StreamChunk]):
        if isinstance(chunks, str | bytes | dict) or not isinstance(chunks, Iterable):
            raise ScriptError(f"chunks entry: chunks must be a list of chunks, got {chunks!r:.80}")
        items = list(chunks)
        self._blob, self._count = _serialize_chunks(items, "chunks entry")
        self._gaps = None
        self._marked = None
        self._verify = None
        self._finished = _finishes_at_end(items, self._blob)
        self._reply = None
        self.origin = None

    @classmethod
    def from_runs(
        cls, runs: list[ChunkRun], count: int, gaps: Gaps | RawTimes | None = None
    ) -> ChunksEntry:
        """Build an entry from chunk runs already validated by a reader.

        Args:
            runs: The call's chunks as chunk runs (``ChunkRun``), in order.
            count: How many chunks the runs materialize into.
            gaps: The recorded pause before each chunk in ms, ``count`` of them
                (see `gaps_ms`), or the times a reader kept for them; ``None``: all 0.

        Raises:
            TypeError: A run cannot be serialized (nested deeper than
                [`MAX_CHUNK_NESTING`][pytest_dsh_replay.MAX_CHUNK_NESTING]).
        """
        entry = cls.__new__(cls)
        entry._blob = blob = _kept(orjson.dumps(runs))
        entry._count = count
        entry._gaps = gaps
        entry._marked = None
        entry._verify = None
        entry._finished = _finishes_at_end(runs, blob)
        entry._reply = None
        entry.origin = None
        return entry

    @classmethod
    def from_stream(
        cls, text: bytes, verify: Callable[[], tuple[ChunksEntry, list[ChunkRun] | None]]
    ) -> ChunksEntry:
        """Build an entry from a stream kept as a log's text.

        See [docs/format.md#raw-payloads](../format.md#raw-payloads).

        Args:
            text: The call's ``data.stream`` as JSON text.
            verify: Reads ``text`` on the first use of the entry's chunks, count or
                placeholders: raises the error of a record or chunk that breaks a rule,
                else returns the entry the plain reader would have built and the runs
                it was built from (fresh objects; ``None`` when it was built otherwise).
        """
        entry = cls.__new__(cls)
        entry._blob = text  # until verify gives the entry to keep
        entry._count = 0
        entry._gaps = None
        entry._marked = None
        entry._verify = verify
        entry._finished = True
        entry._reply = None
        entry.origin = None
        return entry

    @property
    def ends_with_finish(self) -> bool:
        """Whether the last chunk is the entry's only ``finish`` (the stream ended there).

        An override may give an entry chunks after a ``finish``; then this is ``False``.

        Raises:
            SessionLogError: As `chunks`, for a payload left raw.
        """
        self.verify()
        return self._finished

    def reply(self) -> Reply:
        """`assemble_reply` of the entry's chunks, made once and shared: treat it as read-only.

        What the recorder logs after a call that replayed the whole entry (the
        assistant message); the log check by reference reads it for every test that
        replays the entry ([docs/checks.md#by-reference](../checks.md#by-reference)).

        Raises:
            SessionLogError: As `chunks`, for a payload left raw.
        """
        reply = self._reply
        if reply is None:
            reply = self._reply = _reply_of_runs(self.runs())
        return reply

    def to_json(self) -> JSONObject:
        """The wire form: ``{"kind": "chunks", "chunks": [...]}``."""
        return {"kind": "chunks", "chunks": self.chunks}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ChunksEntry):
            return NotImplemented
        self.verify()
        other.verify()
        return self._blob == other._blob or self.chunks == other.chunks

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._verify is not None:
            return "ChunksEntry(<chunks not read yet>)"
        return f"ChunksEntry(<{self._count} chunks>)"


class EntryRun:
    """A run of ``assistant/chunk`` events that is a whole entry's chunks, by reference.

    What the log check by reference gives for a replayed call that streamed its
    entry whole and unchanged ([docs/checks.md#by-reference](../checks.md#by-reference)):
    the events ``{"turn": turn, "step": step, "chunk": c}`` for each chunk ``c`` of
    ``entry``, none of them built.

    Attributes:
        entry: The entry.
        turn: The events' ``data.turn``.
        step: The events' ``data.step``.
    """

    __slots__ = ("entry", "step", "turn")

    def __init__(self, entry: ChunksEntry, turn: object, step: object):
        self.entry = entry
        self.turn = turn
        self.step = step

    def datas(self) -> list[JSONObject]:
        """The events' ``data`` values, built (new objects)."""
        turn, step = self.turn, self.step
        return [{"turn": turn, "step": step, "chunk": chunk} for chunk in self.entry.chunks]


class ThrowEntry(_ChunkHolder):
    """A call that streams ``chunks`` and then fails with ``message``/``code``.

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
        self._gaps = None
        self._marked = None
        self._verify = None
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
    """A call that streams two fixed chunks and then blocks until cancelled.

    Attributes:
        ready_file: A file written (empty) when the consumer asks for the third chunk, so
            a test can wait for the stream to be in flight; relative paths resolve
            against the scenario's working directory. ``None``: no file.

    Raises:
        ScriptError: ``ready_file`` is neither ``None`` nor a non-empty string (as a
            sidecar's ``readyFile`` must be).
    """

    ready_file: str | None = None
    kind: ClassVar[Literal["hang"]] = "hang"
    PREFIX: ClassVar[tuple[StreamChunk, ...]] = (
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "partial"},
    )

    def __post_init__(self) -> None:
        ready = self.ready_file
        if ready is not None and (not isinstance(ready, str) or not ready):
            raise ScriptError(
                f"hang entry: ready_file must be a non-empty string or None, got {ready!r}"
            )

    @property
    def chunks(self) -> list[StreamChunk]:
        """The two chunks streamed before the hang, as new objects."""
        return [dict(c) for c in self.PREFIX]

    @property
    def response_id(self) -> str | None:
        """Always ``None``: a hang has no recorded answer."""
        return None

    def verify(self) -> None:
        """Nothing to check: a hang entry holds no recorded stream.

        See `ChunksEntry.verify`.
        """

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
"""One recorded model call: a `ChunksEntry`, `ThrowEntry` or `HangEntry`."""

# --- entries from JSON and the override sidecar (docs/scenarios.md#override-entries) ------


def invalid_entry(where: str, loc: str, detail: str) -> OverrideError:
    """The error for a bad override entry: ``invalid override: <loc> <detail>``."""
    return OverrideError(f"invalid override: {loc} {detail}", path=where)


_THROW_KEYS: Final = frozenset({"kind", "chunks", "message", "code"})
_CHUNKS_KEYS: Final = frozenset({"kind", "chunks"})


def _read_chunks(value: object, where: str, loc: str) -> list[StreamChunk]:
    if not isinstance(value, list):
        raise invalid_entry(where, loc, "chunks must be an array")
    for j, chunk in enumerate(value):
        kind = chunk.get("type") if isinstance(chunk, dict) else None
        if not isinstance(kind, str) or kind not in CHUNK_TYPES:
            raise invalid_entry(
                where,
                f"{loc}.chunks[{j}]",
                "must have a known StreamChunk type (one of "
                + ", ".join(sorted(CHUNK_TYPES))
                + ")",
            )
    return value


def _json_text(value: object, limit: int = 80) -> str:
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
        raise invalid_entry(
            where,
            loc,
            f"has chunks that cannot be stored: {err.reason}; a chunk may nest at most "
            f"{MAX_CHUNK_NESTING} levels of arrays and objects",
        ) from None


def entry_from_json(value: object, *, where: str = "<entry>", loc: str = "entry") -> ReplayEntry:
    """Validate and build one entry from its wire form.

    See [docs/scenarios.md#override-entries](../scenarios.md#override-entries).

    Args:
        value: ``{"kind":"chunks","chunks":[...]}``,
            ``{"kind":"throw","chunks":[...],"message":str,"code":str}`` or
            ``{"kind":"hang"}`` / ``{"kind":"hang","readyFile":str}``.
        where: The file name used in error messages.
        loc: The location used in error messages (``entry 3``, ``patch 0.entry``).

    Returns:
        The entry. Only each chunk's ``type`` is checked, as the dsh harness does.

    Raises:
        OverrideError: ``invalid override: <loc> <detail>``
            ([docs/scenarios.md#override-entries](../scenarios.md#override-entries)).
    """
    if not isinstance(value, dict):
        raise invalid_entry(where, loc, "must be an object")
    kind = value.get("kind")
    keys = value.keys()
    if kind == "chunks":
        if keys != _CHUNKS_KEYS:
            raise invalid_entry(
                where, loc, "has invalid chunks-entry fields (expected kind, chunks)"
            )
        return _stored(lambda: ChunksEntry(_read_chunks(value["chunks"], where, loc)), where, loc)
    if kind == "throw":
        if keys != _THROW_KEYS:
            raise invalid_entry(
                where, loc, "has invalid throw-entry fields (expected kind, chunks, message, code)"
            )
        message, code = value["message"], value["code"]
        if not isinstance(message, str) or not message:
            raise invalid_entry(where, loc, "message must be a non-empty string")
        if not isinstance(code, str) or not code:
            raise invalid_entry(where, loc, "code must be a non-empty string")
        chunks = _read_chunks(value["chunks"], where, loc)
        return _stored(lambda: ThrowEntry(chunks, message, code), where, loc)
    if kind == "hang":
        if keys != {"kind"} and keys != {"kind", "readyFile"}:
            raise invalid_entry(
                where, loc, "has invalid hang-entry fields (expected kind and optional readyFile)"
            )
        ready = value.get("readyFile")
        if "readyFile" in value and (not isinstance(ready, str) or not ready):
            raise invalid_entry(where, loc, "readyFile must be a non-empty string")
        return HangEntry(ready_file=ready)
    raise invalid_entry(
        where,
        loc,
        f'has unknown kind {_json_text(kind)} (expected "chunks", "throw" or "hang")',
    )
