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


def add_call(
    call_id: str, *, reasoning: str = "think", usage: dict[str, int] | None = None
) -> list[Chunk]:
    """A reasoned call of ``add`` with ``{"a": 2, "b": 3}`` (its arguments in two pieces).

    The usage chunk (default: 5 in, 4 out, 2 cache reads) and a ``tool-calls`` finish
    follow: what the wire tests' agent asks first.
    """
    arguments = '{"a": 2, "b": 3}'
    block = {"type": "tool-call", "id": call_id, "name": "add", "arguments": arguments}
    delta = {"type": "tool-call-delta", "index": 1, "id": call_id}
    return [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        {"type": "reasoning-delta", "index": 0, "text": reasoning},
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": reasoning}},
        {"type": "block-start", "index": 1, "blockType": "tool-call"},
        {**delta, "name": "add", "argumentsDelta": '{"a"'},
        {**delta, "argumentsDelta": ': 2, "b": 3}'},
        {"type": "block-end", "index": 1, "block": block},
        {
            "type": "usage",
            "usage": usage or {"inputTokens": 5, "outputTokens": 4, "cacheReadTokens": 2},
        },
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]


IT_IS_5: list[Chunk] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "It is "},
    {"type": "text-delta", "index": 0, "text": "5."},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "It is 5."}},
    {"type": "usage", "usage": {"inputTokens": 9, "outputTokens": 3}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
"""The answer once ``add`` returned: ``It is 5.`` in two deltas, 9 in and 3 out."""
