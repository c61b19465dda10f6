"""Typed decoding of the lines that carry a log's model calls, checked while decoding.

Most of a log's bytes are in a few kinds of lines: packed chunk rows (``text-chunks``,
``reasoning-chunks``, ``tool-call-chunks``; formats 0 and 1) and the ``assistant/message``
/ ``assistant/attempt`` events whose ``data.stream`` embeds a call (formats 2 to 5).
`decode_call_line` decodes such a line with ``msgspec`` into typed structs, so the
checks the readers apply to its envelope (exact fields, safe integers, the call's last
chunk its only ``finish``) run in C while decoding, and returns what the script builder
needs: a packed row as the same `PackedRow`
the plain reader validates, a stream event as a `StreamLine`.

A stream (formats 2 to 5) is left as the log's own JSON text, its payloads checked when
the call is first served ([docs/format.md#raw-payloads](../format.md#raw-payloads)).

It is a fast path only: it returns ``None`` whenever it is not certain that the plain
path (``orjson`` and the dsh harness's checks in `chunk_rows` and
`stream_records`) would accept the line's envelope and
derive the same values; the caller then decodes the line the plain way, which raises the
exact error a bad line deserves. Every field outside the payloads is decoded (none
skipped), so a line the JSON parser would refuse there is never accepted here.
"""

import functools
from typing import Any, Final

import orjson

from .chunk_rows import PACKED_TAGS, PackedRow
from .events import ChunkRun
from .json_values import ABSENT, MAX_SAFE_INTEGER, surely_lossless

__all__ = [
    "ROW_LINE_PREFIXES",
    "STREAM_LINE_PREFIXES",
    "StreamLine",
    "decode_call_line",
]

ROW_LINE_PREFIXES: Final = (
    b'{"type":"text-chunks",',
    b'{"type":"reasoning-chunks",',
    b'{"type":"tool-call-chunks",',
)
"""How packed rows (formats 0 and 1) begin as the writers write them."""

STREAM_LINE_PREFIXES: Final = (b'{"type":"assistant/message",', b'{"type":"assistant/attempt",')
"""How the events that embed a call's stream (formats 2 to 5) begin as written."""


# Member times are safe when |time0| <= 2**52, every |gap| <= 2**40 (35 years in ms) and
# there are at most 4,096 members: 2**52 + 4096 * 2**40 = 2**53. Checked so, no sum is
# needed; a line beyond these bounds takes the plain path.
_MAX_MEMBERS: Final = 4096


class _Decoders:
    """The msgspec decoders and the struct types the checks look at."""

    __slots__ = (
        "errors",
        "raw_chunk",
        "stream_event",
        "stream_text",
        "text_row",
        "tool_row",
        "tool_row_data",
        "unset",
    )
    errors: tuple[type[BaseException], ...]
    raw_chunk: Any
    stream_event: Any
    stream_text: Any
    text_row: Any
    tool_row: Any
    tool_row_data: Any
    unset: Any

    def __init__(self, **fields: object):
        for name in self.__slots__:
            setattr(self, name, fields[name])


