"""Which tool call of a parent started a child: its announcement.

A parent starts a child from a tool call (the dsh runtime's ``subagent`` and
``subagent_fork``, an SDK agent's agent-as-tool): the call's arguments hold the task the
child then opens with. A tool call **announces** a child when one of its arguments' string
values is the child's opening up to a block boundary, white space runs compared as one
space ([docs/scenarios.md#announcement](../scenarios.md#announcement)). Only equality
counts: a child whose request repeats its parent's task holds every task that parent hands out.

`announcing` links a child to the earliest tool call of its parent that announces it
and no earlier child took. Recording and replay link by the same function over the same
data: the parent's calls' tool calls (recorded, or as served) and the child's opening.

The dsh runtime also says so in its parent's log: it answers the tool call that started
a child with ``started subagent <child id>`` and logs a ``subagent/catalog`` event
``{childId}`` before that result; `runtime_announcements` reads that.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from .._format.events import Event
from .answers import ToolCallMark

__all__ = [
    "Announcement",
    "announces",
    "announcing",
    "argument_texts",
    "runtime_announcements",
]

_STARTED: Final = re.compile(r"\bstarted subagent ([\w-]+)")
"""The dsh runtime's result of a tool call that started a child: ``started subagent <id>``."""

_MAX_DEPTH: Final = 64  # how deep argument values are searched for strings


@dataclass(frozen=True, slots=True)
class Announcement:
    """The tool call that started a child.

    Attributes:
        call: The parent's call whose answer holds the tool call (1 is the first).
        ordinal: The tool call's place among that answer's tool calls (from 0).
        tool_call: The tool call.
    """

    call: int
    ordinal: int
    tool_call: ToolCallMark

    @property
    def key(self) -> tuple[int, int]:
        """``(call, ordinal)``: what tells two announcements of one parent apart."""
        return (self.call, self.ordinal)


def _normal(text: str) -> str:
    return " ".join(text.split())


def argument_texts(arguments: str) -> list[str]:
    """The string values of a tool call's arguments, white space normalized.

    Arguments that are not JSON count as one string (the text as it is).
    """
    try:
        value: object = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return [_normal(arguments)] if arguments.strip() else []
    texts: list[str] = []
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if item.strip():
                texts.append(_normal(item))
        elif depth < _MAX_DEPTH and isinstance(item, dict):
            stack.extend((v, depth + 1) for v in reversed(item.values()))
        elif depth < _MAX_DEPTH and isinstance(item, list):
            stack.extend((v, depth + 1) for v in reversed(item))
    return texts


def announces(call: ToolCallMark, openings: Iterable[str]) -> bool:
    """Whether a tool call's arguments hold a child's task.

    Args:
        call: The parent's tool call.
        openings: The child's opening up to each block boundary
            (`opening_prefixes`).
    """
    texts = {_normal(text) for text in openings if text.strip()}
    return bool(texts) and any(value in texts for value in argument_texts(call.arguments))


def announcing(
    calls: Sequence[Sequence[ToolCallMark]],
    openings: Sequence[str],
    claimed: Container[tuple[int, int]] = (),
) -> Announcement | None:
    """The earliest tool call among a parent's calls that announces a child.

    Args:
        calls: The tool calls of each of the parent's calls, in call order.
        openings: The child's opening texts.
        claimed: ``(call, ordinal)`` keys already linked to other children.

    Returns:
        The announcement, or ``None`` when no unclaimed tool call announces the child.
    """
    for number, marks in enumerate(calls, start=1):
        for ordinal, mark in enumerate(marks):
            if (number, ordinal) not in claimed and announces(mark, openings):
                return Announcement(number, ordinal, mark)
    return None


def _result_call(message: object) -> str | None:
    """The tool call id a logged ``tool/result`` answers (format 0 blocks or formats 2-5)."""
    if not isinstance(message, dict):
        return None
    own = message.get("toolCallId")
    if isinstance(own, str):
        return own
    content = message.get("content")
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and isinstance(block.get("toolCallId"), str):
            return str(block["toolCallId"])
    return None


def _result_texts(message: object) -> list[str]:
    """The texts of a logged ``tool/result``: its own blocks, and those of its result blocks."""
    from .._wire.request import content_texts  # the request reader: not on the replay path

    content = message.get("content") if isinstance(message, dict) else None
    texts: list[str] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        texts += content_texts([block], kind=None)
        inner = block.get("content") if block.get("type") == "tool-result" else None
        if isinstance(inner, list):
            texts += content_texts(inner, kind=None)
    return texts


def runtime_announcements(events: Sequence[Event]) -> dict[str, str]:
    """Which tool call of a session started each child, as the dsh runtime logs it.

    A tool result ``started subagent <child id>`` names its child; a result that names
    none takes the one ``subagent/catalog`` child logged since the previous result.

    Args:
        events: The parent session's events.

    Returns:
        ``{child id: tool call id}``, in log order; empty for a session that announced
        none.
    """
    found: dict[str, str] = {}
    catalogs: list[str] = []
    for event in events:
        kind, data = event.get("type"), event.get("data")
        if not isinstance(data, dict):
            continue
        if kind == "subagent/catalog" and isinstance(data.get("childId"), str):
            catalogs.append(data["childId"])
        elif kind == "tool/result":
            message = data.get("message")
            call = _result_call(message)
            named = [m for text in _result_texts(message) for m in _STARTED.findall(text)]
            if call is not None and named:
                found.setdefault(named[0], call)
            elif call is not None and len(catalogs) == 1:
                found.setdefault(catalogs[0], call)
            catalogs = []
    return found
