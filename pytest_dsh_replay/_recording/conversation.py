"""A model request as the dsh events of the conversation it shows the model.

The recorder logs every call's model-visible conversation the way the harness does: the
system prompt, tools and model settings as a ``request/header``, each message as a
``user/message``, ``tool/result`` or ``assistant/message``. This module is the pure part
of that: it reads a request in any of the three shapes callers send and turns it into a
:class:`RequestView`, and it reads the same items back from logged events, so the
recorder can tell which messages of a request are new.

The three request shapes (one reader covers them, block by block):

1. the in-process shape: ``{"messages": [...], "system"?, "tools"?, "model"?}`` whose
   messages hold strings or dsh content blocks (``text``, ``reasoning``,
   ``tool-call``, ``tool-result``);
2. an OpenAI chat-completions body: ``system``/``developer``/``user``/``assistant``
   (with ``tool_calls``, ``reasoning_content``)/``tool`` messages, function ``tools``;
3. an Anthropic Messages body: top-level ``system`` (a string or text blocks), ``tools``
   with ``input_schema``, messages whose blocks include ``text``, ``thinking``,
   ``tool_use`` and ``tool_result``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .._format.events import Event, JSONObject, StreamChunk

__all__ = [
    "USER",
    "Item",
    "Reply",
    "RequestView",
    "assemble_reply",
    "read_request",
    "surface_item",
]

USER: Final = "user/message"
TOOL_RESULT: Final = "tool/result"
ASSISTANT: Final = "assistant/message"

_MAX_SAFE: Final = 2**53 - 1
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def _plain(value: Any) -> Any:
    """``value`` as lossless JSON: odd types become strings, never an error."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -_MAX_SAFE <= value <= _MAX_SAFE else str(value)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return str(value)


