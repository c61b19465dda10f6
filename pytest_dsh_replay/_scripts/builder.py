"""Replay scripts: one entry per recorded model call, derived from a session's events.

[`derive_replay_script`][pytest_dsh_replay.derive_replay_script] turns a session's events
into its script, one entry per ``stream()`` call:

- formats 0 and 1: a call is the run of ``assistant/chunk`` events (packed chunk rows
  stand for their members) up to and including its ``finish`` chunk, so retries under
  one (turn, step) are separate calls;
- formats 2 to 5: each ``assistant/message`` and ``assistant/attempt`` event is one call,
  its chunks the event's embedded ``data.stream``;
- in every format, a ``compaction/summary`` (older name ``compact/summary``) with
  ``llmStreamCall: true`` is a synthetic call at its position.

`ScriptBuilder` does the work for every reader: log files (through
`iter_log_lines`), SQLite rows, and event lists.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import orjson

from .._errors import DshReplayError, ScriptError, SessionLogError
from .._format.chunk_rows import PACKED_TAGS, PackedRow, validate_packed_row
from .._format.events import END_SEED, ChunkRun, Event, JSONObject, StreamChunk
from .._format.formats import ALL_EVENT_TYPES, format_spec
from .._format.json_values import ABSENT, describe_json, js_string
from .._format.jsonl import line_error, not_an_event, parse_json_text
from .._format.stream_records import (
    STREAM_EVENTS,
    checked_chunks,
    checked_stream,
    finish_problem,
    kept_runs,
    stream_runs,
)
from .._format.text import join_split_surrogates
from .._format.typed import StreamLine
from .._format.vocabulary import chunk_problem, unknown_event_problem
from .entries import MAX_CHUNK_NESTING, ChunksEntry, ReplayEntry, materialize_runs
from .timing import START_EVENTS, RawTimes, raw_times, stream_times

__all__ = [
    "END_SEED",
    "SUMMARY_EVENTS",
    "ScriptBuilder",
    "derive_replay_script",
    "last_user_text",
    "message_blocks",
    "message_text",
]

SUMMARY_EVENTS: Final = frozenset({"compaction/summary", "compact/summary"})
"""Compaction summaries (``compact/summary`` is the older name); a call when they carry
``llmStreamCall: true``."""


def _call_key(turn: object, step: object) -> str:
    """The dsh harness's call key, ``f"{turn}/{step}"`` as JavaScript formats it."""
    return (
        f"{'undefined' if turn is ABSENT else js_string(turn)}/"
        f"{'undefined' if step is ABSENT else js_string(step)}"
    )


def message_text(message: object) -> str | None:
    """The text of a message, as binding compares it (dsh and OpenAI-style messages).

    Args:
        message: A message mapping, ``{"role", "content", ...}``.

    Returns:
        Its ``content`` when that is a string, else the concatenated ``text`` of its
        ``type: "text"`` blocks; ``None`` when it is not a message.
    """
    blocks = message_blocks(message)
    return None if blocks is None else "".join(blocks)


