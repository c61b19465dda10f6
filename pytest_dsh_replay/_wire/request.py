"""One model request, read once: the request view every layer reads.

A model call's request comes in one of three shapes (one reader covers them, block by
block):

1. the in-process shape: ``{"messages": [...], "system"?, "tools"?, "model"?}`` whose
   messages hold strings or dsh content blocks (``text``, ``reasoning``, ``tool-call``,
   ``tool-result``);
2. an OpenAI chat-completions body: ``system``/``developer``/``user``/``assistant``
   (with ``tool_calls``, ``reasoning_content``)/``tool`` messages, function ``tools``;
3. an Anthropic Messages body: top-level ``system`` (a string or text blocks), ``tools``
   with ``input_schema``, messages whose blocks include ``text``, ``thinking``,
   ``tool_use`` and ``tool_result``.

`RequestView` wraps one request and computes, each once and on first use, what the
layers above read of it: the endpoint's routing (the serialized messages, a fork child's
seed), binding (the opening user texts), recording (the `Conversation`: the
``request/header`` and the messages as dsh events), placeholders (the text corpus) and
text safety (`RequestView.safe` repairs lone surrogates first).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.json_values import ABSENT, plain_json
from .._format.reply import assemble_reply
from .._format.text import text_safe

__all__ = [
    "ASSISTANT",
    "TOOL_RESULT",
    "USER",
    "Conversation",
    "Item",
    "RequestView",
    "answer_message",
    "content_key",
    "opening_texts",
    "opening_units",
    "read_request",
    "request_corpus",
    "seed_messages",
    "tool_result_item",
]

_MAX_RUN: Final = 16  # trailing user messages considered


USER: Final = "user/message"
TOOL_RESULT: Final = "tool/result"
ASSISTANT: Final = "assistant/message"

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


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
class Conversation:
    """What a request shows the model, as the dsh events that log it.

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
    return orjson.dumps(plain_json(value if value is not None else {})).decode()


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
        return {"type": "image", "attachment": plain_json(block.get("image_url"))}
    if kind == "image" and "source" in block and "attachment" not in block:
        return {"type": "image", "attachment": plain_json(block.get("source"))}
    plain = plain_json(block)
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
            content_key(_blocks(block.get("content"))),
            bool(block.get("isError")),
        )
    return (str(kind), _canonical(block))


def content_key(blocks: Iterable[JSONObject]) -> tuple[Any, ...]:
    return tuple(k for k in (_block_key(b) for b in blocks) if k is not None)


