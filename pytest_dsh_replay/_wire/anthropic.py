"""dsh stream chunks <-> the Anthropic Messages wire (``/v1/messages`` SSE).

This is the wire the dsh runtime's ``deepseek-official`` route speaks, and the one the
``anthropic`` SDK reads:

- `AnthropicEncoder` turns the chunks of one replayed call into the events a
  provider sends: ``message_start``; per block ``content_block_start`` /
  ``content_block_delta`` (``text_delta``, ``thinking_delta``, ``input_json_delta``) /
  ``content_block_stop``; ``message_delta`` with the ``stop_reason`` and usage;
  ``message_stop``. Each frame is ``event: <type>`` + ``data: <json>``.
- `anthropic_message` assembles the ``message`` object of ``stream: false``.
- `read_thread` reads a request that continues a server-held thread
  (``thread: {"type": "continue", "previous_message_id"}``, what the SDK's tool runner
  sends by default) as the whole conversation it continues.
- `AnthropicDecoder` maps a live provider's events back to dsh chunks the way
  the dsh runtime does, for recording; `anthropic_failure` classifies an HTTP error
  response with the runtime's failure codes.

Block indexes on the wire count the blocks started so far. A ``tool-call`` block starts
on the wire at its first ``tool-call-delta`` that names the tool (``content_block_start``
needs the id and name); the runtime turns that start back into the first delta, so a
recorded first delta's empty ``argumentsDelta`` has no frame of its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import urlsplit

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.reply import assemble_reply
from .base import (
    CONTEXT_OVERFLOW,
    SDK,
    BadRequest,
    BaseWire,
    Failure,
    History,
    WireError,
    failure_message,
    failure_status,
    feed_each,
    int_field,
    join_path,
    json_items,
    retry_after_ms,
    sent_marks,
    wire_error,
    with_model,
)
from .framing import SSE, Frame
from .shapes import ContentBlock, FailureRecord, Usage

__all__ = [
    "WIRE",
    "AnthropicDecoder",
    "AnthropicEncoder",
    "AnthropicWire",
    "answer_content",
    "anthropic_failure",
    "anthropic_message",
    "anthropic_refusal",
    "messages_url",
    "read_thread",
    "thread_not_found",
]

_STOP_REASONS: Final = {"stop": "end_turn", "tool-calls": "tool_use", "max-tokens": "max_tokens"}
_FROM_STOP: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
}
_WIRE_BLOCK: Final = {"text": "text", "reasoning": "thinking", "tool-call": "tool_use"}
_EVENT_ERROR_TYPES: Final = {
    "RATE_LIMIT": "rate_limit_error",
    "AUTH": "authentication_error",
    "OVERLOADED": "overloaded_error",
    "INVALID_REQUEST": "invalid_request_error",
}
_ERROR_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def _event(kind: str, data: JSONObject) -> bytes:
    return SSE.frame(orjson.dumps(data), kind)


def anthropic_usage(usage: Usage | None) -> dict[str, int]:
    """A dsh ``usage`` object as Anthropic usage (``input_tokens``, ``output_tokens``, ...)."""
    usage = usage or {}
    out = {
        "input_tokens": int_field(usage.get("inputTokens")) or 0,
        "output_tokens": int_field(usage.get("outputTokens")) or 0,
    }
    if "cacheReadTokens" in usage:
        out["cache_read_input_tokens"] = int_field(usage.get("cacheReadTokens")) or 0
    if "cacheWriteTokens" in usage:
        out["cache_creation_input_tokens"] = int_field(usage.get("cacheWriteTokens")) or 0
    return out


class _Wire:
    __slots__ = ("id", "kind", "name", "position", "sent", "started", "stopped")

    def __init__(self, kind: str):
        self.kind = kind
        self.position = -1
        self.id = ""
        self.name = ""
        self.sent: list[str] = []
        self.started = False
        self.stopped = False


def _recorded_signatures(
    replay_state: Mapping[str, object] | None,
) -> dict[int, str | None] | None:
    """Block position -> recorded thinking signature (``None``: none), from a replay state."""
    blocks = replay_state.get("blocks") if isinstance(replay_state, Mapping) else None
    if not isinstance(blocks, list):
        return None
    found: dict[int, str | None] = {}
    for position, block in enumerate(blocks):
        if isinstance(block, Mapping) and block.get("type") == "reasoning":
            signature = block.get("signature")
            found[position] = signature if isinstance(signature, str) else None
    return found


class AnthropicEncoder:
    """Encodes the chunks of one call as Anthropic Messages SSE events.

    Feed the call's chunks in order to `feed` (each returns the bytes to send, maybe
    ``b""``) after `start`; a ``finish`` goes to `finish`. Error finishes are
    the caller's (an HTTP error, or `error_event` once the stream has started).

    Args:
        model: The ``model`` of the message (the request's model).
        message_id: The message ``id``.
        replay_state: The call's recorded ``finish.replayState``, when it is known before
            the call is encoded. The dsh runtime keeps a thinking block's signature
            there (its ``blocks``), not in the block: a thinking block is then sent
            with exactly the signature the recording shows (none, ``""`` or a value),
            so the runtime settles the same replay state again.
    """

    def __init__(
        self, *, model: str, message_id: str, replay_state: Mapping[str, object] | None = None
    ):
        self._model = model
        self._id = message_id
        self._signatures = _recorded_signatures(replay_state)
        self._blocks: dict[int, _Wire] = {}
        self._started = 0
        self._usage: Usage | None = None

    def marks(self) -> list[str]:
        """The answer's text and tool call ids so far (how a next request quotes it)."""
        return sent_marks(self._blocks.values())

    def start(self) -> bytes:
        """The ``message_start`` event."""
        return _event(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": self._id,
                    "type": "message",
                    "role": "assistant",
                    "model": self._model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 0, "output_tokens": 0},
                },
            },
        )

    def _begin(self, block: _Wire) -> bytes:
        block.started = True
        block.position = self._started
        self._started += 1
        content: JSONObject
        if block.kind == "tool-call":
            content = {"type": "tool_use", "id": block.id, "name": block.name, "input": {}}
        elif block.kind == "reasoning":
            content = {"type": "thinking", "thinking": "", "signature": ""}
            if self._signatures is not None and self._signatures.get(block.position) is None:
                del content["signature"]  # the recording's block had none
        else:
            content = {"type": "text", "text": ""}
        return _event(
            "content_block_start",
            {"type": "content_block_start", "index": block.position, "content_block": content},
        )

    def _delta(self, block: _Wire, delta: JSONObject) -> bytes:
        return _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": block.position, "delta": delta},
        )

    def _stop(self, block: _Wire) -> bytes:
        block.stopped = True
        return _event("content_block_stop", {"type": "content_block_stop", "index": block.position})

    def _block(self, index: int, kind: str) -> _Wire:
        block = self._blocks.get(index)
        if block is None or block.stopped:
            block = self._blocks[index] = _Wire(kind)
        return block

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The events of ``chunks`` in order (`feed` of each, joined)."""
        return feed_each(self, chunks)

    def feed(self, chunk: StreamChunk) -> bytes:
        """The events for one dsh chunk (``b""`` when it has no wire form of its own)."""
        kind = chunk.get("type")
        index = chunk.get("index", 0)
        if kind == "block-start":
            block_type = chunk.get("blockType")
            block = self._block(index, block_type if block_type in _WIRE_BLOCK else "text")
            return b"" if block.kind == "tool-call" else self._begin(block)
        if kind in ("text-delta", "reasoning-delta"):
            text = chunk.get("text", "")
            block = self._block(index, "text" if kind == "text-delta" else "reasoning")
            out = b"" if block.started else self._begin(block)
            block.sent.append(text)
            if block.kind == "reasoning":
                return out + self._delta(block, {"type": "thinking_delta", "thinking": text})
            return out + self._delta(block, {"type": "text_delta", "text": text})
        if kind == "tool-call-delta":
            block = self._block(index, "tool-call")
            if not block.id and isinstance(chunk.get("id"), str):
                block.id = chunk["id"]
            if not block.name and isinstance(chunk.get("name"), str):
                block.name = chunk["name"]
            args = chunk.get("argumentsDelta", "")
            args = args if isinstance(args, str) else ""
            if block.started:
                block.sent.append(args)
                return self._delta(block, {"type": "input_json_delta", "partial_json": args})
            block.sent.append(args)
            if not block.name:
                return b""  # held back until the name is known
            out = self._begin(block)
            held = "".join(block.sent)
            if held:
                out += self._delta(block, {"type": "input_json_delta", "partial_json": held})
            return out
        if kind == "block-end":
            return self._block_end(index, chunk.get("block"))
        if kind == "usage" and isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        return b""

    def _block_end(self, index: int, block_value: object) -> bytes:
        full = block_value if isinstance(block_value, Mapping) else {}
        kind = full.get("type")
        block = self._blocks.get(index)
        if block is None or block.stopped:
            block = self._block(index, kind if kind in _WIRE_BLOCK else "text")
        out = b""
        sent = "".join(block.sent)
        if block.kind == "tool-call":
            if not block.started:
                block.id = block.id or str(full.get("id", ""))
                block.name = block.name or str(full.get("name", ""))
                out += self._begin(block)
                arguments = full.get("arguments")
                text = arguments if isinstance(arguments, str) else sent
                if text:
                    out += self._delta(block, {"type": "input_json_delta", "partial_json": text})
            return out + self._stop(block)
        if not block.started:
            out += self._begin(block)
        final = full.get("text")
        if isinstance(final, str) and final.startswith(sent) and len(final) > len(sent):
            rest = final[len(sent) :]
            if block.kind == "reasoning":
                out += self._delta(block, {"type": "thinking_delta", "thinking": rest})
            else:
                out += self._delta(block, {"type": "text_delta", "text": rest})
        signature = full.get("signature")
        if not (isinstance(signature, str) and signature) and self._signatures is not None:
            signature = self._signatures.get(block.position)
        if block.kind == "reasoning" and isinstance(signature, str) and signature:
            out += self._delta(block, {"type": "signature_delta", "signature": signature})
        return out + self._stop(block)

    def finish(self, reason: Mapping[str, object]) -> bytes:
        """Close open blocks, then ``message_delta`` (stop reason, usage) and ``message_stop``."""
        out = b""
        for block in self._blocks.values():
            if block.started and not block.stopped:
                out += self._stop(block)
        stop = _STOP_REASONS.get(str(reason.get("kind")), "end_turn")
        out += _event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": anthropic_usage(self._usage),
            },
        )
        return out + _event("message_stop", {"type": "message_stop"})

    @staticmethod
    def error_event(message: str, error_type: str) -> bytes:
        """An in-stream ``error`` event (the stream failed after it started)."""
        return _event("error", {"type": "error", "error": {"type": error_type, "message": message}})

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: an ``error`` event of Anthropic's error type."""
        code = str(failure.get("code", "UNKNOWN"))
        message = str(failure.get("message", "")) or code
        return self.error_event(message, _EVENT_ERROR_TYPES.get(code, "api_error"))

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: an ``invalid_request_error`` event (never retried)."""
        return self.error_event(message, "invalid_request_error")


def _content_block(block: Mapping[str, object]) -> JSONObject | None:
    kind = block.get("type")
    if kind == "tool-call":
        arguments = block.get("arguments")
        try:
            parsed = orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
        except orjson.JSONDecodeError:
            parsed = {}
        return {
            "type": "tool_use",
            "id": block.get("id") or "",
            "name": block.get("name") or "",
            "input": parsed if isinstance(parsed, dict) else {},
        }
    if kind == "reasoning":
        text = block.get("text", "")
        return {"type": "thinking", "thinking": text, "signature": str(block.get("signature", ""))}
    if kind == "text":
        return {"type": "text", "text": block.get("text", "")}
    return None


def answer_content(chunks: Sequence[StreamChunk]) -> list[JSONObject]:
    """An answer's ``content`` blocks, as its ``message`` holds them and a client sends it back.

    ``thinking`` (with ``signature``), ``text`` and ``tool_use`` (``input`` the parsed
    arguments) blocks, in the answer's order.
    """
    reply = assemble_reply(list(chunks))
    return [b for b in map(_content_block, reply.content) if b is not None]


def anthropic_message(chunks: list[StreamChunk], *, model: str, message_id: str) -> JSONObject:
    """The ``message`` object (``stream: false``) assembled from a call's chunks."""
    reply = assemble_reply(chunks)
    content = [b for b in map(_content_block, reply.content) if b is not None]
    reason = reply.finish or {"kind": "stop"}
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _STOP_REASONS.get(str(reason.get("kind")), "end_turn"),
        "stop_sequence": None,
        "usage": anthropic_usage(reply.usage),
    }


