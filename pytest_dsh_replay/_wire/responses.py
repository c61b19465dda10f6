"""dsh stream chunks <-> the OpenAI Responses wire (``POST /v1/responses``).

The API the OpenAI Agents SDK, pydantic-ai's ``OpenAIResponsesModel`` and
langchain-openai's ``use_responses_api`` speak by default
([docs/wires.md#responses](../wires.md#responses)):

- `read_responses_request` reads a Responses body (``input`` as a string or a list
  of items, ``instructions``, function ``tools``, ``previous_response_id``) into the
  in-process request shape every layer reads;
- `ResponsesEncoder` turns the chunks of one replayed call into the API's typed
  stream events (``event: <type>`` and ``data: {..., "sequence_number"}``, counting from
  0, no ``[DONE]``), and `responses_object` into one ``response`` object for
  ``stream: false``;
- `ResponsesDecoder` turns a live provider's events back into dsh chunks, for the
  recording proxy.

The mapping: each dsh block is one output item: a ``text`` block a ``message`` item with
one ``output_text`` part, a ``reasoning`` block a ``reasoning`` item with one summary
part (``response.reasoning_summary_text.delta``), a ``tool-call`` block a
``function_call`` item whose ``call_id`` is the dsh tool call id. The ``finish`` ends the
stream with ``response.completed``, or ``response.incomplete`` for ``max-tokens``
(``max_output_tokens``) and a content filter (``content_filter``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.json_values import plain_json
from .._format.reply import assemble_reply
from .base import (
    BadRequest,
    Failure,
    History,
    delta_run,
    int_field,
    wire_error,
)
from .framing import SSE, Frame
from .openai import OpenAIWire
from .shapes import FailureRecord, Usage

__all__ = [
    "WIRE",
    "ResponsesDecoder",
    "ResponsesEncoder",
    "ResponsesWire",
    "read_responses_request",
    "responses_object",
]

# Responses body keys read into the in-process shape (the rest is kept as it is)
_READ: Final = frozenset(
    {"input", "instructions", "tools", "max_output_tokens", "reasoning", "previous_response_id"}
)
_FINISHED: Final = frozenset({"response.completed", "response.incomplete", "response.failed"})


# --- requests -----------------------------------------------------------------------------


def _part_block(part: Any) -> Any:
    """One content part of an input message in the chat-completions form."""
    if isinstance(part, str):
        return {"type": "text", "text": part}
    if not isinstance(part, Mapping):
        return None
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text", "summary_text", "reasoning_text"):
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind == "refusal":
        return {"type": "text", "text": str(part.get("refusal", ""))}
    if kind == "input_image":
        image = part.get("image_url") or part.get("file_id") or ""
        return {"type": "image_url", "image_url": {"url": str(image)}}
    return plain_json(part)


def _content(content: Any) -> Any:
    if isinstance(content, str) or content is None:
        return content or ""
    parts = content if isinstance(content, list | tuple) else [content]
    return [b for b in (_part_block(p) for p in parts) if b is not None]


def _text(content: Any) -> str:
    blocks = _content(content)
    if isinstance(blocks, str):
        return blocks
    return "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")


def _summary_text(item: Mapping[str, Any]) -> str:
    parts = [*(item.get("summary") or ()), *(item.get("content") or ())]
    return "".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping))


class _Messages:
    """Builds chat-completions messages from Responses input items, in order."""

    def __init__(self) -> None:
        self.messages: list[Any] = []
        self._assistant: dict[str, Any] | None = None

    def _open(self) -> dict[str, Any]:
        if self._assistant is None:
            self._assistant = {"role": "assistant", "content": None}
            self.messages.append(self._assistant)
        return self._assistant

    def flush(self) -> None:
        self._assistant = None

    def add(self, item: Any) -> None:
        if isinstance(item, str):
            self.flush()
            self.messages.append({"role": "user", "content": item})
            return
        if not isinstance(item, Mapping):
            return
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind == "message":
            self._message(item)
        elif kind == "function_call":
            calls = self._open().setdefault("tool_calls", [])
            calls.append(
                {
                    "id": str(item.get("call_id") or item.get("id") or ""),
                    "type": "function",
                    "function": {
                        "name": str(item.get("name", "")),
                        "arguments": str(item.get("arguments", "")),
                    },
                }
            )
        elif kind == "function_call_output":
            self.flush()
            output = item.get("output")
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id", "")),
                    "content": output if isinstance(output, str) else _content(output),
                }
            )
        elif kind == "reasoning":
            assistant = self._open()
            assistant["reasoning_content"] = assistant.get("reasoning_content", "") + (
                _summary_text(item)
            )

    def _message(self, item: Mapping[str, Any]) -> None:
        role = str(item.get("role", "user"))
        if role != "assistant":
            self.flush()
            self.messages.append({"role": role, "content": _content(item.get("content"))})
            return
        assistant = self._open()
        text = _text(item.get("content"))
        if text:
            assistant["content"] = (assistant.get("content") or "") + text


def _tool(tool: Any) -> Any:
    """A Responses function tool in the chat-completions form (other tools as they are)."""
    if isinstance(tool, Mapping) and tool.get("type") == "function" and "function" not in tool:
        function = {k: plain_json(v) for k, v in tool.items() if k not in ("type", "strict")}
        return {"type": "function", "function": function}
    return plain_json(tool)


def _previous(body: Mapping[str, Any], history: History) -> list[Any]:
    previous = body.get("previous_response_id")
    if previous is None:
        return []
    earlier = history.conversation(str(previous))
    if earlier is None:
        raise BadRequest(
            wire_error(
                {},
                400,
                {
                    "error": {
                        "message": f"Previous response with id '{previous}' not found.",
                        "type": "invalid_request_error",
                        "param": "previous_response_id",
                        "code": "previous_response_not_found",
                    }
                },
            )
        )
    # the instructions of an earlier response are not carried over (docs/wires.md#responses)
    return [m for m in earlier if not (isinstance(m, Mapping) and m.get("role") == "system")]


def read_responses_request(body: Mapping[str, Any], history: History) -> dict[str, Any]:
    """A Responses body in the in-process request shape (chat-completions messages).

    Args:
        body: The parsed body: ``input`` (a string, or items: ``message`` with
            ``input_text`` / ``output_text`` parts, ``function_call``,
            ``function_call_output``, ``reasoning``), ``instructions``, ``tools``,
            ``max_output_tokens``, ``reasoning.effort``, ``previous_response_id``.
        history: The answers served so far (``previous_response_id`` continues one).

    Returns:
        ``{"messages", "tools"?, "max_tokens"?, "reasoning_effort"?, ...}``:
        ``instructions`` first as a system message, then the conversation the previous
        response continued (its answer last), then the input; consecutive assistant
        items (reasoning, message, function calls) become one assistant message. Every
        other key of ``body`` is kept.

    Raises:
        BadRequest: ``previous_response_id`` names no answer served in this test (the
            API's 400 ``previous_response_not_found``).
    """
    out: dict[str, Any] = {k: v for k, v in body.items() if k not in _READ}
    builder = _Messages()
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        builder.messages.append({"role": "system", "content": instructions})
    builder.messages.extend(_previous(body, history))
    raw = body.get("input")
    for item in [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else ():
        builder.add(item)
    out["messages"] = builder.messages
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        out["tools"] = [_tool(t) for t in tools]
    if body.get("max_output_tokens") is not None:
        out["max_tokens"] = body["max_output_tokens"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping) and isinstance(reasoning.get("effort"), str):
        out["reasoning_effort"] = reasoning["effort"]
    return out


# --- answers ------------------------------------------------------------------------------


def responses_usage(usage: Usage) -> JSONObject:
    """A dsh ``usage`` object as the Responses ``usage`` object.

    ``input_tokens`` is input plus cached and cache-write tokens, with the cached ones in
    ``input_tokens_details.cached_tokens``; reasoning tokens go in
    ``output_tokens_details.reasoning_tokens``.
    """
    read = int_field(usage.get("cacheReadTokens")) or 0
    write = int_field(usage.get("cacheWriteTokens")) or 0
    prompt = (int_field(usage.get("inputTokens")) or 0) + read + write
    output = int_field(usage.get("outputTokens")) or 0
    total = int_field(usage.get("totalTokens"))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": read},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": int_field(usage.get("reasoningTokens")) or 0},
        "total_tokens": total if total is not None else prompt + output,
    }


def _failure_code(reason: Mapping[str, object]) -> str | None:
    failure = reason.get("failure")
    code = failure.get("code") if isinstance(failure, Mapping) else None
    return code if isinstance(code, str) else None


def _incomplete(reason: Mapping[str, object]) -> str | None:
    """Why a finish leaves the response incomplete (``None``: it completed)."""
    if reason.get("kind") == "max-tokens":
        return "max_output_tokens"
    if reason.get("kind") == "error" and _failure_code(reason) == "CONTENT_FILTER":
        return "content_filter"
    return None


def _response(
    call_id: str,
    model: str,
    *,
    status: str,
    output: list[JSONObject],
    usage: Usage | None = None,
    incomplete: str | None = None,
    error: JSONObject | None = None,
) -> JSONObject:
    return {
        "id": call_id,
        "object": "response",
        "created_at": 0,
        "status": status,
        "error": error,
        "incomplete_details": None if incomplete is None else {"reason": incomplete},
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": None if usage is None else responses_usage(usage),
    }


def _message_item(item_id: str, text: str, status: str) -> JSONObject:
    part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {
        "id": item_id,
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [part] if status == "completed" else [],
    }


def _reasoning_item(item_id: str, text: str, status: str) -> JSONObject:
    summary = [{"type": "summary_text", "text": text}] if status == "completed" else []
    return {"id": item_id, "type": "reasoning", "summary": summary, "status": status}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, status: str) -> JSONObject:
    return {
        "id": item_id,
        "type": "function_call",
        "status": status,
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def _item_id(call_id: str, prefix: str, position: int) -> str:
    return f"{prefix}_{call_id.removeprefix('resp_')}_{position}"


def responses_object(chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
    """The ``response`` object (``stream: false``) assembled from a call's chunks."""
    reply = assemble_reply(chunks)
    output: list[JSONObject] = []
    for block in reply.content:
        kind = block.get("type")
        position = len(output)
        if kind == "text":
            item_id = _item_id(call_id, "msg", position)
            output.append(_message_item(item_id, str(block.get("text", "")), "completed"))
        elif kind == "reasoning":
            item_id = _item_id(call_id, "rs", position)
            output.append(_reasoning_item(item_id, str(block.get("text", "")), "completed"))
        elif kind == "tool-call":
            output.append(
                _call_item(
                    _item_id(call_id, "fc", position),
                    str(block.get("id") or ""),
                    str(block.get("name") or ""),
                    str(block.get("arguments") or ""),
                    "completed",
                )
            )
    reason = reply.finish or {"kind": "stop"}
    incomplete = _incomplete(reason)
    return _response(
        call_id,
        model,
        status="completed" if incomplete is None else "incomplete",
        output=output,
        usage=reply.usage,
        incomplete=incomplete,
    )


class _Item:
    """One open output item of a streamed response."""

    __slots__ = (
        "arguments",
        "call_id",
        "delta",
        "id",
        "kind",
        "name",
        "position",
        "started",
        "text",
    )

    def __init__(self, kind: str, position: int, item_id: str):
        self.delta: tuple[bytes, bytes, bytes] | None = None  # see _delta_frame
        self.kind = kind
        self.position = position
        self.id = item_id
        self.text: list[str] = []
        self.arguments: list[str] = []
        self.call_id = ""
        self.name = ""
        self.started = False

    def done(self) -> JSONObject:
        if self.kind == "message":
            return _message_item(self.id, "".join(self.text), "completed")
        if self.kind == "reasoning":
            return _reasoning_item(self.id, "".join(self.text), "completed")
        return _call_item(self.id, self.call_id, self.name, "".join(self.arguments), "completed")


_KINDS: Final = {"text-delta": "message", "reasoning-delta": "reasoning"}
_DELTA_EVENTS: Final[dict[str, tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "message": ("response.output_text.delta", {"content_index": 0}, {"logprobs": []}),
    "reasoning": ("response.reasoning_summary_text.delta", {"summary_index": 0}, {}),
    "function_call": ("response.function_call_arguments.delta", {}, {}),
}


def _delta_frame(item: _Item) -> tuple[bytes, bytes, bytes]:
    """The fixed bytes of an item's delta events, around its sequence number and delta.

    A delta event is ``head + <sequence number> + middle + <JSON string> + tail``: the
    bytes ``orjson`` gives for ``{"type", "sequence_number", "item_id", "output_index",
    ...fields, "delta", ...after}``, without building that dict for every delta.
    """
    kind, fields, after = _DELTA_EVENTS[item.kind]
    before, after_event = SSE.around(kind)
    head = before + b'{"type":' + orjson.dumps(kind)
    base = {"item_id": item.id, "output_index": item.position, **fields}
    middle = b"," + orjson.dumps(base)[1:-1] + b',"delta":'
    tail = (b"," + orjson.dumps(after)[1:-1] if after else b"") + b"}" + after_event
    return head + b',"sequence_number":', middle, tail


_PREFIXES: Final = {"message": "msg", "reasoning": "rs", "function_call": "fc"}


class ResponsesEncoder:
    """Encodes the chunks of one call as the Responses API's stream events.

    Every event is ``event: <type>`` and ``data: {"type", "sequence_number", ...}``,
    the sequence numbers counting from 0. Feed the chunks in order; the caller handles
    error finishes (an HTTP error before content, `failure_event` after).

    Args:
        model: The ``model`` of the response (the request's model).
        response_id: The response's ``id`` (what ``previous_response_id`` names).
    """

    def __init__(self, *, model: str, response_id: str):
        self._model = model
        self._id = response_id
        self._sequence = 0
        self._items: dict[int, _Item] = {}  # dsh block index -> its open output item
        self._output: list[JSONObject | None] = []  # finished items, by output index
        self._usage: Usage | None = None
        self._text: list[str] = []
        self._call_ids: list[str] = []

    def _event(self, kind: str, fields: JSONObject) -> bytes:
        data = {"type": kind, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return SSE.frame(orjson.dumps(data), kind)

    def _response(
        self,
        status: str,
        *,
        usage: Usage | None = None,
        incomplete: str | None = None,
        error: JSONObject | None = None,
    ) -> JSONObject:
        output = [item for item in self._output if item is not None]
        return _response(
            self._id,
            self._model,
            status=status,
            output=output,
            usage=usage,
            incomplete=incomplete,
            error=error,
        )

    def marks(self) -> list[str]:
        """The answer's text and sorted tool call ids so far (how a next request quotes it)."""
        return ["".join(self._text), *sorted(self._call_ids)]

    def start(self) -> bytes:
        """``response.created`` and ``response.in_progress``."""
        response = self._response("in_progress")
        return self._event("response.created", {"response": response}) + self._event(
            "response.in_progress", {"response": response}
        )

    def _open(self, index: int, kind: str) -> tuple[_Item, bytes]:
        item = self._items.get(index)
        if item is not None and item.kind == kind:
            return item, b""
        out = self._close(index) if item is not None else b""
        position = len(self._output)
        self._output.append(None)
        item = _Item(kind, position, _item_id(self._id, _PREFIXES[kind], position))
        self._items[index] = item
        if kind != "function_call":
            out += self._added(item)
        return item, out

    def _added(self, item: _Item) -> bytes:
        item.started = True
        base = {"output_index": item.position}
        if item.kind == "message":
            added = _message_item(item.id, "", "in_progress")
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            return self._event("response.output_item.added", {**base, "item": added}) + (
                self._event(
                    "response.content_part.added",
                    {**base, "item_id": item.id, "content_index": 0, "part": part},
                )
            )
        if item.kind == "reasoning":
            added = _reasoning_item(item.id, "", "in_progress")
            part = {"type": "summary_text", "text": ""}
            return self._event("response.output_item.added", {**base, "item": added}) + (
                self._event(
                    "response.reasoning_summary_part.added",
                    {**base, "item_id": item.id, "summary_index": 0, "part": part},
                )
            )
        added = _call_item(item.id, item.call_id, item.name, "", "in_progress")
        return self._event("response.output_item.added", {**base, "item": added})

    def _delta(self, item: _Item, text: str) -> bytes:
        if item.kind == "message":
            item.text.append(text)
            self._text.append(text)
        elif item.kind == "reasoning":
            item.text.append(text)
        else:
            item.arguments.append(text)
        frame = item.delta
        if frame is None:
            frame = item.delta = _delta_frame(item)
        head, middle, tail = frame
        sequence = self._sequence
        self._sequence = sequence + 1
        return b"%b%d%b%b%b" % (head, sequence, middle, orjson.dumps(text), tail)

    def feed(self, chunk: StreamChunk) -> bytes:
        """The events for one dsh chunk (``b""`` when it has no wire form of its own)."""
        kind = chunk.get("type")
        index = chunk.get("index", 0)
        wanted = _KINDS.get(kind)  # type: ignore[arg-type]
        if wanted is not None:
            text = chunk.get("text", "")
            text = text if text.__class__ is str else str(text)
            item = self._items.get(index)
            if item is not None and item.kind == wanted:  # the next delta of an open item
                return self._delta(item, text)
            item, out = self._open(index, wanted)
            return out + self._delta(item, text)
        if kind == "tool-call-delta":
            return self._tool_delta(index, chunk)
        if kind == "block-end":
            return self._block_end(index, chunk.get("block"))
        if kind == "usage" and isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        return b""

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The events of ``chunks`` in order: the bytes `feed` gives each, joined.

        After a text or reasoning delta, the deltas that follow it to the same item are
        filled into the item's delta frame in one loop
        ([docs/wires.md#encoded-once](../wires.md#encoded-once)).
        """
        out: list[bytes] = []
        n = len(chunks)
        i = 0
        while i < n:
            chunk = chunks[i]
            out.append(self.feed(chunk))
            i += 1
            kind = chunk.get("type")
            wanted = _KINDS.get(kind)  # type: ignore[arg-type]
            if wanted is None or i == n:
                continue
            index = chunk.get("index", 0)
            item = self._items.get(index)
            if item is not None and item.kind == wanted and item.delta is not None:
                i = self._delta_run(item, kind, index, chunks, i, out)
        return b"".join(out)

    def _delta_run(
        self,
        item: _Item,
        kind: object,
        index: int,
        chunks: Sequence[StreamChunk],
        i: int,
        out: list[bytes],
    ) -> int:
        """Encode the ``kind`` deltas at ``index`` from ``chunks[i]`` on; the next chunk's index.

        Each is what `feed` makes of it: the open ``item``'s next delta event.
        """
        assert item.delta is not None
        head, middle, tail = item.delta
        texts = delta_run(chunks, i, kind, index)
        dumps = orjson.dumps
        first = self._sequence
        out.extend(
            [b"%b%d%b%b%b" % (head, first + n, middle, dumps(t), tail) for n, t in enumerate(texts)]
        )
        self._sequence = first + len(texts)
        item.text.extend(texts)
        if item.kind == "message":
            self._text.extend(texts)
        return i + len(texts)

    def _tool_delta(self, index: int, chunk: StreamChunk) -> bytes:
        item, out = self._open(index, "function_call")
        if not item.call_id and isinstance(chunk.get("id"), str):
            item.call_id = chunk["id"]
        if not item.name and isinstance(chunk.get("name"), str):
            item.name = chunk["name"]
        args = chunk.get("argumentsDelta", "")
        args = args if isinstance(args, str) else ""
        if item.started:
            return out + (self._delta(item, args) if args else b"")
        item.arguments.append(args)
        if not item.name:
            return out  # held back until the name is known
        held = "".join(item.arguments)
        item.arguments = []
        out += self._started_call(item)
        return out + (self._delta(item, held) if held else b"")

    def _started_call(self, item: _Item) -> bytes:
        if item.call_id:
            self._call_ids.append(item.call_id)
        return self._added(item)

    def _block_end(self, index: int, block: object) -> bytes:
        item = self._items.get(index)
        if not isinstance(block, Mapping):
            return self._close(index) if item is not None else b""
        kind = block.get("type")
        out = b""
        if kind == "tool-call":
            item, out = self._open(index, "function_call")
            item.call_id = item.call_id or str(block.get("id") or "")
            item.name = item.name or str(block.get("name") or "")
            if not item.started:
                held = "".join(item.arguments)
                item.arguments = []
                arguments = block.get("arguments")
                out += self._started_call(item)
                full = arguments if isinstance(arguments, str) else held
                out += self._delta(item, full) if full else b""
        elif kind in ("text", "reasoning") and isinstance(block.get("text"), str):
            item, out = self._open(index, "message" if kind == "text" else "reasoning")
            sent = "".join(item.text)
            text = block["text"]
            if text.startswith(sent) and len(text) > len(sent):
                out += self._delta(item, text[len(sent) :])
        elif item is None:
            return b""
        return out + self._close(index)

    def _close(self, index: int) -> bytes:
        item = self._items.pop(index)
        if not item.started:  # a tool call whose name never came
            item.name = item.name or "unknown"
            held = "".join(item.arguments)
            item.arguments = []
            start = self._started_call(item) + (self._delta(item, held) if held else b"")
        else:
            start = b""
        base = {"item_id": item.id, "output_index": item.position}
        done = item.done()
        self._output[item.position] = done
        if item.kind == "message":
            text = "".join(item.text)
            part = done["content"][0]
            out = self._event(
                "response.output_text.done",
                {**base, "content_index": 0, "text": text, "logprobs": []},
            ) + self._event(
                "response.content_part.done", {**base, "content_index": 0, "part": part}
            )
        elif item.kind == "reasoning":
            text = "".join(item.text)
            part = {"type": "summary_text", "text": text}
            out = self._event(
                "response.reasoning_summary_text.done", {**base, "summary_index": 0, "text": text}
            ) + self._event(
                "response.reasoning_summary_part.done", {**base, "summary_index": 0, "part": part}
            )
        else:
            out = self._event(
                "response.function_call_arguments.done",
                {**base, "arguments": "".join(item.arguments)},
            )
        done_item = {"output_index": item.position, "item": done}
        return start + out + self._event("response.output_item.done", done_item)

    def _close_all(self) -> bytes:
        out = b""
        for index in sorted(self._items, key=lambda i: self._items[i].position):
            out += self._close(index)
        return out

    def finish(self, reason: Mapping[str, object]) -> bytes:
        """Every open item done, then ``response.completed`` (or ``response.incomplete``)."""
        out = self._close_all()
        incomplete = _incomplete(reason)
        if incomplete is None:
            response = self._response("completed", usage=self._usage)
            return out + self._event("response.completed", {"response": response})
        response = self._response("incomplete", usage=self._usage, incomplete=incomplete)
        return out + self._event("response.incomplete", {"response": response})

    def _failed(self, message: str, code: str) -> bytes:
        error = {"code": code, "message": message}
        response = self._response("failed", usage=self._usage, error=error)
        return self._event("response.failed", {"response": response}) + self._event(
            "error", {"code": code, "message": message, "param": None}
        )

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: ``response.failed``, then an ``error`` event."""
        code = str(failure.get("code", "UNKNOWN"))
        wire_code = "rate_limit_exceeded" if code == "RATE_LIMIT" else "server_error"
        return self._failed(str(failure.get("message", "")) or code, wire_code)

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: ``response.failed`` and ``error`` (``server_error``)."""
        return self._failed(message, "server_error")


# --- decoding: what a live provider streams -> dsh chunks ----------------------------------


def dsh_usage(usage: Mapping[str, object]) -> Usage:
    """A Responses ``usage`` object as a dsh ``usage`` (cached input split out)."""
    prompt = int_field(usage.get("input_tokens")) or 0
    output = int_field(usage.get("output_tokens")) or 0
    details = usage.get("input_tokens_details")
    cached = int_field(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    out_details = usage.get("output_tokens_details")
    reasoning = (
        int_field(out_details.get("reasoning_tokens")) if isinstance(out_details, Mapping) else None
    )
    out: Usage = {"inputTokens": max(prompt - (cached or 0), 0), "outputTokens": output}
    if cached:
        out["cacheReadTokens"] = cached
    if reasoning:
        out["reasoningTokens"] = reasoning
    total = int_field(usage.get("total_tokens"))
    if total is not None:
        out["totalTokens"] = total
    return out


_DELTA_KINDS: Final = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "text",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_text.delta": "reasoning",
}
_ITEM_KINDS: Final = {"message": "text", "reasoning": "reasoning", "function_call": "tool-call"}


class _Block:
    __slots__ = ("id", "index", "kind", "name", "parts")

    def __init__(self, index: int, kind: str):
        self.index = index
        self.kind = kind
        self.id = ""
        self.name = ""
        self.parts: list[str] = []

    def assembled(self) -> JSONObject:
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": text}
        return {"type": self.kind, "text": text}


def _error_reason(message: str, code: str) -> JSONObject:
    return {"kind": "error", "failure": {"message": message, "code": code}}


_ERROR_CODES: Final = {
    "rate_limit_exceeded": "RATE_LIMIT",
    "context_length_exceeded": "CONTEXT_WINDOW_EXCEEDED",
    "server_error": "SERVER",
    "invalid_prompt": "INVALID_REQUEST",
}


def responses_failure(error: object) -> FailureRecord:
    """The dsh failure of a Responses ``error`` (``{"code", "message"}``) or error event."""
    fields = error if isinstance(error, Mapping) else {}
    code = fields.get("code")
    message = str(fields.get("message") or "the response failed")
    return {"message": message, "code": _ERROR_CODES.get(str(code), "UNKNOWN")}


class ResponsesDecoder:
    """Turns Responses stream events (parsed JSON) into dsh chunks; one per call.

    Each output item is one dsh block (indexes from 0 in order of appearance):
    ``output_text`` and refusal deltas are text, reasoning summary and reasoning text
    deltas reasoning, a ``function_call`` a tool call whose id is its ``call_id``. An
    item's ``response.output_item.done`` ends its block. ``response.completed`` gives
    ``usage`` and the ``finish`` (``tool-calls`` when the output has a function call,
    ``EMPTY_RESPONSE`` when it has nothing); ``response.incomplete`` ``max-tokens``
    (``max_output_tokens``) or a ``CONTENT_FILTER`` error; ``response.failed`` the
    response's error.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, _Block] = {}  # item id -> its open block
        self._count = 0
        self._produced = False
        self._calls = 0
        self._done = False
        self._usage: Usage | None = None
        #: The live response's ``id``, once ``response.created`` said it.
        self.response_id: str | None = None

    @property
    def done(self) -> bool:
        """Whether the ``finish`` was produced (a finishing event was read)."""
        return self._done

    def _block(self, out: list[StreamChunk], item_id: str, kind: str) -> _Block:
        block = self._blocks.get(item_id)
        if block is None:
            block = self._blocks[item_id] = _Block(self._count, kind)
            self._count += 1
            out.append({"type": "block-start", "index": block.index, "blockType": kind})
        return block

    def feed(self, event: Mapping[str, Any]) -> list[StreamChunk]:
        """The dsh chunks for one event object."""
        out: list[StreamChunk] = []
        kind = str(event.get("type", ""))
        if self.done:
            return out
        response = event.get("response")
        if kind == "response.created" and isinstance(response, Mapping):
            if isinstance(response.get("id"), str):
                self.response_id = response["id"]
        elif kind in _DELTA_KINDS:
            block = self._block(out, str(event.get("item_id", "")), _DELTA_KINDS[kind])
            self._text(out, block, str(event.get("delta", "")))
        elif kind == "response.output_item.added":
            self._item_added(out, event.get("item"))
        elif kind == "response.function_call_arguments.delta":
            block = self._block(out, str(event.get("item_id", "")), "tool-call")
            self._arguments(out, block, str(event.get("delta", "")))
        elif kind == "response.output_item.done":
            self._item_done(out, event.get("item"))
        elif kind in _FINISHED and isinstance(response, Mapping):
            self._finished(out, kind, response)
        return out

    def _text(self, out: list[StreamChunk], block: _Block, text: str) -> None:
        if not text:
            return
        block.parts.append(text)
        self._produced = True
        out.append({"type": f"{block.kind}-delta", "index": block.index, "text": text})

    def _arguments(self, out: list[StreamChunk], block: _Block, text: str) -> None:
        block.parts.append(text)
        self._produced = True
        out.append(
            {
                "type": "tool-call-delta",
                "index": block.index,
                "id": block.id,
                "argumentsDelta": text,
            }
        )

    def _item_added(self, out: list[StreamChunk], item: Any) -> None:
        if not isinstance(item, Mapping) or item.get("type") != "function_call":
            return
        block = self._block(out, str(item.get("id") or item.get("call_id") or ""), "tool-call")
        block.id = str(item.get("call_id") or item.get("id") or f"call_{block.index}")
        block.name = str(item.get("name") or "")
        self._calls += 1
        self._produced = True
        out.append(
            {
                "type": "tool-call-delta",
                "index": block.index,
                "id": block.id,
                "name": block.name,
                "argumentsDelta": "",
            }
        )

    def _item_done(self, out: list[StreamChunk], item: Any) -> None:
        if not isinstance(item, Mapping):
            return
        item_id = str(item.get("id") or item.get("call_id") or "")
        block = self._blocks.pop(item_id, None)
        kind = _ITEM_KINDS.get(str(item.get("type")))
        if block is None:
            if kind != "tool-call":
                return
            self._item_added(out, item)
            block = self._blocks.pop(item_id)
        if block.kind == "tool-call":
            arguments = item.get("arguments")
            if isinstance(arguments, str) and arguments.startswith("".join(block.parts)):
                rest = arguments[len("".join(block.parts)) :]
                if rest:
                    self._arguments(out, block, rest)
        out.append({"type": "block-end", "index": block.index, "block": block.assembled()})

    def _close(self, out: list[StreamChunk]) -> None:
        for block in sorted(self._blocks.values(), key=lambda b: b.index):
            out.append({"type": "block-end", "index": block.index, "block": block.assembled()})
        self._blocks = {}

    def _finished(self, out: list[StreamChunk], kind: str, response: Mapping[str, Any]) -> None:
        self._close(out)
        usage = response.get("usage")
        if isinstance(usage, Mapping):
            out.append({"type": "usage", "usage": dsh_usage(usage)})
        out.append({"type": "finish", "reason": self._reason(kind, response)})
        self._done = True

    def _reason(self, kind: str, response: Mapping[str, Any]) -> JSONObject:
        if kind == "response.failed":
            return {"kind": "error", "failure": responses_failure(response.get("error"))}
        if kind == "response.incomplete":
            details = response.get("incomplete_details")
            why = details.get("reason") if isinstance(details, Mapping) else None
            if why == "content_filter":
                return _error_reason(
                    "the provider's content filter stopped the response (incomplete: "
                    "content_filter)",
                    "CONTENT_FILTER",
                )
            return {"kind": "max-tokens"}
        if not self._produced:
            return _error_reason(
                "the model returned a completed response with no text, reasoning or tool call",
                "EMPTY_RESPONSE",
            )
        return {"kind": "tool-calls"} if self._calls else {"kind": "stop"}

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the stream ended (a cut stream finishes as an error)."""
        if self.done:
            return []
        out: list[StreamChunk] = []
        self._close(out)
        reason = _error_reason(
            "the stream ended before response.completed (the response was cut short)", "UNKNOWN"
        )
        out.append({"type": "finish", "reason": reason})
        self._done = True
        return out

    @staticmethod
    def failed(failure: FailureRecord) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}


def decode_response(answer: Mapping[str, Any]) -> list[StreamChunk]:
    """The chunks of a whole ``response`` object, through the stream decoder."""
    decoder = ResponsesDecoder()
    out: list[StreamChunk] = []
    for item in answer.get("output") or ():
        if not isinstance(item, Mapping):
            continue
        item_id = str(item.get("id") or "")
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, Mapping):
                    text = part.get("text", part.get("refusal", ""))
                    event = {"type": "response.output_text.delta", "item_id": item_id}
                    out += decoder.feed({**event, "delta": str(text)})
        elif kind == "reasoning":
            event = {"type": "response.reasoning_summary_text.delta", "item_id": item_id}
            out += decoder.feed({**event, "delta": _summary_text(item)})
        out += decoder.feed({"type": "response.output_item.done", "item": item})
    status = answer.get("status")
    finished = "response.incomplete" if status == "incomplete" else "response.completed"
    if status == "failed":
        finished = "response.failed"
    return out + decoder.feed({"type": finished, "response": answer})


class ResponsesWire(OpenAIWire):
    """The OpenAI Responses wire (``POST /v1/responses``): a variant of the OpenAI wire.

    It shares the OpenAI API's errors, refusals, key header, client and variables; it has
    no model list route of its own (the chat-completions wire's serves it).
    """

    name = "openai-responses"
    routes = ("/v1/responses", "/responses")
    list_routes = ()
    remembers = True
    call_id_prefix = "resp_dsh_replay_"
    checked_fields = ("input", "tools")
    text_fields = ("input",)
    upstream_path = "/responses"  # the base URL includes the version segment

    decoder = ResponsesDecoder
    decode_whole = staticmethod(decode_response)

    def canonical(self, body: dict[str, Any], *, path: str, history: History) -> JSONObject:
        """See `read_responses_request`.

        Raises:
            BadRequest: ``input`` is neither a string nor an array of objects, or
                ``tools`` is not an array of objects (400); ``previous_response_id``
                names no answer served in this test.
        """
        super().canonical(body, path=path, history=history)
        return read_responses_request(body, history)

    def encoder_options(self, request: Mapping[str, object]) -> tuple[object, ...]:
        """``()``: this wire's encoding does not read the request."""
        return ()

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> ResponsesEncoder:
        """An encoder for one streamed response."""
        return ResponsesEncoder(model=model, response_id=call_id)

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """See `responses_object`."""
        return responses_object(chunks, model=model, call_id=call_id)

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """An ``error`` event: its failure (``response.failed`` is the decoder's)."""
        if event.get("type") != "error":
            return None
        return responses_failure(event)

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """``response.completed``, ``response.incomplete`` or ``response.failed``."""
        if frame.name is not None:
            return frame.name in _FINISHED
        return event is not None and event.get("type") in _FINISHED

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``{}``: the OpenAI wire's variables point the same clients here."""
        return {}


WIRE: Final = ResponsesWire()
"""The OpenAI Responses wire."""
