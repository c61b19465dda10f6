"""dsh stream chunks <-> Amazon Bedrock's Converse wire (``converse-stream``, boto3).

The wire of Bedrock Runtime's Converse API, which boto3's ``bedrock-runtime`` client
speaks (``converse_stream``, ``converse``). The model is in the path, URL-encoded by
botocore (``:`` as ``%3A``): ``POST /model/{model}/converse-stream`` streams,
``POST /model/{model}/converse`` answers one JSON object. See
[docs/wires.md#bedrock](../wires.md#bedrock).

- `bedrock_request` reads a Converse body (``messages`` of content blocks ``text``,
  ``toolUse``, ``toolResult``, ``reasoningContent``; ``system``;
  ``toolConfig.tools[].toolSpec``; ``inferenceConfig``) into the in-process shape.
- `BedrockEncoder` turns the chunks of one replayed call into ConverseStream events
  (``messageStart``, ``contentBlockStart``, ``contentBlockDelta``, ``contentBlockStop``,
  ``messageStop``, ``metadata``), each one message of the AWS event stream
  (`EVENT_STREAM`, ``application/vnd.amazon.eventstream``: a binary prelude with
  lengths and a CRC32, headers, the JSON payload and a CRC32 of the whole message).
  `bedrock_response` is the whole ``Converse`` answer.
- `BedrockDecoder` maps a live provider's events back to dsh chunks, for recording;
  `bedrock_failure` classifies an HTTP error (its ``x-amzn-ErrorType``).
- Recording re-signs each request with botocore's SigV4 (`bedrock_auth_headers`);
  on replay the signature of a request is not read.
"""

from __future__ import annotations

import functools
import os
import re
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

import orjson

from .._errors import DshReplayError
from .._format.events import ChunkRun, JSONObject, StreamChunk
from .._format.reply import assemble_reply
from .._scripts.entries import materialize_runs
from .base import (
    CONTEXT_OVERFLOW,
    BaseWire,
    Failure,
    History,
    InProcess,
    WireError,
    copy_settings,
    delta_run,
    failure_headers,
    failure_message,
    failure_record,
    failure_status,
    import_sdk,
    int_field,
    join_path,
    json_items,
    sent_marks,
)
from .framing import JSON_HEADERS, Frame, Framing
from .shapes import FailureRecord, Usage

__all__ = [
    "EVENT_STREAM",
    "WIRE",
    "BedrockDecoder",
    "BedrockEncoder",
    "BedrockWire",
    "EventStream",
    "EventStreamSplitter",
    "bedrock_auth_headers",
    "bedrock_error",
    "bedrock_failure",
    "bedrock_refusal",
    "bedrock_request",
    "bedrock_response",
    "bedrock_usage",
    "event_message",
    "exception_message",
    "model_upstream",
    "stream_exception",
]

_PATH: Final = re.compile(r"/model/(?P<model>[^/?]+)/(?P<verb>converse-stream|converse)(?=\?|$)")
_REGION: Final = re.compile(r"bedrock(?:-runtime)?(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com")
_DEFAULT_REGION: Final = "us-east-1"
_DUMMY_KEY_ID: Final = "dsh-replay-dummy-key-id"

# --- the AWS event stream framing ----------------------------------------------------------

_STRING: Final = 7  # the header value type of a string


_PRELUDE: Final = struct.Struct(">II")  # total length, headers' length
_CRC: Final = struct.Struct(">I")


def _header(name: str, value: str) -> bytes:
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack(
        f">B{len(raw_name)}sBH", len(raw_name), raw_name, _STRING, len(raw_value)
    ) + (raw_value)


@functools.lru_cache(maxsize=256)
def _head(headers: tuple[tuple[str, str], ...]) -> bytes:
    """The encoded headers of a message (a stream repeats a few sets: kept encoded)."""
    return b"".join(_header(name, value) for name, value in headers)


def event_message(payload: bytes, headers: Sequence[tuple[str, str]]) -> bytes:
    """One AWS event stream message: prelude, string headers, payload, message CRC32.

    The prelude is the total length and the headers' length (4-byte big-endian each) and
    the CRC32 of those 8 bytes; the message ends in the CRC32 of all bytes before it.
    """
    head = _head(headers if isinstance(headers, tuple) else tuple(headers))
    prelude = _PRELUDE.pack(16 + len(head) + len(payload), len(head))
    prelude += _CRC.pack(zlib.crc32(prelude))
    body = prelude + head + payload
    return body + _CRC.pack(zlib.crc32(body))


def _event_headers(name: str) -> tuple[tuple[str, str], ...]:
    return (
        (":event-type", name),
        (":content-type", "application/json"),
        (":message-type", "event"),
    )


_DELTA_HEADERS: Final = _event_headers("contentBlockDelta")
_DELTA_HEAD: Final = _head(_DELTA_HEADERS)
_TEXT_OPEN: Final = b'{"delta":{"text":"'


def _framed_text_run(chunks: Sequence[StreamChunk], i: int, block: _Block, out: list[bytes]) -> int:
    """Frame the run of text deltas of the open text ``block`` from ``chunks[i]`` on.

    The run is `delta_run`'s; its texts are kept as sent and framed by `_framed_texts`.

    Returns:
        The index of the first chunk after the run.
    """
    texts = delta_run(chunks, i, "text-delta", chunks[i].get("index", 0))
    block.sent.append("".join(texts))
    _framed_texts(texts, block.position, out)
    return i + len(texts)


_INDENTED: Final = orjson.OPT_INDENT_2
_BETWEEN: Final = b'",\n  "'  # between two strings of an indented array (see _framed_texts)


def _framed_texts(texts: Iterable[str], position: int, out: list[bytes]) -> None:
    """Frame the text deltas ``texts`` of the text block at ``position``, onto ``out``.

    Each non-empty text becomes the ``contentBlockDelta`` message `event_message` gives
    for ``{"delta": {"text": <text>}, "contentBlockIndex": <position>}``, appended to
    ``out`` in pieces (an empty one sends nothing). The texts are serialized together,
    as one indented array, and cut at the ``",<line break>  "`` between two of them (a
    raw line break occurs only there: a serialized string escapes each one). A message's
    bytes before its serialized text (prelude, headers, the payload's opening up to the
    text's opening quote) depend only on that text's length: they and their CRC32 are
    built once per length, the message's CRC32 continued from there.
    """
    sent = list(filter(None, texts))
    if not sent:
        return
    close = b'"},"contentBlockIndex":' + str(position).encode() + b"}"
    pack_crc, crc32 = _CRC.pack, zlib.crc32
    starts: dict[int, tuple[bytes, int]] = {}  # the text's length -> its message's start
    for inner in orjson.dumps(sent, option=_INDENTED)[5:-3].split(_BETWEEN):
        start = starts.get(len(inner))
        if start is None:
            start = starts[len(inner)] = _delta_start(len(inner) + len(close))
        out += (start[0], inner, close, pack_crc(crc32(inner + close, start[1])))


