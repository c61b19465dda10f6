"""dsh stream chunks <-> the Gemini API wire (``generateContent``, ``google-genai``).

The wire of Google's Gemini API (``generativelanguage.googleapis.com``), which the
``google-genai`` SDK speaks. The model is in the path, not the body:
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` streams, ``...:generateContent``
answers one object (also under ``/v1/``, the version the SDK picks). See
[docs/wires.md#gemini](../wires.md#gemini).

- `gemini_request` reads a Gemini body (``contents``, ``systemInstruction``,
  ``tools[].functionDeclarations``, ``generationConfig``) into the in-process shape
  (chat-completions messages) the layers above read.
- `GeminiEncoder` turns the chunks of one replayed call into SSE frames, each
  ``data: {GenerateContentResponse}``; there is no ``[DONE]``: the last frame carries
  ``finishReason`` and ``usageMetadata``. `gemini_response` is the whole object.
- `GeminiDecoder` maps a live provider's ``GenerateContentResponse`` objects back
  to dsh chunks, for recording; `gemini_failure` classifies an HTTP error.

Gemini does not stream a function call's arguments: a tool call is one
``functionCall`` part (``{"id"?, "name", "args": {...}}``), sent when its block ends.
A ``functionCall`` often has no ``id``; `call_id_for` gives it one computed from
its content (``call_<name>_<8 hex of the sorted-keys args JSON>``, ``_2``, ``_3`` ... for a
repeat within one answer), so a request that sends the call back and the answer that
made it agree on the id, and a ``functionResponse`` without an ``id`` takes the id of the
first call of that name it has not answered yet.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import orjson

from .._format.events import JSONObject, StreamChunk
from .._format.reply import assemble_reply
from .base import (
    BaseWire,
    Failure,
    History,
    InProcess,
    WireError,
    copy_settings,
    failure_message,
    failure_record,
    failure_status,
    feed_each,
    import_sdk,
    int_field,
    status_code,
    wire_error,
)
from .framing import SSE_CRLF, Frame
from .held_calls import HeldCall, HeldCallsEncoder, WholeCallsDecoder
from .shapes import ContentBlock, FailureRecord, Usage

__all__ = [
    "WIRE",
    "GeminiDecoder",
    "GeminiEncoder",
    "GeminiWire",
    "call_id_for",
    "gemini_error",
    "gemini_failure",
    "gemini_refusal",
    "gemini_request",
    "gemini_response",
    "gemini_upstream",
]

_STATUS_NAMES: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_FILTERED: Final = frozenset(
    {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}
)
_PATH: Final = re.compile(r"/models/(?P<model>[^/:?]+):(?P<method>[A-Za-z]+)")
_VERSION: Final = re.compile(r"/(v1beta|v1alpha|v1)(?=/|$)")


def _sorted_json(value: object) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def call_id_for(name: str, args: object, seen: dict[str, int]) -> str:
    """The id of a ``functionCall`` that has none, computed from its content.

    Args:
        name: The function's name.
        args: Its ``args`` (any JSON value; ``None`` counts as ``{}``).
        seen: The ids given so far in one answer, with their counts (updated): a
            repeat of the same call gets ``_2``, ``_3``, ... appended.

    Returns:
        ``call_<name>_<first 8 hex digits of sha256 of the sorted-keys args JSON>``.
    """
    digest = hashlib.sha256(_sorted_json({} if args is None else args).encode()).hexdigest()
    base = f"call_{name}_{digest[:8]}"
    count = seen.get(base, 0) + 1
    seen[base] = count
    return base if count == 1 else f"{base}_{count}"


def _frame(obj: JSONObject) -> bytes:
    return SSE_CRLF.frame(orjson.dumps(obj))


def _parsed_args(arguments: object) -> JSONObject:
    """A tool call's ``arguments`` text as the ``args`` object (``{}`` when not one)."""
    if isinstance(arguments, Mapping):
        return dict(arguments)
    try:
        parsed = orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except orjson.JSONDecodeError:
        parsed = {}
    return parsed if isinstance(parsed, dict) else {}


def _function_call(block: Mapping[str, object]) -> JSONObject:
    call: JSONObject = {}
    if block.get("id"):
        call["id"] = str(block["id"])
    call["name"] = str(block.get("name") or "")
    call["args"] = _parsed_args(block.get("arguments"))
    return {"functionCall": call}


