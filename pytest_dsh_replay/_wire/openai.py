"""dsh stream chunks <-> the OpenAI chat-completions wire (``chat.completion.chunk`` SSE).

Both directions of the OpenAI-compatible route:

- `OpenAIEncoder` turns the chunks of one replayed call into the SSE frames a
  provider sends (``data: {chat.completion.chunk}``, then ``data: [DONE]``), or into one
  ``chat.completion`` object for ``stream: false``.
- `OpenAIDecoder` turns the ``chat.completion.chunk`` objects a live provider
  streams into dsh chunks, for recording (the in-process adapter and the recording
  proxy both use it).
- `openai_failure` classifies an HTTP error response the way recordings name it.

The mapping: the role delta comes first; ``text-delta`` is ``delta.content``,
``reasoning-delta`` is ``delta.reasoning_content``, ``tool-call-delta`` is
``delta.tool_calls[{index, id, type: "function", function: {name, arguments}}]`` where
``index`` counts this call's tool calls (not dsh block indexes); ``usage`` goes in a
last chunk with no choices (when the request asked for it with
``stream_options.include_usage``); the ``finish`` kind is the ``finish_reason``
(``stop``, ``tool_calls``, ``length``, ``content_filter``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.reply import assemble_reply
from .base import (
    CONTEXT_OVERFLOW,
    SDK,
    BaseWire,
    Decoder,
    Encoder,
    Failure,
    WireError,
    delta_run,
    failure_message,
    failure_record,
    failure_status,
    int_field,
    json_items,
    wire_error,
)
from .framing import SSE, Frame
from .shapes import ContentBlock, FailureRecord, Usage

__all__ = [
    "WIRE",
    "OpenAIDecoder",
    "OpenAIEncoder",
    "OpenAIWire",
    "openai_completion",
    "openai_failure",
    "openai_refusal",
]

DONE: Final = SSE.frame(b"[DONE]")

_FINISH_REASONS: Final = {"stop": "stop", "tool-calls": "tool_calls", "max-tokens": "length"}


_DELTA_KEYS: Final = {"text-delta": "content", "reasoning-delta": "reasoning_content"}
"""The delta key of a text chunk's frame, by chunk type."""


def _frame(obj: Mapping[str, object]) -> bytes:
    return SSE.frame(orjson.dumps(obj))


