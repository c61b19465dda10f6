"""The session store: create, append, fork and reload sessions over a backend (SPEC 1, 6).

Agents under test persist their sessions through a :class:`SessionStore`; record mode
harvests them. The store keeps every live session in memory and writes each append
through a backend:

- :class:`JsonlBackend` (this module): the dsh harness's on-disk JSONL layout (SPEC 1.1),
  plain or zstd-compressed, with packed chunk rows (SPEC 4.3) and crash repair on load
  (SPEC 1.7);
- :class:`~pytest_dsh_replay.sqlite.SqliteBackend`: the harness's SQLite store, schema 18
  (SPEC 5).

Both satisfy :class:`SessionBackend`, so one store works over either. Every operation is
thread-safe: agents under test append from several threads.

Example::

    store = SessionStore(JsonlBackend(tmp_path / "sessions"))
    parent = store.create(meta={"cwd": "/work"})
    parent.append("turn/start", {"turn": 1})
    parent.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    child = store.fork(parent)              # seed = the whole log, then session/end-seed
    assert child.seed_length == 2 and child.events[2]["type"] == "session/end-seed"
"""

from __future__ import annotations

import copy
import math
import os
import secrets
import threading
import time as _time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Protocol, overload, runtime_checkable

import orjson

from ._chunk_rows import PACKED_TAGS, decode_storage_record, pack_chunk_runs
from ._errors import DshReplayError, SessionForkError, SessionLogError, SessionStoreError
from ._events import Event, JSONObject, SessionHeader, is_safe_integer
from ._jsonl import fsync_dir

__all__ = [
    "END_SEED",
    "SURFACE_TYPES",
    "JsonlBackend",
    "MemoryBackend",
    "Session",
    "SessionBackend",
    "SessionStore",
    "StoredLog",
    "completed_turn_prefix",
    "decode_segment",
    "encode_segment",
    "interrupted_turn_closers",
    "project_key",
    "validate_log",
]

END_SEED: Final = "session/end-seed"
"""The event that closes a seed (SPEC 6.1): ``{"type": "session/end-seed", "data": {}}``."""

SURFACE_TYPES: Final[frozenset[str]] = frozenset(
    {"user/message", "assistant/message", "tool/result"}
)
"""Event types that join the model-visible surface and carry ``surfaceOp`` (SPEC 1.4)."""

_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"}
)
_META_KEYS: Final = (
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
    "owner",
)
_ENVELOPE_ALIASES: Final[dict[str, str]] = {
    "sourceEventSeqs": "sourceEventSeqs",
    "source_event_seqs": "sourceEventSeqs",
    "surfaceOp": "surfaceOp",
    "surface_op": "surfaceOp",
    "ignorable": "ignorable",
    "time": "time",
}


def _now_ms() -> int:
    return _time.time_ns() // 1_000_000


def _q(text: str) -> str:
    """Quote a value for a message as the reference does (JSON string form)."""
    return orjson.dumps(text).decode("utf-8")


# --- lossless JSON and event envelopes (SPEC 1.4) -----------------------------------------


