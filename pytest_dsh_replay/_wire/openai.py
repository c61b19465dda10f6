"""dsh stream chunks <-> the OpenAI chat-completions wire (``chat.completion.chunk`` SSE).

Both directions of the OpenAI-compatible route:

- :class:`OpenAIEncoder` turns the chunks of one replayed call into the SSE frames a
  provider sends (``data: {chat.completion.chunk}``, then ``data: [DONE]``), or into one
  ``chat.completion`` object for ``stream: false``.
- :class:`OpenAIDecoder` turns the ``chat.completion.chunk`` objects a live provider
  streams into dsh chunks, for recording (the in-process adapter and the recording
  proxy both use it).
- :func:`openai_failure` classifies an HTTP error response the way recordings name it.

The mapping: the role delta comes first; ``text-delta`` is ``delta.content``,
``reasoning-delta`` is ``delta.reasoning_content``, ``tool-call-delta`` is
``delta.tool_calls[{index, id, type: "function", function: {name, arguments}}]`` where
``index`` counts this call's tool calls (not dsh block indexes); ``usage`` goes in a
last chunk with no choices (when the request asked for it with
``stream_options.include_usage``); the ``finish`` kind is the ``finish_reason``
(``stop``, ``tool_calls``, ``length``, ``content_filter``).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, Final

import orjson

from .._format.events import StreamChunk

__all__ = [
    "CONTEXT_OVERFLOW",
    "OpenAIDecoder",
    "OpenAIEncoder",
    "openai_completion",
    "openai_failure",
    "retry_after_ms",
]

DONE: Final = b"data: [DONE]\n\n"

CONTEXT_OVERFLOW: Final = re.compile(
    r"context[\s_-]*(length|window)|maximum context|maximum (allowed )?(number of )?tokens"
    r"|too many (input )?tokens|prompt is too long|input is too long",
    re.IGNORECASE,
)
"""Wording of a 400/413 that is a context-window overflow, not another bad parameter."""

_FINISH_REASONS: Final = {"stop": "stop", "tool-calls": "tool_calls", "max-tokens": "length"}


def _frame(obj: Mapping[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def openai_usage(usage: Mapping[str, Any]) -> dict[str, Any]:
    """A dsh ``usage`` object as the OpenAI ``usage`` object.

    ``prompt_tokens`` is input plus cached and cache-write tokens; cached tokens go in
    ``prompt_tokens_details.cached_tokens``, reasoning tokens in
    ``completion_tokens_details.reasoning_tokens``.
    """
    read = _int(usage.get("cacheReadTokens")) or 0
    write = _int(usage.get("cacheWriteTokens")) or 0
    prompt = (_int(usage.get("inputTokens")) or 0) + read + write
    completion = _int(usage.get("outputTokens")) or 0
    total = _int(usage.get("totalTokens"))
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total if total is not None else prompt + completion,
    }
    if "cacheReadTokens" in usage:
        out["prompt_tokens_details"] = {"cached_tokens": read}
    reasoning = _int(usage.get("reasoningTokens"))
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return out


class _Tool:
    __slots__ = ("args", "id", "name", "position", "started")

    def __init__(self, position: int):
        self.position = position
        self.id = ""
        self.name = ""
        self.args: list[str] = []
        self.started = False


class OpenAIEncoder:
    """Encodes the chunks of one call as ``chat.completion.chunk`` SSE frames.

    Feed the call's chunks in order to :meth:`feed` (each returns the bytes to send, maybe
    ``b""``) and end with :meth:`close`. A ``finish`` chunk produces the finishing frame;
    the caller handles error finishes (they become HTTP errors or an error event).

    Args:
        model: The ``model`` field of every frame (the request's model).
        completion_id: The ``id`` field of every frame.
        include_usage: Whether a ``usage`` chunk becomes the last frame (OpenAI sends usage
            only when ``stream_options.include_usage`` is true).
    """

    def __init__(self, *, model: str, completion_id: str, include_usage: bool):
        self._head = {"id": completion_id, "object": "chat.completion.chunk", "created": 0}
        self._model = model
        self._include_usage = include_usage
        self._tools: dict[int, _Tool] = {}  # dsh block index -> tool call
        self._texts: dict[int, list[str]] = {}  # dsh block index -> text so far
        self._usage: Mapping[str, Any] | None = None
        self._text: list[str] = []

    def marks(self) -> list[str]:
        """The answer's text and tool call ids so far (how a next request quotes it)."""
        return ["".join(self._text), *sorted(t.id for t in self._tools.values() if t.id)]

    def _chunk(self, delta: Mapping[str, Any], finish: str | None = None) -> bytes:
        return _frame(
            {
                **self._head,
                "model": self._model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    def start(self) -> bytes:
        """The first frame: the assistant role delta."""
        return self._chunk({"role": "assistant", "content": ""})

    def _tool_frame(self, tool: _Tool, args: str) -> bytes:
        call: dict[str, Any] = {"index": tool.position}
        if not tool.started:
            tool.started = True
            call["id"] = tool.id
            call["type"] = "function"
            call["function"] = {"name": tool.name, "arguments": args}
        else:
            call["function"] = {"arguments": args}
        return self._chunk({"tool_calls": [call]})

    def feed(self, chunk: Mapping[str, Any]) -> bytes:
        """The frames for one dsh chunk (``b""`` when it has no wire form of its own)."""
        kind = chunk.get("type")
        if kind == "text-delta":
            self._texts.setdefault(chunk.get("index", 0), []).append(chunk.get("text", ""))
            self._text.append(chunk.get("text", ""))
            return self._chunk({"content": chunk.get("text", "")})
        if kind == "reasoning-delta":
            self._texts.setdefault(chunk.get("index", 0), []).append(chunk.get("text", ""))
            return self._chunk({"reasoning_content": chunk.get("text", "")})
        if kind == "tool-call-delta":
            tool = self._tool(chunk.get("index", 0))
            if not tool.id and isinstance(chunk.get("id"), str):
                tool.id = chunk["id"]
            if not tool.name and isinstance(chunk.get("name"), str):
                tool.name = chunk["name"]
            args = chunk.get("argumentsDelta", "")
            args = args if isinstance(args, str) else ""
            if tool.started:
                return self._tool_frame(tool, args)
            tool.args.append(args)
            if not tool.name:
                return b""  # held back until the name is known
            return self._tool_frame(tool, "".join(tool.args))
        if kind == "block-end":
            return self._block_end(chunk)
        if kind == "usage" and isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        return b""

    def _tool(self, index: Any) -> _Tool:
        tool = self._tools.get(index)
        if tool is None:
            tool = self._tools[index] = _Tool(len(self._tools))
        return tool

    def _block_end(self, chunk: Mapping[str, Any]) -> bytes:
        block = chunk.get("block")
        if not isinstance(block, Mapping):
            return b""
        index = chunk.get("index", 0)
        kind = block.get("type")
        if kind == "tool-call":
            tool = self._tool(index)
            if tool.started:
                return b""
            tool.id = tool.id or str(block.get("id", ""))
            tool.name = tool.name or str(block.get("name", ""))
            held = "".join(tool.args)
            arguments = block.get("arguments")
            return self._tool_frame(tool, arguments if isinstance(arguments, str) else held)
        if kind in ("text", "reasoning") and isinstance(block.get("text"), str):
            sent = "".join(self._texts.get(index, ()))
            text = block["text"]
            if text.startswith(sent) and len(text) > len(sent):
                key = "content" if kind == "text" else "reasoning_content"
                return self._chunk({key: text[len(sent) :]})
        return b""

    def finish(self, reason: Mapping[str, Any]) -> bytes:
        """The finishing frame (and the usage frame), then ``[DONE]``."""
        kind = reason.get("kind")
        wire = _FINISH_REASONS.get(str(kind), "stop")
        if kind == "error" and _failure_code(reason) == "CONTENT_FILTER":
            wire = "content_filter"
        out = self._chunk({}, wire)
        if self._include_usage and self._usage is not None:
            out += _frame(
                {
                    **self._head,
                    "model": self._model,
                    "choices": [],
                    "usage": openai_usage(self._usage),
                }
            )
        return out + DONE

    @staticmethod
    def error_event(message: str, code: str) -> bytes:
        """An in-stream error event (the stream failed after it started), then ``[DONE]``."""
        return _frame({"error": {"message": message, "type": "server_error", "code": code}})


def _failure_code(reason: Mapping[str, Any]) -> str:
    failure = reason.get("failure")
    if isinstance(failure, Mapping) and isinstance(failure.get("code"), str):
        return str(failure["code"])
    return "UNKNOWN"


def openai_completion(
    chunks: list[StreamChunk], *, model: str, completion_id: str
) -> dict[str, Any]:
    """The ``chat.completion`` object (``stream: false``) assembled from a call's chunks."""
    blocks: dict[int, dict[str, Any]] = {}
    parts: dict[int, list[str]] = {}
    tools: dict[int, dict[str, Any]] = {}
    usage: Mapping[str, Any] | None = None
    reason: Mapping[str, Any] = {"kind": "stop"}
    for chunk in chunks:
        kind = chunk.get("type")
        index = chunk.get("index", 0)
        if kind in ("text-delta", "reasoning-delta"):
            parts.setdefault(index, []).append(chunk.get("text", ""))
            blocks.setdefault(index, {"type": kind[: -len("-delta")]})
        elif kind == "tool-call-delta":
            tool = tools.setdefault(index, {"id": "", "name": "", "args": []})
            tool["id"] = tool["id"] or chunk.get("id", "")
            tool["name"] = tool["name"] or chunk.get("name", "")
            tool["args"].append(chunk.get("argumentsDelta", ""))
            blocks.setdefault(index, {"type": "tool-call"})
        elif kind == "block-end" and isinstance(chunk.get("block"), Mapping):
            blocks[index] = dict(chunk["block"])
        elif kind == "usage":
            usage = chunk.get("usage")
        elif kind == "finish":
            reason = chunk.get("reason") or reason
    message: dict[str, Any] = {"role": "assistant", "content": None}
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    for index in sorted(blocks):
        block = blocks[index]
        if block["type"] == "tool-call":
            tool = tools.get(index, {"id": "", "name": "", "args": []})
            arguments = block.get("arguments", "".join(tool["args"]))
            calls.append(
                {
                    "id": block.get("id") or tool["id"],
                    "type": "function",
                    "function": {"name": block.get("name") or tool["name"], "arguments": arguments},
                }
            )
        elif block["type"] in ("text", "reasoning"):
            text = block.get("text", "".join(parts.get(index, ())))
            (texts if block["type"] == "text" else reasoning).append(text)
    if texts:
        message["content"] = "".join(texts)
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    finish = _FINISH_REASONS.get(str(reason.get("kind")), "stop")
    if reason.get("kind") == "error" and _failure_code(reason) == "CONTENT_FILTER":
        finish = "content_filter"
    out: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if usage is not None:
        out["usage"] = openai_usage(usage)
    return out


# --- decoding: what a live provider streams -> dsh chunks ----------------------------------


class _Block:
    __slots__ = ("id", "index", "kind", "name", "named", "parts")

    def __init__(self, index: int, kind: str):
        self.index = index
        self.kind = kind
        self.id = ""
        self.name = ""
        self.named = False  # the name went out on a tool-call-delta
        self.parts: list[str] = []

    def assembled(self) -> dict[str, Any]:
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": text}
        return {"type": self.kind, "text": text}


def _error(message: str, code: str) -> dict[str, Any]:
    return {"kind": "error", "failure": {"message": message, "code": code}}


class OpenAIDecoder:
    """Turns ``chat.completion.chunk`` objects (parsed JSON) into dsh chunks; one per call.

    Block indexes count from 0 in order of first appearance; a block ends (``block-end``
    with the assembled block) when the stream moves on to another block kind, or at the
    end, where every open block ends in index order. :meth:`end` adds the ``usage``
    chunk (when the provider reported usage) and exactly one ``finish``: ``stop``;
    ``tool-calls`` (also for ``stop`` with tool calls); ``max-tokens`` for ``length``;
    otherwise ``error`` with a failure code (``CONTENT_FILTER``, ``OVERLOADED``,
    ``EMPTY_RESPONSE``, ``UNKNOWN``).
    """

    def __init__(self) -> None:
        self._next_index = 0
        self._open: dict[int, _Block] = {}  # dsh index -> open block
        self._tools: dict[int, _Block] = {}  # OpenAI tool index -> its open block
        self._tool_ids: dict[int, str] = {}  # OpenAI tool index -> id, once seen
        self._produced = False
        self._tool_calls = 0
        self._finish_reason: str | None = None
        self._usage: dict[str, int] | None = None

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamChunk]:
        """The dsh chunks for one ``chat.completion.chunk`` object."""
        out: list[StreamChunk] = []
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = dsh_usage(usage)
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                reasoning = delta.get("reasoning_content")
                if not isinstance(reasoning, str):
                    reasoning = delta.get("reasoning")  # some compatible servers
                if isinstance(reasoning, str) and reasoning:
                    self._text(out, "reasoning", reasoning)
                content = delta.get("content")
                if isinstance(content, str) and content:
                    self._text(out, "text", content)
                for call in delta.get("tool_calls") or ():
                    if isinstance(call, Mapping):
                        self._tool_delta(out, call)
            if choice.get("finish_reason"):
                self._finish_reason = str(choice["finish_reason"])
        return out

    def end(self) -> list[StreamChunk]:
        """Close every open block, then ``usage`` (if any) and the ``finish``."""
        out: list[StreamChunk] = []
        self._close(out, lambda block: True)
        if self._usage is not None:
            out.append({"type": "usage", "usage": self._usage})
        out.append({"type": "finish", "reason": self._reason()})
        return out

    @staticmethod
    def failed(failure: dict[str, Any]) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}

    def _start(self, out: list[StreamChunk], kind: str) -> _Block:
        block = _Block(self._next_index, kind)
        self._next_index += 1
        self._open[block.index] = block
        out.append({"type": "block-start", "index": block.index, "blockType": kind})
        return block

    def _close(self, out: list[StreamChunk], which: Callable[[_Block], bool]) -> None:
        for index in sorted(self._open):
            block = self._open[index]
            if which(block):
                del self._open[index]
                out.append({"type": "block-end", "index": index, "block": block.assembled()})
        self._tools = {k: b for k, b in self._tools.items() if b.index in self._open}

    def _text(self, out: list[StreamChunk], kind: str, text: str) -> None:
        self._close(out, lambda block: block.kind != kind)
        block = next(iter(self._open.values()), None) or self._start(out, kind)
        block.parts.append(text)
        self._produced = True
        out.append({"type": f"{kind}-delta", "index": block.index, "text": text})

    def _tool_delta(self, out: list[StreamChunk], call: Mapping[str, Any]) -> None:
        self._close(out, lambda block: block.kind != "tool-call")
        index = call.get("index")
        key = index if isinstance(index, int) else len(self._tool_ids)
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        name = function.get("name") if isinstance(function.get("name"), str) else ""
        arguments = function.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        block = self._tools.get(key)
        first = block is None
        if block is None:
            block = self._start(out, "tool-call")
            self._tools[key] = block
            self._tool_calls += 1
            call_id = call.get("id")
            block.id = (
                (call_id if isinstance(call_id, str) and call_id else "")
                or self._tool_ids.get(key)
                or f"call_{key}"
            )
            self._tool_ids[key] = block.id
        if name and not block.name:
            block.name = name
        if not (first or arguments or (block.name and not block.named)):
            return
        block.parts.append(arguments)
        self._produced = True
        chunk: StreamChunk = {"type": "tool-call-delta", "index": block.index, "id": block.id}
        if block.name and not block.named:
            chunk["name"] = block.name
            block.named = True
        chunk["argumentsDelta"] = arguments
        out.append(chunk)

    def _reason(self) -> dict[str, Any]:
        reason = self._finish_reason
        if reason == "length":
            return {"kind": "max-tokens"}
        if reason == "content_filter":
            return _error(
                "the provider's content filter stopped the completion (finish_reason "
                "'content_filter')",
                "CONTENT_FILTER",
            )
        if reason == "insufficient_system_resource":
            return _error(
                "the provider ran out of resources mid-completion (finish_reason "
                "'insufficient_system_resource')",
                "OVERLOADED",
            )
        if reason in (None, "stop", "tool_calls") and not self._produced:
            return _error(
                "the model returned a completed response with no text, reasoning or tool "
                f"call (finish_reason {reason!r})",
                "EMPTY_RESPONSE",
            )
        if reason == "tool_calls" or (reason == "stop" and self._tool_calls):
            return {"kind": "tool-calls"}
        if reason == "stop":
            return {"kind": "stop"}
        if reason is None:
            return _error(
                "the stream ended without a finish_reason (the response was cut short)",
                "UNKNOWN",
            )
        return _error(f"the model stopped with an unknown finish_reason {reason!r}", "UNKNOWN")


def dsh_usage(usage: Mapping[str, Any]) -> dict[str, int]:
    """An OpenAI ``usage`` object as a dsh ``usage`` (cached input split out)."""
    prompt = _int(usage.get("prompt_tokens")) or 0
    completion = _int(usage.get("completion_tokens")) or 0
    cached = _int(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
    details = usage.get("prompt_tokens_details")
    if cached is None and isinstance(details, Mapping):
        cached = _int(details.get("cached_tokens"))
    reasoning = None
    completion_details = usage.get("completion_tokens_details")
    if isinstance(completion_details, Mapping):
        reasoning = _int(completion_details.get("reasoning_tokens"))
    out = {"inputTokens": max(prompt - (cached or 0), 0), "outputTokens": completion}
    if cached is not None:
        out["cacheReadTokens"] = cached
    if reasoning is not None:
        out["reasoningTokens"] = reasoning
    return out


# --- failures ------------------------------------------------------------------------------


def _body_message(body: Any, status: int) -> str:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"]) or f"HTTP {status}"
        if isinstance(body.get("message"), str) and body["message"]:
            return str(body["message"])
    return f"HTTP {status}"


def _body_code(body: Any) -> Any:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return error.get("code")
        return body.get("code")
    return None


def openai_failure(
    status: int, body: Any, headers: Mapping[str, str], *, message: str | None = None
) -> dict[str, Any]:
    """The dsh failure (``{"message", "code", "status", ...}``) for an HTTP error response.

    Args:
        status: The HTTP status.
        body: The parsed JSON body (``{"error": {"message", "type", "code"}}``), or
            anything else when it was not JSON.
        headers: The response headers (lower-case names): ``retry-after(-ms)`` becomes
            ``providerRetryAfterMs``, ``x-request-id`` becomes ``requestId``.
        message: The message to use instead of the body's.

    Returns:
        ``code`` is ``AUTH`` (401/403), ``RATE_LIMIT`` (429), ``OVERLOADED`` (503/529),
        ``CONTEXT_WINDOW_EXCEEDED`` (400/413 about the context length), else ``UNKNOWN``.
    """
    text = message if message is not None else _body_message(body, status)
    if status in (401, 403):
        code = "AUTH"
    elif status == 429:
        code = "RATE_LIMIT"
    elif status in (503, 529):
        code = "OVERLOADED"
    elif status in (400, 413) and (
        _body_code(body) == "context_length_exceeded" or CONTEXT_OVERFLOW.search(text)
    ):
        code = "CONTEXT_WINDOW_EXCEEDED"
    else:
        code = "UNKNOWN"
    failure: dict[str, Any] = {"message": text, "code": code}
    if 100 <= status <= 599:
        failure["status"] = status
    retry = retry_after_ms(headers)
    if retry is not None:
        failure["providerRetryAfterMs"] = retry
    request_id = headers.get("x-request-id")
    if request_id:
        failure["requestId"] = request_id
    return failure


def retry_after_ms(headers: Mapping[str, str]) -> int | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), as whole ms > 0."""
    raw_ms = headers.get("retry-after-ms")
    seconds: float | None = None
    if raw_ms is not None:
        try:
            seconds = float(raw_ms) / 1000
        except ValueError:
            seconds = None
    raw = headers.get("retry-after")
    if seconds is None and raw is not None:
        try:
            seconds = float(raw)
        except ValueError:
            try:
                seconds = parsedate_to_datetime(raw).timestamp() - time.time()
            except (TypeError, ValueError):
                seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return math.ceil(seconds * 1000)
