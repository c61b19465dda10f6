"""An answer as the next request quotes it, and whether a re-sent message is that answer.

A client continues a conversation by re-sending the model's answer as an assistant
message. Which session a request continues is told by that message
([docs/wires.md#calling-session](../wires.md#calling-session)): its text and its tool calls.
Some clients give tool calls ids of their own (frameworks that rewrite ids), so an answer is
recognized by its tool calls' names and arguments too, not only by their ids.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import orjson

from .._format.events import ChunkRun, StreamChunk
from .._format.reply import assemble_reply
from .._scripts.entries import materialize_runs

__all__ = [
    "ServedAnswer",
    "ToolCallMark",
    "is_served_answer",
    "message_tool_calls",
    "quotes_answer",
    "runs_tool_call_marks",
    "same_arguments",
    "served_answer",
    "tool_call_marks",
]

_TYPE_KEYS: Final = itertools.repeat("type")
"""The key `_builds_tool_calls` reads of every chunk, as ``map`` takes it."""

ANSWER_ROLES: Final = frozenset({"assistant", "model"})
"""The roles of a re-sent answer (``model`` is Gemini's)."""


@dataclass(frozen=True, slots=True)
class ToolCallMark:
    """One tool call of an answer, as a later request names it.

    Attributes:
        id: The call's id as the client saw it (``""``: none).
        name: The tool's name.
        arguments: The arguments as JSON text (as streamed; compare with
            `same_arguments`, which parses them).
    """

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class ServedAnswer:
    """What a served answer looks like when a later request re-sends it.

    Attributes:
        text: The answer's text (its text blocks joined).
        calls: Its tool calls, in order (ids as the chunks carry them).
        ids: The tool call ids the client saw (the wire's, which may differ from the
            chunks' ids).
    """

    text: str = ""
    calls: tuple[ToolCallMark, ...] = ()
    ids: frozenset[str] = frozenset()


def tool_call_marks(chunks: Iterable[StreamChunk]) -> tuple[ToolCallMark, ...]:
    """The tool calls a call's chunks add up to (the one assembler's ``tool-call`` blocks).

    Args:
        chunks: The call's stream chunks
            ([docs/format.md#stream-chunks](../format.md#stream-chunks)), or only those of
            its tool calls (``block-start``, ``tool-call-delta``, ``block-end``).

    Returns:
        One mark per tool call, in block order; ``()`` without assembling anything when
        no chunk is a ``tool-call-delta`` or ends a ``tool-call`` block (a text answer,
        most calls).
    """
    chunks = chunks if isinstance(chunks, list) else list(chunks)
    if not _builds_tool_calls(chunks):
        return ()
    return tuple(
        ToolCallMark(str(block.get("id") or ""), str(block.get("name") or ""),
                     str(block.get("arguments") or ""))
        for block in assemble_reply(chunks).tool_calls
    )  # fmt: skip


def runs_tool_call_marks(runs: Sequence[ChunkRun]) -> tuple[ToolCallMark, ...]:
    """`tool_call_marks` of the chunks chunk runs stand for (``materialize_runs``).

    Args:
        runs: A call's chunks as stored: chunk objects, and runs of deltas of one block
            (``ChunkRun``); read only.

    Returns:
        As `tool_call_marks`; the chunks are built only when a run is a
        ``tool-call-delta`` run or a chunk object can add a ``tool-call`` block.
    """
    if list not in map(type, runs):  # chunk objects only
        return tool_call_marks(list(runs))
    singles: list[StreamChunk] = []
    for item in runs:
        if item.__class__ is dict:
            singles.append(item)
        elif item[0] == "tool-call-delta":
            return tool_call_marks(materialize_runs(list(runs)))
    if not _builds_tool_calls(singles):
        return ()
    return tool_call_marks(materialize_runs(list(runs)))


def _builds_tool_calls(chunks: list[StreamChunk]) -> bool:
    """Whether a chunk can add a ``tool-call`` block to what the assembler builds.

    The assembler's blocks of that type come from ``tool-call-delta`` chunks or from
    ``block-end`` chunks ending one. The chunks' types are read in one pass without a
    Python frame per chunk (``dict.get`` mapped over them); only the ``block-end``
    chunks are looked into. A chunk that is no ``dict`` (a mapping of another class)
    is read with its own ``get``.
    """
    try:
        kinds = list(map(dict.get, chunks, _TYPE_KEYS))
    except TypeError:  # a chunk is no dict
        kinds = [chunk.get("type") for chunk in chunks]
    if "tool-call-delta" in kinds:
        return True
    at = -1
    for _ in range(kinds.count("block-end")):
        at = kinds.index("block-end", at + 1)
        block = chunks[at].get("block")
        if isinstance(block, Mapping) and block.get("type") == "tool-call":
            return True
    return False


def served_answer(
    chunks: Sequence[StreamChunk], ids: Iterable[str] | None = None, text: str | None = None
) -> ServedAnswer:
    """A served call's answer from its chunks.

    Args:
        chunks: The chunks served (all of them, or only the tool calls' with ``text``).
        ids: The tool call ids the client saw, when the wire named them otherwise than
            the chunks (``None``: the chunks' ids).
        text: The answer's text, when ``chunks`` are not all of them.
    """
    if text is None:
        text = "".join(
            str(chunk.get("text", "")) for chunk in chunks if chunk.get("type") == "text-delta"
        )
    calls = tool_call_marks(chunks)
    seen = frozenset(c.id for c in calls if c.id) if ids is None else frozenset(i for i in ids if i)
    return ServedAnswer(text, calls, seen)


def message_tool_calls(message: Mapping[str, object]) -> tuple[ToolCallMark, ...]:
    """The tool calls a re-sent assistant message names (OpenAI and Anthropic forms)."""
    found: list[ToolCallMark] = []
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        found.append(
            ToolCallMark(
                str(call.get("id") or ""),
                str(function.get("name") or ""),
                _json_text(function.get("arguments")),
            )
        )
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") in ("tool_use", "tool-call"):
            arguments = block.get("input", block.get("arguments"))
            found.append(
                ToolCallMark(
                    str(block.get("id") or ""), str(block.get("name") or ""), _json_text(arguments)
                )
            )
    return tuple(found)


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        return str(value)


def same_arguments(a: str, b: str) -> bool:
    """Whether two tool calls' arguments are the same JSON value (or the same text)."""
    if a == b:
        return True
    try:
        return bool(orjson.loads(a or "null") == orjson.loads(b or "null"))
    except orjson.JSONDecodeError:
        return False


def is_served_answer(message: Mapping[str, object], served: ServedAnswer | None) -> bool:
    """Whether a message that follows a session's latest request is the answer it was served.

    An answer is re-sent as an assistant message. When the served answer called tools
    and the message names tool calls, it names some of the same ids, or, for a client
    that gives tool calls ids of its own, the same tools with the same arguments in the
    same order and the same text.

    Args:
        message: The message after the latest request (any wire's canonical form).
        served: What the session was served (``None``: nothing is known, any
            assistant message counts).
    """
    if message.get("role") not in ANSWER_ROLES:
        return False
    if served is None:
        return True
    named = message_tool_calls(message)
    ids = served.ids
    if not ids or not named:
        return True
    if not ids.isdisjoint(call.id for call in named):
        return True
    from .._wire.request import message_text  # the request reader: not on the replay path

    return (
        len(named) == len(served.calls)
        and all(
            a.name == b.name and same_arguments(a.arguments, b.arguments)
            for a, b in zip(named, served.calls, strict=True)
        )
        and message_text(message) == served.text
    )


def quotes_answer(message: Mapping[str, object], served: ServedAnswer | None) -> bool:
    """Whether a re-sent message is exactly the answer ``served`` (its text and every id).

    Stricter than `is_served_answer`: it tells apart sessions whose latest
    requests were equal by what each was answered.
    """
    if served is None or not (served.text or served.calls):
        return False
    from .._wire.request import message_text  # the request reader: not on the replay path

    if served.text and served.text != message_text(message):
        return False
    return served.ids <= {call.id for call in message_tool_calls(message)}