def _item(kind: str, role: str, content: list[JSONObject], source: JSONObject) -> Item:
    return Item(
        kind,
        {"content": content, "source": source, "role": role},
        (kind, content_key(content)),
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


def tool_result_item(block: Mapping[str, Any]) -> Item | None:
    kind = block.get("type")
    if kind == "tool-result":
        extra = {
            str(k): plain_json(v)
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
        result = tool_result_item(element) if isinstance(element, Mapping) else None
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
            out["parameters"] = plain_json(value)
        elif not (source is function and key == "type"):
            out[str(key)] = plain_json(value)
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
        config["temperature"] = plain_json(request["temperature"])
    for key in ("maxTokens", "max_completion_tokens", "max_tokens"):
        if request.get(key) is not None:
            config["maxTokens"] = plain_json(request[key])
            break
    for key in ("stop", "stop_sequences"):
        if request.get(key) is not None:
            config["stop"] = plain_json(request[key])
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


def read_request(request: Mapping[str, Any]) -> Conversation:
    """Read a request of any of the three shapes (see the module docstring).

    Args:
        request: The request mapping as the caller passed it (never changed).

    Returns:
        The `Conversation`. The system prompt is the top-level ``system`` and every
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
        return Conversation(None, items)
    header: JSONObject = {"config": _config(request)}
    if system_parts:
        header["system"] = "\n\n".join(system_parts)
    if tools:
        header["tools"] = tools
    return Conversation(header, items)


# --- the text units of a request's opening user messages ----------------------------------


def _units(message: Mapping[str, object]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, Sequence):
        return [
            block["text"]
            for block in content
            if isinstance(block, Mapping)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
    return []


def _trailing_user(messages: object) -> int:
    """The index where the request's trailing run of user messages starts (-1: none)."""
    if isinstance(messages, str) or not isinstance(messages, Sequence):
        return -1
    start = len(messages)
    while start > 0:
        message = messages[start - 1]
        if not (isinstance(message, Mapping) and message.get("role") == "user"):
            break
        start -= 1
    return start if start < len(messages) else -1


def _run(messages: object) -> list[list[str]]:
    start = _trailing_user(messages)
    if start < 0:
        return []
    assert isinstance(messages, Sequence)
    return [_units(message) for message in messages[start:]]


def opening_units(messages: object) -> list[str]:
    """The text units (string contents and text blocks) of the trailing user messages.

    Args:
        messages: A request's ``messages`` (dsh, OpenAI or Anthropic shapes).

    Returns:
        In order; ``[]`` when the request does not end with user messages.
    """
    return [unit for units in _run(messages) for unit in units]


def opening_prefixes(messages: object) -> list[str]:
    """The request's opening up to each of its block boundaries.

    The opening is the first message with text of the trailing run of user messages
    ([docs/scenarios.md#binding](../scenarios.md#binding)); the texts are its text units
    joined up to each boundary, the whole message last. ``[]`` when the request ends otherwise.
    """
    for units in _run(messages):
        if units:
            return list(itertools.accumulate(units))
    return []


def opening_run(messages: object) -> list[str]:
    """The text of each message with text of the trailing run of user messages, in order."""
    return ["".join(units) for units in _run(messages) if units]


def opening_texts(messages: object) -> list[str]:
    """The texts a recorded first user message may equal, the whole run last.

    Starting at each of the trailing user messages (a request may put other user
    messages first), the joined text units up to each block or message boundary.
    """
    run = _run(messages)[-_MAX_RUN:]
    texts: list[str] = []
    for first in range(len(run)):
        joined = ""
        for units in run[first:]:
            for unit in units:
                joined += unit
                texts.append(joined)
    whole = "".join(unit for units in run for unit in units)
    if texts and texts[-1] != whole:
        texts.append(whole)
    return texts


def seed_messages(messages: object) -> list[object]:
    """The messages before the trailing user messages: a fork child's inherited part.

    Leading system messages alone are no seed (``[]``).
    """
    start = _trailing_user(messages)
    if start <= 0:
        return []
    assert isinstance(messages, Sequence)
    seed = list(messages[:start])
    if all(isinstance(m, Mapping) and m.get("role") == "system" for m in seed):
        return []
    return seed


# --- the placeholder corpus ---------------------------------------------------------------


def _leaves(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, Mapping):
        for item in value.values():
            _leaves(item, out)
    elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        for item in value:
            _leaves(item, out)


def request_corpus(messages: object) -> str:
    r"""Join every string leaf of a request's messages into the placeholder corpus.

    Args:
        messages: The request's ``messages`` value: usually a list of message mappings.
            Lists and tuples are walked in order, mappings by value in insertion order;
            strings are kept; every other value (numbers, booleans, ``None``, objects)
            is skipped.

    Returns:
        The leaves joined with ``"\n"``; ``""`` when there is none.
    """
    out: list[str] = []
    _leaves(messages, out)
    return "\n".join(out)


# --- the view -----------------------------------------------------------------------------


def _serialized(message: object) -> bytes:
    return orjson.dumps(message, option=orjson.OPT_SORT_KEYS)


class RequestView(Mapping[str, Any]):
    """One model request and what is read from it, each part computed once, when first read.

    A view is a read-only mapping over the request (``view["messages"]``,
    ``view.get("model")``), so it can be passed wherever a request is; the request
    itself is `body`. What the layers read of it:

    - `messages`: the request's ``messages`` as a list (``[]`` when it is not a
      list or tuple);
    - `message_keys`: each message serialized with sorted keys, after the top-level
      ``system`` when there is one (how the endpoint compares two requests);
    - `openings` and `first_user`: the opening user texts a recorded first
      user message may equal (see `opening_texts`), and the last of them;
    - `seed`: the messages before the trailing user messages (a fork child's
      inherited part; see `seed_messages`);
    - `conversation`: the `Conversation` the recorder logs;
    - `corpus`: the text ``{{fromRequest:...}}`` placeholders search.

    The parts are computed from the request as it is when they are first read; a caller
    that changes the request afterwards must not expect them to follow.

    Args:
        body: The request mapping, as the caller passed it (never changed).
    """

    __slots__ = ("_conversation", "_corpus", "_keys", "_messages", "_openings", "_seed", "body")

    def __init__(self, body: Mapping[str, Any]):
        self.body = body
        self._messages: Any = ABSENT
        self._keys: Any = ABSENT
        self._openings: Any = ABSENT
        self._seed: Any = ABSENT
        self._conversation: Any = ABSENT
        self._corpus: Any = ABSENT

    @classmethod
    def of(cls, request: Mapping[str, Any]) -> RequestView:
        """``request`` itself when it is a view, else a new view of it."""
        return request if isinstance(request, RequestView) else cls(request)

    @classmethod
    def safe(cls, request: Mapping[str, Any]) -> RequestView:
        """A view of ``request`` with lone surrogates replaced (see ``text_safe``).

        The body is ``request`` itself when it holds no surrogate to repair, else a copy.
        """
        body = request.body if isinstance(request, RequestView) else request
        safe = text_safe(body)
        if isinstance(request, RequestView) and safe is body:
            return request
        return cls(safe)

    # --- the mapping --------------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.body)

    def __len__(self) -> int:
        return len(self.body)

    def get(self, key: str, default: Any = None) -> Any:
        """``body.get(key, default)``."""
        return self.body.get(key, default)

    def __repr__(self) -> str:
        return f"RequestView({self.body!r})"

    # --- what is read from it -----------------------------------------------------------

    @property
    def messages(self) -> list[Any]:
        """The request's ``messages`` as a list (``[]`` when it is not a list or tuple)."""
        if self._messages is ABSENT:
            messages = self.body.get("messages")
            if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
                messages = ()
            self._messages = list(messages)
        return self._messages  # type: ignore[no-any-return]

    @property
    def message_keys(self) -> tuple[bytes, ...]:
        """The system prompt and each message, serialized with sorted keys, in order."""
        if self._keys is ABSENT:
            system = self.body.get("system")
            head = [{"role": "system", "content": system}] if system is not None else []
            self._keys = tuple(map(_serialized, [*head, *self.messages]))
        return self._keys  # type: ignore[no-any-return]

    @property
    def openings(self) -> list[str]:
        """`opening_texts` of the messages."""
        if self._openings is ABSENT:
            self._openings = opening_texts(self.body.get("messages"))
        return self._openings  # type: ignore[no-any-return]

    @property
    def opening(self) -> list[str]:
        """`opening_prefixes` of the messages (what a tool call announces)."""
        return opening_prefixes(self.body.get("messages"))

    @property
    def run(self) -> list[str]:
        """`opening_run` of the messages."""
        return opening_run(self.body.get("messages"))

    @property
    def first_user(self) -> str | None:
        """The whole opening user text (the last of `openings`), or ``None``."""
        openings = self.openings
        return openings[-1] if openings else None

    @property
    def seed(self) -> list[object]:
        """`seed_messages` of the messages."""
        if self._seed is ABSENT:
            self._seed = seed_messages(self.body.get("messages"))
        return self._seed  # type: ignore[no-any-return]

    @property
    def seed_keys(self) -> tuple[bytes, ...]:
        """The serialized system head and seed messages (``()``: no seed)."""
        seed = self.seed
        if not seed:
            return ()
        keys = self.message_keys
        return keys[: len(keys) - len(self.messages) + len(seed)]

    @property
    def conversation(self) -> Conversation:
        """The `Conversation` (see `read_request`)."""
        if self._conversation is ABSENT:
            self._conversation = read_request(self.body)
        return self._conversation  # type: ignore[no-any-return]

    @property
    def corpus(self) -> str:
        """`request_corpus` of the messages."""
        if self._corpus is ABSENT:
            self._corpus = request_corpus(self.body.get("messages"))
        return self._corpus  # type: ignore[no-any-return]


# --- an answer as the message that continues it ---------------------------------------------


def answer_message(chunks: Sequence[StreamChunk]) -> JSONObject:
    """A served call's answer as the assistant message of the in-process shape.

    Args:
        chunks: The call's chunks, in order.

    Returns:
        ``{"role": "assistant", "content": text or None, "reasoning_content"?,
        "tool_calls"?: [{"id", "type": "function", "function": {"name", "arguments"}}]}``
        (how a conversation continued by the answer's id goes on).
    """
    reply = assemble_reply(list(chunks))
    texts = [str(b.get("text", "")) for b in reply.content if b.get("type") == "text"]
    reasoning = [str(b.get("text", "")) for b in reply.content if b.get("type") == "reasoning"]
    message: JSONObject = {"role": "assistant", "content": "".join(texts) if texts else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    calls = [
        {
            "id": str(block.get("id") or ""),
            "type": "function",
            "function": {
                "name": str(block.get("name") or ""),
                "arguments": _arguments(block.get("arguments", "")),
            },
        }
        for block in reply.tool_calls
    ]
    if calls:
        message["tool_calls"] = calls
    return message


# --- a message's text: the one reader every layer asks --------------------------------------


def content_texts(content: object, kind: str | None = "text") -> list[str]:
    """The texts of a message's content, in order.

    Args:
        content: A message's ``content``: a string, or a list of content blocks (dsh,
            OpenAI or Anthropic shapes: mappings with ``type`` and ``text``).
        kind: The block type whose texts are read (``"text"``, ``"reasoning"``);
            ``None`` reads every block that has a text.

    Returns:
        A string content as one text (for ``kind="text"`` or ``None``); else the
        ``text`` of each block of that type whose ``text`` is a string. ``[]`` for
        anything else.
    """
    if isinstance(content, str):
        return [content] if kind in ("text", None) else []
    if not isinstance(content, list):
        return []
    return [
        text
        for block in content
        if isinstance(block, Mapping)
        and (kind is None or block.get("type") == kind)
        and isinstance(text := block.get("text"), str)
    ]


def message_text(message: object, separator: str = "") -> str:
    """A message's text: `content_texts` of its ``content`` joined by ``separator``.

    ``""`` when ``message`` is no mapping or has no text.
    """
    content = message.get("content") if isinstance(message, Mapping) else None
    return separator.join(content_texts(content))


__all__ += ["content_texts", "message_text"]
