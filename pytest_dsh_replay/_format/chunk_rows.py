"""Packed chunk rows: the storage encoding of runs of stream deltas.

See [docs/format.md#packed-rows](../format.md#packed-rows).

A run of consecutive ``assistant/chunk`` events that carry ``text-delta``,
``reasoning-delta`` or ``tool-call-delta`` chunks of one block is stored as one row::

    {"type": "text-chunks", "seq0": 88, "time0": 1785381572250,
     "data": {"turn": 2, "step": 1, "index": 1, "dt": [117223942, 0, 0],
              "texts": ["M", "ARM", "AL", "ADE"]}}

[`decode_storage_record`][pytest_dsh_replay.decode_storage_record] expands a row back into
its member events exactly as the dsh harness does
([docs/format.md#packed-rows-reading](../format.md#packed-rows-reading));
[`pack_chunk_runs`][pytest_dsh_replay.pack_chunk_runs] is the encoder
([docs/format.md#packed-rows-writing](../format.md#packed-rows-writing), and the SQLite
limits of [docs/format.md#sqlite-store](../format.md#sqlite-store) when asked). Every
malformation raises [`SessionLogError`][pytest_dsh_replay.SessionLogError] with the dsh
harness's reason text.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate
from typing import Any, Final

import orjson

from .._errors import SessionLogError
from .events import Event, JSONObject, StreamChunk
from .json_values import MAX_SAFE_INTEGER, as_safe_integer, is_json_number, is_safe_integer

__all__ = [
    "MIN_RUN",
    "PACKED_TAGS",
    "SQLITE_MAX_DATA_BYTES",
    "SQLITE_MAX_MEMBERS",
    "PackedRow",
    "decode_storage_record",
    "expand_packed_row",
    "expand_records",
    "pack_chunk_runs",
    "validate_packed_row",
]

PACKED_TAGS: Final[dict[str, str]] = {
    "text-chunks": "text-delta",
    "reasoning-chunks": "reasoning-delta",
    "tool-call-chunks": "tool-call-delta",
}
"""Packed row tag -> the chunk type of its members."""

_TAG_OF_CHUNK: Final[dict[str, str]] = {v: k for k, v in PACKED_TAGS.items()}

MIN_RUN: Final[int] = 3
"""The shortest run the encoder packs (``MIN_RUN`` in the dsh harness)."""

SQLITE_MAX_MEMBERS: Final[int] = 1024
"""The SQLite codec's largest packed row, in members.

See [docs/format.md#sqlite-store](../format.md#sqlite-store).
"""

SQLITE_MAX_DATA_BYTES: Final[int] = 1_048_576
"""The SQLite codec's largest serialized ``data`` of a packed row, in UTF-8 bytes."""

_ENVELOPE_KEYS: Final = frozenset({"type", "seq0", "time0", "data"})
_TEXT_DATA_KEYS: Final = frozenset({"turn", "step", "index", "dt", "texts"})
_TOOL_DATA_KEYS: Final = frozenset({"turn", "step", "index", "id", "dt", "args"})
_TOOL_DATA_KEYS_NAMED: Final = frozenset({"turn", "step", "index", "id", "name", "dt", "args"})


class PackedRow:
    """A packed chunk row that passes every rule of the dsh harness's checks.

    The one form of a packed row past its JSON: `validate_packed_row` returns it
    for a parsed row (the JSONL and SQLite readers), and the typed decoder
    (`decode_call_line`) returns it for a row it
    decoded and checked in one step. It stands for its members without expanding them.

    Attributes:
        chunk_type: The ``type`` of every member chunk: ``text-delta``,
            ``reasoning-delta`` or ``tool-call-delta``.
        seq0: The ``seq`` of the first member. ``None`` only from the typed decoder, for
            a row without ``seq0`` (a projected log: the reader numbers its members).
        time0: The ``time`` of the first member (Unix ms; ``0`` when the row has none).
        turn: The members' turn (any JSON number, as the dsh harness allows).
        step: The members' step.
        index: The block index of every member chunk.
        dt: ``len(payload) - 1`` time gaps in ms between consecutive members.
        payload: The members' ``text`` (text/reasoning) or ``argumentsDelta`` (tool
            call), at least one.
        id: The tool call id (tool-call rows only, else ``None``).
        name: The tool name when the row carries one (a string), else ``None``.
    """

    __slots__ = (
        "chunk_type",
        "dt",
        "id",
        "index",
        "name",
        "payload",
        "seq0",
        "step",
        "time0",
        "turn",
    )

    def __init__(self, chunk_type: str, seq0: int | None, time0: int, turn: object, step: object,
                 index: object, dt: list[int], payload: list[str], id: str | None = None,
                 name: str | None = None):  # fmt: skip
        self.chunk_type = chunk_type
        self.seq0 = seq0
        self.time0 = time0
        self.turn = turn
        self.step = step
        self.index = index
        self.dt = dt
        self.payload = payload
        self.id = id
        self.name = name

    @property
    def has_name(self) -> bool:
        """Whether the row carries ``name`` (tool-call rows only)."""
        return self.name is not None

    def chunk(self, k: int) -> StreamChunk:
        """Return member ``k``'s stream chunk as a new object."""
        if self.chunk_type == "tool-call-delta":
            c: StreamChunk = {"type": "tool-call-delta", "index": self.index, "id": self.id}
            if self.name is not None:
                c["name"] = self.name
            c["argumentsDelta"] = self.payload[k]
            return c
        return {"type": self.chunk_type, "index": self.index, "text": self.payload[k]}

    def chunks(self) -> list[StreamChunk]:
        """Every member's stream chunk, in order, as new objects."""
        if self.chunk_type == "tool-call-delta":
            return [self.chunk(k) for k in range(len(self.payload))]
        # the common rows: one literal per member is much cheaper than a method call
        chunk_type, index = self.chunk_type, self.index
        return [{"type": chunk_type, "index": index, "text": text} for text in self.payload]

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, key) for key in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PackedRow):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__)
        return f"PackedRow({fields})"