def gemini_usage(usage: Usage) -> dict[str, int]:
    """A dsh ``usage`` object as Gemini's ``usageMetadata``.

    ``promptTokenCount`` is input plus cache-read and cache-write tokens,
    ``candidatesTokenCount`` the output tokens, ``thoughtsTokenCount`` the reasoning
    tokens and ``cachedContentTokenCount`` the cache-read tokens (each when recorded),
    ``totalTokenCount`` the recorded total (else prompt plus candidates).
    """
    read = int_field(usage.get("cacheReadTokens"))
    write = int_field(usage.get("cacheWriteTokens")) or 0
    prompt = (int_field(usage.get("inputTokens")) or 0) + (read or 0) + write
    output = int_field(usage.get("outputTokens")) or 0
    total = int_field(usage.get("totalTokens"))
    out = {"promptTokenCount": prompt, "candidatesTokenCount": output}
    reasoning = int_field(usage.get("reasoningTokens"))
    if reasoning is not None:
        out["thoughtsTokenCount"] = reasoning
    if read is not None:
        out["cachedContentTokenCount"] = read
    out["totalTokenCount"] = total if total is not None else prompt + output
    return out


def _failure_code(reason: Mapping[str, object]) -> str:
    failure = reason.get("failure")
    if isinstance(failure, Mapping) and isinstance(failure.get("code"), str):
        return str(failure["code"])
    return "UNKNOWN"


def _finish_reason(reason: Mapping[str, object]) -> str:
    kind = reason.get("kind")
    if kind in ("stop", "tool-calls"):
        return "STOP"
    if kind == "max-tokens":
        return "MAX_TOKENS"
    if kind == "error":
        code = _failure_code(reason)
        if code == "CONTENT_FILTER":
            return "SAFETY"
        if code == "EMPTY_RESPONSE":
            return "STOP"
    return "OTHER"


class GeminiEncoder(HeldCallsEncoder):
    """Encodes the chunks of one call as Gemini SSE frames (``data: {response}``).

    ``text-delta`` is a ``{"text"}`` part, ``reasoning-delta`` a ``{"text", "thought":
    true}`` part, a tool call one ``functionCall`` part when its block ends (or at the
    finish, when it never ended); ``usage`` is held for the last frame, which carries
    ``finishReason`` and ``usageMetadata``. Error finishes other than ``CONTENT_FILTER``
    and ``EMPTY_RESPONSE`` are the caller's (an HTTP error, or `failure_event`).

    Args:
        model: Every frame's ``modelVersion`` (the model of the request's path).
        response_id: Every frame's ``responseId``.
    """

    def __init__(self, *, model: str, response_id: str):
        super().__init__()
        self._head = {"modelVersion": model, "responseId": response_id}
        self._sent = False  # whether a frame of parts went out

    def marks(self) -> list[str]:
        """The answer's text and sorted tool call ids so far (how a next request quotes it)."""
        return ["".join(self._text), *sorted(t.id for t in self._tools.values() if t.id)]

    def _parts(self, parts: list[JSONObject]) -> bytes:
        self._sent = True
        candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
        return _frame({"candidates": [candidate], **self._head})

    def start(self) -> bytes:
        """Nothing: a Gemini stream has no opening frame."""
        return b""

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The events of ``chunks`` in order (`feed` of each, joined)."""
        return feed_each(self, chunks)

    def _text_event(self, text: str, reasoning: bool) -> bytes:
        """A frame of one ``{"text"}`` part (``"thought": true`` for reasoning)."""
        part: JSONObject = {"text": text, "thought": True} if reasoning else {"text": text}
        return self._parts([part])

    def _call_event(self, call: HeldCall) -> bytes:
        """A frame of the call's ``functionCall`` part."""
        return self._parts([self._tool_part(call)])

    @staticmethod
    def _tool_part(tool: HeldCall) -> JSONObject:
        tool.sent = True
        block: ContentBlock = {"id": tool.id, "name": tool.name, "arguments": "".join(tool.args)}
        return _function_call(block)

    def finish(self, reason: Mapping[str, object]) -> bytes:
        """The last frame: tool calls not sent yet, ``finishReason`` and ``usageMetadata``.

        After content its candidate has ``content``, as the live API's last frame does:
        the unsent tool calls, else one empty ``{"text": ""}`` part (so code reading
        ``candidates[0].content.parts`` of every frame reads it too); an answer with no
        content at all (``EMPTY_RESPONSE``) has none.
        """
        parts = [self._tool_part(tool) for tool in self.unsent()]
        if not parts and self._sent:
            parts = [{"text": ""}]
        candidate: JSONObject = {}
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        candidate["finishReason"] = _finish_reason(reason)
        candidate["index"] = 0
        frame: JSONObject = {"candidates": [candidate]}
        if self._usage is not None:
            frame["usageMetadata"] = gemini_usage(self._usage)
        return _frame({**frame, **self._head})

    @staticmethod
    def error_event(message: str, status: int) -> bytes:
        """An in-stream error frame: ``data: {"error": {"code", "message", "status"}}``."""
        return _frame({"error": _error_object(status, message)})

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: the error frame of its status."""
        return self.error_event(failure_message(failure), failure_status(failure, overloaded=503))

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: an ``INTERNAL`` (500) error frame."""
        return self.error_event(message, 500)