def _delta_start(rest: int) -> tuple[bytes, int]:
    """A ``contentBlockDelta`` message's bytes before its text, and their CRC32.

    ``rest``: the length of the payload after its opening.
    """
    prelude = _PRELUDE.pack(16 + len(_DELTA_HEAD) + len(_TEXT_OPEN) + rest, len(_DELTA_HEAD))
    start = prelude + _CRC.pack(zlib.crc32(prelude)) + _DELTA_HEAD + _TEXT_OPEN
    return start, zlib.crc32(start)


def _exception_headers(name: str) -> tuple[tuple[str, str], ...]:
    return (
        (":exception-type", name),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    )


def exception_message(exception_type: str, message: str) -> bytes:
    """An in-stream exception (``:message-type: exception``) with ``{"message"}``."""
    return event_message(orjson.dumps({"message": message}), _exception_headers(exception_type))


def stream_exception(failure: Failure) -> bytes:
    """A recorded failure after content as the in-stream exception Bedrock sends for it.

    ``throttlingException`` (``RATE_LIMIT``), ``serviceUnavailableException``
    (``OVERLOADED``), ``validationException`` (``INVALID_REQUEST``,
    ``CONTEXT_WINDOW_EXCEEDED``), else ``modelStreamErrorException``; the message is
    `failure_message`'s.
    """
    code = str(failure.get("code", "UNKNOWN"))
    name = _STREAM_EXCEPTIONS.get(code, "modelStreamErrorException")
    return exception_message(name, failure_message(failure))


class EventStreamSplitter:
    """Splits a live AWS event stream into `Frame` objects (botocore decodes it).

    A frame's ``name`` is its ``:event-type`` (an exception's ``:exception-type``, an
    error's ``:error-code``); its ``data`` is the event as boto3 shows it:
    ``{"<name>": <payload>}``. A message botocore cannot decode (a CRC or length that
    does not hold) ends the stream with a ``modelStreamErrorException`` frame that says
    why; the bytes after it are not read.
    """

    def __init__(self) -> None:
        eventstream = import_sdk("botocore.eventstream", "boto3")
        self._parser: Any = eventstream.EventStreamBuffer()
        self._errors: tuple[type[Exception], ...] = (eventstream.ParserError,)
        self._raw = bytearray()
        self._broken = False

    @property
    def pending(self) -> bytes:
        """The bytes of a message not complete yet."""
        return bytes(self._raw)

    def feed_raw(self, data: bytes) -> list[Frame]:
        """Every message completed by ``data``."""
        if self._broken:
            return []
        self._raw += data
        self._parser.add_data(data)
        frames: list[Frame] = []
        try:
            for message in self._parser:
                size = message.prelude.total_length
                raw = bytes(self._raw[:size])
                del self._raw[:size]
                frames.append(_frame_of(raw, message.headers, message.payload))
        except self._errors as error:
            self._broken = True
            raw, self._raw = bytes(self._raw), bytearray()
            text = f"the live event stream is corrupt: {type(error).__name__}: {error}"
            data_text = orjson.dumps({"modelStreamErrorException": {"message": text}}).decode()
            frames.append(Frame(raw, "modelStreamErrorException", data_text))
        return frames


def _frame_of(raw: bytes, headers: Mapping[str, object], payload: bytes) -> Frame:
    kind = headers.get(":message-type")
    if kind == "error":
        name = str(headers.get(":error-code") or "error")
        text = orjson.dumps({name: {"message": str(headers.get(":error-message") or name)}})
        return Frame(raw, name, text.decode())
    key = ":exception-type" if kind == "exception" else ":event-type"
    name = str(headers.get(key) or "")
    try:
        data = orjson.dumps({name: orjson.loads(payload or b"{}")}).decode()
    except orjson.JSONDecodeError:
        data = payload.decode("utf-8", "replace")
    return Frame(raw, name or None, data)


class EventStream(Framing):
    """The AWS event stream (``application/vnd.amazon.eventstream``): binary messages.

    Each frame is a whole message (`event_message`) whose headers say
    ``:event-type: <name>``, ``:content-type: application/json`` and
    ``:message-type: event``; a frame depends on its payload (lengths, CRCs), so there
    is no `around`.
    """

    media_type = "application/vnd.amazon.eventstream"
    binary = True

    def frame(self, payload: bytes, name: str | None = None) -> bytes:
        """One event message named ``name`` carrying ``payload``."""
        return event_message(payload, _event_headers(name or "event"))

    def rewritten(self, raw: bytes, edit: Callable[[bytes], bytes]) -> bytes:
        """The message ``raw`` with ``edit`` applied to its payload, its headers kept."""
        eventstream = import_sdk("botocore.eventstream", "boto3")
        parser = eventstream.EventStreamBuffer()
        parser.add_data(raw)
        try:
            message = next(iter(parser))
        except (StopIteration, eventstream.ParserError):
            return raw
        headers = [(str(k), str(v)) for k, v in message.headers.items()]
        return event_message(edit(message.payload), headers)

    def splitter(self) -> EventStreamSplitter:
        """An `EventStreamSplitter` (botocore's parser)."""
        return EventStreamSplitter()


EVENT_STREAM: Final = EventStream()
"""The AWS event stream framing."""


# --- encoding: chunks -> ConverseStream events ----------------------------------------------

_STOP_REASONS: Final = {"stop": "end_turn", "tool-calls": "tool_use", "max-tokens": "max_tokens"}
_FROM_STOP: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool-calls",
    "max_tokens": "max-tokens",
}
_FILTERED: Final = frozenset({"guardrail_intervened", "content_filtered"})
_ERROR_TYPES: Final = {
    400: "ValidationException",
    401: "AccessDeniedException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_STREAM_EXCEPTIONS: Final = {
    "RATE_LIMIT": "throttlingException",
    "OVERLOADED": "serviceUnavailableException",
    "INVALID_REQUEST": "validationException",
    "CONTEXT_WINDOW_EXCEEDED": "validationException",
}