def _json_copy(value: Any, where: str) -> Any:
    """Return a deep copy of ``value`` if it is lossless JSON (SPEC 1.4 ``data`` rule).

    Lossless means what survives ``JSON.stringify`` / ``JSON.parse`` unchanged: ``None``,
    ``bool``, strings without lone surrogates, safe integers, finite floats other than
    ``-0.0``, lists and string-keyed dicts of those.

    Raises:
        SessionStoreError: Naming the path of the first offending value.
    """
    cls = value.__class__
    if cls is str:
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise SessionStoreError(
                f"{where} is not lossless JSON: a string holds a lone surrogate"
            ) from None
        return value
    if value is None or cls is bool:
        return value
    if cls is int:
        if not is_safe_integer(value):
            raise SessionStoreError(
                f"{where} is not lossless JSON: integer {value} is outside the safe range "
                "+-(2**53 - 1) a JSON reader keeps exactly"
            )
        return value
    if cls is float:
        if not math.isfinite(value):
            raise SessionStoreError(f"{where} is not lossless JSON: {value!r} has no JSON form")
        if value == 0.0 and math.copysign(1.0, value) < 0:
            raise SessionStoreError(f"{where} is not lossless JSON: -0.0 reads back as 0")
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k.__class__ is not str:
                raise SessionStoreError(
                    f"{where} is not lossless JSON: object key {k!r} is not a string"
                )
            out[k] = _json_copy(v, f"{where}.{k}")
        return out
    if isinstance(value, list):
        return [_json_copy(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, str):  # subclasses (enums and the like): keep the plain value
        return _json_copy(str.__str__(value), where)
    if isinstance(value, int):
        return _json_copy(int(value), where)
    if isinstance(value, float):
        return _json_copy(float(value), where)
    raise SessionStoreError(
        f"{where} is not lossless JSON: {type(value).__name__} values have no exact JSON "
        "form (use dict, list, str, int, float, bool or None)"
    )


def _envelope_problem(event: Any, index: int) -> str | None:
    """The first SPEC 1.4 envelope rule ``event`` breaks at position ``index``, or ``None``."""
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


class _Surface:
    """The model-visible surface: the seqs of current surface nodes (SPEC 1.4 rules).

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
        shadowed: list[int] = []
        span = (-1, -1)
        if op != "append":
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
            shadowed = self.nodes[first : last + 1]
            span = (first, last)
        sources = event.get("sourceEventSeqs")
        cited: set[int] = set()
        if sources is not None or "sourceEventSeqs" in event:
            if not isinstance(sources, list):
                raise ValueError("sourceEventSeqs must be a list of earlier event seqs")
            if not sources and kind != "assistant/message":
                raise ValueError("sourceEventSeqs must not be empty except on assistant/message")
            for s in sources:
                if not is_safe_integer(s) or s < 0:
                    raise ValueError(
                        f"sourceEventSeqs must hold non-negative integer seqs, got {s!r}"
                    )
                if s >= seq:
                    raise ValueError(
                        f"sourceEventSeqs must cite earlier events: {s} >= this event's seq {seq}"
                    )
                cited.add(int(s))
            if len(cited) != len(sources):
                raise ValueError("sourceEventSeqs must not repeat a seq")
        missing = [s for s in shadowed if s not in cited]
        if missing:
            raise ValueError(
                "a surface replace must cite every node it shadows in sourceEventSeqs; "
                f"missing {', '.join(map(str, missing))}"
            )
        if kind == "tool/result" and op != "append":
            self._check_tool_rewrite(event, shadowed, events)
        return span

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
        """Commit a checked event (``span`` from :meth:`plan`)."""
        if span is None:
            return
        if span[0] < 0:
            self.nodes.append(seq)
        else:
            self.nodes[span[0] : span[1] + 1] = [seq]


def validate_log(events: Sequence[Any], *, what: str = "event") -> list[Event]:
    """Check a whole log as the reference's ``Session`` constructor does (SPEC 1.4, 6.1).

    Args:
        events: The events from seq 0.
        what: How to name an event in messages (``"seed event"``, ``"stored event"``).

    Returns:
        ``events`` as a list (the same objects).

    Raises:
        ValueError: ``<what> at index <i> ...`` for the first envelope, contiguity or
            surface rule broken.
    """
    surface = _Surface()
    out: list[Event] = []
    for i, event in enumerate(events):
        problem = _envelope_problem(event, i)
        if problem is not None:
            raise ValueError(f"{what} at index {i} {problem}")
        try:
            span = surface.plan(event, out)
        except ValueError as err:
            raise ValueError(f"invalid {what} at index {i}: {err}") from None
        surface.apply(i, span)
        out.append(event)
    return out


# --- crash repair (SPEC 1.7 step 6) --------------------------------------------------------

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
    """The events that close a turn a crash left open (SPEC 1.7 step 6, RP).

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
    open_turn: Any = None
    open_step: Any = None
    pending: dict[Any, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        data = event.get("data")
        data = data if isinstance(data, dict) else {}
        if kind == "turn/start":
            open_turn, open_step = data.get("turn"), None
            pending.clear()
        elif kind == "turn/end":
            open_turn = open_step = None
            pending.clear()
        elif kind == "step/start":
            open_step = data.get("step")
        elif kind == "step/end":
            open_step = None
            pending.clear()
        elif kind == "assistant/message":
            message = data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool-call":
                    pending[block.get("id")] = {"step": data.get("step")}
        elif kind == "tool/call":
            entry = pending.get(data.get("callId"))
            if entry is not None:
                entry["callSeq"] = event.get("seq")
        elif kind == "tool/result":
            message = data.get("message")
            source = message.get("source") if isinstance(message, dict) else None
            if isinstance(source, dict):
                pending.pop(source.get("callId"), None)
    if open_turn is None or not events:
        return []
    last = events[-1]
    seq = int(last["seq"]) + 1
    when = last["time"]
    closers: list[Event] = []
    for call_id, entry in pending.items():
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
            "data": {"turn": open_turn, "step": entry["step"], "message": message, "error": error},
        }
        if started:
            closer["sourceEventSeqs"] = [entry["callSeq"]]
        closer["surfaceOp"] = "append"
        closers.append(closer)
        seq += 1
    if open_step is not None:
        closers.append(
            {
                "type": "step/end",
                "seq": seq,
                "time": when,
                "data": {"turn": open_turn, "step": open_step},
            }
        )
        seq += 1
    closers.append(
        {
            "type": "turn/end",
            "seq": seq,
            "time": when,
            "data": {"turn": open_turn, "reason": {"kind": "interrupted"}},
        }
    )
    return closers


def completed_turn_prefix(session: Session | Sequence[Event]) -> list[Event] | None:
    """The seed of a subagent fork child: the balanced completed-turn prefix (SPEC 6.3).

    This is the log up to and including its last ``turn/end``: events after it (log-only
    events between turns, the turn still running that delegates) are left out.

    Args:
        session: A :class:`Session` or its events.

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
    if isinstance(session, Session):
        with session._lock:
            events: Sequence[Event] = list(session._events)
    else:
        events = session
    for i in range(len(events) - 1, -1, -1):
        if events[i].get("type") == "turn/end":
            return copy.deepcopy(list(events[: i + 1]))
    return None


# --- headers (SPEC 1.3) -------------------------------------------------------------------


def _make_header(session_id: str, created_at: int, meta: Mapping[str, Any]) -> SessionHeader:
    obj: JSONObject = {"type": "session", "version": 0, "id": session_id, "createdAt": created_at}
    for key in _META_KEYS:
        if key in meta and meta[key] is not None:
            obj[key] = meta[key]
    return SessionHeader.from_json(obj)


def _check_meta(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """Validate ``create``'s ``meta`` against the header rules of SPEC 1.3."""
    if meta is None:
        return {}
    if not isinstance(meta, Mapping):
        raise SessionStoreError(f"meta must be a mapping of header fields, got {type(meta)}")
    unknown = sorted(set(meta) - set(_META_KEYS))
    if unknown:
        raise SessionStoreError(
            f"unknown session meta field(s) {', '.join(map(repr, unknown))}; allowed: "
            + ", ".join(_META_KEYS)
        )
    out = {k: v for k, v in meta.items() if v is not None}

    def count(key: str) -> None:
        if key in out:
            v = out[key]
            if not is_safe_integer(v) or v < 0 or math.copysign(1.0, v) < 0:
                raise SessionStoreError(
                    f"session header {key} must be a non-negative safe integer, got {v!r}"
                )
            out[key] = int(v)

    cwd = out.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise SessionStoreError(f"session header cwd must be a string, got {cwd!r}")
        if not (os.path.isabs(cwd) or cwd.startswith("/")):
            raise SessionStoreError(f"session header cwd must be an absolute path, got {_q(cwd)}")
    for key in ("parentSession", "agentPreset"):
        if key in out and not isinstance(out[key], str):
            raise SessionStoreError(f"session header {key} must be a string, got {out[key]!r}")
    count("seedLength")
    count("delegationDepth")
    if "origin" in out and out["origin"] != "subagent":
        raise SessionStoreError(f'session header origin must be "subagent", got {out["origin"]!r}')
    if "owner" in out and (not isinstance(out["owner"], str) or not out["owner"]):
        raise SessionStoreError(
            f"session header owner must be a non-empty string, got {out['owner']!r}"
        )
    return out


# --- the backend protocol ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StoredLog:
    """A session as a backend read it back: its committed, repaired prefix.

    Attributes:
        header: The stored header (its ``seedLength`` and ``createdAt`` as stored).
        events: The logical events, seqs contiguous from 0; a torn tail is already cut
            off (closers for an interrupted turn are *not* added here, the store does).
        source: Where it was read from, for messages (a file, or ``<store>#<id>``).
        repaired: Whether a torn tail was cut off (and, on disk, removed).
    """

    header: SessionHeader
    events: list[Event]
    source: str
    repaired: bool = False


@runtime_checkable
class SessionBackend(Protocol):
    """What :class:`SessionStore` needs from a persistence backend.

    Implementations must be safe to call from several threads; the store never calls
    :meth:`append` concurrently for one session.
    """

    def exists(self, session_id: str) -> bool:
        """Whether a session with this id is stored."""

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Durably append one batch of events (one transaction, one write).

        Args:
            header: The session's header.
            events: Logical events with contiguous seqs continuing the stored log.
            create: ``True`` for the session's first write: store the header with the
                batch, atomically, and refuse when the session already exists.

        Raises:
            SessionStoreError: The write was refused or failed; nothing was stored.
        """

    def read(self, session_id: str) -> StoredLog | None:
        """Read a stored session, repairing a torn tail (SPEC 1.7, 5); ``None`` if absent.

        Raises:
            SessionLogError: The stored data is damaged before its last ``turn/end``,
                or its header is invalid (names the file and position).
        """

    def session_ids(self) -> list[str]:
        """The ids of every stored session."""

    def describe(self) -> str:
        """A short description for messages (``JSONL store at /x``)."""

    def close(self) -> None:
        """Release files and connections; later calls may fail."""


class MemoryBackend:
    """Sessions kept in memory only: nothing is written anywhere.

    For throwaway stores whose logs are only read back in the same process: the
    ``dsh_replay`` fixture uses one while replaying, where a test's session logs live as
    long as the test. Satisfies :class:`SessionBackend`; a store over it behaves exactly
    as over a file backend, except that nothing survives the process.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, tuple[SessionHeader, list[Event]]] = {}

    def exists(self, session_id: str) -> bool:
        """Whether a session with this id is stored."""
        with self._lock:
            return session_id in self._logs

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Store one batch.

        The events are kept as given (the store hands them over and never changes them
        afterwards); :meth:`read` returns copies.

        Raises:
            SessionStoreError: ``create`` for an existing session, or an append to a
                session that was never created.
        """
        batch = list(events)
        with self._lock:
            stored = self._logs.get(header.id)
            if create:
                if stored is not None:
                    raise SessionStoreError(f"session {_q(header.id)} already exists in memory")
                self._logs[header.id] = (header, batch)
            elif stored is None:
                raise SessionStoreError(f"session {_q(header.id)} was never written")
            else:
                stored[1].extend(batch)

    def read(self, session_id: str) -> StoredLog | None:
        """A copy of a stored session, or ``None``."""
        with self._lock:
            stored = self._logs.get(session_id)
            if stored is None:
                return None
            events: list[Event] = orjson.loads(orjson.dumps(stored[1]))
            return StoredLog(stored[0], events, f"<memory>#{session_id}")

    def session_ids(self) -> list[str]:
        """The stored ids, in the order they were first written."""
        with self._lock:
            return list(self._logs)

    def describe(self) -> str:
        """``in-memory store``."""
        return "in-memory store"

    def close(self) -> None:
        """Nothing to release."""


# --- the JSONL layout (SPEC 1.1) --------------------------------------------------------

_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_SEPARATORS: Final = frozenset("/\\:")
_NO_CWD: Final = "_no-cwd"
_ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
_LOG_NAMES: Final[dict[str, str]] = {"none": "session.jsonl", "zstd": "session.jsonl.zstd"}


def _code_units(text: str) -> Iterator[str]:
    """Yield ``text`` one UTF-16 code unit at a time (astral characters as two)."""
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            yield chr(0xD800 + (cp >> 10))
            yield chr(0xDC00 + (cp & 0x3FF))
        else:
            yield ch


def _escape(unit: str) -> str:
    return unit if unit in _SAFE else f"~{ord(unit):04X}"


def project_key(cwd: str | None) -> str:
    r"""The project directory name of a session's ``cwd`` (SPEC 1.1 ``projectKey``).

    Runs of ``/``, ``\`` and ``:`` become one ``-``; ``[A-Za-z0-9._-]`` stay; every other
    UTF-16 code unit (``~`` included) becomes ``~`` plus 4 uppercase hex digits; leading
    ``-`` are stripped (``root`` when nothing is left); the slug is cut to 251 characters
    and wrapped as ``--<slug>--``. No ``cwd`` gives ``_no-cwd``. The mapping is lossy.

    Example: ``/home/me/my proj`` -> ``--home-me-my~0020proj--``.
    """
    if cwd is None:
        return _NO_CWD
    parts: list[str] = []
    in_separator = False
    for unit in _code_units(cwd):
        if unit in _SEPARATORS:
            if not in_separator:
                parts.append("-")
            in_separator = True
            continue
        in_separator = False
        parts.append(_escape(unit))
    slug = "".join(parts).lstrip("-") or "root"
    return f"--{slug[:251]}--"


def encode_segment(session_id: str) -> str:
    """The session directory name of an id (SPEC 1.1 ``encodeSegment``); injective.

    ``[A-Za-z0-9._-]`` stay, every other UTF-16 code unit becomes ``~XXXX``; ``.`` and
    ``..`` become ``~002E`` and ``~002E~002E``.

    Raises:
        SessionStoreError: The id is empty.
    """
    if not session_id:
        raise SessionStoreError("a session id must be a non-empty string")
    if session_id in (".", ".."):
        return "~002E" * len(session_id)
    return "".join(_escape(u) for u in _code_units(session_id))


def decode_segment(name: str) -> str | None:
    """Invert :func:`encode_segment`; ``None`` when ``name`` is not an encoded id."""
    units: list[int] = []
    i = 0
    while i < len(name):
        ch = name[i]
        if ch == "~":
            digits = name[i + 1 : i + 5]
            if len(digits) != 4 or not all(c in "0123456789ABCDEF" for c in digits):
                return None
            units.append(int(digits, 16))
            i += 5
        elif ch in _SAFE:
            units.append(ord(ch))
            i += 1
        else:
            return None
    raw = b"".join(u.to_bytes(2, "little") for u in units)
    text = raw.decode("utf-16-le", "surrogatepass")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return text if encode_segment(text) == name else None


def _zstd_module(what: str) -> Any:
    try:
        import zstandard
    except ImportError:
        raise SessionStoreError(
            f"{what} needs the zstandard package, which is not installed; install it with: "
            "pip install 'pytest-dsh-replay[zstd]'"
        ) from None
    return zstandard


def _frame_end(data: bytes, start: int, source: str) -> int | None:
    """Walk one zstd frame structurally (SPEC 1.7 zstd mode); its end, or ``None`` if torn.

    Raises:
        SessionLogError: Bad magic, a reserved header bit or a reserved block type.
    """
    n = len(data)
    if data[start : start + 4] != _ZSTD_MAGIC:
        if n - start < 4 and _ZSTD_MAGIC.startswith(data[start:]):
            return None
        raise SessionLogError(
            f"corrupt Zstandard session log: invalid frame magic at byte {start}", path=source
        )
    pos = start + 4
    if pos >= n:
        return None
    fhd = data[pos]
    if fhd & 0x18:
        raise SessionLogError(
            f"corrupt Zstandard session log: reserved frame-header bit at byte {pos}", path=source
        )
    single_segment = bool(fhd & 0x20)
    fcs_size = (0, 2, 4, 8)[fhd >> 6] or (1 if single_segment else 0)
    pos += 1 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3] + fcs_size
    while True:
        if pos + 3 > n:
            return None
        block = int.from_bytes(data[pos : pos + 3], "little")
        last, btype, size = block & 1, (block >> 1) & 3, block >> 3
        if btype == 3:
            raise SessionLogError(
                f"corrupt Zstandard session log: reserved block type at byte {pos}", path=source
            )
        pos += 3 + (1 if btype == 1 else size)
        if pos > n:
            return None
        if last:
            break
    if fhd & 0x04:
        pos += 4
    return pos if pos <= n else None


@dataclass(slots=True)
class _Scan:
    header: SessionHeader
    events: list[Event]
    committed: int  # bytes of plaintext that hold the header and the accepted records


def _header_problem(head: Any) -> str | None:
    """The JSONL loader's header checks (SPEC 1.3, 1.7 step 2), or ``None``."""
    if not isinstance(head, dict):
        return "corrupt session log: first line is not a session header"
    version = head.get("version")
    if is_safe_integer(version) and version != 0:
        return (
            f"session uses log format v{version}, but this build reads only v0 "
            "(no upgrade or downgrade path exists)"
        )
    if "sandboxMode" in head or "approvalPolicy" in head:
        return "session header uses retired policy baseline fields"

    def count(key: str) -> bool:
        v: Any = head.get(key)
        return is_safe_integer(v) and v >= 0

    ok = (
        head.get("type") == "session"
        and version == 0
        and isinstance(head.get("id"), str)
        and count("createdAt")
        and count("delegationDepth")
        and ("cwd" not in head or isinstance(head["cwd"], str))
        and ("parentSession" not in head or isinstance(head["parentSession"], str))
        and ("seedLength" not in head or count("seedLength"))
        and ("origin" not in head or head["origin"] == "subagent")
        and ("agentPreset" not in head or isinstance(head["agentPreset"], str))
        and ("owner" not in head or (isinstance(head["owner"], str) and head["owner"] != ""))
    )
    return None if ok else "corrupt session log: first line is not a session header"


