"""Readable transcripts of a session tree, for snapshot tests (issue: syrupy transcripts).

:func:`render_transcript` turns sessions (a primary and its children) into Markdown: one
section per session, the primary first; per turn the user's message, the assistant's
reasoning and text, its tool calls and their results; a child session is linked from
the tool call that started it. Ids, times and the working directory are normalized
(:class:`~.normalize.Normalizer`), so two runs of the same behaviour
render the same text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from .._format.events import (
    END_SEED,
    SEEDED_FORMAT,
    Event,
    SessionHeader,
    SessionLike,
    SessionLog,
)
from .._format.redact import Redactor, recording_redactor
from .._format.reply import assemble_reply
from .._format.text import visible
from .normalize import Normalizer

__all__ = ["render_transcript", "sessions_as_jsonl"]


def _redacted(sessions: Iterable[SessionLike], redactor: Redactor | None) -> list[SessionLike]:
    """Copies of the sessions with secrets redacted in headers, events and keys."""
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


def _block_text(blocks: Any, kind: str) -> str:
    if isinstance(blocks, str):
        return blocks if kind == "text" else ""
    if not isinstance(blocks, list):
        return ""
    return "".join(
        b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == kind
    )


def _tool_result_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(message, dict) and message.get("role") == "tool":
        # Formats 2-4 (the dsh runtime): the result's own blocks, one per line.
        return _lines(content)
    parts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool-result":
            parts.append(_block_text(block.get("content"), "text"))
    return "\n".join(parts)


def _lines(content: Any) -> str:
    """A message's text blocks, one per line (a string content as it is)."""
    if not isinstance(content, list):
        return _block_text(content, "text")
    return "\n".join(
        b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"
    )


def _seed(session: SessionLike) -> int:
    """How many leading events a fork child inherited (0 for others).

    Formats 0 and 1 say it in the header (``seedLength``); from format 2 on, the seed ends
    at the child's last ``session/end-seed`` marked ``inherited``.
    """
    header = session.header
    if header.format < SEEDED_FORMAT:
        return header.seed_length
    if not header.seeded:
        return 0
    for index in range(len(session.events) - 1, -1, -1):
        event = session.events[index]
        data = event.get("data")
        if event.get("type") == END_SEED and isinstance(data, dict) and data.get("inherited"):
            return index
    return 0


def _first_own_user_text(session: SessionLike) -> str | None:
    """The first text block of a session's first own user message (its task)."""
    for event in session.events[_seed(session) :]:
        if event.get("type") == "user/message":
            data = event.get("data")
            if isinstance(data, dict):
                content = data.get("content")
                if isinstance(content, list):
                    texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
                    return str(texts[0].get("text", "")) if texts else None
                return _block_text(content, "text")
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
        ``*thinking*``), ``**Tool call** `name` `` and ``**Tool result**`` entries; a tool
        call that started a child links to it (``-> child session <id>``). A fork
        child's inherited events are summarized, not repeated. Control characters other
        than newline and tab, U+2028/U+2029 and lone surrogates are shown as visible
        symbols (``\r`` as ``␍``), so the text survives a text file unchanged.
    """
    ordered = _order(_redacted(sessions, redactor))
    cwds = [s.header.cwd for s in ordered if s.header.cwd] + ([cwd] if cwd else [])
    norm = Normalizer(session_ids=[s.header.id for s in ordered], cwds=cwds, aliases=aliases)
    for s in ordered:  # number sessions first, so their placeholders are stable
        norm.text(s.header.id)
    children: dict[str, list[SessionLike]] = {}
    for s in ordered:
        if s.header.parent_session is not None:
            children.setdefault(s.header.parent_session, []).append(s)
    out: list[str] = []
    for s in ordered:
        out.extend(_render_session(s, children.get(s.header.id, []), norm))
    if not out:
        return "*No session was written.*\n"
    # Shown, not obeyed: a text file drops \r, a terminal obeys ESC (see _text.visible).
    return visible("\n".join(out).rstrip("\n") + "\n")


def _render_session(
    session: SessionLike, children: Sequence[SessionLike], norm: Normalizer
) -> list[str]:
    h = session.header
    seed = _seed(session)
    if h.parent_session is None:
        role = "primary"
    else:
        kind = f"fork, seedLength {seed}" if seed else "spawn"
        role = f"child of {norm.text(h.parent_session)}, {kind}"
    lines = [f"# Session {norm.text(h.id)} ({role})", ""]
    if seed:
        lines += [f"*{seed} events inherited from the parent.*", ""]
    unlinked = list(children)
    own = session.events[seed:]
    # Without assistant/message events (a session the model wrapper created), each
    # model call is rendered from its chunks instead.
    from_chunks = not any(e.get("type") == "assistant/message" for e in own)
    call: list[dict[str, Any]] = []
    for event in own:
        if from_chunks and event.get("type") == "assistant/chunk":
            data = event.get("data")
            chunk = data.get("chunk") if isinstance(data, dict) else None
            if isinstance(chunk, dict):
                call.append(chunk)
                if chunk.get("type") == "finish":
                    lines += _render_call(call, unlinked, norm)
                    call = []
            continue
        lines += _render_event(event, unlinked, norm)
    if call:
        lines += _render_call(call, unlinked, norm)
    for child in unlinked:
        lines += [f"-> child session {norm.text(child.header.id)}", ""]
    return lines


def _render_call(
    chunks: list[dict[str, Any]], unlinked: list[SessionLike], norm: Normalizer
) -> list[str]:
    """One model call rendered from its stream chunks."""
    blocks = assemble_reply(chunks).ended
    message = {"message": {"content": blocks}}
    lines = _render_event({"type": "assistant/message", "data": message}, unlinked, norm)
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "tool-call":
            call = {"name": block.get("name"), "arguments": block.get("arguments", "")}
            lines += _render_event({"type": "tool/call", "data": call}, unlinked, norm)
    reason = chunks[-1].get("reason") if chunks[-1].get("type") == "finish" else None
    if isinstance(reason, dict) and reason.get("kind") in ("error", "aborted"):
        failure = reason.get("failure")
        code = failure.get("code") if isinstance(failure, dict) else None
        lines += [f"*Model call failed ({code or reason.get('kind')}).*", ""]
    return lines


def _render_event(event: Event, unlinked: list[SessionLike], norm: Normalizer) -> list[str]:
    kind = event.get("type")
    data = event.get("data")
    if not isinstance(data, dict):
        return []
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
    if kind == "tool/call":
        args = str(data.get("arguments", ""))
        lines = [f"**Tool call** `{data.get('name')}` `{norm.text(args)}`", ""]
        for child in list(unlinked):
            prompt = _first_own_user_text(child)
            if prompt and (prompt in args or orjson.dumps(prompt).decode()[1:-1] in args):
                lines += [f"-> child session {norm.text(child.header.id)}", ""]
                unlinked.remove(child)
                break
        return lines
    if kind == "tool/result":
        return [
            "**Tool result**",
            "",
            _quote(norm.text(_tool_result_text(data.get("message")))),
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
    :func:`render_transcript`.
    """
    ordered = _order(_redacted(sessions, redactor))
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