def bedrock_usage(usage: Usage | None) -> dict[str, int]:
    """A dsh ``usage`` as Converse ``usage``.

    ``inputTokens`` and ``outputTokens``, ``cacheReadInputTokens`` and
    ``cacheWriteInputTokens`` when recorded, ``totalTokens`` the recorded total (else
    the sum of the four).
    """
    usage = usage or {}
    out = {
        "inputTokens": int_field(usage.get("inputTokens")) or 0,
        "outputTokens": int_field(usage.get("outputTokens")) or 0,
    }
    read = int_field(usage.get("cacheReadTokens"))
    write = int_field(usage.get("cacheWriteTokens"))
    total = int_field(usage.get("totalTokens"))
    out["totalTokens"] = (
        total if total is not None else sum(out.values()) + (read or 0) + (write or 0)
    )
    if read is not None:
        out["cacheReadInputTokens"] = read
    if write is not None:
        out["cacheWriteInputTokens"] = write
    return out


def _stop_reason(reason: Mapping[str, object]) -> str:
    kind = str(reason.get("kind"))
    if kind == "error":
        failure = reason.get("failure")
        code = failure.get("code") if isinstance(failure, Mapping) else None
        return "content_filtered" if code == "CONTENT_FILTER" else "end_turn"
    return _STOP_REASONS.get(kind, "end_turn")


def _event(name: str, data: JSONObject) -> bytes:
    return event_message(orjson.dumps(data), _event_headers(name))


_MESSAGE_START: Final = _event("messageStart", {"role": "assistant"})


@functools.lru_cache(maxsize=64)
def _block_stop(position: int) -> bytes:
    """The ``contentBlockStop`` event of the block at ``position`` (kept: few differ)."""
    return _event("contentBlockStop", {"contentBlockIndex": position})


@functools.lru_cache(maxsize=16)
def _message_stop(stop_reason: str) -> bytes:
    """The ``messageStop`` event with ``stop_reason`` (kept: a handful of reasons)."""
    return _event("messageStop", {"stopReason": stop_reason})


def _opens_text(block: _Block | None, text: object) -> bool:
    """Whether a text delta ``text`` of ``block`` is one ``contentBlockDelta``, nothing more.

    The block is an open text block that has its index, or gets it now from a non-empty
    text (a text block's first delta sends no event of its own).
    """
    if block is None or block.kind != "text" or block.stopped:
        return False
    return block.position >= 0 or (text.__class__ is str and bool(text))


class _Block:
    __slots__ = ("id", "kind", "name", "position", "sent", "stopped")

    def __init__(self, kind: str):
        self.kind = kind
        self.position = -1  # its contentBlockIndex, once it has an event
        self.id = ""
        self.name = ""
        self.sent: list[str] = []
        self.stopped = False


