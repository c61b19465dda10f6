"""The session format's vocabulary: which event types and stream chunks a log may hold.

One table for every reader ([docs/format.md#vocabulary](../format.md#vocabulary)): the
script builder checks each event's type and each stream chunk it derives against it, in the
pass that reads the log, whatever the log came from (plain, projected or packed JSONL, zstd,
a SQLite store).

- Event types: `EVENT_TYPES_V0` and `EVENT_TYPES_V4`, the names each format
  version knows (its `FormatSpec` says which). A log may
  hold another type only on an event marked ``"ignorable": true``; anything else is
  refused (an event replay would silently drop).
- Stream chunks: `CHUNK_FIELDS` lists, per chunk type, the fields it must have and
  the ones it may have, with what each must hold. `chunk_problem` checks one chunk
  against it: an unknown chunk type, a missing or mistyped field, or a field the type
  does not have is refused (a chunk the code under test would otherwise be served).

What stays unchecked because the format leaves it open: ``replayState`` (opaque adapter
metadata, passed through as it is) and any extra fields of the content block a
``block-end`` carries.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias

from .json_values import MAX_SAFE_INTEGER, describe_json, is_count, js_json

__all__ = [
    "CHUNK_FIELDS",
    "EVENT_TYPES_V0",
    "EVENT_TYPES_V4",
    "chunk_problem",
    "unknown_event_problem",
]

EVENT_TYPES_V4: Final[frozenset[str]] = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/attempt",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "deliverables/presented",
        "developer/message",
        "feedback/message-delete",
        "feedback/message-put",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "image/offload",
        "job/registered",
        "job/settled",
        "llm/retry",
        "llm/retry-started",
        "model/selection",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session-log-deepseek/delivery-accepted",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/catalog",
        "subagent/descriptor",
        "subagent/model-selection-policy",
        "system/message",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/ptc-dispatch",
        "tool/ptc-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
        "working-directory/change",
        "workspace/changes",
    }
)
"""The 62 event types of formats 2 to 5 (what the dsh runtime writes). No ``assistant/chunk``:
from format 2 on a call's chunks are embedded in its ``assistant/message`` or
``assistant/attempt``."""

_V4_ONLY: Final = frozenset(
    {"assistant/attempt", "subagent/catalog", "system/message", "developer/message"}
)

EVENT_TYPES_V0: Final[frozenset[str]] = (EVENT_TYPES_V4 - _V4_ONLY) | {
    "assistant/chunk",
    "compact/start",
    "compact/end",
    "compact/summary",
    "steering/message",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
}
"""The event types of formats 0 and 1 (the harness's logs).

The types of formats 2 to 5 except the four those formats introduced
(``assistant/attempt``, ``subagent/catalog``, ``system/message``,
``developer/message``), plus ``assistant/chunk`` (one event per stream chunk), the older
names the runtime still reads (``compact/*``, ``steering/message``) and the code dispatch
events of the harness (``tool/code-dispatch``, ``tool/code-dispatch-start``).
"""


def unknown_event_problem(kind: object) -> str:
    """The message for an event whose type the format does not know (callers add file, line)."""
    if kind.__class__ is not str:
        return f"an event's type must be a string, got {describe_json(kind)}"
    return (
        f"unknown event type {js_json(kind)}: the session format has no such event "
        "(docs/format.md#vocabulary lists the types of each format version); an event of "
        'another type must say "ignorable": true'
    )


# --- stream chunks ------------------------------------------------------------------------

_Check: TypeAlias = Callable[[Any], "str | None"]
"""A field's rule: ``None`` when the value is acceptable, else what was expected."""

_BLOCK_TYPES: Final = ("text", "reasoning", "image", "tool-call", "tool-result")
_FINISH_KINDS: Final = ("stop", "tool-calls", "max-tokens", "aborted", "error")
_USAGE_REQUIRED: Final = ("inputTokens", "outputTokens")
_USAGE_REQUIRED_KEYS: Final = frozenset(_USAGE_REQUIRED)
_USAGE_FIELDS: Final = frozenset(
    {*_USAGE_REQUIRED, "cacheReadTokens", "cacheWriteTokens", "reasoningTokens", "totalTokens"}
)
_BLOCK_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "text": ("text",),
    "reasoning": ("text",),
    "image": ("attachment",),
    "tool-call": ("id", "name", "arguments"),
    "tool-result": ("toolCallId", "content"),
}


def _index(value: object) -> str | None:
    return None if is_count(value) else "a non-negative integer"


def _string(value: object) -> str | None:
    return None if value.__class__ is str else "a string"


def _object(value: object) -> str | None:
    return None if value.__class__ is dict else "an object"


def _one_of(names: tuple[str, ...]) -> str:
    return "one of " + ", ".join(js_json(n) for n in names)


def _block_type(value: object) -> str | None:
    if value.__class__ is str and (value in _BLOCK_TYPES or value.startswith("plugin:")):
        return None
    return _one_of(_BLOCK_TYPES) + ' (or "plugin:<tag>")'


def _block(value: object) -> str | None:
    if value.__class__ is not dict:
        return "a content block object"
    kind = value.get("type")
    if kind.__class__ is str and kind.startswith("plugin:"):
        return None
    fields = _BLOCK_FIELDS.get(kind) if kind.__class__ is str else None
    if fields is None:
        return f"a content block whose type is {_one_of(_BLOCK_TYPES)}"
    for f in fields:
        if f not in value:
            return f"a {js_json(kind)} content block with {', '.join(fields)}"
    return None


def _usage(value: object) -> str | None:
    expected = (
        "a token usage object with inputTokens and outputTokens (and optionally "
        "cacheReadTokens, cacheWriteTokens, reasoningTokens, totalTokens), each a "
        "non-negative integer"
    )
    if value.__class__ is not dict or not value.keys() >= _USAGE_REQUIRED_KEYS:
        return expected
    for key, count in value.items():
        if key not in _USAGE_FIELDS or not is_count(count):
            return expected
    return None


def _reason(value: object) -> str | None:
    if value.__class__ is not dict:
        return f"a finish reason object with kind, {_one_of(_FINISH_KINDS)}"
    kind = value.get("kind")
    if kind.__class__ is not str or kind not in _FINISH_KINDS:
        return f"a finish reason whose kind is {_one_of(_FINISH_KINDS)}"
    if kind in ("aborted", "error"):
        failure = value.get("failure")
        if failure.__class__ is not dict or any(
            failure.get(k).__class__ is not str for k in ("message", "code")
        ):
            return f"a {js_json(kind)} finish reason with failure: {{message, code}}"
    return None


CHUNK_FIELDS: Final[Mapping[str, tuple[Mapping[str, _Check], Mapping[str, _Check]]]] = {
    "block-start": ({"index": _index, "blockType": _block_type}, {}),
    "text-delta": ({"index": _index, "text": _string}, {}),
    "reasoning-delta": ({"index": _index, "text": _string}, {}),
    "tool-call-delta": (
        {"index": _index, "id": _string, "argumentsDelta": _string},
        {"name": _string},
    ),
    "block-end": ({"index": _index, "block": _block}, {}),
    "usage": ({"usage": _usage}, {}),
    "finish": ({"reason": _reason}, {"replayState": _object}),
}
"""Per stream chunk type: ``(required fields, optional fields)``, each field with its rule.

A chunk has ``type`` and exactly these fields
([docs/format.md#stream-chunks](../format.md#stream-chunks)).
"""

# The common chunks, checked by their key sets first.
_TEXT_KEYS: Final = frozenset({"type", "index", "text"})
_DELTAS: Final = frozenset({"text-delta", "reasoning-delta"})
# Per chunk type: its rules, and the key set of a chunk with its required fields only.
_REQUIRED_ONLY: Final[Mapping[str, tuple[frozenset[str], Mapping[str, _Check]]]] = {
    kind: (frozenset({"type", *required}), required) for kind, (required, _) in CHUNK_FIELDS.items()
}


def _required_only(kind: str, chunk: dict[str, Any]) -> bool:
    """Whether ``chunk`` has its type's required fields and no other, each passing its rule.

    The common case, decided by the chunk's key set and the fields' rules alone (a text
    or reasoning delta's rules inline); ``False`` sends the chunk through every rule of
    `chunk_problem`, which words the problem.
    """
    if kind in _DELTAS and chunk.keys() == _TEXT_KEYS:
        index = chunk["index"]
        return (
            chunk["text"].__class__ is str
            and index.__class__ is int
            and 0 <= index <= MAX_SAFE_INTEGER  # the rule of _index (is_count)
        )
    exact = _REQUIRED_ONLY.get(kind)
    if exact is None or chunk.keys() != exact[0]:
        return False
    for key, rule in exact[1].items():  # noqa: SIM110 - a loop: no generator per chunk
        if rule(chunk[key]) is not None:
            return False
    return True


def chunk_problem(chunk: dict[str, Any]) -> str | None:
    """Check one stream chunk against `CHUNK_FIELDS`.

    Args:
        chunk: A parsed stream chunk object.

    Returns:
        ``None`` when the chunk is one the format allows; otherwise a sentence naming
        the chunk type, the field and what was expected (callers add the file and line).
    """
    kind = chunk.get("type")
    if kind.__class__ is not str:
        return f"a stream chunk's type must be a string, got {_shown(kind)}"
    if _required_only(kind, chunk):
        return None
    spec = CHUNK_FIELDS.get(kind)
    if spec is None:
        return (
            f"unknown stream chunk type {js_json(kind)}: expected "
            f"{_one_of(tuple(CHUNK_FIELDS))} (docs/format.md#stream-chunks)"
        )
    required, optional = spec
    for key, rule in required.items():
        if key not in chunk:
            return f"a {kind} chunk needs {key}: {rule(None) or 'a value'}; it has none"
        problem = rule(chunk[key])
        if problem is not None:
            return f"a {kind} chunk's {key} must be {problem}, got {_shown(chunk[key])}"
    for key, value in chunk.items():
        if key == "type" or key in required:
            continue
        extra = optional.get(key)
        if extra is None:
            fields = ", ".join([*required, *(f"{k}?" for k in optional)])
            return f"a {kind} chunk has the unknown field {js_json(key)} (its fields: {fields})"
        problem = extra(value)
        if problem is not None:
            return f"a {kind} chunk's {key} must be {problem}, got {_shown(value)}"
    return None


def _shown(value: object) -> str:
    text = js_json(value)
    return text if len(text) <= 80 else text[:77] + "..."
