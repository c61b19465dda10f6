"""Embedded model streams: the ``data.stream`` records of session log formats 2 to 5.

From format 2 on, a model call's chunks are not events of their own: each
``assistant/message`` (a settled call) and ``assistant/attempt`` (a failed or cancelled
one) carries the call's stream as a list of records::

    {"type": "chunk", "time": 1796100231570, "chunk": {"type": "block-start", ...}}
    {"type": "text-chunks", "time0": 1796100231571, "index": 0, "dt": [1, 0],
     "texts": ["Hel", "lo", "!"]}
    {"type": "tool-call-chunks", "time0": ..., "index": 1, "dt": [], "id": "call-1",
     "name": "bash", "args": [""]}

A ``chunk`` record holds one stream chunk as it was received; a run record
(``text-chunks``, ``reasoning-chunks``, ``tool-call-chunks``) holds consecutive deltas of
one block, members one to many. `stream_runs` validates the records in the
runtime's order of checks, with the runtime's own error texts, and returns them as chunk
runs (see `ChunkRun`): the exact chunk sequence the
model adapter yielded, every delta boundary kept.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import SessionLogError
from .events import ChunkRun
from .json_values import (
    ABSENT,
    MAX_SAFE_INTEGER,
    as_safe_integer,
    is_count,
    is_lossless,
    is_safe_integer,
    js_json,
    js_string,
    surely_lossless,
)
from .vocabulary import chunk_problem

__all__ = [
    "STREAM_EVENTS",
    "checked_chunks",
    "checked_stream",
    "finish_problem",
    "kept_runs",
    "record_problem",
    "stream_run",
    "stream_runs",
]

STREAM_EVENTS: Final = frozenset({"assistant/message", "assistant/attempt"})
"""The event types that carry a model call's ``data.stream`` (formats 2 to 5)."""

_RUN_CHUNK: Final[dict[str, str]] = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
_TEXT_KEYS: Final = frozenset({"type", "time0", "index", "dt", "texts"})
_TOOL_KEYS: Final = frozenset({"type", "time0", "index", "dt", "id", "args"})
_TOOL_KEYS_NAMED: Final = frozenset({"type", "time0", "index", "dt", "id", "name", "args"})
_RAW_KEYS: Final = frozenset({"type", "time", "chunk"})
_INT_ONLY: Final = frozenset({int})
_STR_ONLY: Final = frozenset({str})
_UNWORDED: Final = "not a stream record the format allows (docs/format.md#stream-records)"


# --- the one accept path ----------------------------------------------------------------


def stream_run(record: object) -> ChunkRun | None:
    """A stream record's chunk run, or ``None`` when it breaks a rule of the format.

    The one place that decides whether a parsed record is accepted
    ([docs/format.md#stream-records](../format.md#stream-records)): a ``chunk`` record gives
    its chunk object as it is, a run record ``[chunk_type, index, members]`` (``[..., id]``
    or ``[..., id, name]`` for tool-call runs). The common case is checked with whole-list
    operations that run in C; the rare forms the rules allow (integral floats, member times
    near the safe limit, a chunk holding ``null``) are checked one by one. `record_problem` words
    a refusal.
    """
    if record.__class__ is not dict:
        return None
    kind = record.get("type")
    if kind == "chunk":
        return _chunk_run(record)
    chunk_type = _RUN_CHUNK.get(kind) if isinstance(kind, str) else None
    if chunk_type is None:
        return None
    keys = record.keys()
    if chunk_type != "tool-call-delta":
        if keys != _TEXT_KEYS:
            return None
        payload = record["texts"]
        tail: tuple[str, ...] = ()
    else:
        tail = _tool_tail(record, keys)
        if not tail:
            return None
        payload = record["args"]
    if payload.__class__ is not list or not payload or {*map(type, payload)} != _STR_ONLY:
        return None
    index = _index_of(record["index"])
    if index is None or not _times_fit(record["time0"], record["dt"], len(payload)):
        return None
    return [chunk_type, index, payload, *tail]


def _chunk_run(record: dict[str, object]) -> ChunkRun | None:
    """A ``chunk`` record's chunk, or ``None``: a lossless object at a safe time."""
    if record.keys() != _RAW_KEYS:
        return None
    chunk, time = record["chunk"], record["time"]
    if chunk.__class__ is not dict:
        return None
    if (
        time.__class__ is not int or not -MAX_SAFE_INTEGER <= time <= MAX_SAFE_INTEGER
    ) and not is_safe_integer(time):
        return None
    # Lossless in C; a chunk holding null (or a value the serializer refuses) is walked.
    return chunk if surely_lossless(chunk) or is_lossless(chunk) else None


def _tool_tail(record: dict[str, object], keys: object) -> tuple[str, ...]:
    """A tool-call run's ``(id,)`` or ``(id, name)``; ``()`` when its fields break a rule."""
    cid = record.get("id")
    if cid.__class__ is not str or not cid:
        return ()
    if keys == _TOOL_KEYS:
        return (cid,)
    name = record.get("name")
    if keys != _TOOL_KEYS_NAMED or name.__class__ is not str or not name:
        return ()
    return (cid, name)