class BedrockEncoder:
    """Encodes the chunks of one call as ConverseStream events (AWS event stream messages).

    ``messageStart`` opens; a ``tool-call`` block starts with ``contentBlockStart``
    (``toolUse`` with ``toolUseId`` and ``name``, once the name is known) and sends its
    arguments as ``toolUse.input`` pieces; text is ``delta.text``, reasoning
    ``delta.reasoningContent.text`` (and its ``signature``); each block ends with
    ``contentBlockStop``; ``messageStop`` carries the ``stopReason`` and ``metadata`` the
    usage and ``metrics.latencyMs`` (0). Block indexes count the blocks sent so far.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._count = 0
        self._usage: Usage | None = None

    def marks(self) -> list[str]:
        """The answer's text and sorted tool call ids so far (how a next request quotes it)."""
        return sent_marks(self._blocks.values())

    def start(self) -> bytes:
        """The ``messageStart`` event."""
        return _MESSAGE_START

    def _block(self, index: int, kind: str) -> _Block:
        block = self._blocks.get(index)
        if block is None or block.stopped:
            block = self._blocks[index] = _Block(kind)
        return block

    def _open(self, block: _Block) -> bytes:
        """Give ``block`` its index; a tool call's ``contentBlockStart``."""
        if block.position >= 0:
            return b""
        block.position = self._count
        self._count += 1
        if block.kind != "tool-call":
            return b""
        start = {"toolUse": {"toolUseId": block.id, "name": block.name}}
        return _event("contentBlockStart", {"start": start, "contentBlockIndex": block.position})

    def _delta(self, block: _Block, delta: JSONObject) -> bytes:
        out = self._open(block)
        return out + _event(
            "contentBlockDelta", {"delta": delta, "contentBlockIndex": block.position}
        )

    def _text(self, block: _Block, text: str) -> bytes:
        block.sent.append(text)
        if block.kind == "reasoning":
            return self._delta(block, {"reasoningContent": {"text": text}})
        return self._delta(block, {"text": text})

    def _stop(self, block: _Block) -> bytes:
        block.stopped = True
        out = self._open(block)
        return out + _block_stop(block.position)

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The events of ``chunks`` in order (`feed` of each, joined).

        A text delta of a text block already open is framed here at once (most of an
        answer): the same bytes as `feed`, without its calls per chunk.
        """
        out: list[bytes] = []
        blocks = self._blocks
        i, count = 0, len(chunks)
        while i < count:
            chunk = chunks[i]
            if chunk.get("type") == "text-delta":
                block = blocks.get(chunk.get("index", 0))
                if _opens_text(block, chunk.get("text")):
                    assert block is not None
                    self._open(block)  # a text block's index: no event of its own
                    end = _framed_text_run(chunks, i, block, out)
                    if end > i:
                        i = end
                        continue
            out.append(self.feed(chunk))
            i += 1
        return b"".join(out)

    def feed_runs(self, runs: Sequence[ChunkRun]) -> bytes:
        """The events of the chunks ``runs`` stand for: `feed_all` of them, built.

        See [docs/wires.md#encoded-once](../wires.md#encoded-once).

        A run of text deltas of a text block already open is framed from its texts,
        without building its chunks (most of an answer); any other run or chunk is fed
        as `feed_all` feeds it. The runs are only read.
        """
        if list not in map(type, runs):  # chunk objects only (no run of deltas)
            return self.feed_all(runs)
        out: list[bytes] = []
        for item in runs:
            if item.__class__ is dict:
                out.append(self.feed(item))
            elif not self._framed_run(item, out):
                out.append(self.feed_all(materialize_runs([item])))
        return b"".join(out)

    def _framed_run(self, run: list[Any], out: list[bytes]) -> bool:
        """Frame a run of text deltas of an open text block from its texts, onto ``out``.

        Returns:
            Whether it was framed: ``False`` (nothing done) for any other run.
        """
        if run[0] != "text-delta":
            return False
        block = self._blocks.get(run[1])
        if block is None or block.kind != "text" or block.stopped:
            return False
        texts = run[2]
        try:
            joined = "".join(texts)  # what the block sends
        except TypeError:  # a member that is no string: fed as a chunk would be
            return False
        if joined:  # else only empty deltas, which send nothing
            self._open(block)  # a text block's index: no event of its own
            block.sent.append(joined)
            _framed_texts(texts, block.position, out)
        return True

    def feed(self, chunk: StreamChunk) -> bytes:
        """The events for one dsh chunk (``b""`` when it has no wire form of its own)."""
        kind = chunk.get("type")
        index = chunk.get("index", 0)
        if kind in ("text-delta", "reasoning-delta"):
            text = chunk.get("text", "")
            block = self._block(index, "text" if kind == "text-delta" else "reasoning")
            return self._text(block, text) if isinstance(text, str) and text else b""
        if kind == "block-start":
            block_type = chunk.get("blockType")
            self._block(
                index, str(block_type) if block_type in ("reasoning", "tool-call") else "text"
            )
            return b""
        if kind == "tool-call-delta":
            return self._tool_delta(self._block(index, "tool-call"), chunk)
        if kind == "block-end":
            block_value = chunk.get("block")
            return self._block_end(index, block_value if isinstance(block_value, Mapping) else {})
        if kind == "usage" and isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        return b""

    def _tool_delta(self, block: _Block, chunk: StreamChunk) -> bytes:
        if not block.id and isinstance(chunk.get("id"), str):
            block.id = chunk["id"]
        if not block.name and isinstance(chunk.get("name"), str):
            block.name = chunk["name"]
        args = chunk.get("argumentsDelta", "")
        args = args if isinstance(args, str) else ""
        block.sent.append(args)
        if block.position >= 0:
            return self._delta(block, {"toolUse": {"input": args}}) if args else b""
        if not block.name:
            return b""  # held back until the name is known
        out = self._open(block)
        held = "".join(block.sent)
        return out + (self._delta(block, {"toolUse": {"input": held}}) if held else b"")

    def _block_end(self, index: int, full: Mapping[str, object]) -> bytes:
        kind = full.get("type")
        block = self._blocks.get(index)
        if block is None or block.stopped:
            block = self._block(index, kind if kind in ("reasoning", "tool-call") else "text")
        out = b""
        sent = "".join(block.sent)
        if block.kind == "tool-call":
            if block.position < 0:
                block.id = block.id or str(full.get("id", ""))
                block.name = block.name or str(full.get("name", ""))
                arguments = full.get("arguments")
                text = arguments if isinstance(arguments, str) else sent
                block.sent = [text]
                out += self._open(block)
                if text:
                    out += self._delta(block, {"toolUse": {"input": text}})
            return out + self._stop(block)
        final = full.get("text")
        if isinstance(final, str) and final.startswith(sent) and len(final) > len(sent):
            out += self._text(block, final[len(sent) :])
        signature = full.get("signature")
        if block.kind == "reasoning" and isinstance(signature, str) and signature:
            out += self._delta(block, {"reasoningContent": {"signature": signature}})
        return out + self._stop(block)

    def finish(self, reason: Mapping[str, object]) -> bytes:
        """Open blocks stopped, then ``messageStop`` (``stopReason``) and ``metadata``."""
        out = b"".join(
            self._stop(block)
            for block in self._blocks.values()
            if block.position >= 0 and not block.stopped
        )
        out += _message_stop(_stop_reason(reason))
        metadata = {"usage": bedrock_usage(self._usage), "metrics": {"latencyMs": 0}}
        return out + _event("metadata", metadata)

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: see `stream_exception`."""
        return stream_exception(failure)

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: a ``validationException`` (never retried)."""
        return exception_message("validationException", message)


def _tool_input(arguments: object) -> object:
    """A tool call's ``arguments`` text as the ``input`` value (``{}`` when not JSON)."""
    try:
        return orjson.loads(arguments) if isinstance(arguments, str) and arguments else {}
    except orjson.JSONDecodeError:
        return {}


def _content_block(block: Mapping[str, object]) -> JSONObject | None:
    kind = block.get("type")
    if kind == "text":
        return {"text": str(block.get("text", ""))}
    if kind == "reasoning":
        text: JSONObject = {"text": str(block.get("text", ""))}
        if isinstance(block.get("signature"), str) and block.get("signature"):
            text["signature"] = block["signature"]
        return {"reasoningContent": {"reasoningText": text}}
    if kind == "tool-call":
        use = {
            "toolUseId": str(block.get("id", "")),
            "name": str(block.get("name", "")),
            "input": _tool_input(block.get("arguments")),
        }
        return {"toolUse": use}
    return None


def bedrock_response(chunks: list[StreamChunk]) -> JSONObject:
    """The whole ``Converse`` answer of a call's chunks.

    ``{"output": {"message": {"role": "assistant", "content": [...]}}, "stopReason",
    "usage", "metrics": {"latencyMs": 0}}``: each content block in order (``text``,
    ``reasoningContent.reasoningText``, ``toolUse`` with its ``input`` parsed).
    """
    reply = assemble_reply(chunks)
    content = [found for b in reply.content if (found := _content_block(b)) is not None]
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": _stop_reason(reply.finish or {"kind": "stop"}),
        "usage": bedrock_usage(reply.usage),
        "metrics": {"latencyMs": 0},
    }


def _error_type(status: int) -> str:
    return _ERROR_TYPES.get(
        status, "InternalServerException" if status >= 500 else "ValidationException"
    )


def _aws_error(status: int, message: str, headers: list[tuple[str, str]]) -> WireError:
    headers = [*headers, ("x-amzn-errortype", _error_type(status))]
    return WireError(status, headers, orjson.dumps({"message": message}))


def bedrock_error(failure: Failure) -> WireError:
    """The HTTP error Bedrock answers for a recorded failure.

    The status comes from `failure_status` (503 for ``OVERLOADED``); the body is
    ``{"message"}`` and the ``x-amzn-ErrorType`` header names the exception boto3 raises
    (``ValidationException`` 400, ``AccessDeniedException`` 401/403,
    ``ResourceNotFoundException`` 404, ``ModelTimeoutException`` 408,
    ``ModelErrorException`` 424, ``ThrottlingException`` 429,
    ``InternalServerException`` 500, ``ServiceUnavailableException`` 503; else
    ``InternalServerException`` from 500, ``ValidationException`` below); a recorded
    request id is also ``x-amzn-RequestId``.
    """
    status = failure_status(failure, overloaded=503)
    headers = failure_headers(failure)
    request_id = failure.get("requestId")
    if isinstance(request_id, str) and request_id:
        headers.append(("x-amzn-requestid", request_id))
    return _aws_error(status, failure_message(failure), headers)