def _scan_plain(data: bytes, source: str) -> _Scan:
    """Read the committed prefix of a JSONL log as the harness loader does (SPEC 1.7).

    Raises:
        SessionLogError: The header is missing or invalid, or a damaged line lies before
            a later ``turn/end`` (committed data is damaged).
    """
    nl = data.find(b"\n")
    if nl < 0:
        raise SessionLogError("empty or header-less session log", path=source)
    try:
        head = orjson.loads(data[:nl])
    except orjson.JSONDecodeError:
        raise SessionLogError(
            "corrupt session log: header line is not valid JSON", path=source, line=1
        ) from None
    problem_text = _header_problem(head)
    if problem_text is not None:
        raise SessionLogError(problem_text, path=source, line=1)
    events: list[Event] = []
    committed = pos = nl + 1
    body_line = 0
    problem: SessionLogError | None = None
    while True:
        end = data.find(b"\n", pos)
        if end < 0:
            break  # bytes after the last LF: a torn tail
        body_line += 1
        line, pos = data[pos:end], end + 1
        try:
            decoded = decode_storage_record(orjson.loads(line))
        except (orjson.JSONDecodeError, SessionLogError):
            if problem is None:
                problem = SessionLogError(
                    f"corrupt session log: unparsable committed event at line {body_line} "
                    "(a later turn/end shows the damage is inside committed data)",
                    path=source,
                    line=body_line + 1,
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
                    f"corrupt session log: seq gap in committed region at line {body_line} "
                    f"(expected {len(events) + i}, got {seq!r})",
                    path=source,
                    line=body_line + 1,
                )
                break
        if problem is None:
            events.extend(decoded)
            committed = pos
    return _Scan(SessionHeader.from_json(head), events, committed)