def message_blocks(message: object) -> list[str] | None:
    """The texts of a message's text blocks (``[content]`` for a string content).

    Args:
        message: A message mapping, ``{"role", "content", ...}``.

    Returns:
        The ``text`` of each ``type: "text"`` block in order; ``None`` when it is not a
        message.
    """
    if type(message) is not dict and not isinstance(message, Mapping):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if type(content) is list or isinstance(content, Sequence):
        return [
            block["text"]
            for block in content
            if (type(block) is dict or isinstance(block, Mapping))
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
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


def _text_safe_entry(runs: list[ChunkRun], times: RawTimes | None) -> ChunksEntry | None:
    """The call with surrogates repaired, or ``None`` when that is not what failed.

    A log written by JavaScript may split a surrogate pair across two deltas, or hold a
    lone one; its chunks are then joined into valid text as the recorder joins them live.
    The join gives one chunk per chunk, in order, so the call keeps its recorded
    ``times`` ([docs/scenarios.md#pacing](../scenarios.md#pacing)).
    """
    chunks = join_split_surrogates(materialize_runs(runs))
    try:
        return ChunksEntry.from_runs(list(chunks), len(chunks), times)
    except TypeError:
        return None


def _run_size(run: ChunkRun) -> int:
    return 1 if run.__class__ is dict else len(run[2])


def _unstorable_call(
    key: str, err: TypeError, source: str | None, line: int | None, index: int
) -> ScriptError:
    """The error for a call whose chunks cannot be serialized (nested too deep)."""
    return ScriptError(
        f"model call {key} cannot be stored ({err}): a chunk may nest at most "
        f"{MAX_CHUNK_NESTING} levels of arrays and objects",
        path=source,
        line=line,
        call_key=key,
        event_index=index,
    )


def _unparsed_stream(
    text: bytes, kind: str, source: str | None, line: int | None
) -> SessionLogError:
    """The error for a kept stream whose text does not parse: the reader's, for its line."""
    error = line_error(source, line)  # the reader's message names the line's column
    if error is not None:
        return error
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as err:
        reason = str(err)
    else:  # pragma: no cover - the text parsed after all
        reason = "it parses now"
    return SessionLogError(
        f"{kind} data.stream is not valid JSON ({reason})", path=source, line=line
    )


def _stream_check(
    text: bytes,
    kind: str,
    key: str,
    source: str | None,
    line: int | None,
    index: int,
    start: object = None,
) -> Callable[[], tuple[ChunksEntry, list[ChunkRun] | None]]:
    """The check an entry runs on first use over a stream a typed read kept as text.

    It reads the stream as the plain reader does (every record, then every chunk) and
    returns the entry the plain reader builds of it, and the runs when it was built
    from them as they are (not with surrogates repaired).
    """

    def verify() -> tuple[ChunksEntry, list[ChunkRun] | None]:
        stream = parse_json_text(text)
        if stream is ABSENT:
            raise _unparsed_stream(text, kind, source, line)
        runs = kept_runs(stream)
        try:
            if runs is None:  # a payload may break a rule: the reader's own checks
                runs = checked_stream(stream, event_type=kind)
            else:
                checked_chunks(runs, event_type=kind)
        except SessionLogError as err:
            raise err.at(path=source, line=line) from None
        times = stream_times(stream, start)  # the records passed the reader's checks
        try:
            return ChunksEntry.from_runs(runs, sum(map(_run_size, runs)), times), runs
        except TypeError as err:
            safe = _text_safe_entry(runs, times)
            if safe is None:
                raise _unstorable_call(key, err, source, line, index) from None
            return safe, None

    return verify


class ScriptBuilder:
    """Incremental script derivation shared by every reader.

    Feed it a log's records in order and call `finish`:

    - `feed` takes parsed body lines ``(line number, value)`` straight from
      `iter_log_lines` (one pass; packed rows are
      validated but never expanded);
    - `record` takes one record at a time: an event or a
      `PackedRow` (the SQLite reader);
    - `event` takes one logical event
    ([`derive_replay_script`][pytest_dsh_replay.derive_replay_script]).

    Args:
        version: The log's format version (one of
            `FORMATS`): its spec says whether
            calls are ``assistant/chunk`` events and packed rows or embedded streams,
            and which event types it knows; ``None`` reads both, and every type
            (events of unknown origin).
        skip: Leading logical events that are counted but not derived: a format 0/1
            fork child's inherited seed (its header's ``seedLength``).
        cut_at_marker: Derive only what follows the last ``session/end-seed`` with
            ``inherited: true`` (a format 2-5 fork child). Problems in the events
            before it are the parent's, so they are raised only if no such marker
            follows them.
        source: The log's name for messages.
        derive: ``False`` counts events and reads the first user message only (a
            script an override replaces as a whole).
        rows: The records are rows of a store, not lines: refusals name the event's
            seq.

    Not part of the public API; [`derive_replay_script`][pytest_dsh_replay.derive_replay_script] is.
    """

    __slots__ = (
        "_chunk_events",
        "_count",
        "_entries",
        "_items",
        "_known",
        "_lines",
        "_n_chunks",
        "_partial",
        "_pending",
        "_readers",
        "_start",
        "_start_index",
        "_start_line",
        "_step",
        "_stream_events",
        "_times",
        "_turn",
        "_version",
        "boundary",
        "cut_at_marker",
        "derive",
        "first_user_blocks",
        "first_user_text",
        "markers",
        "opened",
        "opening_blocks",
        "opening_run",
        "rows",
        "run_blocks",
        "run_texts",
        "skip",
        "source",
    )

    def __init__(
        self,
        *,
        version: int | None = 0,
        skip: int = 0,
        cut_at_marker: bool = False,
        source: str | None = None,
        derive: bool = True,
        rows: bool = False,
    ):
        spec = None if version is None else format_spec(version)
        self._chunk_events = spec is None or not spec.streams_in_message
        self._stream_events = spec is None or spec.streams_in_message
        self._readers = _event_readers(self._chunk_events, self._stream_events, derive)
        self._version = version
        self._known = ALL_EVENT_TYPES if spec is None else spec.event_types
        self.skip = skip
        self.cut_at_marker = cut_at_marker
        self.source = source
        self.derive = derive
        self.rows = rows
        self.first_user_text: str | None = None
        #: The text blocks of the first own user message, for quoting it (see
        #: ``BLOCK_SEPARATOR``); ``first_user_text`` is them joined without a separator.
        self.first_user_blocks: tuple[str, ...] | None = None
        #: The text blocks of the first message of the user run the session's first own
        #: call was made after (docs/scenarios.md#binding): what binds a child. ``()``:
        #: that call followed no user message; ``None``: no call was read.
        self.opening_blocks: tuple[str, ...] | None = None
        #: The texts of every message of the run the first own call was made after.
        self.opening_run: tuple[str, ...] = ()
        #: The first message of the current run of user messages (``None``: no run).
        self.run_blocks: tuple[str, ...] | None = None
        #: The texts of the current run's messages.
        self.run_texts: list[str] = []
        #: Whether the first own call was seen (the opening is taken).
        self.opened = False
        #: How many inherited ``session/end-seed`` markers were seen (formats 2-5).
        self.markers = 0
        #: The position of the last inherited marker: the inherited prefix's length.
        self.boundary: int | None = None
        self._count = 0
        self._entries: list[ReplayEntry] = []
        self._pending: DshReplayError | None = None
        # The open call of formats 0/1: its chunk runs, the line of each, its chunk
        # count, and the (turn, step) it was opened with.
        self._items: list[ChunkRun] = []
        # The open call's start time, then the time of each item: a chunk's (any
        # value; only integers are times), a run's (time0, dt) (docs/scenarios.md#pacing).
        self._times: list[object] = []
        # The time of the latest call start event not taken by a call yet.
        self._start: object = None
        self._lines: list[int | None] = []
        self._n_chunks = 0
        self._partial = False  # the open call took part of a packed row only (a seed's end)
        self._turn: object = ABSENT
        self._step: object = ABSENT
        self._start_index = 0
        self._start_line: int | None = None

    @property
    def event_count(self) -> int:
        """How many logical events were fed so far (seed included)."""
        return self._count

    @property
    def _key(self) -> str:
        return _call_key(self._turn, self._step)

    def _same_call(self, turn: object, step: object) -> bool:
        """Whether (turn, step) has the open call's key (as the dsh harness compares keys)."""
        t0, s0 = self._turn, self._step
        if (
            turn.__class__ is int
            and step.__class__ is int
            and t0.__class__ is int
            and s0.__class__ is int
        ):
            return bool(turn == t0 and step == s0)
        return _call_key(turn, step) == _call_key(t0, s0)

    def _open(self, turn: object, step: object, index: int, line: int | None) -> None:
        if not self.opened:
            self._take_opening()
        self._turn = turn
        self._step = step
        self._start_index = index
        self._start_line = line
        self._times.append(self._start)  # first: the call's start, then one per item
        self._start = None

    def _take_opening(self) -> None:
        """The first own call starts: the user run before it is the session's opening.

        ``()`` when the call followed no user message (a tool result, an answer).
        """
        self.opened = True
        self.opening_blocks = () if self.run_blocks is None else self.run_blocks
        self.opening_run = tuple(self.run_texts)

    def _surface_break(self, event: Event, index: int, line: int | None) -> None:
        """A tool result or an assistant message: the run of user messages ends."""
        self.run_blocks = None
        self.run_texts = []

    def _unterminated_at(self, key: str, index: int, line: int | None) -> ScriptError:
        n = len(self._entries) + 1
        return ScriptError(
            f"model call {key} (call #{n} of this session) ended without a finish "
            "chunk (a thrown or cancelled stream), so it cannot be replayed from the log; "
            'this scenario needs a replay.override.json sidecar: a "throw" or "hang" entry '
            f"for this call (patch at {n - 1})",
            path=self.source,
            line=line,
            call_key=key,
            event_index=index,
        )

    def _unterminated(self) -> ScriptError:
        return self._unterminated_at(self._key, self._start_index, self._start_line)

    def _fail(self, error: DshReplayError) -> None:
        """Raise ``error`` now, or (before a possible inherited marker) at `finish`."""
        if not self.cut_at_marker:
            raise error
        if self._pending is None:
            self._pending = error

    def _refused(self, problem: str, index: int, line: int | None) -> SessionLogError:
        """The error for what the format does not allow.

        See [docs/format.md#vocabulary](../format.md#vocabulary).
        """
        where = f" (event seq {index})" if self.rows else ""
        return SessionLogError(problem + where, path=self.source, line=line)

    def _unknown_event(self, event: Event, index: int, line: int | None) -> None:
        """An event of a type the format does not know: refused unless ignorable."""
        if event.get("ignorable") is not True:
            self._fail(self._refused(unknown_event_problem(event.get("type")),
                                     index, line))  # fmt: skip

    def _bad_chunk(self, chunk: StreamChunk, index: int, line: int | None) -> None:
        """Raise the refusal of a stream chunk the format does not allow, if it is one."""
        problem = chunk_problem(chunk)
        if problem is not None:
            raise self._refused(problem, index, line)

    def _close(self) -> None:
        items = self._items
        lines = self._lines
        try:
            entry = ChunksEntry.from_runs(items, self._n_chunks, raw_times(self._times))
        except TypeError:
            safe = _text_safe_entry(items, raw_times(self._times))
            if safe is None:
                raise self._unstorable() from None
            entry = safe
        else:
            # Its chunks are the log's own values, each line whole: where they came from
            # (the log check by reference, docs/checks.md#by-reference).
            first, last = lines[0], lines[-1]
            if first is not None and last is not None and not self._partial:
                entry.origin = (first, last)
        self._entries.append(entry)
        items.clear()  # in place: feed() holds these lists
        self._times.clear()
        lines.clear()
        self._n_chunks = 0
        self._partial = False

    def _unstorable(self) -> ScriptError:
        """The error for an open call whose chunks cannot be serialized (too deep)."""
        for n, (item, line) in enumerate(zip(self._items, self._lines, strict=True), start=1):
            try:
                orjson.dumps([item])  # as in the list of the call's items
            except TypeError as err:
                which = "on this line" if line is not None else f"number {n} in the call"
                return ScriptError(
                    f"the stream chunk of model call {self._key} {which} cannot be "
                    f"stored ({err}): a chunk may nest at most {MAX_CHUNK_NESTING} levels "
                    "of arrays and objects",
                    path=self.source,
                    line=line,
                    call_key=self._key,
                )
        raise AssertionError("unreachable: the call's chunks serialized one by one")

    def _cut(self) -> None:
        """An inherited ``session/end-seed``: all before it is the parent's."""
        self._entries.clear()
        self._items.clear()
        self._times.clear()
        self._start = None
        self._lines.clear()
        self._n_chunks = 0
        self._partial = False
        self._pending = None
        self.first_user_text = None
        self.first_user_blocks = None
        self.opening_blocks = None
        self.opening_run = ()
        self.run_blocks = None
        self.run_texts = []
        self.opened = False

    def record(self, record: Event | PackedRow, line: int | None = None) -> None:
        """Feed one record: an event, or a validated packed row standing for its members."""
        if isinstance(record, PackedRow):
            self.packed(record, line)
        else:
            self.event(record, line)

    def event(self, event: Event, line: int | None = None) -> None:
        """Feed one logical event.

        Raises:
            SessionLogError: An embedded stream is malformed.
            ScriptError: A call cannot be derived.
        """
        index = self._count
        self._count = index + 1
        kind = event.get("type")
        if kind.__class__ is not str or kind not in self._known:
            self._unknown_event(event, index, line)
            return
        if index < self.skip:
            return
        reader = self._readers.get(kind)
        if reader is not None:
            reader(self, event, index, line)

    def _chunk_event(self, event: Event, index: int, line: int | None) -> None:
        """An ``assistant/chunk``: a chunk of the open call, or the first of a new one."""
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
        turn = data.get("turn", ABSENT)
        step = data.get("step", ABSENT)
        if self._items:
            if not self._same_call(turn, step):
                raise self._unterminated()
        else:
            self._open(turn, step, index, line)
        self._bad_chunk(chunk, index, line)
        self._items.append(chunk)
        self._times.append(event.get("time"))
        self._lines.append(line)
        self._n_chunks += 1
        if chunk.get("type") == "finish":
            self._close()

    def _summary_event(self, event: Event, index: int, line: int | None) -> None:
        """A compaction summary: a call of its own when it says ``llmStreamCall: true``."""
        if self._items:
            raise self._unterminated()
        data = event.get("data")
        if data.__class__ is dict and data.get("llmStreamCall") is True:
            assert isinstance(data, dict)
            if not self.opened:
                self._take_opening()
            self._entries.append(self._summary_call(data, index, line))

    def _user_event(self, event: Event, index: int, line: int | None) -> None:
        """A ``user/message``: the first one's text binds the session."""
        data = event.get("data")
        content = data.get("content") if data.__class__ is dict else None
        if content.__class__ is not list and content.__class__ is not str:
            self._fail(self._refused(
                "a user/message's data must be a message whose content is an array of content "
                f"blocks, got {describe_json(content if data.__class__ is dict else data)}",
                index, line))  # fmt: skip
            return
        blocks = message_blocks(data)
        if self.first_user_text is None and blocks is not None:
            self.first_user_blocks = tuple(blocks)
            self.first_user_text = "".join(blocks)
        if blocks:  # a message without text is not part of the run (as on the wire)
            if self.run_blocks is None:
                self.run_blocks = tuple(blocks)
            self.run_texts.append("".join(blocks))

    def _start_event(self, event: Event, index: int, line: int | None) -> None:
        """A ``step/start`` or ``llm/retry-started``: the next call's start time."""
        self._start = event.get("time")

    def _end_seed_event(self, event: Event, index: int, line: int | None) -> None:
        """A ``session/end-seed``: an inherited one ends a fork child's seed (formats 2-5)."""
        data = event.get("data")
        if data.__class__ is dict and data.get("inherited") is True:
            self.markers += 1
            self.boundary = index
            if self.cut_at_marker:
                self._cut()

    def _stream_call(self, event: Event, index: int, line: int | None) -> None:
        """One ``assistant/message`` / ``assistant/attempt``: one call (formats 2-5)."""
        data = event.get("data")
        if data.__class__ is not dict or "stream" not in data:
            self._surface_break(event, index, line)
            return  # a message without an embedded stream carries no call
        if not self.opened:
            self._take_opening()
        self._surface_break(event, index, line)
        kind = event["type"]
        key = _call_key(data.get("turn", ABSENT), data.get("step", ABSENT))
        start, self._start = self._start, None
        try:
            runs = stream_runs(data["stream"], event_type=kind, source=self.source, line=line)
        except SessionLogError as err:
            self._fail(err)
            return
        self._stream_entry(kind, key, runs, index, line, stream_times(data["stream"], start))

    def _stream_entry(
        self,
        kind: str,
        key: str,
        runs: list[ChunkRun],
        index: int,
        line: int | None,
        times: RawTimes | None = None,
    ) -> None:
        """A stream event's call from its validated runs (formats 2-5), and its times."""
        if self._items:
            raise self._unterminated()
        if not runs and kind == "assistant/message":
            return  # an empty settled stream (a migrated log lost its chunks): no call
        for run in runs:
            if run.__class__ is dict:
                problem = chunk_problem(run)
                if problem is not None:
                    self._fail(self._refused(f"{kind} stream: {problem}", index, line))
                    return
        problem = finish_problem(runs)
        if problem is not None:
            self._fail(self._refused(f"{kind} {problem}", index, line))
            return
        last = runs[-1] if runs else None
        if last.__class__ is not dict or last.get("type") != "finish":
            self._fail(self._unterminated_at(key, index, line))
            return
        try:
            entry = ChunksEntry.from_runs(runs, sum(map(_run_size, runs)), times)
        except TypeError as err:
            safe = _text_safe_entry(runs, times)
            if safe is not None:
                self._entries.append(safe)
                return
            self._fail(_unstorable_call(key, err, self.source, line, index))
            return
        self._entries.append(entry)

    def _stream_line(self, value: StreamLine, index: int, line: int | None) -> None:
        """A stream event the typed read decoded: one call (formats 2-5)."""
        if not self.opened:
            self._take_opening()
        self.run_blocks = None
        self.run_texts = []
        key = _call_key(value.turn, value.step)
        start, self._start = self._start, None
        if value.stream is None:  # an empty stream
            self._stream_entry(value.kind, key, value.runs, index, line)
        else:
            self._kept_stream_entry(value, key, value.stream, index, line, start)

    def _kept_stream_entry(
        self,
        value: StreamLine,
        key: str,
        stream: bytes,
        index: int,
        line: int | None,
        start: object = None,
    ) -> None:
        """A call whose stream a typed read kept as text.

        See [docs/format.md#raw-payloads](../format.md#raw-payloads).

        Its last chunk is its only ``finish`` candidate and is checked now; the rest of
        the stream is checked when the call is first served. A last chunk that fails
        has the whole stream read now, for the reader's first problem.
        """
        if self._items:
            raise self._unterminated()
        last = value.runs[-1]
        check = _stream_check(stream, value.kind, key, self.source, line, index, start)
        if chunk_problem(last) is not None or last.get("type") != "finish":
            try:  # the whole stream now: the plain reader's first problem
                check()
            except DshReplayError as err:
                self._fail(err)
                return
            self._fail(self._unterminated_at(key, index, line))
            return
        self._entries.append(ChunksEntry.from_stream(stream, check))

    def packed(self, row: PackedRow, line: int | None = None) -> None:
        """Feed a validated packed row: its members, without expanding them."""
        payload = row.payload
        n = len(payload)
        first = self._count
        self._count = first + n
        start = self.skip - first
        if start < 0:
            start = 0
        elif start >= n:
            return
        if not self._chunk_events:
            self._fail(
                self._refused(
                    f"a packed chunk row ({row.chunk_type} run) in a session log format "
                    f"v{self._version} log: from format v2 on chunk runs are only stream "
                    "records inside assistant/message and assistant/attempt events",
                    first,
                    line,
                )
            )
            return
        if not self.derive:
            return
        if self._items:
            if not self._same_call(row.turn, row.step):
                raise self._unterminated()
        else:
            self._open(row.turn, row.step, first + start, line)
        time0, dt = row.time0, row.dt
        if start:
            self._partial = True
            payload = payload[start:]
            time0, dt = time0 + sum(dt[:start]), dt[start:]
        cid = row.id
        if cid is None:
            item: ChunkRun = [row.chunk_type, row.index, payload]
        elif row.name is None:
            item = [row.chunk_type, row.index, payload, cid]
        else:
            item = [row.chunk_type, row.index, payload, cid, row.name]
        self._items.append(item)
        self._times.append((time0, dt))
        self._lines.append(line)
        self._n_chunks += n - start

    def _packed_value(self, value: JSONObject, lineno: int) -> None:
        """A packed row as parsed from a line: validated, then fed as its members."""
        if "seq0" not in value:
            value["seq0"] = self._count
        if "time0" not in value:
            value["time0"] = 0
        try:
            row = validate_packed_row(value)  # the dsh harness's checks and errors
        except SessionLogError as err:
            raise err.at(path=self.source, line=lineno) from None
        self.packed(row, lineno)

    def feed(self, lines: Iterable[tuple[int, Any]]) -> None:
        """Feed a log's body lines: ``(line number, parsed value)`` after the header.

        The reader of every log file: packed rows get a missing ``seq0``/``time0``
        filled in, are validated and fed as their members; everything else is an event.
        The loop handles the common case (an ``assistant/chunk`` of the open or a new
        call, past the seed) itself; `event` holds the rules.

        Raises:
            SessionLogError: A line is not a JSON object, a packed row or an embedded
                stream is malformed (and whatever ``lines`` raises while reading).
            ScriptError: A call cannot be derived.
        """
        source = self.source
        skip = self.skip
        fast = self.derive and self._chunk_events
        items = self._items
        item_times = self._times
        item_lines = self._lines
        count = self._count  # kept in a local; self._count is set around every method call
        reads = frozenset(self._readers).difference(("assistant/chunk",))  # handled here
        known = self._known
        check = chunk_problem
        try:
            for lineno, value in lines:
                if value.__class__ is not dict:
                    if value.__class__ is PackedRow:  # decoded typed and checked
                        self._count = count
                        self.packed(value, lineno)
                        count = self._count
                        continue
                    if value.__class__ is StreamLine:
                        index = count
                        count += 1
                        if index >= skip and self.derive and self._stream_events:
                            self._count = count
                            self._stream_line(value, index, lineno)
                        continue
                    raise not_an_event(value, source, lineno)
                tag = value.get("type")
                if tag == "assistant/chunk" and fast and count >= skip:
                    data = value.get("data")
                    if type(data) is dict and type(chunk := data.get("chunk")) is dict:
                        turn = data.get("turn", ABSENT)
                        step = data.get("step", ABSENT)
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
                        if check(chunk) is not None:
                            self._bad_chunk(chunk, count, lineno)
                        count += 1
                        items.append(chunk)
                        item_times.append(value.get("time"))
                        item_lines.append(lineno)
                        self._n_chunks += 1
                        if chunk.get("type") == "finish":
                            self._close()
                        continue
                elif tag.__class__ is str and tag in PACKED_TAGS:
                    self._count = count
                    self._packed_value(value, lineno)
                    count = self._count
                    continue
                elif tag.__class__ is not str or tag not in reads:
                    if (tag.__class__ is not str or tag not in known) and count >= skip:
                        self._count = count
                        self._unknown_event(value, count, lineno)
                    count += 1  # an event replay does not read
                    self._count = count  # in a fork child's seed, where it ends is watched
                    continue
                self._count = count
                self.event(value, lineno)
                count = self._count
        finally:
            self._count = count

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
            return ChunksEntry.from_runs(chunks, len(chunks))
        except TypeError as err:
            raise ScriptError(
                f"compaction/summary rawOutput or usage cannot be stored ({err}): a chunk "
                f"may nest at most {MAX_CHUNK_NESTING} levels of arrays and objects",
                path=self.source,
                line=line,
                event_index=index,
            ) from None

    def finish(self) -> list[ReplayEntry]:
        """Close the script.

        Raises:
            ScriptError: The last call has no ``finish`` chunk, or a call (after the
                last inherited marker, for ``cut_at_marker``) could not be derived.
            SessionLogError: An embedded stream after that marker is malformed.
        """
        if self._items:
            raise self._unterminated()
        if self._pending is not None:
            raise self._pending
        if not self.opened:  # no call read: the first own user message stands for it
            self.opening_blocks = self.first_user_blocks
        return self._entries


_EventReader: TypeAlias = Callable[[ScriptBuilder, Event, int, int | None], None]


@functools.cache
def _event_readers(
    chunk_events: bool, stream_events: bool, derive: bool
) -> dict[str, _EventReader]:
    """The event types a builder reads, and the method that reads each (the rest it counts).

    Args:
        chunk_events: Calls are ``assistant/chunk`` runs (formats 0 and 1).
        stream_events: Calls are embedded streams, seeds end at a marker (formats 2-5).
        derive: Calls are derived at all (else only the first user message is read).
    """
    readers: dict[str, _EventReader] = {
        "user/message": ScriptBuilder._user_event,
        "tool/result": ScriptBuilder._surface_break,
        "assistant/message": ScriptBuilder._surface_break,
        "assistant/attempt": ScriptBuilder._surface_break,
    }
    if derive and chunk_events:
        readers["assistant/chunk"] = ScriptBuilder._chunk_event
    if derive and stream_events:
        readers.update(dict.fromkeys(STREAM_EVENTS, ScriptBuilder._stream_call))
    if derive:
        readers.update(dict.fromkeys(SUMMARY_EVENTS, ScriptBuilder._summary_event))
        readers.update(dict.fromkeys(START_EVENTS, ScriptBuilder._start_event))
    if stream_events:
        readers[END_SEED] = ScriptBuilder._end_seed_event
    return readers


def derive_replay_script(
    events: Iterable[Event], *, source: str | None = None
) -> list[ReplayEntry]:
    """Derive a session's replay script from its events.

    A call is, by format: the run of ``assistant/chunk`` chunks up to and including its
    ``finish`` chunk (formats 0 and 1; retries under the same (turn, step) are separate
    calls), or one ``assistant/message`` / ``assistant/attempt`` event with its embedded
    ``data.stream`` (formats 2 to 5). A ``compaction/summary`` (or ``compact/summary``)
    with ``llmStreamCall: true`` is a synthetic call at its log position
    (block-start/block-end per ``rawOutput`` block, the recorded ``usage``, then a
    ``stop`` finish). Every other event is ignored.

    Args:
        events: Logical events in log order (as
            [`parse_session_log`][pytest_dsh_replay.parse_session_log] returns them). Slice
            a fork child's seed off first (``events[seed_length:]``).
        source: The file name used in error messages.

    Returns:
        One [`ChunksEntry`][pytest_dsh_replay.ChunksEntry] per call, in call order; ``[]``
        when there is no call.

    Raises:
        ScriptError: ``events`` is not a list (an iterable) of event objects; a call
            ends without ``finish`` (its (turn, step) changes, a summary
            arrives, the log ends while it is open, or an embedded stream does not end
            with one), a marked summary has no ``rawOutput``, or an ``assistant/chunk``
            has no chunk object. ``call`` names the call as ``turn/step`` and
            ``event_index`` where it began.
        SessionLogError: An embedded stream is malformed.
    """
    if isinstance(events, str | bytes | dict) or not isinstance(events, Iterable):
        raise ScriptError(
            f"events must be a list of event objects, got {events!r:.80}", path=source
        )
    builder = ScriptBuilder(version=None, source=source)
    for event in events:
        if event.__class__ is not dict:
            raise ScriptError(
                f"events must be JSON objects, got {type(event).__name__}",
                path=source,
                event_index=builder.event_count,
            )
        builder.event(event)
    return builder.finish()
