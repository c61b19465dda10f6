"""What a picture of a scenario shows, read from its sessions' logs.

`picture_of` turns the sessions of one scenario (a primary and its spawn and fork
children, each a header and its events) into a `Picture`: the session tree, each fork's
seed boundary and what it inherited, every model call's request summary and streamed
answer, the tool call that started each child, and the recorded times
([docs/guide/picture.md](../guide/picture.md)). Secrets are redacted first, as
transcripts redact them. `render_page` (``_report/html.py``) draws it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from .._check.transcript import (
    child_links,
    inherited_length,
    redacted_sessions,
    tool_result_text,
)
from .._errors import DshReplayError
from .._format.events import Event, JSONObject, SessionLike, StreamChunk
from .._format.redact import Redactor
from .._format.reply import assemble_reply, finish_failure
from .._format.stream_records import STREAM_EVENTS, stream_runs
from .._scripts.entries import materialize_runs
from .._wire.request import content_texts

__all__ = [
    "Call",
    "Message",
    "Picture",
    "Request",
    "SessionPicture",
    "ToolCall",
    "picture_of",
]

_SUMMARY_CHARS: Final = 2000
"""How much of a request message's text a picture shows (the answers are shown whole)."""


@dataclass(frozen=True)
class Message:
    """One message of a request: ``role`` (``user``, ``tool``, ``assistant``) and its text."""

    role: str
    text: str


@dataclass(frozen=True)
class Request:
    """What a model call was asked, as far as the log tells.

    Attributes:
        model: The model the last ``request/header`` named, if any.
        system: The system prompt in force (``request/header`` or ``system/message``).
        tools: The names of the tools offered.
        messages: The messages logged since the previous call (the call's new input).
    """

    model: str | None = None
    system: str | None = None
    tools: tuple[str, ...] = ()
    messages: tuple[Message, ...] = ()


@dataclass(frozen=True)
class ToolCall:
    """A tool call of an answer; ``children`` are the sessions (indexes) it started."""

    call_id: str | None
    name: str
    arguments: str
    children: tuple[int, ...] = ()


@dataclass(frozen=True)
class Call:
    """One model call of a session.

    Attributes:
        number: Its place among the session's own calls (1 is the first).
        request: Its request summary.
        reasoning: The reasoning it streamed.
        text: The text it streamed (text blocks joined by a blank line).
        tool_calls: The tool calls it streamed.
        finish: The finish reason (``stop``, ``tool-calls``, ``error RATE_LIMIT``, ...;
            ``none`` when the stream has no finish chunk).
        usage: Its last usage chunk's usage, if any.
        start: When its first chunk was logged, Unix ms (``None``: no times recorded).
        end: When its last chunk (or the event carrying its stream) was logged.
    """

    number: int
    request: Request
    reasoning: str
    text: str
    tool_calls: tuple[ToolCall, ...]
    finish: str
    usage: JSONObject | None
    start: int | None = None
    end: int | None = None


@dataclass(frozen=True)
class SessionPicture:
    """One session of the picture.

    Attributes:
        index: Its place in `Picture.sessions` (the primary is 0).
        id: The recorded session id.
        file: The log it was read from (``session.1.jsonl``), when known.
        parent: The parent's index, ``None`` for a top-level session (or a parent
            that is not part of the scenario).
        role: ``primary``, ``spawn`` or ``fork``.
        version: The log's format version.
        seed_length: The events a fork inherited (0 for others).
        inherited: The messages among those inherited events.
        inherited_calls: The model calls among them.
        calls: The session's own model calls.
        started_by: ``(call number, tool call ordinal)`` of the parent's tool call that
            started it, when the logs tell.
        unlinked: The children no tool call is known to have started (indexes).
        event_count: Its events, seed included.
        span: Its own first and last event times, Unix ms (``None``: no times).
    """

    index: int
    id: str
    file: str | None
    parent: int | None
    role: str
    version: int
    seed_length: int
    inherited: tuple[Message, ...]
    inherited_calls: int
    calls: tuple[Call, ...]
    started_by: tuple[int, int] | None = None
    unlinked: tuple[int, ...] = ()
    event_count: int = 0
    span: tuple[int, int] | None = None


@dataclass(frozen=True)
class Picture:
    """A scenario as a picture shows it.

    Attributes:
        title: What it is a picture of (the scenario's path).
        sessions: Every session, the primary first, then the children in replay order.
    """

    title: str
    sessions: tuple[SessionPicture, ...]

    @property
    def timed(self) -> bool:
        """Whether any session's log recorded event times."""
        return any(s.span is not None for s in self.sessions)

    @property
    def call_count(self) -> int:
        """The model calls over every session."""
        return sum(len(s.calls) for s in self.sessions)

    def children(self, index: int) -> list[SessionPicture]:
        """The sessions whose parent is session ``index``, in order."""
        return [s for s in self.sessions if s.parent == index]


