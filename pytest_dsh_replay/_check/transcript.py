"""Readable transcripts of a session tree, for snapshot tests (issue: syrupy transcripts).

`render_transcript` turns sessions (a primary and its children) into Markdown: one
section per session, the primary first; per turn the user's message, the assistant's
reasoning and text, its tool calls and their results; a child session is linked from
the tool call that started it. Ids, times and the working directory are normalized
(`Normalizer`), so two runs of the same behaviour
render the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

import orjson

from .._format.events import (
    END_SEED,
    Event,
    SessionHeader,
    SessionLike,
    SessionLog,
    StreamChunk,
)
from .._format.redact import Redactor
from .._format.reply import assemble_reply
from .._format.text import visible
from .._identity.announce import announces, runtime_announcements
from .._identity.answers import ToolCallMark
from .._wire.request import content_texts
from .._wire.table import recording_redactor
from .normalize import Normalizer

__all__ = [
    "ToolCallRef",
    "announced_children",
    "child_links",
    "inherited_length",
    "notices_in_announcement_order",
    "redacted_sessions",
    "render_transcript",
    "sessions_as_jsonl",
    "tool_result_text",
]


def redacted_sessions(
    sessions: Iterable[SessionLike], redactor: Redactor | None = None
) -> list[SessionLike]:
    """Copies of the sessions with secrets redacted in headers, events and keys.

    ``redactor`` defaults to the rules recordings use (the built-in patterns, the value of
    ``DSH_RECORD_API_KEY`` and the recording base URLs' credentials).
    """
    rules = recording_redactor() if redactor is None else redactor
    return [
        SessionLog(
            SessionHeader.from_json(rules.redact(s.header.to_json())), rules.redact_events(s.events)
        )
        for s in sessions
    ]


def _order(sessions: Iterable[SessionLike]) -> list[SessionLike]:
    """Top-level sessions first, otherwise the order given (creation order).

    Creation times have millisecond resolution and ids are random, so neither can order
    two children started in the same millisecond the same way on every run.
    """
    return sorted(sessions, key=lambda s: s.header.parent_session is not None)


def _quote(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def _block_text(blocks: object, kind: str) -> str:
    return "".join(content_texts(blocks, kind))


def tool_result_text(message: object) -> str:
    """The text of a logged ``tool/result`` message (format 0 blocks or formats 2-5)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(message, dict) and message.get("role") == "tool":
        # Formats 2-5 (the dsh runtime): the result's own blocks, one per line.
        return _lines(content)
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool-result":
            parts.append(_block_text(block.get("content"), "text"))
    return "\n".join(parts)


def _lines(content: object) -> str:
    """A message's text blocks, one per line (a string content as it is)."""
    return "\n".join(content_texts(content))


def inherited_length(session: SessionLike) -> int:
    """How many leading events a fork child inherited (0 for others).

    Formats 0 and 1 say it in the header (``seedLength``); from format 2 on, the seed ends
    at the child's last ``session/end-seed`` marked ``inherited``.
    """
    header = session.header
    if not header.spec.seeded:
        return header.seed_length
    if not header.seeded:
        return 0
    for index in range(len(session.events) - 1, -1, -1):
        event = session.events[index]
        data = event.get("data")
        if event.get("type") == END_SEED and isinstance(data, dict) and data.get("inherited"):
            return index
    return 0


_SETTLED: Final = "subagent-settled"
"""The ``source.kind`` of a child's settled notice in its parent (a ``user/message``)."""

_MESSAGES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
"""The events that carry a conversation's messages (what a fork child's copy repeats)."""


def announced_children(events: Sequence[Event]) -> dict[str, str]:
    """Which tool call of a session started each child it announced (the dsh runtime's way).

    See `runtime_announcements` ([docs/checks.md#transcripts](../checks.md#transcripts)).

    Returns:
        ``{child id: tool call id}``; empty for a session that announced none.
    """
    return runtime_announcements(events)


def _settled_sender(event: Event) -> str | None:
    """The child whose settled notice ``event`` is (``None`` for any other event)."""
    data = event.get("data")
    source = data.get("source") if isinstance(data, dict) else None
    if event.get("type") != "user/message" or not isinstance(source, dict):
        return None
    if source.get("kind") != _SETTLED:
        return None
    sender = source.get("senderSessionId")
    return sender if isinstance(sender, str) else ""


def notices_in_announcement_order(events: Sequence[Event]) -> list[Event]:
    """``events`` with each run of consecutive settled notices in announcement order.

    Children that finish while their parent's model call is in flight reach the
    parent's next request together, in whichever order the scheduler settled them;
    each such run of ``subagent-settled`` notices is ordered by the id of the tool call
    that announced each child (`announced_children`), notices of children not
    announced last, in their order
    ([docs/checks.md#runtime-log-check](../checks.md#runtime-log-check)).

    Returns:
        A new list holding the same event objects.
    """
    announced = announced_children(events)
    out: list[Event] = []
    run: list[Event] = []

    def flush() -> None:
        def key(event: Event) -> tuple[int, str]:
            call = announced.get(_settled_sender(event) or "")
            return (0, call) if call is not None else (1, "")

        out.extend(sorted(run, key=key))
        run.clear()

    for event in events:
        if _settled_sender(event) is not None:
            run.append(event)
            continue
        flush()
        out.append(event)
    flush()
    return out


def _message_key(event: Event) -> tuple[str, str] | None:
    """What a copy of a message must repeat: its kind and its text (tool calls included)."""
    kind, data = event.get("type"), event.get("data")
    if kind not in _MESSAGES or not isinstance(data, dict):
        return None
    if kind == "user/message":
        return ("user", _lines(data.get("content")))
    if kind == "tool/result":
        return ("tool", tool_result_text(data.get("message")))
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    calls = [
        [b.get("name"), b.get("arguments")]
        for b in (content if isinstance(content, list) else [])
        if isinstance(b, dict) and b.get("type") == "tool-call"
    ]
    return ("assistant", orjson.dumps([_block_text(content, "text"), calls]).decode())


def _copied(session: SessionLike, parent: SessionLike | None, seed: int) -> set[int]:
    """The indexes (in the session's own events) of the messages it copied from its parent.

    A fork child's seed is its parent's history up to the fork; a request may repeat
    more of it (the parent's open turn: its latest user message, tool calls and
    results) before the child's own question. Those leading messages, equal in order to
    the parent's messages that follow the seed, are the parent's, not the child's.
    """
    if parent is None or not seed:
        return set()
    theirs = [k for k in map(_message_key, parent.events) if k is not None]
    inherited = [k for k in map(_message_key, session.events[:seed]) if k is not None]
    if theirs[: len(inherited)] != inherited:
        return set()
    rest = theirs[len(inherited) :]
    copied: set[int] = set()
    for index, event in enumerate(session.events[seed:]):
        key = _message_key(event)
        if key is None:
            continue
        if len(copied) >= len(rest) or key != rest[len(copied)]:
            break
        copied.add(index)
    return copied


def _task(own: Sequence[Event], copied: set[int]) -> str | None:
    """The first text block of a session's first own user message (its task)."""
    for index, event in enumerate(own):
        if event.get("type") == "user/message" and index not in copied:
            data = event.get("data")
            if isinstance(data, dict):
                content = data.get("content")
                texts = content_texts(content)
                if isinstance(content, list):
                    return texts[0] if texts else None
                return "".join(texts)
    return None


def render_transcript(
    sessions: Iterable[SessionLike],
    *,
    cwd: str | None = None,
    redactor: Redactor | None = None,
    aliases: Mapping[str, str] | None = None,
) -> str:
    r"""Render sessions as a Markdown transcript.

    Args:
        sessions: The sessions of one scenario (each with ``.header`` and ``.events``),
            in the order they were created (a store's ``sessions()`` order).
        cwd: A working directory to show as ``{{cwd}}`` (the sessions' own ``cwd``
            headers are always replaced).
        redactor: The secret rules applied before rendering (default: the built-in
            rules and the value of ``DSH_RECORD_API_KEY``).
        aliases: ``{recorded id: live id}`` of replayed sessions: a recorded id in the
            text (a replayed answer naming a child) is shown as that session's own.

    Returns:
        Markdown text ending in a newline: ``# Session <id> (primary)``, then
        ``## Turn <n>`` sections with ``**User**``, ``**Assistant**`` (reasoning as
        ``*thinking*``), ``**Tool call** `name` `` and ``**Tool result**`` entries. A
        child is linked (``-> child session <id>``) after the tool call that started it
        ([docs/checks.md#transcripts](../checks.md#transcripts): the runtime's announcement,
        else the call that announces its task,
        [docs/scenarios.md#announcement](../scenarios.md#announcement)), else at the end of
        its parent. A fork child's inherited events, and the messages of its parent it
        repeats after them, are summarized, not repeated. Control characters other than
        newline and tab, U+2028/U+2029 and lone surrogates are shown as visible symbols
        (``\r`` as ``␍``), so the text survives a text file unchanged.
    """
    ordered = _order(redacted_sessions(sessions, redactor))
    cwds = [s.header.cwd for s in ordered if s.header.cwd] + ([cwd] if cwd else [])
    norm = Normalizer(session_ids=[s.header.id for s in ordered], cwds=cwds, aliases=aliases)
    for s in ordered:  # number sessions first, so their placeholders are stable
        norm.text(s.header.id)
    children: dict[str, list[SessionLike]] = {}
    by_id = {s.header.id: s for s in ordered}
    for s in ordered:
        if s.header.parent_session is not None:
            children.setdefault(s.header.parent_session, []).append(s)
    out: list[str] = []
    for s in ordered:
        parent = by_id.get(s.header.parent_session or "")
        out.extend(_render_session(s, parent, children.get(s.header.id, []), by_id, norm))
    if not out:
        return "*No session was written.*\n"
    # Shown, not obeyed: a text file drops \r, a terminal obeys ESC (see _text.visible).
    return visible("\n".join(out).rstrip("\n") + "\n")


@dataclass
class _Item:
    """One rendered entry of a session: its lines, and what a child link may follow."""

    lines: list[str]
    call_id: str | None = None  # a tool call: its id, when the log names one
    arguments: str | None = None  # a tool call: its arguments (a child's task may be there)


def _render_session(
    session: SessionLike,
    parent: SessionLike | None,
    children: Sequence[SessionLike],
    sessions: Mapping[str, SessionLike],
    norm: Normalizer,
) -> list[str]:
    h = session.header
    seed = inherited_length(session)
    if h.parent_session is None:
        role = "primary"
    else:
        kind = f"fork, seedLength {seed}" if seed else "spawn"
        role = f"child of {norm.text(h.parent_session)}, {kind}"
    lines = [f"# Session {norm.text(h.id)} ({role})", ""]
    if seed:
        lines += [f"*{seed} events inherited from the parent.*", ""]
    copied = _copied(session, parent, seed)
    note = None
    if copied and h.parent_session is not None:
        note = (
            f"*{len(copied)} more message(s) of {norm.text(h.parent_session)} repeated "
            "here (shown in its session).*"
        )
    items = _items(session.events[seed:], copied, norm, note)
    after, unlinked = child_links(session, children, items, sessions)
    for index, item in enumerate(items):
        lines += item.lines
        for child in after.get(index, []):
            lines += [f"-> child session {norm.text(child.header.id)}", ""]
    for child in unlinked:
        lines += [f"-> child session {norm.text(child.header.id)}", ""]
    return lines


class ToolCallRef(Protocol):
    """What `child_links` reads of an entry that may be a tool call."""

    @property
    def call_id(self) -> str | None:
        """The tool call's id, when the log names one (``None``: not a tool call or no id)."""
        ...

    @property
    def arguments(self) -> str | None:
        """The tool call's arguments (``None``: not a tool call)."""
        ...


def child_links(
    session: SessionLike,
    children: Sequence[SessionLike],
    items: Sequence[ToolCallRef],
    sessions: Mapping[str, SessionLike],
) -> tuple[dict[int, list[SessionLike]], list[SessionLike]]:
    """Which of a session's tool calls started each of its children.

    First the tool call the parent announced it from as the dsh runtime logs it
    (`announced_children`); else the first tool call that announces the child's
    task ([docs/scenarios.md#announcement](../scenarios.md#announcement): one of its
    arguments is the task; each such call links one child), as recording and replay link a
    child; else nowhere. Transcripts and the picture of a scenario
    ([docs/guide/picture.md](../guide/picture.md)) link children by it.

    Args:
        session: The parent session.
        children: Its children, in creation order.
        items: The parent's entries in order; those that are tool calls have arguments.
        sessions: Every session of the scenario by id (a child's parent is looked up).

    Returns:
        ``{item index: children linked after it}`` and the children linked nowhere, in
        the order given.
    """
    announced = announced_children(session.events)
    calls = {item.call_id: n for n, item in enumerate(items) if item.call_id is not None}
    after: dict[int, list[SessionLike]] = {}
    unlinked: list[SessionLike] = []
    for child in children:
        call = announced.get(child.header.id)
        if call is not None and call in calls:
            after.setdefault(calls[call], []).append(child)
        else:
            unlinked.append(child)
    tasks = {id(child): _child_task(child, sessions) for child in unlinked}
    for n, item in enumerate(items):
        args = item.arguments
        if args is None or n in after:
            continue
        for child in unlinked:
            prompt = tasks[id(child)]
            if prompt and announces(ToolCallMark("", "", args), [prompt]):
                after[n] = [child]
                unlinked.remove(child)
                break
    return after, unlinked


def _child_task(child: SessionLike, sessions: Mapping[str, SessionLike]) -> str | None:
    """A child's task: its first own user message that is no copy of its parent's."""
    seed = inherited_length(child)
    parent = sessions.get(child.header.parent_session or "")
    return _task(child.events[seed:], _copied(child, parent, seed))


def _items(
    own: Sequence[Event], copied: set[int], norm: Normalizer, note: str | None
) -> list[_Item]:
    """The rendered entries of a session's own events.

    The ``copied`` messages (indexes in ``own``) are left out, ``note`` says so where
    the first of them was. Runs of settled notices come in announcement order
    (`notices_in_announcement_order`). Without ``assistant/message`` events (a
    session the model wrapper created), each model call is rendered from its chunks.
    """
    from_chunks = not any(e.get("type") == "assistant/message" for e in own)
    items: list[_Item] = []
    call: list[StreamChunk] = []
    shown = {id(event): index for index, event in enumerate(own)}
    for event in notices_in_announcement_order(own):
        if shown[id(event)] in copied:
            if note is not None:
                items.append(_Item([note, ""]))
                note = None
            continue
        if from_chunks and event.get("type") == "assistant/chunk":
            data = event.get("data")
            chunk = data.get("chunk") if isinstance(data, dict) else None
            if isinstance(chunk, dict):
                call.append(chunk)
                if chunk.get("type") == "finish":
                    items += _render_call(call, norm)
                    call = []
            continue
        items += _render_event(event, norm)
    if call:
        items += _render_call(call, norm)
    return items


def _render_call(chunks: list[StreamChunk], norm: Normalizer) -> list[_Item]:
    """One model call rendered from its stream chunks."""
    blocks = assemble_reply(chunks).ended
    message = {"message": {"content": blocks}}
    items = _render_event({"type": "assistant/message", "data": message}, norm)
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool-call":
            call = {
                "callId": block.get("id"),
                "name": block.get("name"),
                "arguments": block.get("arguments", ""),
            }
            items += _render_event({"type": "tool/call", "data": call}, norm)
    reason = chunks[-1].get("reason") if chunks[-1].get("type") == "finish" else None
    if isinstance(reason, dict) and reason.get("kind") in ("error", "aborted"):
        failure = reason.get("failure")
        code = failure.get("code") if isinstance(failure, dict) else None
        items.append(_Item([f"*Model call failed ({code or reason.get('kind')}).*", ""]))
    return items


def _render_event(event: Event, norm: Normalizer) -> list[_Item]:
    kind = event.get("type")
    data = event.get("data")
    if not isinstance(data, dict):
        return []
    if kind == "tool/call":
        args = str(data.get("arguments", ""))
        call_id = data.get("callId")
        return [
            _Item(
                [f"**Tool call** `{data.get('name')}` `{norm.text(args)}`", ""],
                call_id=call_id if isinstance(call_id, str) else None,
                arguments=args,
            )
        ]
    lines = _event_lines(kind, data, norm)
    return [_Item(lines)] if lines else []


def _event_lines(kind: object, data: Mapping[str, object], norm: Normalizer) -> list[str]:
    """The lines of an event that no child link can follow."""
    if kind == "turn/start":
        return [f"## Turn {data.get('turn')}", ""]
    if kind == "user/message":
        return ["**User**", "", _quote(norm.text(_lines(data.get("content")))), ""]
    if kind == "assistant/message":
        message = data.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        lines: list[str] = []
        thinking = _block_text(content, "reasoning")
        if thinking:
            lines += ["**Assistant** *thinking*", "", _quote(norm.text(thinking)), ""]
        text = _block_text(content, "text")
        if text:
            lines += ["**Assistant**", "", _quote(norm.text(text)), ""]
        return lines
    if kind == "tool/result":
        return [
            "**Tool result**",
            "",
            _quote(norm.text(tool_result_text(data.get("message")))),
            "",
        ]
    if kind == "llm/retry":
        failure = data.get("failure")
        code = failure.get("code") if isinstance(failure, dict) else None
        return [f"*Model call failed ({code or 'error'}); retried.*", ""]
    if kind == "turn/end":
        reason = data.get("reason")
        end = reason.get("kind") if isinstance(reason, dict) else reason
        return [] if end == "completed" else [f"*Turn ended: {end}.*", ""]
    return []


def sessions_as_jsonl(
    sessions: Iterable[SessionLike],
    *,
    redactor: Redactor | None = None,
    aliases: Mapping[str, str] | None = None,
) -> str:
    """Sessions as normalized JSON lines: each header, then its events (ids, times, cwd).

    The format of the raw-event snapshot: one compact JSON value per line, a blank line
    between sessions, the primary first. Envelopes (``seq``, ``time``) are dropped, so
    packing and timing never show. Secrets are redacted first (``redactor``; default:
    the built-in rules and the value of ``DSH_RECORD_API_KEY``). ``aliases`` as for
    `render_transcript`.
    """
    ordered = _order(redacted_sessions(sessions, redactor))
    norm = Normalizer(
        session_ids=[s.header.id for s in ordered],
        cwds=[s.header.cwd for s in ordered if s.header.cwd],
        aliases=aliases,
    )
    blocks: list[str] = []
    for s in ordered:
        lines = [orjson.dumps(norm.header(s.header)).decode()]
        lines += [orjson.dumps(norm.event(e)).decode() for e in s.events]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