def anthropic_error(failure: Failure) -> WireError:
    """The HTTP error the Anthropic Messages API answers for a recorded failure.

    The status comes from `failure_status` (529 for ``OVERLOADED``); the body
    is ``{"type": "error", "error": {"type", "message"}}`` with Anthropic's error type for
    the status (``overloaded_error`` for ``OVERLOADED``).
    """
    status = failure_status(failure, overloaded=529)
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    if failure.get("code") == "OVERLOADED":
        kind = "overloaded_error"
    body = {"type": "error", "error": {"type": kind, "message": failure_message(failure)}}
    return wire_error(failure, status, body)


def anthropic_refusal(status: int, message: str, *, param: str | None = None) -> WireError:
    """The Messages API's error for a refused request.

    ``{"type": "error", "error": {"type", "message"}}``: ``invalid_request_error`` for a
    400, ``request_too_large`` for a 413 (``param`` is not part of this shape).
    """
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return wire_error({}, status, {"type": "error", "error": {"type": kind, "message": message}})


# --- server-held threads: a request that continues an answer by its id --------------------

_THREAD_KEPT: Final = ("system", "tools")  # what a continuation takes from the thread


def thread_not_found(previous: str) -> WireError:
    """The API's 404 ``thread_not_found`` for a ``previous_message_id`` it does not hold.

    ``{"type": "error", "error": {"type": "not_found_error", "message", "details":
    {"error_code": "thread_not_found"}}}``: the SDK raises ``ThreadNotFoundError`` for it,
    and its threads (the tool runner's) send the whole conversation again under a new
    thread.
    """
    message = (
        f"thread not found: previous_message_id '{previous}' names no message this test's "
        "model endpoint answered for a request with a `thread`"
    )
    details = {"error_code": "thread_not_found"}
    error = {"type": "not_found_error", "message": message, "details": details}
    return wire_error({}, 404, {"type": "error", "error": error})