def _short(text: str) -> str:
    if len(text) <= _SUMMARY_CHARS:
        return text
    return f"{text[:_SUMMARY_CHARS]}… ({len(text) - _SUMMARY_CHARS} more characters)"


def _lines(content: object) -> str:
    return "\n".join(content_texts(content))


def _times(events: Sequence[Event]) -> tuple[int, int] | None:
    """The first and last time of ``events``, or ``None`` when the log recorded none.

    A log in the committed form keeps no times: its events read with time 0 (a packed
    row's members with the row's gaps), so a log whose earliest time is 0 has none
    ([docs/guide/picture.md#time-line](../guide/picture.md#time-line)).
    """
    times = [t for e in events if isinstance(t := e.get("time"), int) and not isinstance(t, bool)]
    if not times or min(times) == 0:
        return None
    return times[0], times[-1]


def _stream_start(stream: Sequence[object]) -> int | None:
    """The time of an embedded stream's first record (formats 2-5)."""
    first = stream[0] if stream else None
    if not isinstance(first, dict):
        return None
    time = first.get("time", first.get("time0"))
    return time if isinstance(time, int) and not isinstance(time, bool) else None


def _finish(chunks: Sequence[StreamChunk]) -> str:
    reply = assemble_reply(chunks)
    kind = reply.finish_kind
    if kind is None:
        return "none"
    failure = finish_failure(reply.finish)
    code = failure.get("code") if failure is not None else None
    return f"{kind} {code}" if code else kind


def _call(
    number: int, chunks: Sequence[StreamChunk], request: Request, times: tuple[int | None, ...]
) -> Call:
    reply = assemble_reply(chunks)
    blocks = reply.content
    texts = [str(b.get("text", "")) for b in blocks if b.get("type") == "text"]
    reasoning = [str(b.get("text", "")) for b in blocks if b.get("type") == "reasoning"]
    calls = tuple(
        ToolCall(
            call_id=b["id"] if isinstance(b.get("id"), str) and b.get("id") else None,
            name=str(b.get("name", "")),
            arguments=str(b.get("arguments", "")),
        )
        for b in reply.tool_calls
    )
    usage = reply.usage if isinstance(reply.usage, dict) else None
    start, end = times
    return Call(
        number,
        request,
        "\n\n".join(reasoning),
        "\n\n".join(texts),
        calls,
        _finish(chunks),
        usage,
        start if start else None,
        end if end else None,
    )


@dataclass
class _Walk:
    """The request state and the calls found while walking one session's own events."""

    model: str | None = None
    system: str | None = None
    tools: tuple[str, ...] = ()
    messages: list[Message] = field(default_factory=list)
    chunks: list[StreamChunk] = field(default_factory=list)
    chunk_start: int | None = None
    calls: list[Call] = field(default_factory=list)

    def request(self) -> Request:
        request = Request(self.model, self.system, self.tools, tuple(self.messages))
        self.messages = []
        return request

    def add_call(self, chunks: Sequence[StreamChunk], start: int | None, end: int | None) -> None:
        self.calls.append(_call(len(self.calls) + 1, chunks, self.request(), (start, end)))

    def header(self, data: Mapping[str, object]) -> None:
        header = data.get("header")
        if not isinstance(header, dict):
            return
        config = header.get("config")
        model = config.get("model") if isinstance(config, dict) else None
        self.model = model if isinstance(model, str) else self.model
        system = header.get("system")
        if isinstance(system, str | list):
            self.system = _short(_lines(system))
        tools = header.get("tools")
        if isinstance(tools, list):
            self.tools = tuple(str(t.get("name")) for t in tools if isinstance(t, dict))

    def event(self, event: Event) -> None:
        kind, data = event.get("type"), event.get("data")
        if not isinstance(data, dict):
            return
        if kind == "request/header":
            self.header(data)
        elif kind == "system/message":
            message = data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            self.system = _short(_lines(content))
        elif kind == "user/message":
            self.messages.append(Message("user", _short(_lines(data.get("content")))))
        elif kind == "tool/result":
            self.messages.append(Message("tool", _short(tool_result_text(data.get("message")))))
        elif kind == "assistant/chunk":
            self.chunk(event, data)
        elif kind in STREAM_EVENTS and isinstance(data.get("stream"), list):
            self.stream(event, data["stream"])

    def chunk(self, event: Event, data: Mapping[str, object]) -> None:
        """A chunk event of formats 0 and 1: a call is the run up to its ``finish``."""
        chunk = data.get("chunk")
        if not isinstance(chunk, dict):
            return
        if not self.chunks:
            self.chunk_start = event.get("time")
        self.chunks.append(chunk)
        if chunk.get("type") == "finish":
            self.add_call(self.chunks, self.chunk_start, event.get("time"))
            self.chunks = []

    def stream(self, event: Event, stream: list[object]) -> None:
        """A settled or failed call of formats 2-5: its chunks are the event's stream."""
        kind = str(event.get("type"))
        try:
            chunks = materialize_runs(stream_runs(stream, event_type=kind, source=None, line=None))
        except DshReplayError:  # the reader checked it; a picture shows what it can
            chunks = []
        self.add_call(chunks, _stream_start(stream), event.get("time"))

    def finish(self) -> list[Call]:
        if self.chunks:  # a call the log ends in (no finish chunk)
            self.add_call(self.chunks, self.chunk_start, None)
            self.chunks = []
        return self.calls