def bedrock_refusal(status: int, message: str, *, param: str | None = None) -> WireError:
    """Bedrock's error for a refused request (a ``ValidationException`` for a 400).

    ``param`` is not part of this shape.
    """
    return _aws_error(status, message, [*JSON_HEADERS])


# --- reading a request: Converse body -> the in-process shape --------------------------------


def _texts(blocks: object) -> str:
    return "".join(
        str(b["text"]) for b in json_items(blocks) if isinstance(b, Mapping) and "text" in b
    )


def _result_text(content: object) -> str:
    parts: list[str] = []
    for item in json_items(content):
        if not isinstance(item, Mapping):
            continue
        if isinstance(item.get("text"), str):
            parts.append(item["text"])
        elif "json" in item:
            parts.append(orjson.dumps(item["json"]).decode())
    return "".join(parts)


def _assistant(content: object) -> JSONObject:
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[JSONObject] = []
    for block in json_items(content):
        if not isinstance(block, Mapping):
            continue
        use = block.get("toolUse")
        reasoning = block.get("reasoningContent")
        if isinstance(use, Mapping):
            arguments = orjson.dumps(use.get("input") if use.get("input") is not None else {})
            function = {"name": str(use.get("name") or ""), "arguments": arguments.decode()}
            calls.append(
                {"id": str(use.get("toolUseId") or ""), "type": "function", "function": function}
            )
        elif isinstance(reasoning, Mapping):
            text = reasoning.get("reasoningText")
            if isinstance(text, Mapping) and isinstance(text.get("text"), str):
                thoughts.append(text["text"])
        elif isinstance(block.get("text"), str):
            texts.append(block["text"])
    message: JSONObject = {"role": "assistant", "content": "".join(texts) if texts else None}
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    if calls:
        message["tool_calls"] = calls
    return message


def _user(content: object) -> list[JSONObject]:
    """A user message: one ``tool`` message per ``toolResult``, then the rest."""
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    tools: list[JSONObject] = []
    blocks: list[JSONObject] = []
    for block in json_items(content):
        if not isinstance(block, Mapping):
            continue
        result = block.get("toolResult")
        if isinstance(result, Mapping):
            tool: JSONObject = {
                "role": "tool",
                "tool_call_id": str(result.get("toolUseId") or ""),
                "content": _result_text(result.get("content")),
            }
            tools.append(tool)
        elif isinstance(block.get("text"), str):
            blocks.append({"type": "text", "text": block["text"]})
        else:
            key = next(iter(block), "")
            blocks.append({"type": str(key), **block})  # image, document, ...: kept as sent
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return [*tools, {"role": "user", "content": blocks[0]["text"]}]
    return [*tools, {"role": "user", "content": blocks}] if blocks or not tools else tools


def _tools(config: object) -> list[JSONObject]:
    out: list[JSONObject] = []
    tools = config.get("tools") if isinstance(config, Mapping) else None
    for tool in json_items(tools):
        spec = tool.get("toolSpec") if isinstance(tool, Mapping) else None
        if not isinstance(spec, Mapping):
            continue
        function: JSONObject = {"name": str(spec.get("name") or "")}
        if spec.get("description") is not None:
            function["description"] = spec["description"]
        schema = spec.get("inputSchema")
        if isinstance(schema, Mapping) and schema.get("json") is not None:
            function["parameters"] = schema["json"]
        out.append({"type": "function", "function": function})
    return out


_INFERENCE: Final = (
    ("maxTokens", "max_tokens"),
    ("temperature", "temperature"),
    ("topP", "top_p"),
    ("stopSequences", "stop"),
)
"""An ``inferenceConfig`` read into the in-process request: (Bedrock's name, its name there)."""