class JsonlBackend:
    """Sessions as JSONL files in the dsh harness's layout (SPEC 1.1, 1.2, 1.6, 1.7).

    Each session lives at ``<root>/<project_key(cwd)>/<encode_segment(id)>/session.jsonl``
    (or ``session.jsonl.zstd``). Nothing exists on disk before a session's first write;
    that write (header plus first batch) goes to a temporary file that is then published
    with a hard link, which never overwrites. Later batches are appended and fsynced,
    delta runs of each batch packed into chunk rows. In zstd mode the header is one
    frame and every batch one more (content checksums on).

    Args:
        root: The directory holding the project directories (created on first write).
        compression: ``"none"`` (plain ``session.jsonl``, what snapshot runs use) or
            ``"zstd"`` (needs the ``zstandard`` package: ``pytest-dsh-replay[zstd]``).
            One root holds one encoding: a log of the other kind is refused.
        pack_chunks: Pack delta runs of 3 or more per batch (SPEC 4.3), as the harness
            does by default.
        durable: Flush every write to the disk (``fsync``) before it returns. ``False``
            skips that, for throwaway stores such as a test's temporary directory; writes
            stay atomic either way.

    Raises:
        SessionStoreError: An unknown compression, or zstd without ``zstandard``.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        compression: Literal["none", "zstd"] = "none",
        pack_chunks: bool = True,
        durable: bool = True,
    ):
        if compression not in _LOG_NAMES:
            raise SessionStoreError(
                f'unknown compression {compression!r}: expected "none" or "zstd"'
            )
        self.root = Path(root)
        self.compression: Literal["none", "zstd"] = compression
        self.pack_chunks = pack_chunks
        self.durable = durable
        self._zstd = _zstd_module("JSONL compression 'zstd'") if compression == "zstd" else None
        self._lock = threading.Lock()
        self._paths: dict[str, Path] = {}

    # -- layout --------------------------------------------------------------------------

    @property
    def log_name(self) -> str:
        """``session.jsonl`` or ``session.jsonl.zstd``."""
        return _LOG_NAMES[self.compression]

    def path_for(self, header: SessionHeader) -> Path:
        """Where a session with this header is stored."""
        return self.root / project_key(header.cwd) / encode_segment(header.id) / self.log_name

    def _project_dirs(self) -> list[Path]:
        try:
            entries = sorted(self.root.iterdir())
        except FileNotFoundError:
            return []
        except OSError as err:
            raise SessionStoreError(f"cannot list JSONL store {self.root}: {err}") from None
        dirs = []
        for p in entries:
            if p.name.startswith(".") or not p.is_dir():
                continue
            for q in p.iterdir():
                if q.is_file() and q.name.endswith((".jsonl", ".jsonl.zstd")):
                    raise SessionStoreError(
                        f"JSONL store {self.root}: {q} uses the unsupported flat-file layout "
                        "(a log directly in a project directory); expected "
                        "<project>/<session>/session.jsonl"
                    )
            dirs.append(p)
        return dirs

    def _log_in(self, session_dir: Path) -> Path | None:
        other = "zstd" if self.compression == "none" else "none"
        foreign = session_dir / _LOG_NAMES[other]
        if foreign.exists():
            raise SessionStoreError(
                f"{foreign} uses {_LOG_NAMES[other].removeprefix('session')}, but this backend is "
                f'configured for compression "{self.compression}"; open the root with '
                f'JsonlBackend(root, compression="{other}")'
            )
        path = session_dir / self.log_name
        return path if path.exists() else None

    def locate(self, session_id: str) -> Path | None:
        """The log file of a stored session, or ``None`` (SPEC 1.1 ``findLog``).

        Raises:
            SessionStoreError: The id appears in several project directories, or its
                log uses the other compression.
        """
        with self._lock:
            cached = self._paths.get(session_id)
        if cached is not None and cached.exists():
            return cached
        segment = encode_segment(session_id)
        found = [
            log
            for project in self._project_dirs()
            if (project / segment).is_dir() and (log := self._log_in(project / segment))
        ]
        if len(found) > 1:
            raise SessionStoreError(
                f"duplicate JSONL session id {_q(session_id)} appears in multiple project "
                f"directories: {', '.join(str(p) for p in found)}"
            )
        if not found:
            return None
        with self._lock:
            self._paths[session_id] = found[0]
        return found[0]

    # -- the protocol ----------------------------------------------------------------------

    def describe(self) -> str:
        """``JSONL store at <root>``."""
        return f"JSONL store at {self.root}"

    def exists(self, session_id: str) -> bool:
        """Whether ``session_id`` has a log under the root."""
        return self.locate(session_id) is not None

    def session_ids(self) -> list[str]:
        """Every stored session id, sorted."""
        ids: list[str] = []
        for project in self._project_dirs():
            for d in sorted(project.iterdir()):
                sid = decode_segment(d.name) if d.is_dir() else None
                if sid is not None and self._log_in(d) is not None:
                    ids.append(sid)
        return sorted(ids)

    def _encode(self, records: Iterable[JSONObject]) -> bytes:
        return b"".join(orjson.dumps(r) + b"\n" for r in records)

    def _frame(self, plaintext: bytes) -> bytes:
        if self._zstd is None:
            return plaintext
        return bytes(self._zstd.ZstdCompressor(level=3, write_checksum=True).compress(plaintext))

    def _batch(self, events: Sequence[Event]) -> bytes:
        records = pack_chunk_runs(events) if self.pack_chunks else list(events)
        return self._encode(records)

    def append(self, header: SessionHeader, events: Sequence[Event], *, create: bool) -> None:
        """Write a batch; the first write publishes header and batch atomically.

        Raises:
            SessionStoreError: The session exists already (``create``) or not at all,
                or the file cannot be written (nothing is left half-published).
        """
        if create:
            self._materialize(header, events)
            return
        path = self.locate(header.id)
        if path is None:
            raise SessionStoreError(
                f"session {_q(header.id)} has no log in {self.describe()}; it was never "
                "written or was removed"
            )
        if not events:
            return
        blob = self._frame(self._batch(events))
        try:
            with open(path, "ab") as f:
                f.write(blob)
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
        except OSError as err:
            raise SessionStoreError(f"cannot append to session log {path}: {err}") from None

    def _materialize(self, header: SessionHeader, events: Sequence[Event]) -> None:
        if self.exists(header.id):
            raise SessionStoreError(f"session {_q(header.id)} already exists in {self.describe()}")
        final = self.path_for(header)
        head = orjson.dumps(header.to_json()) + b"\n"
        body = self._batch(events) if events else b""
        blob = self._frame(head) + (self._frame(body) if body else b"")
        tmp = final.with_name(f"{final.name}.{secrets.token_hex(6)}.tmp")
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "xb") as f:
                f.write(blob)
                f.flush()
                if self.durable:
                    os.fsync(f.fileno())
            try:
                os.link(tmp, final)
            except FileExistsError:
                raise SessionStoreError(
                    f"session {_q(header.id)} already exists: {final} was written meanwhile"
                ) from None
            except OSError:  # no hard links here: publish by an exclusive rename
                if final.exists():
                    raise SessionStoreError(
                        f"session {_q(header.id)} already exists: {final}"
                    ) from None
                os.replace(tmp, final)
            if self.durable:
                fsync_dir(final.parent)
        except OSError as err:
            raise SessionStoreError(f"cannot write session log {final}: {err}") from None
        finally:
            tmp.unlink(missing_ok=True)
        with self._lock:
            self._paths[header.id] = final

    def read(self, session_id: str) -> StoredLog | None:
        """Read a session's committed prefix, repairing a torn tail on disk (SPEC 1.7).

        A plain log is truncated to its last complete accepted record. In zstd mode a
        torn last frame is cut off and the complete records it still held are appended
        again as a new frame.

        Raises:
            SessionLogError: The header is missing, invalid, foreign, or names another
                session or project; or committed data is damaged (file and line named).
        """
        path = self.locate(session_id)
        if path is None:
            return None
        source = str(path)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise SessionLogError(f"cannot read session log: {err}", path=source) from None
        recovered: list[Event] = []
        if self.compression == "zstd":
            scan, cut, recovered = self._scan_zstd(data, source)
        else:
            scan = _scan_plain(data, source)
            cut = scan.committed if scan.committed < len(data) else None
        header = scan.header
        if header.id != session_id:
            raise SessionLogError(
                f"corrupt session log: requested id {_q(session_id)} does not match header "
                f"id {_q(header.id)}",
                path=source,
                line=1,
            )
        expected = project_key(header.cwd)
        if path.parent.parent.name != expected:
            raise SessionLogError(
                f"corrupt session log: header id {_q(header.id)} and cwd identify "
                f"{_q(str(self.root / expected / encode_segment(header.id)))}, not this file",
                path=source,
                line=1,
            )
        if cut is not None:
            try:
                os.truncate(path, cut)
                if recovered:
                    with open(path, "ab") as f:
                        f.write(self._frame(self._batch(recovered)))
                        f.flush()
                        if self.durable:
                            os.fsync(f.fileno())
            except OSError as err:
                raise SessionStoreError(
                    f"cannot repair the torn tail of session log {path}: {err}"
                ) from None
        return StoredLog(header, scan.events, source, repaired=cut is not None)

    def _scan_zstd(self, data: bytes, source: str) -> tuple[_Scan, int | None, list[Event]]:
        zstandard = _zstd_module(f"reading {source}")
        frames: list[bytes] = []
        start = 0
        torn_at: int | None = None
        while start < len(data):
            end = _frame_end(data, start, source)
            if end is None:
                torn_at = start
                break
            frames.append(data[start:end])
            start = end
        if not frames:
            raise SessionLogError("empty or header-less Zstandard session log", path=source)
        plain: list[bytes] = []
        for i, frame in enumerate(frames):
            try:
                obj = zstandard.ZstdDecompressor().decompressobj()
                text = obj.decompress(frame)
                if not obj.eof:
                    raise zstandard.ZstdError("frame did not end")
            except zstandard.ZstdError as err:
                raise SessionLogError(
                    f"corrupt Zstandard session log: frame {i} does not decode ({err})",
                    path=source,
                ) from None
            if i == 0 and (text.count(b"\n") != 1 or not text.endswith(b"\n")):
                raise SessionLogError(
                    "corrupt Zstandard session log: first frame is not exactly one header line",
                    path=source,
                )
            if text and not text.endswith(b"\n"):
                raise SessionLogError(
                    "corrupt Zstandard session log: complete frame contains a torn JSONL record",
                    path=source,
                )
            plain.append(text)
        complete = b"".join(plain)
        partial = b""
        if torn_at is not None:
            try:
                obj = zstandard.ZstdDecompressor().decompressobj()
                partial = obj.decompress(data[torn_at:])
            except zstandard.ZstdError:
                partial = b""
            partial = partial[: partial.rfind(b"\n") + 1]
        scan = _scan_plain(complete + partial, source)
        if scan.committed < len(complete):
            raise SessionLogError(
                "corrupt Zstandard session log: a complete frame holds a damaged record",
                path=source,
            )
        in_complete = len(_scan_plain(complete, source).events)
        recovered = scan.events[in_complete:]
        return scan, torn_at, recovered

    def close(self) -> None:
        """Nothing to release: every write opens and closes its file."""


# --- sessions ------------------------------------------------------------------------------


class _EventsView(Sequence[Event]):
    """A read-only view of a session's events (the event dicts must not be mutated)."""

    __slots__ = ("_events",)

    def __init__(self, events: list[Event]):
        self._events = events

    @overload
    def __getitem__(self, index: int) -> Event: ...

    @overload
    def __getitem__(self, index: slice) -> list[Event]: ...

    def __getitem__(self, index: int | slice) -> Event | list[Event]:
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events[:])

    def __repr__(self) -> str:
        return f"<{len(self._events)} events>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _EventsView):
            return self._events == other._events
        if isinstance(other, list):
            return self._events == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