def _malformed(tag: str, reason: str) -> SessionLogError:
    return SessionLogError(f"malformed {tag} storage row: {reason}")


def validate_packed_row(value: JSONObject) -> PackedRow:
    """Validate a packed row as the dsh harness does.

    See [docs/format.md#packed-rows-reading](../format.md#packed-rows-reading).

    Args:
        value: A parsed record whose ``type`` is one of `PACKED_TAGS`; ``seq0``
            and ``time0`` must already be present (replay fills them in for projected
            logs before decoding: [docs/format.md#committed-form](../format.md#committed-form)).

    Returns:
        The validated row.

    Raises:
        SessionLogError: ``malformed <tag> storage row: <reason>`` with the dsh harness's
            reason for the first rule broken (no path or line; callers add them).
    """
    row = packed_row(value)
    if row is None:
        raise row_error(value)
    return row


_NUMBER_TYPES: Final = frozenset({int, float})
_INT_ONLY: Final = frozenset({int})
_UNWORDED: Final = "not a row the format allows (docs/format.md#packed-rows-reading)"


# --- the one accept path ----------------------------------------------------------------


def packed_row(value: JSONObject) -> PackedRow | None:
    """A parsed packed row as a `PackedRow`, or ``None`` when it breaks a rule.

    The one place that decides whether a parsed row is accepted
    ([docs/format.md#packed-rows-reading](../format.md#packed-rows-reading)). The common
    case (exact ``int`` envelope numbers and gaps, ``|time0| + sum(|dt|)`` within the safe
    range, which bounds every member time) is checked with whole-list operations that run in
    C; the rare forms the rules allow (integral floats, times near the safe limit) one by
    one, their numbers then made ``int``. `row_problem` words a refusal.
    """
    if value.keys() != _ENVELOPE_KEYS:
        return None
    data = value["data"]
    if not isinstance(data, dict):
        return None
    tool = value["type"] == "tool-call-chunks"
    fields = _row_fields(data, tool)
    if fields is None:
        return None
    payload, cid, name = fields
    dt = data["dt"]
    if not isinstance(dt, list) or len(dt) != len(payload) - 1:
        return None
    seq0, time0 = value["seq0"], value["time0"]
    n = len(payload)
    if not (
        seq0.__class__ is int
        and time0.__class__ is int
        and 0 <= seq0 <= MAX_SAFE_INTEGER - n + 1
        and (not dt or {*map(type, dt)} == _INT_ONLY)
        and abs(time0) + sum(map(abs, dt)) <= MAX_SAFE_INTEGER
    ):
        numbers = _exact_numbers(seq0, time0, dt, n)
        if numbers is None:
            return None
        seq0, time0, dt = numbers
    chunk_type = "tool-call-delta" if tool else PACKED_TAGS[value["type"]]
    turn, step, index = data["turn"], data["step"], data["index"]
    return PackedRow(chunk_type, seq0, time0, turn, step, index, dt, payload, cid, name)