def _index_of(index: object) -> int | None:
    """A run's block index as an ``int``, or ``None`` unless it is a count."""
    if index.__class__ is int and 0 <= index <= MAX_SAFE_INTEGER:
        return index
    return as_safe_integer(index) if is_count(index) else None


def _times_fit(time0: object, dt: object, members: int) -> bool:
    """Whether ``time0`` and the ``dt`` gaps of ``members`` members keep every time safe."""
    if dt.__class__ is not list:
        return False
    if len(dt) != members - 1:
        return False
    if (
        time0.__class__ is int
        and (not dt or {*map(type, dt)} == _INT_ONLY)
        and abs(time0) + sum(map(abs, dt)) <= MAX_SAFE_INTEGER
    ):
        return True  # the absolute sum bounds every member's time
    if not is_safe_integer(time0) or not all(is_safe_integer(d) for d in dt):
        return False
    t = time0
    for d in dt:
        t += d
        if not is_safe_integer(t):
            return False
    return True


# --- wording a refusal ---------------------------------------------------------------------


def record_problem(record: object) -> str:
    """Why `stream_run` refused ``record``: the first rule it breaks, as the runtime says it.

    Asked only after a refusal, to word the error: the rules are checked one by one in
    the dsh runtime's order, with its texts
    ([docs/format.md#stream-records](../format.md#stream-records)).

    Returns:
        The message; ``""`` when no rule is broken (then the record is accepted).
    """
    if record.__class__ is not dict:
        return "Assistant stream record must be an object"
    kind = record.get("type", ABSENT)
    if kind == "chunk":
        return _raw_problem(record)
    if not isinstance(kind, str) or kind not in _RUN_CHUNK:
        return f"Unsupported Assistant stream record {js_json(kind)}"
    tool = kind == "tool-call-chunks"
    problem = _tool_fields_problem(record) if tool else _text_fields_problem(record, kind)
    if problem:
        return problem
    return _timing_problem(record, kind, len(record["args"] if tool else record["texts"]))


def _raw_problem(record: dict[str, object]) -> str:
    if record.keys() != _RAW_KEYS:
        return "chunk Assistant stream record must contain exactly type, time, chunk"
    if not is_safe_integer(record["time"]):
        return f"Assistant stream time must be a safe integer, got {js_string(record['time'])}"
    chunk = record["chunk"]
    if chunk.__class__ is not dict or not is_lossless(chunk):
        return "Assistant stream raw chunk must be a lossless JSON object"
    return ""


def _tool_fields_problem(record: dict[str, object]) -> str:
    """A ``tool-call-chunks`` record's key set, members, id and name: the problem, or ``""``."""
    keys = record.keys()
    named = "name" in keys
    if keys != (_TOOL_KEYS_NAMED if named else _TOOL_KEYS):
        fields = "dt, id, name, args" if named else "dt, id, args"
        return (
            "tool-call-chunks Assistant stream record must contain exactly type, time0, "
            f"index, {fields}"
        )
    payload = record["args"]
    if payload.__class__ is not list or not set(map(type, payload)) <= _STR_ONLY:
        return "tool-call-chunks args must be a string array"
    if not payload:
        return "tool-call-chunks args must be non-empty"
    cid = record["id"]
    if cid.__class__ is not str or not cid:
        return "tool-call-chunks id must be a non-empty string"
    name = record.get("name")
    if named and (name.__class__ is not str or not name):
        return "tool-call-chunks name must be a non-empty string"
    return ""


def _text_fields_problem(record: dict[str, object], kind: str) -> str:
    """A text or reasoning run record's key set and members: the problem, or ``""``."""
    if record.keys() != _TEXT_KEYS:
        return f"{kind} Assistant stream record must contain exactly type, time0, index, dt, texts"
    payload = record["texts"]
    if payload.__class__ is not list or not set(map(type, payload)) <= _STR_ONLY:
        return f"{kind} texts must be a string array"
    if not payload:
        return f"{kind} texts must be non-empty"
    return ""


def _timing_problem(record: dict[str, object], kind: str, members: int) -> str:
    """A run record's ``time0``, ``index`` and ``dt``: the problem, or ``""``."""
    time0 = record["time0"]
    if not is_safe_integer(time0):
        return f"Assistant stream time must be a safe integer, got {js_string(time0)}"
    if not is_count(record["index"]):
        return f"{kind} index must be a non-negative safe integer"
    dt = record["dt"]
    if dt.__class__ is not list or not all(is_safe_integer(d) for d in dt):
        return f"{kind} dt must contain safe integers"
    if len(dt) != members - 1:
        return f"{kind} dt length must be one less than its members"
    t = time0
    for d in dt:
        t += d
        if not is_safe_integer(t):
            return f"{kind} member times must stay safe integers"
    return ""