class Session:
    """One session of a :class:`SessionStore`: a header and an append-only event log.

    Get sessions from :meth:`SessionStore.create`, :meth:`SessionStore.fork` or
    :meth:`SessionStore.load`, never by constructing one. A session satisfies
    :class:`~pytest_dsh_replay.scenario.SessionLike`, so
    ``write_scenario(path, store.sessions())`` writes a store's sessions as a scenario.

    Attributes:
        id: The session id.
        header: The :class:`~pytest_dsh_replay.events.SessionHeader` (fixed for life).
        events: A read-only sequence of the event dicts, seq order; do not mutate them.
        seed_length: The header's ``seedLength`` (0 when absent): leading events
            inherited from a fork parent (SPEC 6).
    """

    __slots__ = (
        "_batch_depth",
        "_events",
        "_header",
        "_lock",
        "_pending",
        "_persisted",
        "_store",
        "_surface",
        "_written",
    )

    def __init__(
        self,
        store: SessionStore,
        header: SessionHeader,
        events: list[Event],
        *,
        persisted: bool,
    ):
        self._store = store
        self._header = header
        self._events = events
        self._lock = threading.RLock()
        self._surface = _Surface()
        for i, event in enumerate(events):
            self._surface.apply(i, self._surface.plan(event, events))
        self._persisted = persisted
        self._written = len(events) if persisted else 0
        self._pending: list[Event] = []
        self._batch_depth = 0

    @property
    def id(self) -> str:
        """The session id."""
        return self._header.id

    @property
    def header(self) -> SessionHeader:
        """The session header."""
        return self._header

    @property
    def events(self) -> Sequence[Event]:
        """The events in seq order, a read-only live view."""
        return _EventsView(self._events)

    @property
    def seed_length(self) -> int:
        """The header ``seedLength`` (0 when absent)."""
        return self._header.seed_length

    @property
    def parent_session(self) -> str | None:
        """The header ``parentSession``."""
        return self._header.parent_session

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, events={len(self._events)})"

    def append(self, type: str, data: Any, **envelope: Any) -> Event:
        """Append one event and persist it (SPEC 1.4, S ``Session.append``).

        Args:
            type: The event type, e.g. ``"turn/start"`` (not a packed-row tag).
            data: The payload: lossless JSON (no NaN, infinities, ``-0.0``, integers
                beyond 2**53 - 1, tuples or other objects). It is copied.
            **envelope: ``surfaceOp`` (``"append"`` or ``{"op": "replace", "start",
                "end"}``; required on ``user/message``, ``assistant/message`` and
                ``tool/result`` and allowed only there), ``sourceEventSeqs`` (earlier
                seqs; the same types only), ``ignorable=True``, and ``time`` (Unix ms;
                default: the store's clock). Snake-case spellings are accepted.

        Returns:
            The stored event ``{"type", "seq", "time", "data", ...}``; ``seq`` is its
            position in the log. Do not mutate it.

        Raises:
            SessionStoreError: The event is invalid (the message says which rule), the
                session is no longer live, or the write failed (nothing was appended).
        """
        event = self._store._build_event(type, data, envelope)
        with self._lock:
            self._store._check_live(self)
            seq = len(self._events)
            event["seq"] = seq
            try:
                span = self._surface.plan(event, self._events)
            except ValueError as err:
                raise SessionStoreError(
                    f"session {_q(self.id)}: {type} at seq {seq}: {err}"
                ) from None
            if self._batch_depth:
                self._events.append(event)
                self._surface.apply(seq, span)
                self._pending.append(event)
                return event
            self._write([event])
            self._events.append(event)
            self._surface.apply(seq, span)
            return event

    @contextmanager
    def batch(self) -> Iterator[Session]:
        """Group appends into one write (one packed batch, one transaction).

        Appends inside the block are visible at once in :attr:`events` and written
        together when the outermost block exits, also when it exits with an exception;
        delta runs are packed per batch (SPEC 1.6), so batching gives the compact
        layout the harness's write-behind window gives. Appends from other threads
        during the block join the batch.

        Raises:
            SessionStoreError: The write failed; the batch's events are removed again.
        """
        with self._lock:
            self._batch_depth += 1
        try:
            yield self
        finally:
            with self._lock:
                self._batch_depth -= 1
                if not self._batch_depth:
                    self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        try:
            self._write(pending)
        except BaseException:
            del self._events[self._written :]
            self._surface = _Surface()
            for i, event in enumerate(self._events):
                self._surface.apply(i, self._surface.plan(event, self._events))
            raise

    def _write(self, events: list[Event]) -> None:
        backend = self._store._backend
        try:
            backend.append(self._header, events, create=not self._persisted)
        except DshReplayError:
            raise
        except (OSError, ValueError) as err:
            raise SessionStoreError(
                f"session {_q(self.id)}: cannot persist {len(events)} event(s) to "
                f"{backend.describe()}: {err}"
            ) from err
        self._persisted = True
        self._written += len(events)