def bedrock_request(body: Mapping[str, object], path: str) -> JSONObject:
    """A Converse body read into the in-process shape.

    Args:
        body: The parsed body (never changed).
        path: The request path: ``/model/<model>/converse-stream`` (or ``converse``)
            names the model (URL-decoded) and whether the answer streams.

    Returns:
        ``{"messages", "model"?, "stream", "tools"?, "max_tokens"?, "temperature"?,
        "top_p"?, "stop"?}``: ``system`` text blocks as a leading ``system`` message;
        each ``assistant`` message its text joined, ``reasoningContent`` as
        ``reasoning_content`` and ``toolUse`` blocks as ``tool_calls`` (``input`` as
        JSON text); each ``user`` message its ``toolResult`` blocks as ``tool``
        messages (``text`` and ``json`` content as text), then its other blocks as a
        user message (one text block as a string).
    """
    messages: list[JSONObject] = []
    system = _texts(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in json_items(body.get("messages")):
        if not isinstance(message, Mapping):
            continue
        if message.get("role") == "assistant":
            messages.append(_assistant(message.get("content")))
        else:
            messages.extend(_user(message.get("content")))
    out: JSONObject = {"messages": messages}
    found = _PATH.search(path)
    if found is not None:
        out["model"] = unquote(found["model"])
    out["stream"] = found is not None and found["verb"] == "converse-stream"
    tools = _tools(body.get("toolConfig"))
    if tools:
        out["tools"] = tools
    copy_settings(body.get("inferenceConfig"), _INFERENCE, out)
    return out


# --- decoding: a live provider's events -> dsh chunks ----------------------------------------


def _error(message: str, code: str) -> JSONObject:
    return {"kind": "error", "failure": {"message": message, "code": code}}


def dsh_usage(usage: Mapping[str, object]) -> Usage:
    """Converse ``usage`` as a dsh ``usage`` (the inverse of `bedrock_usage`)."""
    out: Usage = {
        "inputTokens": int_field(usage.get("inputTokens")) or 0,
        "outputTokens": int_field(usage.get("outputTokens")) or 0,
    }
    read = int_field(usage.get("cacheReadInputTokens"))
    if read is not None:
        out["cacheReadTokens"] = read
    write = int_field(usage.get("cacheWriteInputTokens"))
    if write is not None:
        out["cacheWriteTokens"] = write
    total = int_field(usage.get("totalTokens"))
    if total is not None:
        out["totalTokens"] = total
    return out


class _Open:
    __slots__ = ("id", "index", "kind", "name", "parts", "signature")

    def __init__(self, index: int, kind: str):
        self.index = index
        self.kind = kind
        self.id = ""
        self.name = ""
        self.parts: list[str] = []
        self.signature = ""

    def block(self) -> JSONObject:
        text = "".join(self.parts)
        if self.kind == "tool-call":
            return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": text}
        if self.kind == "reasoning" and self.signature:
            return {"type": "reasoning", "text": text, "signature": self.signature}
        return {"type": self.kind, "text": text}


class BedrockDecoder:
    """Turns ConverseStream events (``{"<event type>": payload}``) into dsh chunks.

    Block indexes count from 0 in order of appearance. ``contentBlockStart`` with
    ``toolUse`` starts a ``tool-call`` block (a ``tool-call-delta`` with its id, name and
    an empty ``argumentsDelta``), each ``toolUse.input`` piece is a ``tool-call-delta``;
    ``text`` and ``reasoningContent.text`` deltas start (or continue) a ``text`` or
    ``reasoning`` block; ``contentBlockStop`` is ``block-end``. ``messageStop`` keeps
    the stop reason; ``metadata`` (the last event) gives ``usage`` and the ``finish``:
    ``end_turn`` and ``stop_sequence`` are ``stop``, ``tool_use`` is ``tool-calls``,
    ``max_tokens`` is ``max-tokens``, ``guardrail_intervened`` and ``content_filtered``
    fail with ``CONTENT_FILTER``; no content at all with ``EMPTY_RESPONSE``. An
    exception event fails with `bedrock_failure` of it.
    """

    response_id: str | None = None

    def __init__(self) -> None:
        self._blocks: dict[object, _Open] = {}
        self._count = 0
        self._stop: str | None = None
        self._usage: Usage | None = None
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the ``finish`` was produced."""
        return self._done

    def feed(self, event: Mapping[str, object]) -> list[StreamChunk]:
        """The dsh chunks for one event."""
        out: list[StreamChunk] = []
        if self._done:
            return out
        for name, payload in event.items():
            if not isinstance(payload, Mapping):
                continue
            if name.endswith("Exception"):
                out.append(self.failed(bedrock_failure(None, payload, {}, error_type=name)))
                return out
            self._event(name, payload, out)
        return out

    def _event(self, name: str, payload: Mapping[str, object], out: list[StreamChunk]) -> None:
        if name == "contentBlockStart":
            start = payload.get("start")
            use = start.get("toolUse") if isinstance(start, Mapping) else None
            if isinstance(use, Mapping):
                block = self._open(payload.get("contentBlockIndex"), "tool-call", out)
                block.id = str(use.get("toolUseId") or "")
                block.name = str(use.get("name") or "")
                delta: StreamChunk = {
                    "type": "tool-call-delta",
                    "index": block.index,
                    "id": block.id,
                    "name": block.name,
                    "argumentsDelta": "",
                }
                out.append(delta)
        elif name == "contentBlockDelta":
            self._delta(payload, out)
        elif name == "contentBlockStop":
            closed = self._blocks.pop(payload.get("contentBlockIndex"), None)
            if closed is not None:
                out.append({"type": "block-end", "index": closed.index, "block": closed.block()})
        elif name == "messageStop":
            self._stop = str(payload.get("stopReason") or "")
        elif name == "metadata":
            usage = payload.get("usage")
            if isinstance(usage, Mapping):
                self._usage = dsh_usage(usage)
            out.extend(self._finish())

    def _open(self, key: object, kind: str, out: list[StreamChunk]) -> _Open:
        block = self._blocks.get(key)
        if block is None or block.kind != kind:
            block = self._blocks[key] = _Open(self._count, kind)
            self._count += 1
            out.append({"type": "block-start", "index": block.index, "blockType": kind})
        return block

    def _delta(self, payload: Mapping[str, object], out: list[StreamChunk]) -> None:
        delta = payload.get("delta")
        if not isinstance(delta, Mapping):
            return
        key = payload.get("contentBlockIndex")
        use = delta.get("toolUse")
        reasoning = delta.get("reasoningContent")
        if isinstance(use, Mapping):
            block = self._open(key, "tool-call", out)
            piece = str(use.get("input") or "")
            block.parts.append(piece)
            out.append(
                {
                    "type": "tool-call-delta",
                    "index": block.index,
                    "id": block.id,
                    "argumentsDelta": piece,
                }
            )
        elif isinstance(reasoning, Mapping):
            block = self._open(key, "reasoning", out)
            if isinstance(reasoning.get("signature"), str):
                block.signature += reasoning["signature"]
            text = reasoning.get("text")
            if isinstance(text, str) and text:
                block.parts.append(text)
                out.append({"type": "reasoning-delta", "index": block.index, "text": text})
        elif isinstance(delta.get("text"), str):
            block = self._open(key, "text", out)
            block.parts.append(delta["text"])
            out.append({"type": "text-delta", "index": block.index, "text": delta["text"]})

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the stream ended (``metadata`` or more missing)."""
        if self._done:
            return []
        if self._stop is None:
            self._done = True
            return [
                {
                    "type": "finish",
                    "reason": _error("the stream ended before messageStop", "STREAM_CLOSED"),
                }
            ]
        return self._finish()

    def failed(self, failure: FailureRecord) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        self._done = True
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}

    def _finish(self) -> list[StreamChunk]:
        out: list[StreamChunk] = [
            {"type": "block-end", "index": block.index, "block": block.block()}
            for block in self._blocks.values()
        ]
        self._blocks.clear()
        if self._usage is not None:
            out.append({"type": "usage", "usage": self._usage})
        out.append({"type": "finish", "reason": self._reason(self._stop or "")})
        self._done = True
        return out

    def _reason(self, stop: str) -> JSONObject:
        if stop in _FILTERED:
            return _error(f"the model's answer was blocked (stopReason {stop})", "CONTENT_FILTER")
        if stop not in _FROM_STOP:
            return _error(f"the model stopped with stopReason {stop or 'none'}", "UNKNOWN")
        if self._count == 0 and stop != "max_tokens":
            return _error("the model returned no content", "EMPTY_RESPONSE")
        return {"kind": _FROM_STOP[stop]}


