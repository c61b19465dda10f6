"""Logged events read back as the conversation items a request shows the model.

The recorder logs each call's conversation (the request's `Item` s)
into the calling session; to tell which messages of the next request are new, it reads the
items back from the session's logged events with `surface_item` and compares their
keys. A new child's lineage is decided the same way: whether its first request starts with
the conversation its parent's completed turns hold (`surface_of`).
"""

from __future__ import annotations

from collections.abc import Iterable

from .._format.events import Event
from .._wire.request import ASSISTANT, TOOL_RESULT, USER, Item, content_key, tool_result_item

__all__ = ["apply_surface", "surface_item", "surface_of"]


def surface_item(event: Event) -> Item | None:
    """The conversation item a logged event stands for (``None`` for other events).

    ``user/message`` data is the message; ``tool/result`` and ``assistant/message``
    carry it under ``message``. A tool result with several ``tool-result`` blocks counts
    as its first.
    """
    kind = event.get("type")
    data = event.get("data")
    if not isinstance(data, dict):
        return None
    message = data if kind == USER else data.get("message")
    if kind not in (USER, TOOL_RESULT, ASSISTANT) or not isinstance(message, dict):
        return None
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    if kind == TOOL_RESULT:
        for block in blocks:
            found = tool_result_item(block)
            if found is not None:
                return found
        return Item(kind, message, (kind, ()))
    return Item(kind, message, (kind, content_key(blocks)))


def apply_surface(surface: list[tuple[int, Item]], event: Event, item: Item) -> None:
    """Add one logged item to a session's model-visible conversation, in place.

    Args:
        surface: ``(seq, item)`` pairs so far.
        event: The event that logged ``item``: its ``surfaceOp`` ``replace`` (``start``
            and ``end`` seqs) replaces that span; otherwise the item is appended.
        item: Its `surface_item`.
    """
    op = event.get("surfaceOp")
    seq = event.get("seq", len(surface))
    if isinstance(op, dict) and op.get("op") == "replace":
        seqs = [s for s, _ in surface]
        try:
            first, last = seqs.index(op["start"]), seqs.index(op["end"])
        except (KeyError, ValueError):
            first, last = len(seqs), len(seqs) - 1
        surface[first : last + 1] = [(seq, item)]
    else:
        surface.append((seq, item))


def surface_of(events: Iterable[Event]) -> list[Item]:
    """The model-visible conversation a run of logged events holds, in order."""
    surface: list[tuple[int, Item]] = []
    for event in events:
        if event.get("type") == "assistant/chunk":
            continue
        item = surface_item(event)
        if item is not None:
            apply_surface(surface, event, item)
    return [item for _, item in surface]