def read_thread(body: JSONObject, history: History) -> JSONObject:
    """A Messages body with its ``thread`` read.

    See [docs/wires.md#anthropic-threads](../wires.md#anthropic-threads).

    Args:
        body: The parsed body (never changed).
        history: The answers the endpoint kept in this test.

    Returns:
        ``body`` itself when it has no ``thread``. Otherwise a copy without ``thread``,
        whose answer the endpoint keeps (`hold`); for
        ``{"type": "continue", "previous_message_id": id}`` the copy is the whole
        conversation: ``system`` and ``tools`` of the request that ``id`` answered (where
        the body sends none), its messages, that answer as an assistant message
        (`answer_content`), then the body's messages.

    Raises:
        BadRequest: ``thread`` is not ``{"type": "create"}`` or ``{"type": "continue",
            "previous_message_id": <string>}`` (400 ``invalid_request_error``), or the id
            names no answer kept in this test (`thread_not_found`).
    """
    thread = body.get("thread")
    if thread is None:
        return body
    kind = thread.get("type") if isinstance(thread, Mapping) else None
    previous = thread.get("previous_message_id") if isinstance(thread, Mapping) else None
    if kind not in ("create", "continue") or (
        kind == "continue" and not (isinstance(previous, str) and previous)
    ):
        raise BadRequest(
            anthropic_refusal(
                400,
                'Invalid \'thread\': expected {"type": "create"} or {"type": "continue", '
                f'"previous_message_id": <a message id>}}, got {orjson.dumps(thread).decode()}',
            )
        )
    history.hold()
    out = {key: value for key, value in body.items() if key != "thread"}
    if kind == "create":
        return out
    earlier = history.answered(str(previous))
    if earlier is None:
        raise BadRequest(thread_not_found(str(previous)))
    for key in _THREAD_KEPT:
        if out.get(key) is None and earlier.request.get(key) is not None:
            out[key] = earlier.request[key]
    answer = {"role": "assistant", "content": answer_content(earlier.chunks)}
    before = earlier.request.get("messages")
    now = body.get("messages")
    out["messages"] = [*json_items(before), answer, *(now or ())]
    return out