def _row_fields(data: JSONObject, tool: bool) -> tuple[list[str], str | None, str | None] | None:
    """``data``'s members, tool id and name once its fields follow the rules; else ``None``."""
    keys = data.keys()
    cid = name = None
    if tool:
        if keys != _TOOL_DATA_KEYS and keys != _TOOL_DATA_KEYS_NAMED:
            return None
        cid, name = data["id"], data.get("name")
        if not isinstance(cid, str) or ("name" in data and not isinstance(name, str)):
            return None
        payload = data["args"]
    elif keys != _TEXT_DATA_KEYS:
        return None
    else:
        payload = data["texts"]
    for number in (data["turn"], data["step"], data["index"]):
        if number.__class__ not in _NUMBER_TYPES and not is_json_number(number):
            return None
    if not isinstance(payload, list) or not payload:
        return None
    try:
        "".join(payload)  # raises TypeError unless every member is a string
    except TypeError:
        return None
    return payload, cid, name


def _exact_numbers(
    seq0: object, time0: object, dt: list[object], n: int
) -> tuple[int, int, list[int]] | None:
    """A row's ``seq0``, ``time0`` and gaps as ``int``, checked one by one; ``None`` if unsafe."""
    first, start = as_safe_integer(seq0), as_safe_integer(time0)
    gaps = [g for g in map(as_safe_integer, dt) if g is not None]
    if first is None or start is None or len(gaps) != len(dt):
        return None
    if first < 0 or first + n - 1 > MAX_SAFE_INTEGER:
        return None
    t = start
    for d in gaps:
        t += d
        if abs(t) > MAX_SAFE_INTEGER:
            return None
    return first, start, gaps


# --- wording a refusal ---------------------------------------------------------------------


def row_error(value: JSONObject) -> SessionLogError:
    """Why `packed_row` refused ``value``: the first rule it breaks, in the harness's words.

    Asked only after a refusal, to word the error: the rules one by one, in the dsh
    harness's order ([docs/format.md#packed-rows-reading](../format.md#packed-rows-reading)).

    Returns:
        ``malformed <tag> storage row: <reason>`` (no path or line; callers add them).
    """
    tag = value["type"]
    try:
        seq0, time0, data = _exact_envelope(tag, value)
        is_tool = tag == "tool-call-chunks"
        _exact_data_fields(tag, data, is_tool)
        payload, dt = _exact_members(tag, data, is_tool)
    except SessionLogError as err:
        return err
    if not is_safe_integer(seq0 + len(payload) - 1):
        return _malformed(tag, "member seqs must stay safe integers")
    t = time0
    for d in dt:
        t += d
        if not is_safe_integer(t):
            return _malformed(tag, "member times must stay safe integers")
    return _malformed(tag, _UNWORDED)


def _exact_envelope(tag: str, value: JSONObject) -> tuple[Any, Any, JSONObject]:
    """The row's own keys, ``seq0``, ``time0`` and that ``data`` is an object."""
    if value.keys() != _ENVELOPE_KEYS:
        raise _malformed(tag, "envelope must be exactly {type, seq0, time0, data}")
    seq0 = value["seq0"]
    if not is_safe_integer(seq0) or seq0 < 0:
        raise _malformed(tag, "seq0 must be a non-negative safe integer")
    time0 = value["time0"]
    if not is_safe_integer(time0):
        raise _malformed(tag, "time0 must be a safe integer")
    data = value["data"]
    if not isinstance(data, dict):
        raise _malformed(tag, "data must be an object")
    return seq0, time0, data