def decode_response(answer: Mapping[str, object]) -> list[StreamChunk]:
    """The chunks of a whole ``Converse`` answer."""
    output = answer.get("output")
    message = output.get("message") if isinstance(output, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    decoder = BedrockDecoder()
    out: list[StreamChunk] = []
    for position, block in enumerate(json_items(content)):
        if not isinstance(block, Mapping):
            continue
        use = block.get("toolUse")
        reasoning = block.get("reasoningContent")
        if isinstance(use, Mapping):
            start = {"toolUse": {"toolUseId": use.get("toolUseId"), "name": use.get("name")}}
            out += decoder.feed(
                {"contentBlockStart": {"start": start, "contentBlockIndex": position}}
            )
            piece = orjson.dumps(use.get("input") if use.get("input") is not None else {}).decode()
            delta: JSONObject = {"toolUse": {"input": piece}}
        elif isinstance(reasoning, Mapping):
            text = reasoning.get("reasoningText")
            delta = {"reasoningContent": dict(text) if isinstance(text, Mapping) else {}}
        else:
            delta = {"text": block.get("text")}
        out += decoder.feed({"contentBlockDelta": {"delta": delta, "contentBlockIndex": position}})
        out += decoder.feed({"contentBlockStop": {"contentBlockIndex": position}})
    out += decoder.feed({"messageStop": {"stopReason": answer.get("stopReason")}})
    usage = answer.get("usage")
    out += decoder.feed({"metadata": {"usage": usage if isinstance(usage, Mapping) else {}}})
    return out


_AUTH_TYPES: Final = frozenset(
    {"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException",
     "InvalidSignatureException", "IncompleteSignatureException"}
)  # fmt: skip


def bedrock_failure(
    status: int | None,
    body: object,
    headers: Mapping[str, str],
    *,
    error_type: str | None = None,
) -> FailureRecord:
    """The dsh failure for a Bedrock error (an HTTP error, or an exception event).

    Args:
        status: The HTTP status; ``None`` for an exception event in the stream.
        body: The parsed body (``{"message"}``, also ``{"Message"}``), or anything else.
        headers: The response headers (lower-case names): ``x-amzn-errortype`` names
            the exception (up to a ``:``), ``retry-after(-ms)`` becomes
            ``providerRetryAfterMs``, ``x-amzn-requestid`` becomes ``requestId``.
        error_type: The exception's name, when the headers do not carry it (an
            exception event's ``:exception-type``).

    Returns:
        ``{"message", "code", "status"?, ...}``; ``code`` is ``RATE_LIMIT``
        (``ThrottlingException``, 429), ``AUTH`` (``AccessDeniedException``, an
        unrecognized or expired credential, 401, 403), ``OVERLOADED``
        (``ServiceUnavailableException``, 503), ``CONTEXT_WINDOW_EXCEEDED`` (a 400 or
        ``ValidationException`` about too long an input), ``INVALID_REQUEST`` (another
        ``ValidationException``), else ``UNKNOWN``.
    """
    kind = (error_type or headers.get("x-amzn-errortype") or "").split(":", 1)[0]
    kind = kind[:1].upper() + kind[1:]
    found = None
    if isinstance(body, Mapping):
        found = body.get("message", body.get("Message"))
    text = (
        found if isinstance(found, str) and found else f"Bedrock request failed ({kind or status})"
    )
    if kind == "ThrottlingException" or status == 429:
        code = "RATE_LIMIT"
    elif kind in _AUTH_TYPES or status in (401, 403):
        code = "AUTH"
    elif kind == "ServiceUnavailableException" or status == 503:
        code = "OVERLOADED"
    elif (kind == "ValidationException" or status in (400, 413)) and CONTEXT_OVERFLOW.search(text):
        code = "CONTEXT_WINDOW_EXCEEDED"
    elif kind == "ValidationException":
        code = "INVALID_REQUEST"
    else:
        code = "UNKNOWN"
    return failure_record(text, code, status, headers, request_id_header="x-amzn-requestid")


# --- recording: signing with botocore ---------------------------------------------------------


def _region(url: str) -> str:
    found = _REGION.search(urlsplit(url).netloc)
    if found is not None:
        return found.group(1)
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    return _DEFAULT_REGION


def bedrock_auth_headers(api_key: str, url: str, body: bytes) -> dict[str, str]:
    """The headers that authenticate a live Bedrock call (botocore signs it).

    With credentials from botocore's own chain (the environment, the shared files, a
    profile, ...) the request is signed with SigV4 (``botocore.auth.SigV4Auth``, service
    ``bedrock``), in the region of ``url``'s host (``bedrock-runtime.<region>.
    amazonaws.com``), else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, else ``us-east-1``:
    ``authorization``, ``x-amz-date`` and, for temporary credentials,
    ``x-amz-security-token``. Without credentials, ``api_key`` is a Bedrock API key:
    ``authorization: Bearer <key>``.

    Raises:
        DshReplayError: ``boto3`` (botocore) is not installed.
    """
    session = import_sdk("botocore.session", "boto3").get_session()
    credentials = session.get_credentials()
    if credentials is None:
        return {"authorization": f"Bearer {api_key}"}
    auth = import_sdk("botocore.auth", "boto3")
    awsrequest = import_sdk("botocore.awsrequest", "boto3")
    request = awsrequest.AWSRequest(method="POST", url=url, data=body)
    auth.SigV4Auth(credentials.get_frozen_credentials(), "bedrock", _region(url)).add_auth(request)
    return {name.lower(): str(value) for name, value in request.headers.items()}


# --- the boto3 client on the endpoint in process ----------------------------------------------


class _Raw:
    """An answer's body as botocore reads a raw HTTP response.

    ``stream`` for an event stream (``ConverseStream``), and the file-like ``read``,
    ``readinto``, ``readlines``, ``readable`` and ``tell`` that botocore's
    ``StreamingBody`` (``InvokeModel``'s ``body``) calls; ``close``.
    """

    def __init__(self, reply: Any, url: str, exceptions: Any):
        self._reply = reply
        self._url = url
        self._exceptions = exceptions
        self._pieces: Iterator[bytes] | None = None
        self._held = b""
        self._read = 0

    def stream(self, *args: object, **kwargs: object) -> Iterator[bytes]:
        try:
            yield from self._reply.body
        except ConnectionError:
            raise self._exceptions.ConnectionClosedError(endpoint_url=self._url) from None
        except TimeoutError:
            raise self._exceptions.ReadTimeoutError(endpoint_url=self._url) from None

    def read(self, amt: int | None = None) -> bytes:
        """Up to ``amt`` bytes of the body (``None``: the rest); ``b""`` at its end."""
        if self._pieces is None:
            self._pieces = self.stream()
        while amt is None or len(self._held) < amt:
            piece = next(self._pieces, None)
            if piece is None:
                break
            self._held += piece
        if amt is None:
            out, self._held = self._held, b""
        else:
            out, self._held = self._held[:amt], self._held[amt:]
        self._read += len(out)
        return out

    def readinto(self, buffer: Any) -> int:
        """Read into ``buffer``; the number of bytes read."""
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def readlines(self) -> list[bytes]:
        """The rest of the body, split after each newline."""
        return self.read().splitlines(keepends=True)

    def readable(self) -> bool:
        """Always ``True``."""
        return True

    def tell(self) -> int:
        """How many bytes were read."""
        return self._read

    def close(self) -> None:
        self._reply.close()


class _Sender:
    """botocore's ``before-send`` handler: the request goes to the endpoint in process."""

    def __init__(self, http: InProcess, timeout: float | None):
        self._http = http
        self._timeout = timeout
        self._awsrequest = import_sdk("botocore.awsrequest", "boto3")
        self._exceptions = import_sdk("botocore.exceptions", "boto3")

    def __call__(self, request: Any, **kwargs: object) -> Any:
        parts = urlsplit(request.url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        body = request.body
        if hasattr(body, "read"):
            body = body.read()
        data = body.encode() if isinstance(body, str) else bytes(body or b"")
        headers = {str(k).lower(): _text(v) for k, v in request.headers.items()}
        try:
            reply = self._http.send("POST", path, headers, data, timeout=self._timeout)
        except ConnectionError:
            raise self._exceptions.ConnectionClosedError(endpoint_url=request.url) from None
        raw = _Raw(reply, request.url, self._exceptions)
        return self._awsrequest.AWSResponse(request.url, reply.status, dict(reply.headers), raw)


def _text(value: object) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def model_upstream(
    base_url: str, path: str, model: str | None, pattern: re.Pattern[str], safe: str
) -> str:
    """``<base_url><path>``, ``model`` put in the path's ``/model/<model>/<verb>`` when set.

    Args:
        base_url: The live provider's base URL.
        path: The request path.
        model: The model to send instead of the path's (``None``: the path's).
        pattern: The wire's path, with ``model`` and ``verb`` groups.
        safe: What ``urllib.parse.quote`` leaves unescaped in the model: what the wire's
            SDK leaves (and signs) unescaped.
    """
    if model is not None:
        encoded = quote(model, safe=safe)
        path = pattern.sub(lambda m: f"/model/{encoded}/{m['verb']}", path, count=1)
    return join_path(base_url, path)


class BedrockWire(BaseWire):
    """Bedrock Runtime's Converse wire (``POST /model/{model}/converse-stream``, ``converse``)."""

    name = "bedrock"
    routes = ("/model/{model}/converse-stream", "/model/{model}/converse")
    framing = EVENT_STREAM
    checked_fields = ("messages",)
    record_base_url_variable = "DSH_RECORD_BEDROCK_BASE_URL"

    refusal = staticmethod(bedrock_refusal)
    error = staticmethod(bedrock_error)
    decoder = BedrockDecoder
    decode_whole = staticmethod(decode_response)

    def failure(
        self, status: int | None, body: object, headers: Mapping[str, str]
    ) -> FailureRecord:
        """See `bedrock_failure`."""
        return bedrock_failure(status, body, headers)

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """See `bedrock_request`.

        Raises:
            BadRequest: ``messages`` is not an array of objects (a 400
                ``ValidationException``).
        """
        super().canonical(body, path=path, history=history)
        return bedrock_request(body, path)

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> BedrockEncoder:
        """An encoder (ConverseStream events carry no model, id or replay state)."""
        return BedrockEncoder()

    def runs_encoder(
        self, request: Mapping[str, object], *, model: str, call_id: str
    ) -> BedrockEncoder:
        """An encoder (`BedrockEncoder.feed_runs` frames chunk runs)."""
        return BedrockEncoder()

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """See `bedrock_response`."""
        return bedrock_response(chunks)

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """``<base_url><path>``; ``model`` (URL-encoded) replaces the path's model when set.

        The body goes unchanged (it names no model).
        """
        return model_upstream(base_url, path, model, _PATH, safe=""), body

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """See `bedrock_auth_headers`."""
        return bedrock_auth_headers(api_key, url, body)

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """An exception event (``{"<name>Exception": {"message"}}``): `bedrock_failure` of it."""
        for name, payload in event.items():
            if name.endswith("Exception"):
                return bedrock_failure(None, payload, {}, error_type=name)
        return None

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """The ``metadata`` event (the last of an answer) ends it."""
        return frame.name == "metadata"

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``AWS_ENDPOINT_URL_BEDROCK_RUNTIME`` (the root), dummy AWS keys and a region.

        boto3 reads the service's endpoint variable, ``AWS_ACCESS_KEY_ID`` /
        ``AWS_SECRET_ACCESS_KEY`` (dummies: the endpoint reads no signature) and
        ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` (``us-east-1``).
        """
        return {
            "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": root,
            "AWS_ACCESS_KEY_ID": _DUMMY_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": api_key,
            "AWS_REGION": _DEFAULT_REGION,
            "AWS_DEFAULT_REGION": _DEFAULT_REGION,
        }

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """A boto3 ``bedrock-runtime`` client whose requests go to the endpoint in process.

        botocore's ``before-send`` event hands each signed request to the endpoint
        (`InProcess.send`) and its answer back as the HTTP response (the event
        stream read as it is produced); nothing goes to the network.

        Args:
            http: The endpoint's in-process transports.
            options: Passed to ``boto3.client`` (``region_name`` defaults to
                ``us-east-1``, the keys to dummies, ``config`` to no retries: a
                ``config`` given keeps its settings).
            asynchronous: Must be false: boto3 has no async client.

        Raises:
            DshReplayError: ``boto3`` is not installed, or an async client was asked for.
        """
        if asynchronous:
            raise DshReplayError(
                "boto3 has no async client: use dsh_replay.client('bedrock') (sync)"
            )
        boto3 = import_sdk("boto3")
        config_module = import_sdk("botocore.config", "boto3")
        options.setdefault("region_name", _DEFAULT_REGION)
        options.setdefault("aws_access_key_id", _DUMMY_KEY_ID)
        options.setdefault("aws_secret_access_key", http.api_key)
        retries = config_module.Config(retries={"total_max_attempts": 1})
        given = options.get("config")
        options["config"] = retries if given is None else retries.merge(given)
        options.setdefault("endpoint_url", http.url)
        client = boto3.client("bedrock-runtime", **options)
        timeout = client.meta.config.read_timeout
        client.meta.events.register("before-send.bedrock-runtime", _Sender(http, timeout))
        return client


WIRE: Final = BedrockWire()
"""Amazon Bedrock's Converse wire."""