# --- decoding: a live provider's events -> dsh chunks (as the dsh runtime maps them) -------


class _Open:
    __slots__ = ("id", "index", "input", "kind", "name", "parts", "signature")

    def __init__(self, index: int, kind: str):
        self.index = index
        self.kind = kind
        self.id = ""
        self.name = ""
        self.input: object = None
        self.parts: list[str] = []
        self.signature = ""


def _error(message: str, code: str) -> JSONObject:
    return {"kind": "error", "failure": {"message": message, "code": code}}


class AnthropicDecoder:
    """Turns Anthropic Messages events (parsed JSON) into dsh chunks; one per call.

    Follows the dsh runtime's mapping: block indexes count the blocks started;
    ``tool_use`` starts with a ``tool-call-delta`` carrying id, name and an empty
    ``argumentsDelta``; ``content_block_stop`` is ``block-end`` with the assembled block;
    ``message_stop`` gives ``usage`` (``totalTokens`` the sum of every count) and the
    ``finish``. A stream that ends before ``message_stop`` finishes with
    ``STREAM_CLOSED``; an ``error`` event with the error's code.
    """

    def __init__(self) -> None:
        self._blocks: dict[object, _Open] = {}
        self._count = 0
        self._usage: dict[str, int] = {}
        self._stop: str | None = None
        self._done = False
        #: The live message's ``id`` (from ``message_start``), once read.
        self.response_id: str | None = None

    @property
    def done(self) -> bool:
        """Whether the ``finish`` was produced."""
        return self._done

    def feed(self, event: Mapping[str, object]) -> list[StreamChunk]:
        """The dsh chunks for one event object."""
        kind = event.get("type")
        out: list[StreamChunk] = []
        if self._done:
            return out
        if kind == "message_start":
            message = event.get("message")
            if isinstance(message, Mapping):
                self._merge_usage(message.get("usage"))
                if isinstance(message.get("id"), str):
                    self.response_id = message["id"]
        elif kind == "content_block_start":
            self._block_start(event, out)
        elif kind == "content_block_delta":
            self._block_delta(event, out)
        elif kind == "content_block_stop":
            block = self._blocks.pop(event.get("index"), None)
            if block is not None:
                out.append({"type": "block-end", "index": block.index, "block": _assembled(block)})
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
                self._stop = delta["stop_reason"]
            self._merge_usage(event.get("usage"))
        elif kind == "message_stop":
            out.extend(self._finish())
        elif kind == "error":
            error = event.get("error")
            error = error if isinstance(error, Mapping) else {}
            failure = anthropic_failure(None, {"error": error}, {})
            out.append(self.failed(failure))
        return out

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the HTTP stream ended (``STREAM_CLOSED`` if unfinished)."""
        if self._done:
            return []
        self._done = True
        return [
            {
                "type": "finish",
                "reason": _error(
                    "DeepSeek Messages stream ended before message_stop", "STREAM_CLOSED"
                ),
            }
        ]

    def failed(self, failure: FailureRecord) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        self._done = True
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}

    def _merge_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        for wire, dsh in (
            ("input_tokens", "inputTokens"),
            ("output_tokens", "outputTokens"),
            ("cache_read_input_tokens", "cacheReadTokens"),
            ("cache_creation_input_tokens", "cacheWriteTokens"),
        ):
            value = int_field(usage.get(wire))
            if value is not None and value >= 0:
                self._usage[dsh] = value

    def _block_start(self, event: Mapping[str, object], out: list[StreamChunk]) -> None:
        content = event.get("content_block")
        content = content if isinstance(content, Mapping) else {}
        wire = content.get("type")
        kind = {"text": "text", "thinking": "reasoning", "tool_use": "tool-call"}.get(str(wire))
        if kind is None:
            out.append(
                self.failed(
                    {
                        "message": f"unsupported content block {wire!r}",
                        "code": "UNSUPPORTED_CONTENT",
                    }
                )
            )
            return
        block = _Open(self._count, kind)
        self._count += 1
        self._blocks[event.get("index")] = block
        out.append({"type": "block-start", "index": block.index, "blockType": kind})
        if kind == "tool-call":
            block.id = str(content.get("id", ""))
            block.name = str(content.get("name", ""))
            block.input = content.get("input")
            out.append(
                {
                    "type": "tool-call-delta",
                    "index": block.index,
                    "id": block.id,
                    "name": block.name,
                    "argumentsDelta": "",
                }
            )
            return
        initial = content.get("text" if kind == "text" else "thinking")
        if isinstance(initial, str) and initial:
            block.parts.append(initial)
            out.append({"type": f"{kind}-delta", "index": block.index, "text": initial})

    def _block_delta(self, event: Mapping[str, object], out: list[StreamChunk]) -> None:
        block = self._blocks.get(event.get("index"))
        delta = event.get("delta")
        if block is None or not isinstance(delta, Mapping):
            return
        kind = delta.get("type")
        if kind == "text_delta" and block.kind == "text":
            text = str(delta.get("text", ""))
            block.parts.append(text)
            out.append({"type": "text-delta", "index": block.index, "text": text})
        elif kind == "thinking_delta" and block.kind == "reasoning":
            text = str(delta.get("thinking", ""))
            block.parts.append(text)
            out.append({"type": "reasoning-delta", "index": block.index, "text": text})
        elif kind == "signature_delta" and block.kind == "reasoning":
            block.signature += str(delta.get("signature", ""))
        elif kind == "input_json_delta" and block.kind == "tool-call":
            partial = str(delta.get("partial_json", ""))
            block.parts.append(partial)
            out.append(
                {
                    "type": "tool-call-delta",
                    "index": block.index,
                    "id": block.id,
                    "argumentsDelta": partial,
                }
            )

    def _finish(self) -> list[StreamChunk]:
        self._done = True
        out: list[StreamChunk] = []
        usage = dict(self._usage)
        usage.setdefault("inputTokens", 0)
        usage.setdefault("outputTokens", 0)
        usage["totalTokens"] = sum(
            usage.get(k, 0)
            for k in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
        )
        ordered = {
            k: usage[k]
            for k in (
                "inputTokens",
                "outputTokens",
                "totalTokens",
                "cacheReadTokens",
                "cacheWriteTokens",
            )
            if k in usage
        }
        out.append({"type": "usage", "usage": ordered})
        stop = self._stop
        if stop is None:
            reason = _error(
                "DeepSeek Messages stream: message_stop without a stop reason", "MALFORMED_RESPONSE"
            )
        elif stop not in _FROM_STOP:
            reason = _error(
                f"DeepSeek Messages stream: unsupported stop reason {stop}", "MALFORMED_RESPONSE"
            )
        elif self._count == 0 and _FROM_STOP[stop] == "stop":
            reason = _error("DeepSeek Messages returned no content", "EMPTY_RESPONSE")
        else:
            reason = {"kind": _FROM_STOP[stop]}
        out.append({"type": "finish", "reason": reason})
        return out


def _assembled(block: _Open) -> ContentBlock:
    text = "".join(block.parts)
    if block.kind == "tool-call":
        if not text and block.input is not None:
            text = orjson.dumps(block.input).decode()
        return {"type": "tool-call", "id": block.id, "name": block.name, "arguments": text}
    return {"type": block.kind, "text": text}


def anthropic_failure(
    status: int | None, body: object, headers: Mapping[str, str], *, message: str | None = None
) -> FailureRecord:
    """The dsh failure for an Anthropic Messages error, with the dsh runtime's codes.

    Args:
        status: The HTTP status; ``None`` for an ``error`` event inside the stream.
        body: The parsed JSON body (``{"type": "error", "error": {"type", "message"}}``),
            or anything else when it was not JSON.
        headers: The response headers (lower-case names): ``retry-after`` becomes
            ``providerRetryAfterMs``; ``request-id``, ``x-request-id`` or
            ``x-deepseek-request-id`` becomes ``requestId``.
        message: The message to use instead of the body's.

    Returns:
        ``{"message", "code", "status"?, "requestId"?, "providerRetryAfterMs"?}``; the
        code, first match: ``AUTH`` (401, 403, ``authentication_error``,
        ``permission_error``), ``QUOTA`` (402 or quota wording), ``RATE_LIMIT`` (429,
        ``rate_limit_error``), ``CONTEXT_WINDOW_EXCEEDED`` (context-overflow wording),
        ``INVALID_REQUEST`` (400, 413, ``invalid_request_error``), ``SERVER`` (>= 500,
        ``api_error``, ``overloaded_error``, or no status), else ``HTTP_<status>``.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    kind = error.get("type")
    text = message
    if text is None:
        found = error.get("message")
        text = (
            found
            if isinstance(found, str) and found
            else f"DeepSeek Messages request failed ({status})"
        )
    if status in (401, 403) or kind in ("authentication_error", "permission_error"):
        code = "AUTH"
    elif status == 402 or "quota" in text.lower():
        code = "QUOTA"
    elif status == 429 or kind == "rate_limit_error":
        code = "RATE_LIMIT"
    elif CONTEXT_OVERFLOW.search(text):
        code = "CONTEXT_WINDOW_EXCEEDED"
    elif status in (400, 413) or kind == "invalid_request_error":
        code = "INVALID_REQUEST"
    elif status is None or status >= 500 or kind in ("api_error", "overloaded_error"):
        code = "SERVER"
    else:
        code = f"HTTP_{status}"
    failure: FailureRecord = {"message": text, "code": code}
    if status is not None:
        failure["status"] = status
    for name in ("request-id", "x-request-id", "x-deepseek-request-id"):
        if headers.get(name):
            failure["requestId"] = headers[name]
            break
    retry = retry_after_ms(headers)
    if retry is not None:
        failure["providerRetryAfterMs"] = retry
    return failure