class SessionStore:
    """Live sessions over a persistence backend (SPEC 6; DESIGN 2).

    Args:
        backend: Where sessions are persisted: a :class:`JsonlBackend`, a
            :class:`~pytest_dsh_replay.sqlite.SqliteBackend`, or anything satisfying
            :class:`SessionBackend`.
        clock: Returns the current time in Unix milliseconds (an ``int``); used for
            ``createdAt``, event ``time`` and ``session/end-seed``. Default: the wall
            clock. Inject a fake one for deterministic logs.

    Every method is thread-safe. A session created without a seed reaches the backend
    with its first append (the reference writes nothing before); a seeded session is
    written at once, seed and ``session/end-seed`` together.
    """

    def __init__(self, backend: SessionBackend, *, clock: Callable[[], int] | None = None):
        self._backend = backend
        self._clock = clock or _now_ms
        self._lock = threading.RLock()
        self._live: dict[str, Session] = {}
        self._closed = False

    @property
    def backend(self) -> SessionBackend:
        """The persistence backend."""
        return self._backend

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Write pending batches, detach every session and close the backend."""
        with self._lock:
            if self._closed:
                return
            for session in list(self._live.values()):
                with session._lock:
                    session._flush()
            self._closed = True
            self._live.clear()
            self._backend.close()

    # -- internals ---------------------------------------------------------------------------

    def _now(self) -> int:
        value = self._clock()
        if not is_safe_integer(value):
            raise SessionStoreError(f"the store clock must return Unix ms as an int, got {value!r}")
        return int(value)

    def _check_live(self, session: Session) -> None:
        if self._live.get(session.id) is not session:
            raise SessionStoreError(f"session {_q(session.id)} is not live in this store")

    def _build_event(self, kind: Any, data: Any, envelope: Mapping[str, Any]) -> Event:
        if not isinstance(kind, str) or not kind:
            raise SessionStoreError(f"event type must be a non-empty string, got {kind!r}")
        if kind in PACKED_TAGS:
            raise SessionStoreError(
                f"{_q(kind)} is a packed chunk row tag (a storage encoding), not an event "
                "type; append assistant/chunk events and the backend packs them"
            )
        event: Event = {"type": kind, "seq": -1, "time": 0, "data": None}
        unknown = sorted(set(envelope) - set(_ENVELOPE_ALIASES))
        if unknown:
            raise SessionStoreError(
                f"{kind} has an invalid event envelope: unknown field(s) {', '.join(unknown)} "
                "(allowed: surfaceOp, sourceEventSeqs, ignorable, time)"
            )
        fields = {_ENVELOPE_ALIASES[k]: v for k, v in envelope.items() if v is not None}
        when = fields.pop("time", None)
        if when is None:
            when = self._now()
        elif not is_safe_integer(when):
            raise SessionStoreError(f"{kind}: time must be a safe integer (Unix ms), got {when!r}")
        event["time"] = int(when)
        event["data"] = _json_copy(data, f"{kind} data")
        if "sourceEventSeqs" in fields:
            seqs = fields["sourceEventSeqs"]
            if not isinstance(seqs, list | tuple):
                raise SessionStoreError(
                    f"{kind}: sourceEventSeqs must be a list of earlier seqs, got {seqs!r}"
                )
            event["sourceEventSeqs"] = _json_copy(list(seqs), f"{kind} sourceEventSeqs")
        if "surfaceOp" in fields:
            event["surfaceOp"] = _json_copy(fields["surfaceOp"], f"{kind} surfaceOp")
        ignorable = fields.get("ignorable", False)
        if ignorable is True:
            event["ignorable"] = True
        elif ignorable is not False:
            raise SessionStoreError(f"{kind}: ignorable may only be True, got {ignorable!r}")
        return event

    def _new_id(self) -> str:
        while True:
            candidate = str(uuid.uuid4())
            if candidate not in self._live and not self._backend.exists(candidate):
                return candidate

    def _copy_seed(self, seed: Iterable[Event]) -> list[Event]:
        if isinstance(seed, str | bytes | Mapping) or not isinstance(seed, Iterable):
            raise SessionStoreError(f"seed must be a sequence of events, got {type(seed).__name__}")
        events = [_json_copy(e, f"seed event at index {i}") for i, e in enumerate(seed)]
        try:
            return validate_log(events, what="seed event")
        except ValueError as err:
            raise SessionStoreError(f"{err}; seed must be contiguous from 0") from None

    # -- the API -----------------------------------------------------------------------------

    def create(
        self,
        session_id: str | None = None,
        *,
        seed: Iterable[Event] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Session:
        """Create a session (SPEC 6.1; S ``SessionStore.create``).

        Args:
            session_id: The id; ``None`` mints a fresh UUID.
            seed: Events to start from, seqs contiguous from 0 with valid envelopes
                (deep-copied). A seed, even an empty one, is followed by
                ``session/end-seed`` (``data: {}``, seq ``len(seed)``) unless its last
                event already is one; the seed and marker are persisted at once. No seed
                means no marker, and nothing is written before the first append.
            meta: Header fields: ``cwd`` (absolute), ``parentSession``, ``seedLength``
                (at most ``len(seed)``), ``origin`` (``"subagent"``),
                ``delegationDepth``, ``agentPreset``, ``owner``. ``createdAt`` comes from
                the clock.

        Returns:
            The new live session.

        Raises:
            SessionStoreError: The id is taken (live or stored) or empty, a meta field
                or seed event is invalid, or the seed cannot be written.
        """
        fields = _check_meta(meta)
        events = self._copy_seed(seed) if seed is not None else None
        if "seedLength" in fields and fields["seedLength"] > len(events or ()):
            raise SessionStoreError(
                f"seedLength {fields['seedLength']} exceeds the seed's {len(events or ())} "
                "events; seedLength counts inherited events at the start of the seed"
            )
        with self._lock:
            if self._closed:
                raise SessionStoreError("this session store is closed")
            if session_id is None:
                sid = self._new_id()
            elif not isinstance(session_id, str) or not session_id:
                raise SessionStoreError(
                    f"a session id must be a non-empty string, got {session_id!r}"
                )
            else:
                sid = session_id
                if sid in self._live or self._backend.exists(sid):
                    raise SessionStoreError(f"session {_q(sid)} already exists")
            header = _make_header(sid, self._now(), fields)
            if events is not None and (not events or events[-1]["type"] != END_SEED):
                events.append(
                    {"type": END_SEED, "seq": len(events), "time": self._now(), "data": {}}
                )
            session = Session(self, header, events or [], persisted=False)
            if events is not None:
                session._write(list(events))
            self._live[sid] = session
            return session

    def fork(
        self,
        source: Session | str,
        boundary: int | None = None,
        child_session_id: str | None = None,
    ) -> Session:
        """Fork a live session at an inclusive boundary (SPEC 6.2; S ``fork``).

        Checks, in order: a given ``child_session_id`` that is taken
        (``SESSION_ALREADY_EXISTS``); the source (``SESSION_NOT_FOUND`` for an id or
        object that is not live, ``SESSION_NOT_LIVE`` for a stale object whose id is
        live on another); the boundary (default: the last event's seq; an empty source
        gives an empty seed) must be a non-negative safe integer naming an existing,
        contiguous seq (``INVALID_BOUNDARY``); and it must not fall inside an open turn:
        the last ``turn/start``/``turn/end`` at or before it must not be a ``turn/start``
        (``OPEN_TURN``). It need not be a ``turn/end`` itself.

        The child is ``create(child_session_id, seed=<events 0..boundary, deep-copied>,
        meta={cwd (when the source has one), parentSession: source id, seedLength})``:
        its log is the seed, then ``session/end-seed`` at seq ``seedLength``. ``origin``
        and ``delegationDepth`` are not stamped.

        Returns:
            The child session.

        Raises:
            SessionForkError: With ``.code`` as above and the reference's message.
        """
        with self._lock:
            if child_session_id is not None and (
                child_session_id in self._live or self._backend.exists(child_session_id)
            ):
                raise SessionForkError(
                    "SESSION_ALREADY_EXISTS", f"session {_q(child_session_id)} already exists"
                )
            if isinstance(source, Session):
                live = self._live.get(source.id)
                if live is None:
                    raise SessionForkError(
                        "SESSION_NOT_FOUND", f"session {_q(source.id)} not found in this store"
                    )
                if live is not source:
                    raise SessionForkError(
                        "SESSION_NOT_LIVE", f"session {_q(source.id)} is not live in this store"
                    )
            else:
                found = self._live.get(source) if isinstance(source, str) else None
                if found is None:
                    raise SessionForkError(
                        "SESSION_NOT_FOUND", f"session {source!r} not found in this store"
                    )
                live = found
            sid = live.id
            with live._lock:
                events = list(live._events)
            if boundary is None and not events:
                seed: list[Event] = []
            else:
                b = events[-1]["seq"] if boundary is None else boundary
                if not is_safe_integer(b) or b < 0:
                    raise SessionForkError(
                        "INVALID_BOUNDARY",
                        f"fork boundary for session {_q(sid)} must be a non-negative safe "
                        f"integer, got {b!r}",
                    )
                b = int(b)
                if b >= len(events):
                    last = len(events) - 1 if events else "none"
                    raise SessionForkError(
                        "INVALID_BOUNDARY",
                        f"fork boundary {b} does not exist in session {_q(sid)} (last seq: {last})",
                    )
                if events[b].get("seq") != b:
                    raise SessionForkError(
                        "INVALID_BOUNDARY",
                        f"fork boundary {b} in session {_q(sid)} does not match a contiguous "
                        "event seq",
                    )
                for event in reversed(events[: b + 1]):
                    kind = event.get("type")
                    if kind == "turn/end":
                        break
                    if kind == "turn/start":
                        turn = (
                            event["data"].get("turn") if isinstance(event["data"], dict) else None
                        )
                        raise SessionForkError(
                            "OPEN_TURN",
                            f"fork boundary {b} in session {_q(sid)} ends inside open turn {turn}",
                        )
                seed = events[: b + 1]
            meta: dict[str, Any] = {"parentSession": sid, "seedLength": len(seed)}
            if live.header.cwd is not None:
                meta["cwd"] = live.header.cwd
            return self.create(child_session_id, seed=seed, meta=meta)

    def get(self, session_id: str) -> Session | None:
        """The live session with this id, or ``None``."""
        with self._lock:
            return self._live.get(session_id)

    def sessions(self) -> list[Session]:
        """Every live session, in the order they were created or loaded."""
        with self._lock:
            return list(self._live.values())

    def stored_ids(self) -> list[str]:
        """The ids of every session the backend holds (live or not)."""
        return self._backend.session_ids()

    def load(self, session_id: str) -> Session:
        """Reopen a stored session from the backend's log (SPEC 1.7, 1.8, 6.1).

        The header is kept as stored: ``seedLength`` and ``createdAt`` are never
        recomputed (a seed's length is not the lineage boundary). A torn tail is cut
        off on disk and, when a turn was left open, the closers of
        :func:`interrupted_turn_closers` are appended and persisted. No
        ``session/end-seed`` is added.

        Returns:
            The live session.

        Raises:
            SessionStoreError: The session is already live here, or not stored.
            SessionLogError: The stored log is damaged or fails validation (names the
                file and the event index).
        """
        with self._lock:
            if self._closed:
                raise SessionStoreError("this session store is closed")
            if session_id in self._live:
                raise SessionStoreError(
                    f"session {_q(session_id)} is already live in this store; use get()"
                )
            stored = self._backend.read(session_id)
            if stored is None:
                raise SessionStoreError(
                    f"session {_q(session_id)} not found in {self._backend.describe()}"
                )
            try:
                events = validate_log(stored.events, what="stored event")
            except ValueError as err:
                raise SessionLogError(
                    f"stored session {_q(session_id)} failed validation: {err}",
                    path=stored.source,
                ) from None
            session = Session(self, stored.header, events, persisted=True)
            closers = interrupted_turn_closers(events)
            if closers:
                session._write(closers)
                events.extend(closers)
                for event in closers:
                    session._surface.apply(event["seq"], session._surface.plan(event, events))
            self._live[session_id] = session
            return session
