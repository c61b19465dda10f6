"""The rules a session log obeys, and how the store reads back a log a crash cut short.

- The event envelope and the model-visible surface (`validate_log`, `Surface`):
  contiguous seqs, ``surfaceOp`` and ``sourceEventSeqs`` on surface events only.
- Crash repair: `scan_committed` reads the committed prefix of a plain log (a torn
  last line is not committed; damage before a later ``turn/end`` is fatal);
  `scan_zstd` does the same frame by frame;
  [`interrupted_turn_closers`][pytest_dsh_replay.interrupted_turn_closers] closes a turn the
  crash left open.
- Seeds: [`completed_turn_prefix`][pytest_dsh_replay.completed_turn_prefix], the prefix a
subagent fork child inherits.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .._errors import SessionLogError, SessionStoreError
from .._format.chunk_rows import PACKED_TAGS, decode_storage_record
from .._format.events import (
    Event,
    JSONObject,
    SessionHeader,
    SessionLike,
    SessionLog,
    header_problem,
)
from .._format.json_values import PLAIN_ONLY, holds_lone_surrogate, is_safe_integer
from .._format.jsonl import MAX_LINE_BYTES, raw_lines, too_long
from .._format.zstd import zstd_frames
from .plain import PlainJSONEvents

__all__ = [
    "SURFACE_TYPES",
    "CommittedLog",
    "Surface",
    "check_record_size",
    "check_session_id",
    "completed_turn_prefix",
    "envelope_problem",
    "interrupted_turn_closers",
    "quote",
    "scan_committed",
    "scan_zstd",
    "store_header",
    "validate_log",
]

SURFACE_TYPES: Final[frozenset[str]] = frozenset(
    {"user/message", "assistant/message", "tool/result"}
)
"""Event types that join the model-visible surface and carry ``surfaceOp``."""

_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"}
)


def quote(text: str) -> str:
    """Quote a value for a message as the dsh harness does (JSON string form)."""
    return orjson.dumps(text).decode("utf-8")


def check_session_id(value: object) -> str:
    """Check a session id given to the store or a backend: a non-empty string.

    The one check every backend shares; a backend may refuse more (the JSONL store, an
    id too long for a directory name: [docs/format.md#jsonl-store](../format.md#jsonl-store)).

    Returns:
        ``value``, typed as the id.

    Raises:
        SessionStoreError: ``value`` is not a string, is empty, or holds a lone surrogate
            (no file or database can hold it).
    """
    if not isinstance(value, str) or not value:
        raise SessionStoreError(f"a session id must be a non-empty string, got {value!r}")
    if holds_lone_surrogate(value):
        raise SessionStoreError(
            f"a session id must be text UTF-8 can hold; {value!r} holds a lone surrogate"
        )
    return value


def envelope_problem(event: object, index: int) -> str | None:
    """The first envelope rule ``event`` breaks at ``index``, or ``None``.

    See [docs/format.md#envelopes](../format.md#envelopes).
    """
    if not isinstance(event, dict):
        return "is not a JSON object"
    extra = sorted(set(event) - _ENVELOPE_KEYS)
    if extra:
        return f"has an invalid event envelope: unknown field(s) {', '.join(extra)}"
    kind = event.get("type")
    if not isinstance(kind, str) or not kind:
        return "has an invalid event envelope: type must be a non-empty string"
    if kind in PACKED_TAGS:
        return f"has type {kind!r}, a packed chunk row tag, not an event type"
    seq: Any = event.get("seq")
    if not is_safe_integer(seq) or seq < 0:
        return "has an invalid event envelope: seq must be a non-negative safe integer"
    if seq != index:
        return f"has seq {seq} (expected {index}); a log must be contiguous from 0"
    if not is_safe_integer(event.get("time")):
        return "has an invalid event envelope: time must be a safe integer (Unix ms)"
    if "data" not in event:
        return "has an invalid event envelope: data is required"
    if "ignorable" in event and event["ignorable"] is not True:
        return "has an invalid event envelope: ignorable may only be true"
    return None


class Surface:
    """The model-visible surface: the seqs of current surface nodes.

    See [docs/format.md#envelopes](../format.md#envelopes).

    ``append`` adds a node; ``{"op": "replace", "start", "end"}`` replaces the current
    nodes ``start..end`` (inclusive, by position) with the new one, whose
    ``sourceEventSeqs`` must cite every node it shadows.
    """

    __slots__ = ("nodes",)

    def __init__(self) -> None:
        self.nodes: list[int] = []

    def plan(self, event: Event, events: Sequence[Event]) -> tuple[int, int] | None:
        """Check ``event`` against the surface; return the node range it replaces.

        Returns:
            ``None`` for a non-surface event, ``(-1, -1)`` for an append, else the
            ``(first, last)`` node positions a replace shadows.

        Raises:
            ValueError: The surface rule broken, in words.
        """
        kind = event["type"]
        seq = event["seq"]
        if kind not in SURFACE_TYPES:
            for key in ("surfaceOp", "sourceEventSeqs"):
                if key in event:
                    raise ValueError(
                        f"{kind} events are not surface events and cannot carry {key} (only "
                        "user/message, assistant/message and tool/result do)"
                    )
            return None
        if "surfaceOp" not in event:
            raise ValueError(
                f'{kind} is a surface event and needs surfaceOp: "append" or '
                '{"op": "replace", "start": <seq>, "end": <seq>}'
            )
        op = event["surfaceOp"]
        shadowed, span = ([], (-1, -1)) if op == "append" else self._replaced(op)
        cited = _cited_seqs(event, kind, seq)
        missing = [s for s in shadowed if s not in cited]
        if missing:
            raise ValueError(
                "a surface replace must cite every node it shadows in sourceEventSeqs; "
                f"missing {', '.join(map(str, missing))}"
            )
        if kind == "tool/result" and op != "append":
            self._check_tool_rewrite(event, shadowed, events)
        return span

    def _replaced(self, op: object) -> tuple[list[int], tuple[int, int]]:
        """A replace op's shadowed node seqs and their ``(first, last)`` positions."""
        if (
            not isinstance(op, dict)
            or op.keys() != {"op", "start", "end"}
            or op["op"] != "replace"
            or not all(is_safe_integer(op[k]) and op[k] >= 0 for k in ("start", "end"))
        ):
            raise ValueError(
                f'surfaceOp must be "append" or {{"op": "replace", "start": <seq>, '
                f'"end": <seq>}} with non-negative integer seqs, got {op!r}'
            )
        try:
            first = self.nodes.index(op["start"])
            last = self.nodes.index(op["end"])
        except ValueError:
            raise ValueError(
                f"surface replace {op['start']}..{op['end']} names a seq that is not a "
                f"current surface node (current nodes: {self.nodes})"
            ) from None
        if first > last:
            raise ValueError(
                f"surface replace start seq {op['start']} comes after end seq {op['end']} "
                "on the surface"
            )
        return self.nodes[first : last + 1], (first, last)

    @staticmethod
    def _check_tool_rewrite(event: Event, shadowed: list[int], events: Sequence[Event]) -> None:
        if len(shadowed) != 1 or events[shadowed[0]].get("type") != "tool/result":
            raise ValueError("a tool/result replace must rewrite exactly one current tool/result")

        def without_content(data: Any) -> Any:
            try:
                out = dict(data)
                message = dict(out["message"])
                first = dict(message["content"][0])
                first["content"] = None
                message["content"] = [first, *message["content"][1:]]
                out["message"] = message
                return out
            except (TypeError, KeyError, IndexError):
                return data

        if without_content(events[shadowed[0]]["data"]) != without_content(event["data"]):
            raise ValueError("a tool/result replace may change only the result's content")

    def apply(self, seq: int, span: tuple[int, int] | None) -> None:
        """Commit a checked event (``span`` from `plan`)."""
        if span is None:
            return
        if span[0] < 0:
            self.nodes.append(seq)
        else:
            self.nodes[span[0] : span[1] + 1] = [seq]


def _cited_seqs(event: Event, kind: str, seq: object) -> set[int]:
    """The earlier seqs a surface event's ``sourceEventSeqs`` cites (checked)."""
    sources = event.get("sourceEventSeqs")
    cited: set[int] = set()
    if sources is None and "sourceEventSeqs" not in event:
        return cited
    if not isinstance(sources, list):
        raise ValueError("sourceEventSeqs must be a list of earlier event seqs")
    if not sources and kind != "assistant/message":
        raise ValueError("sourceEventSeqs must not be empty except on assistant/message")
    if (
        sources
        and seq.__class__ is int
        and all(s.__class__ is int for s in sources)
        and 0 <= min(sources) <= max(sources) < seq
    ):
        cited = set(sources)  # the common case: plain ints, all earlier (so safe)
        if len(cited) != len(sources):
            raise ValueError("sourceEventSeqs must not repeat a seq")
        return cited
    for s in sources:
        if not is_safe_integer(s) or s < 0:
            raise ValueError(f"sourceEventSeqs must hold non-negative integer seqs, got {s!r}")
        if s >= seq:
            raise ValueError(
                f"sourceEventSeqs must cite earlier events: {s} >= this event's seq {seq}"
            )
        cited.add(int(s))
    if len(cited) != len(sources):
        raise ValueError("sourceEventSeqs must not repeat a seq")
    return cited


def validate_log(events: Sequence[Any], *, what: str = "event") -> list[Event]:
    """Check a whole log as the dsh harness's ``Session`` constructor does.

    See [docs/format.md#envelopes](../format.md#envelopes).

    Args:
        events: The events from seq 0.
        what: How to name an event in messages (``"seed event"``, ``"stored event"``).

    Returns:
        ``events`` as a list (the same objects).

    Raises:
        ValueError: ``<what> at index <i> ...`` for the first envelope, contiguity or
            surface rule broken.
    """
    surface = Surface()
    out: list[Event] = []
    for i, event in enumerate(events):
        problem = envelope_problem(event, i)
        if problem is not None:
            raise ValueError(f"{what} at index {i} {problem}")
        try:
            span = surface.plan(event, out)
        except ValueError as err:
            raise ValueError(f"invalid {what} at index {i}: {err}") from None
        surface.apply(i, span)
        out.append(event)
    return out


# --- crash repair (docs/format.md#crash-repair) -------------------------------------------

_STARTED_TEXT: Final = (
    "This tool call was recorded as started, but the session stopped before its result "
    "was saved, so its outcome is unknown. Retry only if the operation is safe to repeat; "
    "otherwise check its effects first."
)
_NOT_STARTED_TEXT: Final = (
    "This tool call was requested but the session stopped before it started. Run it "
    "again if it is still needed."
)


def interrupted_turn_closers(events: Sequence[Event]) -> list[Event]:
    """The events that close a turn a crash left open.

    Scanning the log, a turn is open between ``turn/start`` and ``turn/end``, a step
    between ``step/start`` and ``step/end``; a tool call is pending from the
    ``assistant/message`` that requests it (a ``tool-call`` content block) until a
    ``tool/result`` names its ``callId``; a ``tool/call`` event records that it started.

    Args:
        events: A committed log, seqs contiguous from 0.

    Returns:
        ``[]`` when no turn is open. Otherwise, in order: one error ``tool/result`` per
        pending call (``error.code`` ``TOOL_OUTCOME_UNKNOWN`` citing the ``tool/call``
        seq when the call started, else ``TOOL_NOT_STARTED``), a ``step/end`` when a step
        is open, and ``turn/end`` with reason ``{"kind": "interrupted"}``. Their seqs
        continue the log; each reuses the last event's ``time``.
    """
    state = _OpenTurn()
    for event in events:
        kind = event.get("type")
        scan = _TURN_SCAN.get(kind) if isinstance(kind, str) else None
        if scan is not None:
            data = event.get("data")
            scan(state, event, data if isinstance(data, dict) else {})
    if state.turn is None or not events:
        return []
    last = events[-1]
    seq = int(last["seq"]) + 1
    when = last["time"]
    closers: list[Event] = []
    for call_id, entry in state.pending.items():
        closers.append(_unknown_result(call_id, entry, state.turn, seq, when))
        seq += 1
    if state.step is not None:
        closers.append(
            {
                "type": "step/end",
                "seq": seq,
                "time": when,
                "data": {"turn": state.turn, "step": state.step},
            }
        )
        seq += 1
    closers.append(
        {
            "type": "turn/end",
            "seq": seq,
            "time": when,
            "data": {"turn": state.turn, "reason": {"kind": "interrupted"}},
        }
    )
    return closers


class _OpenTurn:
    """What a scan of a log knows at each event: the open turn and step, pending tool calls.

    ``pending`` maps a requested call's id to ``{"step": ..., "callSeq"?: ...}`` (the seq
    of its ``tool/call`` once it started).
    """

    __slots__ = ("pending", "step", "turn")

    def __init__(self) -> None:
        self.turn: object = None
        self.step: object = None
        self.pending: dict[object, dict[str, object]] = {}

    def turn_start(self, event: Event, data: dict[str, object]) -> None:
        self.turn, self.step = data.get("turn"), None
        self.pending.clear()

    def turn_end(self, event: Event, data: dict[str, object]) -> None:
        self.turn = self.step = None
        self.pending.clear()

    def step_start(self, event: Event, data: dict[str, object]) -> None:
        self.step = data.get("step")

    def step_end(self, event: Event, data: dict[str, object]) -> None:
        self.step = None
        self.pending.clear()

    def assistant_message(self, event: Event, data: dict[str, object]) -> None:
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict) and block.get("type") == "tool-call":
                self.pending[block.get("id")] = {"step": data.get("step")}

    def tool_call(self, event: Event, data: dict[str, object]) -> None:
        entry = self.pending.get(data.get("callId"))
        if entry is not None:
            entry["callSeq"] = event.get("seq")

    def tool_result(self, event: Event, data: dict[str, object]) -> None:
        message = data.get("message")
        source = message.get("source") if isinstance(message, dict) else None
        if isinstance(source, dict):
            self.pending.pop(source.get("callId"), None)


_TURN_SCAN: Final[dict[str, Callable[[_OpenTurn, Event, dict[str, object]], None]]] = {
    "turn/start": _OpenTurn.turn_start,
    "turn/end": _OpenTurn.turn_end,
    "step/start": _OpenTurn.step_start,
    "step/end": _OpenTurn.step_end,
    "assistant/message": _OpenTurn.assistant_message,
    "tool/call": _OpenTurn.tool_call,
    "tool/result": _OpenTurn.tool_result,
}
"""How each event type moves `_OpenTurn` (other events leave it as it is)."""


def _unknown_result(
    call_id: object, entry: dict[str, object], turn: object, seq: int, when: object
) -> Event:
    """The error ``tool/result`` that closes a tool call a crash left pending."""
    started = "callSeq" in entry
    message = {
        "id": f"interrupted-tool-result-{call_id}-{seq}",
        "role": "user",
        "source": {"kind": "tool", "callId": call_id},
        "content": [
            {
                "type": "tool-result",
                "toolCallId": call_id,
                "isError": True,
                "content": [
                    {"type": "text", "text": _STARTED_TEXT if started else _NOT_STARTED_TEXT}
                ],
            }
        ],
    }
    error = (
        {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
        if started
        else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
    )
    closer: Event = {
        "type": "tool/result",
        "seq": seq,
        "time": when,
        "data": {"turn": turn, "step": entry["step"], "message": message, "error": error},
    }
    if started:
        closer["sourceEventSeqs"] = [entry["callSeq"]]
    closer["surfaceOp"] = "append"
    return closer


def completed_turn_prefix(session: SessionLike | Sequence[Event]) -> list[Event] | None:
    """The seed of a subagent fork child: the balanced completed-turn prefix.

    This is the log up to and including its last ``turn/end``: events after it (log-only
    events between turns, the turn still running that delegates) are left out.

    Args:
        session: A session or a log (anything with ``header`` and ``events``), or its
            events.

    Returns:
        A deep copy of ``events[0 .. last turn/end]``, or ``None`` when no turn has
        completed: the child then gets no seed at all (no ``seedLength``, no
        ``session/end-seed``) and behaves like a spawn child. Stamp ``seedLength`` only
        when the returned seed is not ``None``::

            seed = completed_turn_prefix(parent)
            meta = {"parentSession": parent.id, "origin": "subagent", "delegationDepth": 1}
            if seed is not None:
                meta["seedLength"] = len(seed)
            child = store.create(seed=seed, meta=meta)
    """
    if isinstance(session, SessionLog) or not isinstance(session, Sequence):
        events: Sequence[Event] = list(session.events)  # a SessionLog is a tuple too
    else:
        events = session
    for i in range(len(events) - 1, -1, -1):
        if events[i].get("type") == "turn/end":
            prefix = list(events[: i + 1])
            # A store's session holds JSON values (the store copies what it is given as
            # JSON; a stream's chunks are checked to serialize as they are), copied by
            # value; other events may hold enums and the like, which deepcopy keeps.
            return (
                _plain_copy(prefix)
                if isinstance(session, PlainJSONEvents)
                else copy.deepcopy(prefix)
            )
    return None


def _plain_copy(events: list[Event]) -> list[Event]:
    """A deep copy of plain JSON ``events``: by a serializer's round trip when that is exact.

    Exact means the copy equals the events (a NaN, a tuple, a subclass or an unsafe
    integer does not come back equal, or is refused); anything else is copied by
    ``copy.deepcopy``.
    """
    try:
        copied = orjson.loads(orjson.dumps(events, option=orjson.OPT_STRICT_INTEGER | PLAIN_ONLY))
    except TypeError:  # orjson.JSONEncodeError included
        return copy.deepcopy(events)
    return copied if copied == events else copy.deepcopy(events)


# --- reading back what a crash left --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommittedLog:
    """The committed prefix of a stored log.

    Attributes:
        log: The validated header and the committed events, seqs contiguous from 0.
        committed: Bytes of plaintext holding the header and the accepted records.
    """

    log: SessionLog
    committed: int


def store_header(value: object, source: str) -> SessionHeader:
    """Validate a stored log's header by the store's rules.

    Raises:
        SessionLogError: ``corrupt session log: first line is not a session header
            (<why>)``, or the version / retired-field refusal, naming the file, line 1.
    """
    problem = header_problem(value, "store")
    if problem is None:
        return SessionHeader.from_json(value)
    if not problem.startswith("session "):
        problem = f"corrupt session log: first line is not a session header ({problem})"
    raise SessionLogError(problem, path=source, line=1)


def scan_committed(data: bytes, source: str) -> CommittedLog:
    """Read the committed prefix of a plain log as the harness's loader does.

    Bytes after the last newline are a torn tail and not committed. A record that does
    not parse, is a malformed packed row, or breaks seq contiguity ends the committed
    prefix, unless a later record holds a ``turn/end``: then committed data is damaged.

    Raises:
        SessionLogError: The header is missing or invalid, a line is longer than the
            limit, or a damaged record lies before a later ``turn/end``.
    """
    lines = raw_lines(data)
    first = next(lines, b"")
    if not first.endswith(b"\n"):
        raise SessionLogError("empty or header-less session log", path=source)
    try:
        head = orjson.loads(first)
    except orjson.JSONDecodeError:
        raise SessionLogError(
            "corrupt session log: header line is not valid JSON", path=source, line=1
        ) from None
    header = store_header(head, source)
    events: list[Event] = []
    committed = pos = len(first)
    line = 1  # the physical line, the header counted (docs/format.md#crash-repair)
    problem: SessionLogError | None = None
    for raw in lines:
        if not raw.endswith(b"\n"):
            if len(raw) > MAX_LINE_BYTES:
                raise too_long(source, line + 1)
            break  # bytes after the last newline: a torn tail
        line += 1
        pos += len(raw)
        try:
            decoded = decode_storage_record(orjson.loads(raw))
        except (orjson.JSONDecodeError, SessionLogError):
            if problem is None:
                problem = SessionLogError(
                    "corrupt session log: unparsable committed event (a later turn/end "
                    "shows the damage is inside committed data)",
                    path=source,
                    line=line,
                )
            continue
        if problem is not None:
            if any(isinstance(e, dict) and e.get("type") == "turn/end" for e in decoded):
                raise problem
            continue
        for i, e in enumerate(decoded):
            seq = e.get("seq") if isinstance(e, dict) else None
            if not (is_safe_integer(seq) and seq == len(events) + i):
                problem = SessionLogError(
                    "corrupt session log: seq gap in committed region "
                    f"(expected {len(events) + i}, got {seq!r})",
                    path=source,
                    line=line,
                )
                break
        if problem is None:
            events.extend(decoded)
            committed = pos
    return CommittedLog(SessionLog(header, events), committed)


def scan_zstd(data: bytes, source: str) -> tuple[CommittedLog, int | None, list[Event]]:
    """Read the committed prefix of a zstd log (a header frame, then a frame per batch).

    Returns:
        ``(log, torn_at, recovered)``: the committed log; the byte offset of a torn last
        frame (``None`` when every frame is complete); and the complete records that
        torn frame still held, to be written again as a new frame.

    Raises:
        SessionLogError: The first frame is not exactly the header line, a complete
            frame ends inside a record or holds a damaged one, or as
            `scan_committed`.
    """
    frames, torn_at, partial = zstd_frames(data, source)
    if not frames:
        raise SessionLogError("empty or header-less zstd session log", path=source)
    for i, (_, text) in enumerate(frames):
        if i == 0 and (text.count(b"\n") != 1 or not text.endswith(b"\n")):
            raise SessionLogError(
                "corrupt zstd session log: first frame is not exactly one header line",
                path=source,
            )
        if text and not text.endswith(b"\n"):
            raise SessionLogError(
                "corrupt zstd session log: complete frame contains a torn JSONL record",
                path=source,
            )
    complete = b"".join(text for _, text in frames)
    partial = partial[: partial.rfind(b"\n") + 1]
    log = scan_committed(complete + partial, source)
    if log.committed < len(complete):
        raise SessionLogError(
            "corrupt zstd session log: a complete frame holds a damaged record", path=source
        )
    in_complete = len(scan_committed(complete, source).log.events)
    return log, torn_at, log.log.events[in_complete:]


def check_record_size(size: int, record: JSONObject) -> None:
    """Refuse a record a store could not read back: more than `MAX_LINE_BYTES` serialized.

    Args:
        size: The record's serialized size in bytes (its line, or its data's).
        record: The record (an event or a packed row), for its seq in the message.

    Raises:
        SessionStoreError: ``size`` is over the limit; nothing of the batch is written.
    """
    if size > MAX_LINE_BYTES:
        seq = record.get("seq", record.get("seq0"))
        raise SessionStoreError(
            f"event {record.get('type')!s} at seq {seq} is {size} bytes serialized, over the "
            f"{MAX_LINE_BYTES} bytes (64 MiB) a stored record may hold: "
            "nothing was written; keep large payloads out of the log"
        )
