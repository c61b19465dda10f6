"""Logged events read back as the conversation items a request shows the model.

The recorder logs each call's conversation (the request's :class:`~.._wire.request.Item` s)
into the calling session; to tell which messages of the next request are new, it reads the
items back from the session's logged events with :func:`surface_item` and compares their
keys.
"""

from __future__ import annotations

from .._format.events import Event
from .._wire.request import ASSISTANT, TOOL_RESULT, USER, Item, content_key, tool_result_item

__all__ = ["surface_item"]


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
