"""Stream chunks and the events that log them: the shapes most tests need."""

from __future__ import annotations

from typing import Any

from pytest_dsh_replay import ChunksEntry

Chunk = dict[str, Any]

STOP: Chunk = {"type": "finish", "reason": {"kind": "stop"}}


def text_call(text: str, *, usage: dict[str, int] | None = None) -> list[Chunk]:
    """One finished call streaming ``text`` in one delta (with a ``usage`` chunk if given)."""
    chunks: list[Chunk] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
    ]
    if usage is not None:
        chunks.append({"type": "usage", "usage": dict(usage)})
    chunks.append(dict(STOP))
    return chunks


def text_entry(text: str, *, usage: dict[str, int] | None = None) -> ChunksEntry:
    """:func:`text_call` as a replay entry."""
    return ChunksEntry(text_call(text, usage=usage))


def chunk_events(
    chunks: list[Chunk], *, turn: int = 1, step: int = 1, first_seq: int | None = None
) -> list[dict[str, Any]]:
    """The ``assistant/chunk`` events that log ``chunks`` (``seq``/``time`` when asked)."""
    events: list[dict[str, Any]] = []
    for n, chunk in enumerate(chunks):
        event: dict[str, Any] = {"type": "assistant/chunk"}
        if first_seq is not None:
            event["seq"] = first_seq + n
            event["time"] = 0
        event["data"] = {"turn": turn, "step": step, "chunk": chunk}
        events.append(event)
    return events


def user_event(text: str, seq: int) -> dict[str, Any]:
    """A ``user/message`` event holding one text block (``time`` 0)."""
    return {
        "type": "user/message",
        "seq": seq,
        "time": 0,
        "data": {"role": "user", "content": [{"type": "text", "text": text}]},
    }