def _inherited(events: Sequence[Event]) -> tuple[Message, ...]:
    """The messages among a fork's inherited events."""
    messages: list[Message] = []
    for event in events:
        kind, data = event.get("type"), event.get("data")
        if not isinstance(data, dict):
            continue
        if kind == "user/message":
            messages.append(Message("user", _short(_lines(data.get("content")))))
        elif kind == "tool/result":
            messages.append(Message("tool", _short(tool_result_text(data.get("message")))))
        elif kind == "assistant/message":
            message = data.get("message")
            content = message.get("content") if isinstance(message, dict) else None
            text = "".join(content_texts(content, "text"))
            if text:
                messages.append(Message("assistant", _short(text)))
    return tuple(messages)


def _session(
    index: int,
    session: SessionLike,
    file: str | None,
    parent: int | None,
) -> SessionPicture:
    header = session.header
    seed = inherited_length(session) if header.parent_session is not None else 0
    walk = _Walk()
    for event in session.events[:seed]:  # the request a fork's own calls continue
        walk.event(event)
    inherited_calls = len(walk.finish())
    walk.calls, walk.messages = [], []
    for event in session.events[seed:]:
        walk.event(event)
    if header.parent_session is None:
        role = "primary"
    else:
        role = "fork" if seed or header.seeded else "spawn"
    times = _times(session.events)
    own = _times(session.events[seed:]) if times is not None else None
    return SessionPicture(
        index=index,
        id=header.id,
        file=file,
        parent=parent,
        role=role,
        version=header.format,
        seed_length=seed,
        inherited=_inherited(session.events[:seed]),
        inherited_calls=inherited_calls,
        calls=tuple(walk.finish()),
        event_count=len(session.events),
        span=own,
    )


@dataclass(frozen=True)
class _Ref:
    """A tool call as `child_links` reads it."""

    call_id: str | None
    arguments: str | None


def _linked(pictures: list[SessionPicture], sessions: Sequence[SessionLike]) -> None:
    """Link each child to the tool call of its parent that started it."""
    by_id = {s.header.id: s for s in sessions}
    index_of = {id(s): n for n, s in enumerate(sessions)}
    for n, (picture, session) in enumerate(zip(pictures, sessions, strict=True)):
        children = [sessions[c.index] for c in pictures if c.parent == n]
        if not children:
            continue
        places = [(c.number, k) for c in picture.calls for k in range(len(c.tool_calls))]
        refs = [_Ref(t.call_id, t.arguments) for c in picture.calls for t in c.tool_calls]
        after, unlinked = child_links(session, children, refs, by_id)
        started: dict[tuple[int, int], tuple[int, ...]] = {}
        for item, linked in after.items():
            started[places[item]] = tuple(index_of[id(child)] for child in linked)
            for child in linked:
                child_index = index_of[id(child)]
                pictures[child_index] = replace(pictures[child_index], started_by=places[item])
        calls = tuple(
            replace(
                call,
                tool_calls=tuple(
                    replace(t, children=started.get((call.number, k), ()))
                    for k, t in enumerate(call.tool_calls)
                ),
            )
            for call in picture.calls
        )
        pictures[n] = replace(
            picture, calls=calls, unlinked=tuple(index_of[id(c)] for c in unlinked)
        )


def _parent(index_of: Mapping[str, int], session: SessionLike, index: int) -> int | None:
    """The index of a session's parent: an earlier session of the scenario, else ``None``."""
    parent = index_of.get(session.header.parent_session or "")
    return parent if parent is not None and parent < index else None


def picture_of(
    title: str,
    sessions: Iterable[SessionLike],
    *,
    files: Sequence[str | None] = (),
    redactor: Redactor | None = None,
) -> Picture:
    """The picture of one scenario's sessions.

    Args:
        title: What the picture is of (the scenario's path, for its heading).
        sessions: The scenario's sessions, the primary first, then the children in
            replay order (as a `Scenario` lists them).
        files: Each session's log name, in the same order (missing ones: none known).
        redactor: The secret rules applied first (default: the rules recordings use).

    Returns:
        The picture; a session whose parent is not among ``sessions`` is drawn at the
        top level.
    """
    shown = redacted_sessions(sessions, redactor)
    index_of: dict[str, int] = {}
    for n, s in enumerate(shown):
        index_of.setdefault(s.header.id, n)
    pictures = [
        _session(n, s, files[n] if n < len(files) else None, _parent(index_of, s, n))
        for n, s in enumerate(shown)
    ]
    _linked(pictures, shown)
    return Picture(title, tuple(pictures))