def _canonical(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


@dataclass(frozen=True)
class Item:
    """One model-visible message as the dsh event that logs it.

    Attributes:
        kind: ``"user/message"``, ``"tool/result"`` or ``"assistant/message"``.
        message: The message without its ``id``: ``{"content", "source", "role"}`` (a
            ``tool/result``'s holds exactly one ``tool-result`` block; an assistant's
            source is filled in when it is logged).
        key: What two items are compared by: the role and the content, reasoning and
            empty text left out and tool calls by id and name only (clients send back
            assistant turns without their reasoning and re-serialize arguments).
    """

    kind: str
    message: JSONObject
    key: tuple[Any, ...] = field(compare=False)

    @property
    def call_id(self) -> str | None:
        """A ``tool/result``'s ``callId``."""
        source = self.message.get("source")
        return source.get("callId") if isinstance(source, dict) else None


@dataclass(frozen=True)
class RequestView:
    """What a request shows the model.

    Attributes:
        header: The ``request/header`` header: ``{"config": {"provider", "model",
            "reasoningEffort"?, "temperature"?, "maxTokens"?, "stop"?}, "system"?,
            "tools"?}``; ``None`` when the request sets none of these.
        items: The conversation, in order.
    """

    header: JSONObject | None
    items: list[Item]

    @property
    def provider(self) -> str:
        """The header's ``config.provider`` (``"unknown"`` when the request says none)."""
        return str(self.header["config"]["provider"]) if self.header else "unknown"

    @property
    def model(self) -> str:
        """The header's ``config.model`` (``"unknown"`` when the request says none)."""
        return str(self.header["config"]["model"]) if self.header else "unknown"


# --- content blocks ---------------------------------------------------------------------


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(_plain(value if value is not None else {})).decode()


def _block(block: Any) -> JSONObject | None:
    """One content block in dsh form (``None``: nothing the model sees as content)."""
    if isinstance(block, str):
        return {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind in ("text", "input_text", "output_text"):
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "reasoning":
        return {"type": "reasoning", "text": str(block.get("text", ""))}
    if kind == "thinking":
        return {"type": "reasoning", "text": str(block.get("thinking", ""))}
    if kind == "redacted_thinking":
        return None
    if kind == "tool_use":
        return {
            "type": "tool-call",
            "id": str(block.get("id", "")),
            "name": str(block.get("name", "")),
            "arguments": _arguments(block.get("input")),
        }
    if kind == "image_url":
        return {"type": "image", "attachment": _plain(block.get("image_url"))}
    if kind == "image" and "source" in block and "attachment" not in block:
        return {"type": "image", "attachment": _plain(block.get("source"))}
    plain = _plain(block)
    return plain if isinstance(plain, dict) else None


def _blocks(content: Any) -> list[JSONObject]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if isinstance(content, Mapping):
        content = [content]
    if not isinstance(content, Sequence):
        return [{"type": "text", "text": str(content)}]
    return [b for b in (_block(x) for x in content) if b is not None]


def _block_key(block: JSONObject) -> tuple[Any, ...] | None:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return ("text", text) if text else None
    if kind == "reasoning":
        return None
    if kind == "tool-call":
        return ("tool-call", block.get("id"), block.get("name"))
    if kind == "tool-result":
        return (
            "tool-result",
            block.get("toolCallId"),
            _content_key(_blocks(block.get("content"))),
            bool(block.get("isError")),
        )
    return (str(kind), _canonical(block))


def _content_key(blocks: Iterable[JSONObject]) -> tuple[Any, ...]:
    return tuple(k for k in (_block_key(b) for b in blocks) if k is not None)


def _item(kind: str, role: str, content: list[JSONObject], source: JSONObject) -> Item:
    return Item(
        kind,
        {"content": content, "source": source, "role": role},
        (kind, _content_key(content)),
    )


def _tool_result(
    call_id: str, content: list[JSONObject], is_error: bool, extra: JSONObject | None = None
) -> Item:
    block: JSONObject = {
        "type": "tool-result",
        "toolCallId": call_id,
        "content": content,
        "isError": is_error,
    }
    if extra:
        block.update({k: v for k, v in extra.items() if k not in block})
    return _item(TOOL_RESULT, "user", [block], {"kind": "tool", "callId": call_id})


def _tool_result_block(block: Mapping[str, Any]) -> Item | None:
    kind = block.get("type")
    if kind == "tool-result":
        extra = {
            str(k): _plain(v)
            for k, v in block.items()
            if k not in ("type", "toolCallId", "content", "isError")
        }
        return _tool_result(
            str(block.get("toolCallId", "")),
            _blocks(block.get("content")),
            bool(block.get("isError")),
            extra,
        )
    if kind == "tool_result":
        return _tool_result(
            str(block.get("tool_use_id", "")),
            _blocks(block.get("content")),
            bool(block.get("is_error")),
        )
    return None


def _user_items(raw: Any) -> list[Item]:
    """A user message: its tool results first (one item each), then the rest."""
    if raw is None:
        raw = []
    elif isinstance(raw, str | Mapping) or not isinstance(raw, Sequence):
        raw = [raw]
    items: list[Item] = []
    rest: list[JSONObject] = []
    for element in raw:
        result = _tool_result_block(element) if isinstance(element, Mapping) else None
        if result is not None:
            items.append(result)
            continue
        block = _block(element)
        if block is not None and block != {"type": "text", "text": ""}:
            rest.append(block)
    if rest or not items:
        items.append(_item(USER, "user", rest, {"kind": "user"}))
    return items


def _assistant_item(message: Mapping[str, Any]) -> Item:
    content: list[JSONObject] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        content.append({"type": "reasoning", "text": reasoning})
    content.extend(b for b in _blocks(message.get("content")) if b != {"type": "text", "text": ""})
    calls = message.get("tool_calls")
    for call in calls if isinstance(calls, list | tuple) else []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        content.append(
            {
                "type": "tool-call",
                "id": str(call.get("id", "")),
                "name": str(function.get("name", "")),
                "arguments": _arguments(function.get("arguments")),
            }
        )
    return _item(ASSISTANT, "assistant", content, {"kind": "model"})


def _text_of(content: Any) -> str:
    return "\n\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


# --- the request ---------------------------------------------------------------------------


def _tool_schema(tool: Any) -> JSONObject | None:
    """A tool definition in the harness's shape: ``{name, description, parameters, ...}``."""
    if not isinstance(tool, Mapping):
        return None
    source: Mapping[str, Any] = tool
    function = tool.get("function")
    if tool.get("type") == "function" and isinstance(function, Mapping):
        source = function
    out: JSONObject = {}
    for key, value in source.items():
        if key in ("input_schema", "inputSchema"):
            out["parameters"] = _plain(value)
        elif not (source is function and key == "type"):
            out[str(key)] = _plain(value)
    return out


def _config(request: Mapping[str, Any]) -> JSONObject:
    def text(*keys: str) -> str | None:
        for key in keys:
            value = request.get(key)
            if isinstance(value, str) and value:
                return value
        return None

    config: JSONObject = {
        "provider": text("provider") or "unknown",
        "model": text("model") or "unknown",
    }
    effort = text("reasoningEffort", "reasoning_effort")
    output = request.get("output_config")
    if effort is None and isinstance(output, Mapping) and isinstance(output.get("effort"), str):
        effort = output["effort"]
    if effort:
        config["reasoningEffort"] = effort
    if "temperature" in request and request["temperature"] is not None:
        config["temperature"] = _plain(request["temperature"])
    for key in ("maxTokens", "max_completion_tokens", "max_tokens"):
        if request.get(key) is not None:
            config["maxTokens"] = _plain(request[key])
            break
    for key in ("stop", "stop_sequences"):
        if request.get(key) is not None:
            config["stop"] = _plain(request[key])
            break
    return config


_CONFIG_KEYS: Final = frozenset(
    {
        "provider",
        "model",
        "reasoningEffort",
        "reasoning_effort",
        "output_config",
        "temperature",
        "maxTokens",
        "max_completion_tokens",
        "max_tokens",
        "stop",
        "stop_sequences",
    }
)


def read_request(request: Mapping[str, Any]) -> RequestView:
    """Read a request of any of the three shapes (see the module docstring).

    Args:
        request: The request mapping as the caller passed it (never changed).

    Returns:
        The :class:`RequestView`. The system prompt is the top-level ``system`` and every
        ``system``/``developer`` message, joined by blank lines; a user message's
        ``tool_result``/``tool-result`` blocks become ``tool/result`` items before the
        rest of its content. Values that are not JSON are logged as strings; nothing in
        a request is an error.
    """
    system_parts: list[str] = []
    top = request.get("system")
    if top is not None:
        text = _text_of(top)
        if text:
            system_parts.append(text)
    items: list[Item] = []
    messages = request.get("messages")
    if isinstance(messages, str) or not isinstance(messages, Sequence):
        messages = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        if role in _SYSTEM_ROLES:
            text = _text_of(message.get("content"))
            if text:
                system_parts.append(text)
        elif role == "assistant":
            items.append(_assistant_item(message))
        elif role == "tool":
            call_id = message.get("tool_call_id", message.get("toolCallId", ""))
            is_error = message.get("is_error", message.get("isError", False))
            items.append(
                _tool_result(str(call_id), _blocks(message.get("content")), bool(is_error))
            )
        else:
            items.extend(_user_items(message.get("content")))
    tools_raw = request.get("tools")
    tools = [
        t
        for t in (_tool_schema(x) for x in (tools_raw if isinstance(tools_raw, list) else []))
        if t is not None
    ]
    if not system_parts and not tools and not (_CONFIG_KEYS & request.keys()):
        return RequestView(None, items)
    header: JSONObject = {"config": _config(request)}
    if system_parts:
        header["system"] = "\n\n".join(system_parts)
    if tools:
        header["tools"] = tools
    return RequestView(header, items)


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
            found = _tool_result_block(block)
            if found is not None:
                return found
        return Item(kind, message, (kind, ()))
    return Item(kind, message, (kind, _content_key(blocks)))


# --- the reply ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What one call streamed, assembled as the harness assembles it.

    Attributes:
        content: The content blocks in index order: each ``block-end``'s block, or, for
            a block the stream never ended (a cancelled call), what its deltas built.
        usage: The last ``usage`` chunk's usage, if any.
        finish: The ``finish`` chunk's ``reason``, or ``None``.
        replay_state: The ``finish`` chunk's ``replayState``, if any.
    """

    content: list[JSONObject]
    usage: Any
    finish: JSONObject | None
    replay_state: Any

    @property
    def finish_kind(self) -> str | None:
        """``stop``, ``tool-calls``, ``max-tokens``, ``aborted``, ``error`` or ``None``."""
        kind = self.finish.get("kind") if self.finish else None
        return kind if isinstance(kind, str) else None

    @property
    def tool_calls(self) -> list[JSONObject]:
        """The ``tool-call`` blocks."""
        return [b for b in self.content if b.get("type") == "tool-call"]


_DELTA_BLOCK: Final = {"text-delta": "text", "reasoning-delta": "reasoning"}


def assemble_reply(chunks: Iterable[StreamChunk]) -> Reply:
    """Assemble one call's chunks (see :class:`Reply`)."""
    ended: dict[int, JSONObject] = {}
    partial: dict[int, JSONObject] = {}
    texts: dict[int, list[str]] = {}  # the deltas of a partial block's text, joined last
    usage: Any = None
    finish: JSONObject | None = None
    replay_state: Any = None
    for chunk in chunks:
        kind = chunk.get("type")
        index = chunk.get("index")
        if kind in _DELTA_BLOCK:
            if isinstance(index, int):
                if index not in partial:
                    partial[index] = {"type": _DELTA_BLOCK[kind], "text": ""}
                if index in texts:
                    texts[index].append(str(chunk.get("text", "")))
                else:
                    texts[index] = [str(chunk.get("text", ""))]
        elif kind == "block-end":
            block = chunk.get("block")
            if isinstance(index, int) and isinstance(block, dict):
                ended[index] = block
        elif kind == "tool-call-delta" and isinstance(index, int):
            block = partial.setdefault(
                index, {"type": "tool-call", "id": "", "name": "", "arguments": ""}
            )
            if chunk.get("id"):
                block["id"] = chunk["id"]
            if chunk.get("name"):
                block["name"] = chunk["name"]
            block["arguments"] = str(block.get("arguments", "")) + str(
                chunk.get("argumentsDelta", "")
            )
        elif kind == "usage":
            usage = chunk.get("usage")
        elif kind == "finish":
            reason = chunk.get("reason")
            finish = reason if isinstance(reason, dict) else {}
            replay_state = chunk.get("replayState")
    for index, parts in texts.items():
        if index not in ended:  # a block the stream never ended: what its deltas built
            partial[index]["text"] = "".join(parts)
    blocks = {**partial, **ended}
    return Reply([blocks[i] for i in sorted(blocks)], usage, finish, replay_state)