def _error_object(status: int, message: str) -> JSONObject:
    name = _STATUS_NAMES.get(status, "INTERNAL" if status >= 500 else "INVALID_ARGUMENT")
    return {"code": status, "message": message, "status": name}


def gemini_response(chunks: list[StreamChunk], *, model: str, response_id: str) -> JSONObject:
    """The whole ``GenerateContentResponse`` (``:generateContent``) of a call's chunks.

    One candidate whose parts are the reasoning joined (one ``thought`` part), the text
    joined, then each tool call's ``functionCall``; ``finishReason`` as in the stream,
    ``usageMetadata`` when the call recorded usage.
    """
    reply = assemble_reply(chunks)
    texts = [str(b.get("text", "")) for b in reply.content if b.get("type") == "text"]
    thoughts = [str(b.get("text", "")) for b in reply.content if b.get("type") == "reasoning"]
    parts: list[JSONObject] = []
    if any(thoughts):
        parts.append({"text": "".join(thoughts), "thought": True})
    if any(texts):
        parts.append({"text": "".join(texts)})
    parts.extend(_function_call(block) for block in reply.tool_calls)
    candidate: JSONObject = {
        "content": {"role": "model", "parts": parts},
        "finishReason": _finish_reason(reply.finish or {"kind": "stop"}),
        "index": 0,
    }
    out: JSONObject = {"candidates": [candidate]}
    if reply.usage is not None:
        out["usageMetadata"] = gemini_usage(reply.usage)
    out["modelVersion"] = model
    out["responseId"] = response_id
    return out


def gemini_error(failure: Failure) -> WireError:
    """The HTTP error the Gemini API answers for a recorded failure.

    The status comes from `failure_status` (503 for ``OVERLOADED``); the body
    is Google's ``{"error": {"code": <status>, "message", "status": <canonical name>}}``
    (``INVALID_ARGUMENT`` 400, ``UNAUTHENTICATED`` 401, ``PERMISSION_DENIED`` 403,
    ``NOT_FOUND`` 404, ``RESOURCE_EXHAUSTED`` 429, ``INTERNAL`` 500, ``UNAVAILABLE`` 503,
    ``DEADLINE_EXCEEDED`` 504; other statuses ``INTERNAL`` from 500, else
    ``INVALID_ARGUMENT``).
    """
    status = failure_status(failure, overloaded=503)
    return wire_error(failure, status, {"error": _error_object(status, failure_message(failure))})


def gemini_refusal(status: int, message: str, *, param: str | None = None) -> WireError:
    """Google's error for a refused request: ``{"error": {"code", "message", "status"}}``.

    ``status`` is the canonical name (``INVALID_ARGUMENT`` for a 400 or 413); ``param`` is
    not part of this shape.
    """
    return wire_error({}, status, {"error": _error_object(status, message)})


# --- reading a request: Gemini body -> the in-process shape ---------------------------------