@functools.cache
def _decoders() -> _Decoders:
    """The typed decoders, built on first use.

    ``msgspec`` is imported only then, so a process that reads only small logs never
    pays for importing it.
    """
    from typing import Annotated, Literal

    import msgspec
    from msgspec import UNSET, Meta, Raw, Struct, UnsetType

    _Safe = Annotated[int, Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
    _Time = Annotated[int, Meta(ge=-(2**52), le=2**52)]
    _Gap = Annotated[int, Meta(ge=-(2**40), le=2**40)]
    _Index = Annotated[int, Meta(ge=0, le=MAX_SAFE_INTEGER)]
    # Integers the JSON parser keeps as integers (beyond them it gives floats).
    _Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
    _Number = _Int64 | float
    _Members = Annotated[list[str], Meta(min_length=1)]
    _NonEmpty = Annotated[str, Meta(min_length=1)]

    # --- formats 0 and 1: packed rows ------------------------------------------------------

    class _TextRowData(Struct, forbid_unknown_fields=True):
        turn: _Number
        step: _Number
        index: _Number
        dt: list[_Gap]
        texts: _Members

    class _ToolRowData(Struct, forbid_unknown_fields=True):
        turn: _Number
        step: _Number
        index: _Number
        id: str
        dt: list[_Gap]
        args: _Members
        name: str | UnsetType = UNSET

    class _TextRow(Struct, forbid_unknown_fields=True):
        type: Literal["text-chunks", "reasoning-chunks"]
        data: _TextRowData
        seq0: _Index | UnsetType = UNSET
        time0: _Time | UnsetType = UNSET

    class _ToolRow(Struct, forbid_unknown_fields=True):
        type: Literal["tool-call-chunks"]
        data: _ToolRowData
        seq0: _Index | UnsetType = UNSET
        time0: _Time | UnsetType = UNSET

    # --- formats 2 to 5: embedded streams ----------------------------------------------------

    # The records with their payloads (chunks, member texts) left as raw JSON: the
    # envelope is checked here, the payloads when the call is first served. A run's
    # members are counted by its dt, bounded so that every member time is safe.
    _RawGaps = Annotated[list[_Gap], Meta(max_length=_MAX_MEMBERS - 1)]

    class _RawChunk(Struct, tag="chunk", tag_field="type", forbid_unknown_fields=True):
        time: _Safe
        chunk: Raw

    class _TextRun(Struct, tag="text-chunks", tag_field="type", forbid_unknown_fields=True):
        time0: _Time
        index: _Index
        dt: _RawGaps
        texts: Raw

    class _ReasoningRun(
        Struct, tag="reasoning-chunks", tag_field="type", forbid_unknown_fields=True
    ):
        time0: _Time
        index: _Index
        dt: _RawGaps
        texts: Raw

    class _ToolRun(Struct, tag="tool-call-chunks", tag_field="type", forbid_unknown_fields=True):
        time0: _Time
        index: _Index
        dt: _RawGaps
        id: _NonEmpty
        args: Raw
        name: _NonEmpty | UnsetType = UNSET

    _Record = _RawChunk | _TextRun | _ReasoningRun | _ToolRun

    class _StreamData(Struct, forbid_unknown_fields=True):
        stream: list[_Record]
        turn: _Int64 | UnsetType = UNSET
        step: _Int64 | UnsetType = UNSET
        message: object = UNSET
        usage: object = UNSET
        interrupted: object = UNSET

    class _StreamEvent(Struct, forbid_unknown_fields=True):
        type: Literal["assistant/message", "assistant/attempt"]
        data: _StreamData
        seq: object = UNSET
        time: object = UNSET
        surfaceOp: object = UNSET
        sourceEventSeqs: object = UNSET
        ignorable: object = UNSET

    class _StreamText(Struct):
        stream: Raw

    class _StreamTextEvent(Struct):
        data: _StreamText

    return _Decoders(
        stream_event=msgspec.json.Decoder(_StreamEvent),
        stream_text=msgspec.json.Decoder(_StreamTextEvent),
        text_row=msgspec.json.Decoder(_TextRow),
        tool_row=msgspec.json.Decoder(_ToolRow),
        tool_row_data=_ToolRowData,
        raw_chunk=_RawChunk,
        unset=UNSET,
        errors=(msgspec.DecodeError, RecursionError),  # ValidationError is a DecodeError
    )


# --- what the script builder gets ----------------------------------------------------------


class StreamLine:
    """An ``assistant/message`` or ``assistant/attempt`` whose stream certainly passes.

    Attributes:
        kind: The event type.
        turn: ``data.turn``, or `ABSENT`.
        step: ``data.step``, or `ABSENT`.
        runs: The stream's last chunk (its ``finish``), decoded; ``[]`` for an empty
            stream.
        stream: ``data.stream`` as the log's own JSON text, its envelope checked and its
            payloads left to be checked when the call is first served
            ([docs/format.md#raw-payloads](../format.md#raw-payloads)); ``None`` for an
            empty stream.
    """

    __slots__ = ("kind", "runs", "step", "stream", "turn")

    def __init__(self, kind: str, turn: object, step: object, runs: list[ChunkRun],
                 stream: bytes | None = None):  # fmt: skip
        self.kind = kind
        self.turn = turn
        self.step = step
        self.runs = runs
        self.stream = stream


def _packed(raw: bytes, d: _Decoders) -> PackedRow | None:
    if raw.startswith(b'{"type":"tool-call-chunks",'):
        row = d.tool_row.decode(raw)
    else:
        row = d.text_row.decode(raw)
    data = row.data
    tool = data.__class__ is d.tool_row_data
    payload = data.args if tool else data.texts
    n = len(payload)
    if len(data.dt) != n - 1 or n > _MAX_MEMBERS:
        return None
    seq0 = None if row.seq0 is d.unset else row.seq0
    if seq0 is not None and seq0 > MAX_SAFE_INTEGER - n + 1:
        return None
    time0 = 0 if row.time0 is d.unset else row.time0
    if tool:
        name = None if data.name is d.unset else data.name
        return PackedRow("tool-call-delta", seq0, time0, data.turn, data.step, data.index,
                         data.dt, payload, data.id, name)  # fmt: skip
    return PackedRow(PACKED_TAGS[row.type], seq0, time0, data.turn, data.step, data.index,
                     data.dt, payload)  # fmt: skip


def _stream_raw(raw: bytes, d: _Decoders) -> StreamLine | None:
    """A stream event with its stream kept as the log's own text.

    See [docs/format.md#raw-payloads](../format.md#raw-payloads).

    The records are decoded with their payloads left raw, so their envelope is checked
    here; the last record's chunk is decoded (it must be the call's ``finish``, and no
    other record's text holds ``"finish"``; one hidden by an escape is found when the
    stream is read). Anything else (``None``) is left to the plain reader, which checks
    every payload now.
    """
    event = d.stream_event.decode(raw)
    data = event.data
    turn = ABSENT if data.turn is d.unset else data.turn
    step = ABSENT if data.step is d.unset else data.step
    records = data.stream
    if not records:
        return StreamLine(event.type, turn, step, [])
    last = records[-1]
    if last.__class__ is not d.raw_chunk:
        return None
    text = bytes(last.chunk)
    try:
        chunk = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if chunk.__class__ is not dict or not surely_lossless(chunk):
        return None
    stream = bytes(d.stream_text.decode(raw).data.stream)
    if stream.count(b'"finish"') != text.count(b'"finish"'):
        return None
    return StreamLine(event.type, turn, step, [chunk], stream)


def decode_call_line(raw: bytes) -> PackedRow | StreamLine | None:
    """Decode a packed row or a stream event line, or say it must take the plain path.

    Args:
        raw: One line of a log (after the header), beginning with one of
            `ROW_LINE_PREFIXES` or `STREAM_LINE_PREFIXES`.

    Returns:
        The decoded line when the plain path would certainly accept it with the same
        values; ``None`` otherwise (a line that does not decode, breaks a rule, or holds
        anything this decoder does not judge: the plain path then decides, with its
        messages).
    """
    d = _decoders()
    try:
        if raw.startswith(b'{"type":"assistant/'):
            return _stream_raw(raw, d)
        return _packed(raw, d)
    except d.errors:
        return None