def _exact_data_fields(tag: str, data: JSONObject, is_tool: bool) -> None:
    """``data``'s key set, a tool row's ``id``/``name``, and the numbers every member shares."""
    keys = data.keys()
    if is_tool:
        if keys != _TOOL_DATA_KEYS and keys != _TOOL_DATA_KEYS_NAMED:
            raise _malformed(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
        has_name = "name" in data
        if not isinstance(data["id"], str) or (has_name and not isinstance(data["name"], str)):
            raise _malformed(tag, "id (and name when present) must be strings")
    elif keys != _TEXT_DATA_KEYS:
        raise _malformed(tag, "data must be exactly {turn, step, index, dt, texts}")
    if not (
        is_json_number(data["turn"])
        and is_json_number(data["step"])
        and is_json_number(data["index"])
    ):
        raise _malformed(tag, "turn/step/index must be numbers")


def _exact_members(tag: str, data: JSONObject, is_tool: bool) -> tuple[list[str], list[Any]]:
    """The members and their time gaps: ``(payload, dt)``."""
    payload_key = "args" if is_tool else "texts"
    payload = data[payload_key]
    if not isinstance(payload, list) or not payload or not all(isinstance(p, str) for p in payload):
        raise _malformed(tag, f"{payload_key} must be a non-empty string array")
    dt = data["dt"]
    if not isinstance(dt, list) or not all(is_safe_integer(d) for d in dt):
        raise _malformed(tag, "dt must be an array of safe integers")
    if len(dt) != len(payload) - 1:
        raise _malformed(tag, f"dt length {len(dt)} does not match {len(payload)} members")
    return payload, dt


def expand_packed_row(row: PackedRow) -> list[Event]:
    """Expand a validated row into its member ``assistant/chunk`` events.

    See [docs/format.md#packed-rows](../format.md#packed-rows).

    Member ``k`` gets ``seq = seq0 + k`` and ``time = time0 + sum(dt[:k])``.
    """
    turn, step, seq0 = row.turn, row.step, row.seq0
    assert seq0 is not None, "a row the readers numbered (validate_packed_row)"
    times = accumulate(row.dt[: len(row.payload) - 1], initial=row.time0)
    # `PackedRow.chunks` inline: a method call per row costs a corpus load 0.1 % more
    chunk_type = row.chunk_type
    if chunk_type == "tool-call-delta":
        chunks = [row.chunk(k) for k in range(len(row.payload))]
    else:  # the common rows: one literal per member is much cheaper than a method call
        index = row.index
        chunks = [{"type": chunk_type, "index": index, "text": text} for text in row.payload]
    return [
        {
            "type": "assistant/chunk",
            "seq": seq0 + k,
            "time": t,
            "data": {"turn": turn, "step": step, "chunk": chunk},
        }
        for k, (t, chunk) in enumerate(zip(times, chunks, strict=False))
    ]


def expand_records(records: Iterable[Event | PackedRow]) -> list[Event]:
    """The logical events of a log's records: packed rows expanded, events as they are."""
    events: list[Event] = []
    for record in records:
        if isinstance(record, PackedRow):
            events.extend(expand_packed_row(record))
        else:
            events.append(record)
    return events


def decode_storage_record(value: Any) -> list[Event]:
    """Decode one storage record into the logical events it holds.

    Args:
        value: One parsed JSON value from a log line (``seq0``/``time0`` already filled
            in for projected rows).

    Returns:
        ``[value]`` for anything that is not a packed row (ordinary events are not
        validated at this layer); the expanded member events for a packed row.

    Raises:
        SessionLogError: The row is malformed.
    """
    if not isinstance(value, dict):
        return [value]
    tag = value.get("type")
    if not isinstance(tag, str) or tag not in PACKED_TAGS:
        return [value]
    return expand_packed_row(validate_packed_row(value))


# --- encoding (docs/format.md#packed-rows-writing) ----------------------------------------

_DELTA_KEYS: Final = frozenset({"type", "index", "text"})
_TOOL_DELTA_KEYS: Final = frozenset({"type", "index", "id", "argumentsDelta"})
_TOOL_DELTA_KEYS_NAMED: Final = frozenset({"type", "index", "id", "name", "argumentsDelta"})
_EVENT_KEYS: Final = frozenset({"type", "seq", "time", "data"})
_CHUNK_DATA_KEYS: Final = frozenset({"turn", "step", "chunk"})


def _packable(event: object) -> StreamChunk | None:
    """Return the event's chunk when the event may join a run, else ``None``.

    See [docs/format.md#packed-rows-writing](../format.md#packed-rows-writing).
    """
    if not isinstance(event, dict) or event.get("type") != "assistant/chunk":
        return None
    if event.keys() != _EVENT_KEYS:
        return None
    seq, time = event["seq"], event["time"]
    if not is_safe_integer(seq) or seq < 0 or not is_safe_integer(time):
        return None
    data = event["data"]
    if not isinstance(data, dict) or data.keys() != _CHUNK_DATA_KEYS:
        return None
    if not (is_json_number(data["turn"]) and is_json_number(data["step"])):
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, dict) or not is_json_number(chunk.get("index")):
        return None
    kind = chunk.get("type")
    keys = chunk.keys()
    if kind in ("text-delta", "reasoning-delta"):
        return chunk if keys == _DELTA_KEYS and isinstance(chunk["text"], str) else None
    if kind == "tool-call-delta":
        if keys != _TOOL_DELTA_KEYS and keys != _TOOL_DELTA_KEYS_NAMED:
            return None
        if not all(isinstance(chunk[k], str) for k in keys if k not in ("type", "index")):
            return None
        return chunk
    return None