def _text_of(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        value = value.get("parts")
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        return ""
    texts = (p.get("text") for p in value if isinstance(p, Mapping))
    return "".join(t for t in texts if isinstance(t, str))


def _parts(content: Mapping[str, object]) -> list[Mapping[str, object]]:
    parts = content.get("parts")
    if not isinstance(parts, Sequence) or isinstance(parts, str | bytes):
        return []
    return [p for p in parts if isinstance(p, Mapping)]


def _model_message(content: Mapping[str, object], open_calls: list[tuple[str, str]]) -> JSONObject:
    """A ``model`` content as an assistant message; its calls are added to ``open_calls``."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[JSONObject] = []
    seen: dict[str, int] = {}
    for part in _parts(content):
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            name = str(call.get("name") or "")
            args = call.get("args")
            given = call.get("id")
            call_id = given if isinstance(given, str) and given else call_id_for(name, args, seen)
            open_calls.append((name, call_id))
            arguments = _sorted_json({} if args is None else args)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            )
        elif isinstance(text := part.get("text"), str):
            (thoughts if part.get("thought") is True else texts).append(text)
    message: JSONObject = {"role": "assistant", "content": "".join(texts) if texts else None}
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    if calls:
        message["tool_calls"] = calls
    return message


def _answered_id(name: str, given: object, open_calls: list[tuple[str, str]]) -> str:
    """The call a ``functionResponse`` answers: its ``id``, else the first open call of ``name``."""
    if isinstance(given, str) and given:
        for position, (_, call_id) in enumerate(open_calls):
            if call_id == given:
                del open_calls[position]
                break
        return given
    for position, (call_name, call_id) in enumerate(open_calls):
        if call_name == name:
            del open_calls[position]
            return call_id
    return f"call_{name}"


def _user_messages(
    content: Mapping[str, object], open_calls: list[tuple[str, str]]
) -> list[JSONObject]:
    """A ``user`` content: one ``tool`` message per ``functionResponse``, then the rest."""
    tools: list[JSONObject] = []
    blocks: list[JSONObject] = []
    for part in _parts(content):
        response = part.get("functionResponse")
        if isinstance(response, Mapping):
            name = str(response.get("name") or "")
            call_id = _answered_id(name, response.get("id"), open_calls)
            result = response.get("response")
            text = result if isinstance(result, str) else _sorted_json(result or {})
            tools.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif isinstance(said := part.get("text"), str):
            if part.get("thought") is not True:
                blocks.append({"type": "text", "text": said})
        else:
            for key in ("inlineData", "inline_data", "fileData", "file_data"):
                if key in part:
                    blocks.append({"type": key.replace("_d", "D"), **{key: part[key]}})
                    break
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return [*tools, {"role": "user", "content": blocks[0]["text"]}]
    return [*tools, {"role": "user", "content": blocks}] if blocks or not tools else tools


def _tools(value: object) -> list[JSONObject]:
    out: list[JSONObject] = []
    for tool in value if isinstance(value, list) else []:
        if not isinstance(tool, Mapping):
            continue
        declarations = tool.get("functionDeclarations", tool.get("function_declarations"))
        if not isinstance(declarations, list):
            out.append(dict(tool))  # googleSearch, codeExecution, ...: kept as sent
            continue
        for declaration in declarations:
            if not isinstance(declaration, Mapping):
                continue
            function: JSONObject = {"name": str(declaration.get("name") or "")}
            if declaration.get("description") is not None:
                function["description"] = declaration["description"]
            for key in ("parameters", "parametersJsonSchema", "parameters_json_schema"):
                if declaration.get(key) is not None:
                    function["parameters"] = declaration[key]
                    break
            out.append({"type": "function", "function": function})
    return out


_CONFIG: Final = (
    ("maxOutputTokens", "max_tokens"),
    ("max_output_tokens", "max_tokens"),
    ("temperature", "temperature"),
    ("stopSequences", "stop"),
    ("stop_sequences", "stop"),
)
"""A ``generationConfig`` read into the in-process request: (Gemini's name, its name there)."""


def gemini_request(body: Mapping[str, object], path: str) -> JSONObject:
    """A Gemini ``generateContent`` body read into the in-process shape.

    Args:
        body: The parsed body (never changed).
        path: The request path: ``.../models/<model>:<method>`` names the model, and
            ``:streamGenerateContent`` asks for a stream.

    Returns:
        ``{"messages", "model"?, "stream", "tools"?, "max_tokens"?, "temperature"?,
        "stop"?}``: ``systemInstruction`` as a leading ``system`` message; each
        ``model`` content an assistant message (text joined, ``thought`` text as
        ``reasoning_content``, ``functionCall`` parts as ``tool_calls`` with sorted-keys
        ``arguments``); each ``user`` content its ``functionResponse`` parts as ``tool``
        messages (the response as JSON text), then its other parts as a user message
        (one text part as a string, else blocks; ``inlineData``/``fileData`` parts kept
        as blocks of that type).
    """
    messages: list[JSONObject] = []
    system = _text_of(body.get("systemInstruction", body.get("system_instruction")))
    if system:
        messages.append({"role": "system", "content": system})
    open_calls: list[tuple[str, str]] = []
    contents = body.get("contents")
    if isinstance(contents, Mapping):
        contents = [contents]
    for content in contents if isinstance(contents, list) else []:
        if not isinstance(content, Mapping):
            continue
        if content.get("role") == "model":
            messages.append(_model_message(content, open_calls))
        else:
            messages.extend(_user_messages(content, open_calls))
    out: JSONObject = {"messages": messages}
    found = _PATH.search(path.split("?", 1)[0])
    if found is not None:
        out["model"] = found["model"]
    out["stream"] = found is not None and found["method"] == "streamGenerateContent"
    tools = _tools(body.get("tools"))
    if tools:
        out["tools"] = tools
    copy_settings(body.get("generationConfig", body.get("generation_config")), _CONFIG, out)
    return out


# --- decoding: a live provider's responses -> dsh chunks -----------------------------------


def _error(message: str, code: str) -> JSONObject:
    return {"kind": "error", "failure": {"message": message, "code": code}}


def dsh_usage(usage: Mapping[str, object]) -> Usage:
    """Gemini's ``usageMetadata`` as a dsh ``usage`` (the inverse of `gemini_usage`).

    ``inputTokens`` is ``promptTokenCount`` less ``cachedContentTokenCount`` (which
    becomes ``cacheReadTokens``), ``outputTokens`` the ``candidatesTokenCount``,
    ``reasoningTokens`` the ``thoughtsTokenCount``, ``totalTokens`` the
    ``totalTokenCount``.
    """
    prompt = int_field(usage.get("promptTokenCount")) or 0
    cached = int_field(usage.get("cachedContentTokenCount"))
    out: Usage = {
        "inputTokens": max(prompt - (cached or 0), 0),
        "outputTokens": int_field(usage.get("candidatesTokenCount")) or 0,
    }
    if cached is not None:
        out["cacheReadTokens"] = cached
    thoughts = int_field(usage.get("thoughtsTokenCount"))
    if thoughts is not None:
        out["reasoningTokens"] = thoughts
    total = int_field(usage.get("totalTokenCount"))
    if total is not None:
        out["totalTokens"] = total
    return out


class GeminiDecoder(WholeCallsDecoder):
    """Turns ``GenerateContentResponse`` objects (parsed JSON) into dsh chunks; one per call.

    Block indexes count from 0 in order of appearance. Consecutive text parts (or
    ``thought`` parts) continue one ``text`` (or ``reasoning``) block; a ``functionCall``
    part is a whole ``tool-call`` block: ``block-start``, one ``tool-call-delta`` with the
    id (the part's, else `call_id_for`), the name and the whole sorted-keys
    arguments, ``block-end``. The frame with ``finishReason`` closes the open block and
    gives ``usage`` (from ``usageMetadata``) and the ``finish``: ``STOP`` is ``stop``, or
    ``tool-calls`` after function calls; ``MAX_TOKENS`` is ``max-tokens``; ``SAFETY``,
    ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT`` (and a prompt blocked by
    ``promptFeedback.blockReason``) fail with ``CONTENT_FILTER``; no content at all with
    ``EMPTY_RESPONSE``; any other reason, or a stream that ends without one, with
    ``UNKNOWN``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._usage: Usage | None = None
        #: The live answer's ``responseId``, once read.
        self.response_id: str | None = None

    def feed(self, event: Mapping[str, object]) -> list[StreamChunk]:
        """The dsh chunks for one ``GenerateContentResponse`` object."""
        out: list[StreamChunk] = []
        if self._done:
            return out
        if self.response_id is None and isinstance(response_id := event.get("responseId"), str):
            self.response_id = response_id
        usage = event.get("usageMetadata")
        if isinstance(usage, Mapping):
            self._usage = dsh_usage(usage)
        candidates = event.get("candidates")
        candidate = candidates[0] if isinstance(candidates, list) and candidates else None
        if not isinstance(candidate, Mapping):
            feedback = event.get("promptFeedback")
            if isinstance(feedback, Mapping) and feedback.get("blockReason"):
                reason = str(feedback["blockReason"])
                out.extend(
                    self._finish(_error(f"the prompt was blocked ({reason})", "CONTENT_FILTER"))
                )
            return out
        content = candidate.get("content")
        for part in _parts(content) if isinstance(content, Mapping) else []:
            self._part(part, out)
        finish = candidate.get("finishReason")
        if isinstance(finish, str) and finish:
            out.extend(self._finish(self._reason(finish)))
        return out

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the stream ended without a ``finishReason``."""
        if self._done:
            return []
        return self._finish(_error("the stream ended without a finishReason", "UNKNOWN"))

    def _part(self, part: Mapping[str, object], out: list[StreamChunk]) -> None:
        call = part.get("functionCall")
        if isinstance(call, Mapping):
            name = str(call.get("name") or "")
            args = call.get("args")
            given = call.get("id")
            call_id = (
                given if isinstance(given, str) and given else call_id_for(name, args, self._seen)
            )
            self._whole_call(call_id, name, _sorted_json({} if args is None else args), out)
            return
        text = part.get("text")
        if not isinstance(text, str) or not text:
            return
        self._delta("reasoning" if part.get("thought") is True else "text", text, out)

    def _finish(self, reason: JSONObject) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        self._close(out)
        if self._usage is not None:
            out.append({"type": "usage", "usage": self._usage})
        out.append({"type": "finish", "reason": reason})
        self._done = True
        return out

    def _reason(self, finish: str) -> JSONObject:
        if finish in _FILTERED:
            return _error(
                f"the model's answer was blocked (finishReason {finish})", "CONTENT_FILTER"
            )
        if not self._produced:
            return _error(
                f"the model returned no text, reasoning or function call (finishReason {finish})",
                "EMPTY_RESPONSE",
            )
        if finish == "STOP":
            return {"kind": "tool-calls"} if self._calls else {"kind": "stop"}
        if finish == "MAX_TOKENS":
            return {"kind": "max-tokens"}
        return _error(f"the model stopped with finishReason {finish}", "UNKNOWN")


def decode_response(answer: Mapping[str, object]) -> list[StreamChunk]:
    """The chunks of a whole ``GenerateContentResponse``, through the stream decoder."""
    decoder = GeminiDecoder()
    return decoder.feed(answer) + decoder.end()


def gemini_failure(status: int | None, body: object, headers: Mapping[str, str]) -> FailureRecord:
    """The dsh failure for a Gemini API error (an HTTP error, or an error frame).

    Args:
        status: The HTTP status; ``None`` for an error frame in the stream (its
            ``error.code`` is used then).
        body: The parsed body (``{"error": {"code", "message", "status"}}``), or
            anything else when it was not JSON.
        headers: The response headers (lower-case names): ``retry-after(-ms)`` becomes
            ``providerRetryAfterMs``, ``x-request-id`` becomes ``requestId``.

    Returns:
        ``{"message", "code", "status"?, ...}``; ``code`` is ``AUTH`` (401, 403),
        ``RATE_LIMIT`` (429), ``OVERLOADED`` (503), ``CONTEXT_WINDOW_EXCEEDED`` (400 about
        too many tokens), else ``UNKNOWN``.
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    if status is None:
        status = int_field(error.get("code"))
    found = error.get("message")
    text = found if isinstance(found, str) and found else f"Gemini API request failed ({status})"
    return failure_record(text, status_code(status, text), status, headers)


def gemini_upstream(base_url: str, path: str, model: str | None) -> str:
    """The live URL of a Gemini call: ``<base_url><path>``.

    The version segment is not doubled (a base ending in ``/v1beta`` and a path
    starting with it), ``model`` replaces the path's model when set, and a
    ``:streamGenerateContent`` call gets ``alt=sse`` when its query lacks it (the
    in-process transport passes no query).
    """
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    bare, _, query = path.partition("?")
    head = _VERSION.match(bare)
    if head is not None and base.endswith(head.group(0)):
        base = base[: -len(head.group(0))]
    if model is not None:
        bare = _PATH.sub(lambda m: f"/models/{model}:{m['method']}", bare, count=1)
    query = "&".join(q for q in (parts.query, query) if q)
    if bare.endswith(":streamGenerateContent") and "alt=" not in query:
        query = f"{query}&alt=sse" if query else "alt=sse"
    return urlunsplit((parts.scheme, parts.netloc, base + bare, query, parts.fragment))


def _route(version: str, method: str) -> str:
    return f"/{version}/models/{{model}}:{method}"


class GeminiWire(BaseWire):
    """The Gemini API wire (``POST /v1beta/models/{model}:streamGenerateContent``, ...)."""

    name = "gemini"
    routes = tuple(
        _route(version, method)
        for version in ("v1beta", "v1")
        for method in ("streamGenerateContent", "generateContent")
    )
    list_routes = ("/v1beta/models", "/v1/models")
    list_headers = ("x-goog-api-key", "x-goog-api-client")
    framing = SSE_CRLF
    checked_fields = ("contents", "tools")
    single_fields = ("contents",)
    record_base_url_variable = "DSH_RECORD_GEMINI_BASE_URL"

    refusal = staticmethod(gemini_refusal)
    error = staticmethod(gemini_error)
    decoder = GeminiDecoder
    decode_whole = staticmethod(decode_response)
    failure = staticmethod(gemini_failure)

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """See `gemini_request`.

        Raises:
            BadRequest: ``contents`` is neither an array of objects nor one object, or
                ``tools`` is not an array of objects (400).
        """
        super().canonical(body, path=path, history=history)
        return gemini_request(body, path)

    def model_list(self, names: list[str]) -> JSONObject:
        """``{"models": [{"name": "models/<n>", "displayName", "supportedGenerationMethods"}]}``."""
        return {
            "models": [
                {
                    "name": f"models/{name}",
                    "baseModelId": name,
                    "version": "001",
                    "displayName": name,
                    "description": "a model of the dsh-replay recording",
                    "supportedGenerationMethods": ["generateContent", "streamGenerateContent"],
                }
                for name in names
            ]
        }

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> GeminiEncoder:
        """An encoder (``replay_state`` is not used on this wire)."""
        return GeminiEncoder(model=model, response_id=call_id)

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """See `gemini_response`."""
        return gemini_response(chunks, model=model, response_id=call_id)

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """See `gemini_upstream`; the body goes unchanged (it names no model)."""
        return gemini_upstream(base_url, path, model), body

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """``x-goog-api-key: <key>``."""
        return {"x-goog-api-key": api_key}

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """An ``{"error": {...}}`` frame in the stream: `gemini_failure` of it."""
        if not isinstance(event.get("error"), Mapping):
            return None
        return gemini_failure(None, event, {})

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """A frame whose candidate has a ``finishReason`` ends the answer."""
        candidates = event.get("candidates") if event is not None else None
        return isinstance(candidates, list) and any(
            isinstance(c, Mapping) and c.get("finishReason") for c in candidates
        )

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``GOOGLE_GEMINI_BASE_URL`` (the root), ``GEMINI_API_KEY``, ``GOOGLE_API_KEY``.

        ``google-genai`` adds the version segment to the base URL, and reads both keys.
        """
        return {
            "GOOGLE_GEMINI_BASE_URL": root,
            "GEMINI_API_KEY": api_key,
            "GOOGLE_API_KEY": api_key,
        }

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """A ``google.genai.Client`` on the endpoint in process, or its ``.aio`` async face.

        The client's HTTP options carry the in-process base URL and ``httpx`` clients on
        the endpoint's transports (nothing goes to the network) and no retry options,
        so ``google-genai`` makes each call once.

        Args:
            http: The endpoint's in-process transports.
            options: Passed to ``google.genai.Client`` (``api_key`` defaults to the
                dummy key); an ``http_options`` given (a mapping or
                ``types.HttpOptions``) keeps its other settings (``api_version``,
                ``headers``, ...).
            asynchronous: The async client.

        Returns:
            The ``Client``, or ``Client(...).aio`` (``asynchronous``): the
            ``google.genai`` async client, ``await client.models.generate_content(...)``.

        Raises:
            DshReplayError: ``google-genai`` is not installed.
        """
        genai = import_sdk("google.genai", "google-genai")
        types = import_sdk("google.genai.types", "google-genai")
        given = options.pop("http_options", None)
        if given is None:
            http_options = types.HttpOptions()
        elif isinstance(given, types.HttpOptions):
            http_options = given.model_copy()
        elif isinstance(given, Mapping):
            http_options = types.HttpOptions(**given)
        else:
            raise TypeError(f"http_options must be a mapping or HttpOptions, got {given!r}")
        http_options.base_url = http.url
        http_options.httpx_client = http.http_client(False)
        if asynchronous:
            http_options.httpx_async_client = http.http_client(True)
        options.setdefault("api_key", http.api_key)
        client = genai.Client(http_options=http_options, **options)
        return client.aio if asynchronous else client


WIRE: Final = GeminiWire()
"""The Gemini API wire."""