def openai_usage(usage: Usage) -> JSONObject:
    """A dsh ``usage`` object as the OpenAI ``usage`` object.

    ``prompt_tokens`` is input plus cached and cache-write tokens; cached tokens go in
    ``prompt_tokens_details.cached_tokens``, reasoning tokens in
    ``completion_tokens_details.reasoning_tokens``.
    """
    read = int_field(usage.get("cacheReadTokens")) or 0
    write = int_field(usage.get("cacheWriteTokens")) or 0
    prompt = (int_field(usage.get("inputTokens")) or 0) + read + write
    completion = int_field(usage.get("outputTokens")) or 0
    total = int_field(usage.get("totalTokens"))
    out: JSONObject = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": total if total is not None else prompt + completion,
    }
    if "cacheReadTokens" in usage:
        out["prompt_tokens_details"] = {"cached_tokens": read}
    reasoning = int_field(usage.get("reasoningTokens"))
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

    Feed the call's chunks in order to `feed` (each returns the bytes to send, maybe
    ``b""``) and end with `close`. A ``finish`` chunk produces the finishing frame;
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
        self._usage: Usage | None = None
        self._text: list[str] = []
        self._frames: dict[str, tuple[bytes, bytes]] = {}  # delta key -> see _delta_frame

    def marks(self) -> list[str]:
        """The answer's text and tool call ids so far (how a next request quotes it)."""
        return ["".join(self._text), *sorted(t.id for t in self._tools.values() if t.id)]

    def _chunk(self, delta: JSONObject, finish: str | None = None) -> bytes:
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
        call: JSONObject = {"index": tool.position}
        if not tool.started:
            tool.started = True
            call["id"] = tool.id
            call["type"] = "function"
            call["function"] = {"name": tool.name, "arguments": args}
        else:
            call["function"] = {"arguments": args}
        return self._chunk({"tool_calls": [call]})

    def feed(self, chunk: StreamChunk) -> bytes:
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

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The frames of ``chunks`` in order: the bytes `feed` gives each, joined.

        A run of text or reasoning deltas at one index is filled into one frame's bytes
        in a loop ([docs/wires.md#encoded-once](../wires.md#encoded-once)), the rest is fed
        chunk by chunk.
        """
        out: list[bytes] = []
        n = len(chunks)
        i = 0
        while i < n:
            chunk = chunks[i]
            kind = chunk.get("type")
            key = _DELTA_KEYS.get(kind) if kind.__class__ is str else None
            if key is None:
                out.append(self.feed(chunk))
                i += 1
                continue
            end = self._delta_run(key, chunks, i, out)
            if end == i:  # a text that is not a string: as feed() makes it
                out.append(self.feed(chunk))
                end += 1
            i = end
        return b"".join(out)

    def _delta_frame(self, key: str) -> tuple[bytes, bytes]:
        """The bytes of a ``{key: <text>}`` delta frame before and after the text."""
        frame = self._frames.get(key)
        if frame is None:
            whole = self._chunk({key: 0})
            marker = b"{" + orjson.dumps(key) + b":0}"
            at = whole.rindex(marker) + len(marker) - 2  # the delta is the last object
            frame = self._frames[key] = (whole[:at], whole[at + 1 :])
        return frame

    def _delta_run(self, key: str, chunks: Sequence[StreamChunk], i: int, out: list[bytes]) -> int:
        """Encode the run of deltas of ``chunks[i]``'s type and index; the next chunk's index.

        Each frame is the one `feed` makes: ``{key: text}`` as the delta.
        """
        first = chunks[i]
        kind, index = first.get("type"), first.get("index", 0)
        texts = delta_run(chunks, i, kind, index)
        head, tail = self._delta_frame(key)
        dumps = orjson.dumps
        out.extend([head + dumps(text) + tail for text in texts])
        self._texts.setdefault(index, []).extend(texts)
        if kind == "text-delta":
            self._text.extend(texts)
        return i + len(texts)

    def _tool(self, index: int) -> _Tool:
        tool = self._tools.get(index)
        if tool is None:
            tool = self._tools[index] = _Tool(len(self._tools))
        return tool

    def _block_end(self, chunk: StreamChunk) -> bytes:
        block: ContentBlock | None = chunk.get("block")
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

    def finish(self, reason: Mapping[str, object]) -> bytes:
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
        """An in-stream error event (the stream failed after it started)."""
        return _frame({"error": {"message": message, "type": "server_error", "code": code}})

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: an error event carrying its code."""
        code = str(failure.get("code", "UNKNOWN"))
        return self.error_event(str(failure.get("message", "")) or code, code)

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: an ``api_error`` event."""
        return self.error_event(message, "api_error")


def _failure_code(reason: Mapping[str, object]) -> str:
    failure = reason.get("failure")
    if isinstance(failure, Mapping) and isinstance(failure.get("code"), str):
        return str(failure["code"])
    return "UNKNOWN"


def _tool_call(block: Mapping[str, object]) -> JSONObject:
    return {
        "id": block.get("id") or "",
        "type": "function",
        "function": {"name": block.get("name") or "", "arguments": block.get("arguments", "")},
    }


def openai_completion(chunks: list[StreamChunk], *, model: str, completion_id: str) -> JSONObject:
    """The ``chat.completion`` object (``stream: false``) assembled from a call's chunks."""
    reply = assemble_reply(chunks)
    texts = [str(b.get("text", "")) for b in reply.content if b.get("type") == "text"]
    reasoning = [str(b.get("text", "")) for b in reply.content if b.get("type") == "reasoning"]
    calls = [_tool_call(block) for block in reply.tool_calls]
    message: JSONObject = {"role": "assistant", "content": "".join(texts) if texts else None}
    if reasoning:
        message["reasoning_content"] = "".join(reasoning)
    if calls:
        message["tool_calls"] = calls
    reason = reply.finish or {"kind": "stop"}
    finish = _FINISH_REASONS.get(str(reason.get("kind")), "stop")
    if reason.get("kind") == "error" and _failure_code(reason) == "CONTENT_FILTER":
        finish = "content_filter"
    out: JSONObject = {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }
    if reply.usage is not None:
        out["usage"] = openai_usage(reply.usage)
    return out


_OPENAI_TYPES: Final = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    402: ("insufficient_quota", "insufficient_quota"),
    403: ("permission_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def openai_error(failure: Failure) -> WireError:
    """The HTTP error an OpenAI-compatible provider answers for a recorded failure.

    The status comes from `failure_status` (503 for ``OVERLOADED``); the body
    is ``{"error": {"message", "type", "param", "code"}}`` with OpenAI's type and code for
    the status (``context_length_exceeded`` for a context-window overflow).
    """
    status = failure_status(failure, overloaded=503)
    kind, wire_code = _OPENAI_TYPES.get(status, ("server_error", None))
    if failure.get("code") == "CONTEXT_WINDOW_EXCEEDED":
        kind, wire_code = "invalid_request_error", "context_length_exceeded"
    body = {
        "error": {
            "message": failure_message(failure),
            "type": kind,
            "param": None,
            "code": wire_code,
        }
    }
    return wire_error(failure, status, body)


def openai_refusal(status: int, message: str, *, param: str | None = None) -> WireError:
    """The OpenAI API's error for a refused request (the shape the other routes use too).

    ``{"error": {"message", "type": "invalid_request_error", "param", "code": null}}``
    (``type`` is ``server_error`` from 500).
    """
    kind = "server_error" if status >= 500 else "invalid_request_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": None}}
    return wire_error({}, status, body)


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

    def assembled(self) -> ContentBlock:
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": text}
        return {"type": self.kind, "text": text}


def _error(message: str, code: str) -> JSONObject:
    return {"kind": "error", "failure": {"message": message, "code": code}}


class OpenAIDecoder:
    """Turns ``chat.completion.chunk`` objects (parsed JSON) into dsh chunks; one per call.

    Block indexes count from 0 in order of first appearance; a block ends (``block-end``
    with the assembled block) when the stream moves on to another block kind, or at the
    end, where every open block ends in index order. `end` adds the ``usage``
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
        self._usage: Usage | None = None
        self._ended = False
        #: The live completion's ``id``, once read.
        self.response_id: str | None = None

    @property
    def done(self) -> bool:
        """Whether `end` produced the ``finish`` (the answer's end is ``[DONE]``)."""
        return self._ended

    def feed(self, chunk: Mapping[str, object]) -> list[StreamChunk]:
        """The dsh chunks for one ``chat.completion.chunk`` object."""
        out: list[StreamChunk] = []
        if self.response_id is None and isinstance(response_id := chunk.get("id"), str):
            self.response_id = response_id
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = dsh_usage(usage)
        for choice in json_items(chunk.get("choices")):
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
        self._ended = True
        out: list[StreamChunk] = []
        self._close(out, lambda block: True)
        if self._usage is not None:
            out.append({"type": "usage", "usage": self._usage})
        out.append({"type": "finish", "reason": self._reason()})
        return out

    @staticmethod
    def failed(failure: FailureRecord) -> StreamChunk:
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

    def _tool_delta(self, out: list[StreamChunk], call: Mapping[str, object]) -> None:
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

    def _reason(self) -> JSONObject:
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


def dsh_usage(usage: Mapping[str, object]) -> Usage:
    """An OpenAI ``usage`` object as a dsh ``usage`` (cached input split out)."""
    prompt = int_field(usage.get("prompt_tokens")) or 0
    completion = int_field(usage.get("completion_tokens")) or 0
    cached = int_field(usage.get("prompt_cache_hit_tokens"))  # DeepSeek
    details = usage.get("prompt_tokens_details")
    if cached is None and isinstance(details, Mapping):
        cached = int_field(details.get("cached_tokens"))
    reasoning = None
    completion_details = usage.get("completion_tokens_details")
    if isinstance(completion_details, Mapping):
        reasoning = int_field(completion_details.get("reasoning_tokens"))
    out: Usage = {"inputTokens": max(prompt - (cached or 0), 0), "outputTokens": completion}
    if cached is not None:
        out["cacheReadTokens"] = cached
    if reasoning is not None:
        out["reasoningTokens"] = reasoning
    return out


# --- failures ------------------------------------------------------------------------------


def _body_message(body: object, status: int) -> str:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping) and isinstance(error.get("message"), str):
            return str(error["message"]) or f"HTTP {status}"
        if isinstance(body.get("message"), str) and body["message"]:
            return str(body["message"])
    return f"HTTP {status}"


def _body_code(body: object) -> object:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            return error.get("code")
        return body.get("code")
    return None


def openai_failure(
    status: int | None, body: object, headers: Mapping[str, str], *, message: str | None = None
) -> FailureRecord:
    """The dsh failure (``{"message", "code", "status", ...}``) for an HTTP error response.

    Args:
        status: The HTTP status (``None``: not known, a 2xx answer's error body).
        body: The parsed JSON body (``{"error": {"message", "type", "code"}}``), or
            anything else when it was not JSON.
        headers: The response headers (lower-case names): ``retry-after(-ms)`` becomes
            ``providerRetryAfterMs``, ``x-request-id`` becomes ``requestId``.
        message: The message to use instead of the body's.

    Returns:
        ``code`` is ``AUTH`` (401/403), ``RATE_LIMIT`` (429), ``OVERLOADED`` (503/529),
        ``CONTEXT_WINDOW_EXCEEDED`` (400/413 about the context length), else ``UNKNOWN``.
    """
    text = message if message is not None else _body_message(body, status or 0)
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
    return failure_record(text, code, status, headers)


def decode_completion(answer: Mapping[str, object]) -> list[StreamChunk]:
    """The chunks of a whole ``chat.completion`` answer, through the stream decoder."""
    decoder = OpenAIDecoder()
    choices = []
    for choice in json_items(answer.get("choices")):
        if isinstance(choice, Mapping):
            message = dict(choice.get("message") or {})
            calls = message.get("tool_calls")
            if isinstance(calls, list):
                message["tool_calls"] = [
                    {**call, "index": i}
                    for i, call in enumerate(calls)
                    if isinstance(call, Mapping)
                ]
            choices.append({**choice, "delta": message})
    return decoder.feed({"usage": answer.get("usage"), "choices": choices}) + decoder.end()


class OpenAIWire(BaseWire):
    """The OpenAI chat-completions wire (``POST /v1/chat/completions``)."""

    name = "openai"
    routes: tuple[str, ...] = ("/v1/chat/completions", "/chat/completions")
    list_routes: tuple[str, ...] = ("/v1/models", "/models")
    call_id_prefix = "chatcmpl-dsh-replay-"
    upstream_path = "/chat/completions"  # the base URL includes the version segment
    sdk = SDK("openai", "OpenAI", "/v1")

    refusal = staticmethod(openai_refusal)
    error = staticmethod(openai_error)
    decoder: Callable[[], Decoder] = OpenAIDecoder
    decode_whole = staticmethod(decode_completion)
    failure = staticmethod(openai_failure)
    stream_encoder: type[OpenAIEncoder] = OpenAIEncoder  # a streamed answer's encoder
    completion = staticmethod(openai_completion)  # a whole answer's body

    def encoder_options(self, request: Mapping[str, object]) -> tuple[object, ...]:
        """``(include_usage,)``: whether the request asks for the usage frame."""
        options = request.get("stream_options")
        return (isinstance(options, Mapping) and options.get("include_usage") is True,)

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> Encoder:
        """An encoder; usage is sent when the request asks (``stream_options.include_usage``)."""
        (usage,) = self.encoder_options(request)
        return self.stream_encoder(model=model, completion_id=call_id, include_usage=usage is True)

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """The ``chat.completion`` object (`completion`)."""
        return self.completion(chunks, model=model, completion_id=call_id)

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """An ``{"error": {...}}`` event in the stream: its message, code ``UNKNOWN``."""
        error = event.get("error")
        if not isinstance(error, Mapping):
            return None
        return {"message": str(error.get("message") or "stream error"), "code": "UNKNOWN"}

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """``data: [DONE]`` ends the answer."""
        return frame.data == "[DONE]"

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``OPENAI_BASE_URL`` (the root and ``/v1``) and ``OPENAI_API_KEY``.

        ``OPENAI_API_BASE`` carries the same URL for the stacks that read the older
        variable (LlamaIndex, older LangChain), so that they too stay on the endpoint.
        """
        base = f"{root}/v1"
        return {"OPENAI_BASE_URL": base, "OPENAI_API_BASE": base, "OPENAI_API_KEY": api_key}


WIRE: Final = OpenAIWire()
"""The OpenAI chat-completions wire."""