def _continues(prev: Event, prev_chunk: StreamChunk, event: Event, chunk: StreamChunk) -> bool:
    if chunk["type"] != prev_chunk["type"] or event["seq"] != prev["seq"] + 1:
        return False
    if not is_safe_integer(event["time"] - prev["time"]):
        return False
    d, pd = event["data"], prev["data"]
    if d["turn"] != pd["turn"] or d["step"] != pd["step"] or chunk["index"] != prev_chunk["index"]:
        return False
    if chunk["type"] == "tool-call-delta":
        if chunk["id"] != prev_chunk["id"]:
            return False
        if ("name" in chunk) != ("name" in prev_chunk) or chunk.get("name") != prev_chunk.get(
            "name"
        ):
            return False
    return True


def _build_row(run: list[tuple[Event, StreamChunk]]) -> JSONObject:
    first_event, first_chunk = run[0]
    kind = first_chunk["type"]
    data: JSONObject = {
        "turn": first_event["data"]["turn"],
        "step": first_event["data"]["step"],
        "index": first_chunk["index"],
        "dt": [run[i + 1][0]["time"] - run[i][0]["time"] for i in range(len(run) - 1)],
    }
    if kind == "tool-call-delta":
        data["id"] = first_chunk["id"]
        if "name" in first_chunk:
            data["name"] = first_chunk["name"]
        data["args"] = [c["argumentsDelta"] for _, c in run]
    else:
        data["texts"] = [c["text"] for _, c in run]
    return {
        "type": _TAG_OF_CHUNK[kind],
        "seq0": first_event["seq"],
        "time0": first_event["time"],
        "data": data,
    }


def _data_bytes(run: list[tuple[Event, StreamChunk]]) -> int:
    return len(orjson.dumps(_build_row(run)["data"]))


def _split_run(
    run: list[tuple[Event, StreamChunk]],
    min_members: int,
    max_members: int | None,
    max_data_bytes: int | None,
) -> list[list[tuple[Event, StreamChunk]]]:
    """Cut a run into row-sized pieces; pieces shorter than ``min_members`` stay verbatim."""
    pieces: list[list[tuple[Event, StreamChunk]]] = []
    rest = run
    while rest:
        take = len(rest) if max_members is None else min(len(rest), max_members)
        if max_data_bytes is not None and _data_bytes(rest[:take]) > max_data_bytes:
            lo, hi = 0, take  # largest prefix within the byte limit, by binary search
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _data_bytes(rest[:mid]) <= max_data_bytes:
                    lo = mid
                else:
                    hi = mid - 1
            take = max(lo, 1)
        pieces.append(rest[:take])
        rest = rest[take:]
    return pieces


def pack_chunk_runs(
    events: Iterable[Event],
    *,
    min_members: int = MIN_RUN,
    max_members: int | None = None,
    max_data_bytes: int | None = None,
) -> list[JSONObject]:
    """Encode events as storage records, packing delta runs into rows.

    The encoder is pure: it never changes the events it is given, and what it returns
    decodes ([`decode_storage_record`][pytest_dsh_replay.decode_storage_record]) back into
    exactly those events.

    Args:
        events: Logical events in log order, each with ``seq`` and ``time``.
        min_members: Runs shorter than this stay verbatim (the dsh harness uses 3).
        max_members: Largest row in members, or ``None`` for no limit (the SQLite codec
            uses `SQLITE_MAX_MEMBERS`).
        max_data_bytes: Largest serialized ``data`` in UTF-8 bytes, or ``None`` (the
            SQLite codec uses `SQLITE_MAX_DATA_BYTES`).

    Returns:
        Storage records in order: events stored verbatim (the same objects) and packed
        rows (``{"type", "seq0", "time0", "data"}``).
    """
    out: list[JSONObject] = []
    run: list[tuple[Event, StreamChunk]] = []

    def flush() -> None:
        for piece in _split_run(run, min_members, max_members, max_data_bytes):
            if len(piece) >= min_members:
                out.append(_build_row(piece))
            else:
                out.extend(e for e, _ in piece)
        run.clear()

    for event in events:
        chunk = _packable(event)
        if chunk is None:
            if run:
                flush()
            out.append(event)
            continue
        if run and not _continues(run[-1][0], run[-1][1], event, chunk):
            flush()
        run.append((event, chunk))
    if run:
        flush()
    return out