def decode_message(answer: Mapping[str, object]) -> list[StreamChunk]:
    """The chunks of a whole ``message`` answer, through the stream decoder."""
    decoder = AnthropicDecoder()
    out = decoder.feed({"type": "message_start", "message": {"usage": {}}})
    for index, block in enumerate(json_items(answer.get("content"))):
        if not isinstance(block, Mapping):
            continue
        start = dict(block)
        if block.get("type") == "tool_use":
            start["input"] = {}
        out += decoder.feed({"type": "content_block_start", "index": index, "content_block": start})
        if block.get("type") == "tool_use":
            partial = orjson.dumps(block.get("input", {})).decode()
            delta = {"type": "input_json_delta", "partial_json": partial}
            out += decoder.feed({"type": "content_block_delta", "index": index, "delta": delta})
        out += decoder.feed({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": answer.get("stop_reason")}
    out += decoder.feed({"type": "message_delta", "delta": stop, "usage": answer.get("usage")})
    return out + decoder.feed({"type": "message_stop"})


def messages_url(base_url: str) -> str:
    """The Messages URL for a base URL, by the dsh runtime's rule (``/v1`` not doubled)."""
    base = urlsplit(base_url).path.rstrip("/")
    return join_path(base_url, "/messages" if base.endswith("/v1") else "/v1/messages")


class AnthropicWire(BaseWire):
    """The Anthropic Messages wire (``POST /v1/messages``): the dsh runtime's route."""

    name = "anthropic"
    routes = ("/v1/messages", "/messages")
    list_routes: tuple[str, ...] = ("/v1/models", "/models")
    list_headers: tuple[str, ...] = ("anthropic-version",)
    # remembers only answers to requests with a `thread` (read_thread)
    call_id_prefix = "msg-dsh-replay-"
    checked_fields = ("messages", "system", "tools")
    text_fields = ("system",)
    record_base_url_variable = "DSH_RECORD_ANTHROPIC_BASE_URL"
    sdk = SDK("anthropic", "Anthropic")

    refusal = staticmethod(anthropic_refusal)
    error = staticmethod(anthropic_error)
    decoder = AnthropicDecoder
    decode_whole = staticmethod(decode_message)
    failure = staticmethod(anthropic_failure)

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """``body`` as it is, its ``thread`` read (see `read_thread`).

        The in-process shape reads this wire's requests as they are.

        Raises:
            BadRequest: ``messages`` or ``tools`` is not an array of objects, or
                ``system`` neither a string nor one (400); a malformed ``thread``, or
                one that continues an answer this test did not keep (see
                `read_thread`).
        """
        super().canonical(body, path=path, history=history)
        return read_thread(body, history)

    def model_list(self, names: list[str]) -> JSONObject:
        """``{"data": [{"type": "model", "id", "display_name", "created_at"}], ...}``."""
        return {
            "data": [
                {
                    "type": "model",
                    "id": name,
                    "display_name": name,
                    "created_at": "1970-01-01T00:00:00Z",
                }
                for name in names
            ],
            "has_more": False,
            "first_id": names[0] if names else None,
            "last_id": names[-1] if names else None,
        }

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> AnthropicEncoder:
        """An encoder; a known ``replay_state`` gives thinking blocks their signatures."""
        return AnthropicEncoder(model=model, message_id=call_id, replay_state=replay_state)

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """The ``message`` object."""
        return anthropic_message(chunks, model=model, message_id=call_id)

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """See `messages_url`."""
        return messages_url(base_url), with_model(body, model)

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """``x-api-key: <key>``."""
        return {"x-api-key": api_key}

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """The ``message_stop`` event ends the answer."""
        return frame.name == "message_stop"

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``ANTHROPIC_*`` and ``DEEPSEEK_*`` (the dsh runtime's DeepSeek route): the root."""
        return {
            "ANTHROPIC_BASE_URL": root,
            "ANTHROPIC_API_KEY": api_key,
            "DEEPSEEK_BASE_URL": root,
            "DEEPSEEK_API_KEY": api_key,
        }


WIRE: Final = AnthropicWire()
"""The Anthropic Messages wire."""