def stream_runs(
    stream: object, *, event_type: str, source: str | None, line: int | None
) -> list[ChunkRun]:
    """Validate a call's ``data.stream`` and return it as chunk runs, in order.

    Args:
        stream: The event's ``data.stream`` value.
        event_type: ``assistant/message`` or ``assistant/attempt`` (for messages).
        source: The log file, for messages.
        line: The log line of the event, for messages.

    Returns:
        One chunk run per record: a ``chunk`` record's chunk object as it is, a run
        record as ``[chunk_type, index, members]`` (``[..., id]`` or ``[..., id, name]``
        for tool-call runs; a named run puts ``name`` on every member chunk).

    Raises:
        SessionLogError: ``stream`` is not an array, or a record breaks a rule:
            ``<event_type> stream record <i>: <the runtime's message>``, naming the file
            and line.
    """
    if stream.__class__ is not list:
        raise SessionLogError(
            f"{event_type} data.stream must be an array of stream records, got "
            f"{type(stream).__name__}",
            path=source,
            line=line,
        )
    runs: list[ChunkRun] = []
    for i, record in enumerate(stream):
        run = stream_run(record)
        if run is None:
            problem = record_problem(record) or _UNWORDED
            raise SessionLogError(
                f"{event_type} stream record {i}: {problem}", path=source, line=line
            )
        runs.append(run)
    return runs


def kept_runs(stream: Any) -> list[ChunkRun] | None:
    """The runs of a parsed stream whose records' envelope was checked when it was read.

    Only the payloads' rules are left
    ([docs/format.md#raw-payloads](../format.md#raw-payloads)): a chunk is a JSON object the
    strict serializer writes without ``null`` (so certainly lossless), a run's members are
    strings, one more than its ``dt``. The envelope (record types and keys, times, indexes,
    ids and names) must have passed the typed read.

    Returns:
        The runs, as `stream_runs` gives them; ``None`` when a payload is not
        certain to pass: `checked_stream` then decides, with its message.
    """
    runs: list[ChunkRun] = []
    chunks: list[object] = []
    append = runs.append
    join = "".join
    for record in stream:
        kind = record["type"]
        if kind == "chunk":
            chunk = record["chunk"]
            if chunk.__class__ is not dict:
                return None
            chunks.append(chunk)
            append(chunk)
            continue
        tool = kind == "tool-call-chunks"
        payload = record["args"] if tool else record["texts"]
        if payload.__class__ is not list or len(payload) != len(record["dt"]) + 1:
            return None
        try:
            join(payload)  # raises unless every member is a string
        except TypeError:
            return None
        if not tool:
            append([_RUN_CHUNK[kind], record["index"], payload])
        elif "name" in record:
            append(["tool-call-delta", record["index"], payload, record["id"], record["name"]])
        else:
            append(["tool-call-delta", record["index"], payload, record["id"]])
    return runs if surely_lossless(chunks) else None


def checked_stream(stream: object, *, event_type: str) -> list[ChunkRun]:
    """A call's parsed ``data.stream``, checked as the reader checks a stream.

    A large log's streams may be kept as the log's own text when they are read, with
    only their records' envelope checked
    ([docs/format.md#raw-payloads](../format.md#raw-payloads)); this checks one when its
    call is first served: every record's rules (`stream_runs`), then every chunk against the
    format's vocabulary, in order, so a stream that breaks a rule gets the message the
    reader gives it.

    Args:
        stream: The ``data.stream`` value, parsed.
        event_type: ``assistant/message`` or ``assistant/attempt`` (for messages).

    Returns:
        The stream as chunk runs.

    Raises:
        SessionLogError: A record breaks a rule, or a chunk is not one the format allows
            (no file or line: the caller adds them).
    """
    runs = stream_runs(stream, event_type=event_type, source=None, line=None)
    return checked_chunks(runs, event_type=event_type)


def checked_chunks(runs: list[ChunkRun], *, event_type: str) -> list[ChunkRun]:
    """``runs``, once every chunk in them is one the format allows.

    Raises:
        SessionLogError: ``<event_type> stream: <problem>`` for the first that is not.
    """
    for run in runs:
        if run.__class__ is dict:
            problem = chunk_problem(run)
            if problem is not None:
                raise SessionLogError(f"{event_type} stream: {problem}")
    problem = finish_problem(runs)
    if problem is not None:
        raise SessionLogError(f"{event_type} {problem}")
    return runs


def finish_problem(runs: list[ChunkRun]) -> str | None:
    """Why a call's stream goes on after its ``finish`` chunk, or ``None``.

    A call's ``finish`` is its last chunk
    ([docs/format.md#stream-chunks](../format.md#stream-chunks)): a record after it (a
    second ``finish`` too) is damage, not a second call.
    """
    last = len(runs) - 1
    for i, run in enumerate(runs):
        if i != last and run.__class__ is dict and run.get("type") == "finish":
            return (
                f"stream record {i + 1}: a chunk follows the call's finish chunk (record {i}); "
                "a call's stream ends with its finish"
            )
    return None
