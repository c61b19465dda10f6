"""dsh stream chunks <-> Anthropic Messages on Amazon Bedrock (``AnthropicBedrock``).

The wire the ``anthropic`` SDK's ``AnthropicBedrock`` / ``AsyncAnthropicBedrock`` clients
speak: an Anthropic Messages body with ``anthropic_version`` (``bedrock-2023-05-31``),
its ``model`` the path segment (``:`` kept, other characters URL-encoded) and its
``stream`` the route: ``POST /model/{model}/invoke-with-response-stream`` streams,
``POST /model/{model}/invoke`` answers the whole ``message``. See
[docs/wires.md#anthropic-on-bedrock](../wires.md#anthropic-on-bedrock).

- The request and the events are the Anthropic wire's (`AnthropicWire`,
  `AnthropicEncoder`, `AnthropicDecoder`); the model is read from the path.
- The stream is the AWS event stream of the Bedrock module (`EVENT_STREAM`): each
  Anthropic event is one message ``:event-type: chunk`` whose payload is
  ``{"bytes": "<base64 of the event's JSON>"}`` (`CHUNK_STREAM`), as Bedrock's
  ``InvokeModelWithResponseStream`` sends it and the SDK decodes it.
- Errors are Bedrock's (`bedrock_error`: ``{"message"}`` and ``x-amzn-ErrorType``; an
  in-stream exception after content, `stream_exception`); recording re-signs each
  request with botocore's SigV4 (`bedrock_auth_headers`), like the Converse wire.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Callable, Mapping
from typing import Final
from urllib.parse import unquote

import orjson

from .._format.events import JSONObject, StreamChunk
from .anthropic import AnthropicEncoder, AnthropicWire
from .base import Failure, History, InProcess, import_sdk
from .bedrock import (
    EVENT_STREAM,
    EventStreamSplitter,
    bedrock_auth_headers,
    bedrock_error,
    bedrock_failure,
    bedrock_refusal,
    exception_message,
    model_upstream,
    stream_exception,
)
from .bedrock import WIRE as CONVERSE
from .framing import Frame, Framing
from .shapes import FailureRecord

__all__ = [
    "CHUNK_STREAM",
    "WIRE",
    "AnthropicBedrockEncoder",
    "AnthropicBedrockWire",
    "ChunkSplitter",
    "ChunkStream",
]

_PATH: Final = re.compile(
    r"/model/(?P<model>[^/?]+)/(?P<verb>invoke-with-response-stream|invoke)(?=\?|$)"
)
_STREAMED: Final = "invoke-with-response-stream"
_REGION: Final = "us-east-1"
_DUMMY_KEY_ID: Final = "dsh-replay-dummy-key-id"
_TOKEN_VARIABLE: Final = "AWS_BEARER_TOKEN_BEDROCK"
_DATA: Final = b"\ndata: "


def _chunk_payload(event: bytes) -> bytes:
    return orjson.dumps({"bytes": base64.b64encode(event).decode("ascii")})


def _decoded(chunk: object) -> bytes | None:
    """The event of a parsed ``chunk`` payload (``{"bytes": base64}``), or ``None``."""
    raw = chunk.get("bytes") if isinstance(chunk, dict) else None
    try:
        return base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
    except binascii.Error:
        return None


def _inner(payload: bytes) -> bytes | None:
    """The event a ``chunk`` payload carries, or ``None`` (not one: an exception's)."""
    try:
        return _decoded(orjson.loads(payload))
    except orjson.JSONDecodeError:
        return None


class ChunkSplitter:
    """Splits a live ``invoke-with-response-stream`` answer into Anthropic events.

    botocore reads the messages (`EventStreamSplitter`); a ``chunk`` message becomes
    the frame of the event it carries (``name`` its ``type``, ``data`` its JSON, ``raw``
    the whole message); any other message (an exception, a corrupt stream) is the
    Bedrock splitter's frame (``{"<name>Exception": {"message"}}``), and so is a
    ``chunk`` that carries no Anthropic event (no base64, no JSON object with a
    ``type``): a ``modelStreamErrorException`` that says so, which fails the call.
    """

    def __init__(self) -> None:
        self._messages = EventStreamSplitter()

    @property
    def pending(self) -> bytes:
        """The bytes of a message not complete yet."""
        return self._messages.pending

    def feed_raw(self, data: bytes) -> list[Frame]:
        """Every event completed by ``data``."""
        return [_unwrapped(frame) for frame in self._messages.feed_raw(data)]


def _unwrapped(frame: Frame) -> Frame:
    if frame.name != "chunk":
        return frame
    event: bytes | None = None
    try:
        wrapped = orjson.loads(frame.data or "null")
        event = _decoded(wrapped.get("chunk")) if isinstance(wrapped, dict) else None
        parsed = orjson.loads(event) if event is not None else None
    except orjson.JSONDecodeError:
        parsed = None
    kind = parsed.get("type") if isinstance(parsed, dict) else None
    if event is None or not isinstance(kind, str):
        return _broken(frame.raw)
    return Frame(frame.raw, kind, event.decode("utf-8", "replace"))


def _broken(raw: bytes) -> Frame:
    """The failure frame of a ``chunk`` message that carries no Anthropic event."""
    text = 'a live "chunk" message carries no Anthropic event ({"bytes": base64 of JSON})'
    data = orjson.dumps({"modelStreamErrorException": {"message": text}}).decode()
    return Frame(raw, "modelStreamErrorException", data)


class ChunkStream(Framing):
    """The AWS event stream of ``InvokeModelWithResponseStream``: events in ``chunk`` messages.

    A frame is one message with ``:event-type: chunk`` and the payload ``{"bytes":
    "<base64 of the event>"}``; `rewritten` edits the event inside (base64 decoded,
    edited, encoded again), and an exception message's payload as it is.
    """

    media_type = EVENT_STREAM.media_type
    binary = True

    def frame(self, payload: bytes, name: str | None = None) -> bytes:
        """The ``chunk`` message carrying the event ``payload`` (``name`` is not sent)."""
        return EVENT_STREAM.frame(_chunk_payload(payload), "chunk")

    def rewritten(self, raw: bytes, edit: Callable[[bytes], bytes]) -> bytes:
        """The message ``raw`` with ``edit`` applied to the event it carries."""

        def inside(payload: bytes) -> bytes:
            event = _inner(payload)
            return edit(payload) if event is None else _chunk_payload(edit(event))

        return EVENT_STREAM.rewritten(raw, inside)

    def splitter(self) -> ChunkSplitter:
        """A `ChunkSplitter`."""
        return ChunkSplitter()


CHUNK_STREAM: Final = ChunkStream()
"""The event stream framing of Anthropic events on Bedrock."""


def _reframed(sse: bytes) -> bytes:
    """The Anthropic encoder's SSE events in ``sse``, each as a ``chunk`` message.

    Each event is ``event: <type>`` and ``data: <JSON>`` lines and a blank line, as
    `AnthropicEncoder` writes them (its JSON holds no line end).
    """
    if not sse:
        return b""
    frame = CHUNK_STREAM.frame
    events = sse.split(b"\n\n")[:-1]
    return b"".join([frame(event[event.index(_DATA) + len(_DATA) :]) for event in events])


class AnthropicBedrockEncoder(AnthropicEncoder):
    """`AnthropicEncoder`'s events, each in a ``chunk`` message (`CHUNK_STREAM`).

    A failure after content is Bedrock's in-stream exception (`stream_exception`); a
    replay error mid-stream a ``validationException`` (never retried).
    """

    def start(self) -> bytes:
        """The ``message_start`` event."""
        return _reframed(super().start())

    def feed(self, chunk: StreamChunk) -> bytes:
        """The events of one chunk (`feed_all` feeds each)."""
        return _reframed(super().feed(chunk))

    def finish(self, reason: Mapping[str, object]) -> bytes:
        """Open blocks closed, ``message_delta`` and ``message_stop``."""
        return _reframed(super().finish(reason))

    def failure_event(self, failure: Failure) -> bytes:
        """A recorded failure after content: see `stream_exception`."""
        return stream_exception(failure)

    def replay_error_event(self, message: str) -> bytes:
        """A replay error mid-stream: a ``validationException``."""
        return exception_message("validationException", message)


class AnthropicBedrockWire(AnthropicWire):
    """Anthropic Messages on Bedrock (``POST /model/{model}/invoke-with-response-stream``)."""

    name = "anthropic-bedrock"
    routes = ("/model/{model}/invoke-with-response-stream", "/model/{model}/invoke")
    list_routes: tuple[str, ...] = ()
    list_headers: tuple[str, ...] = ()
    framing = CHUNK_STREAM
    record_base_url_variable = CONVERSE.record_base_url_variable

    refusal = staticmethod(bedrock_refusal)
    error = staticmethod(bedrock_error)

    def failure(
        self,
        status: int | None,
        body: object,
        headers: Mapping[str, str],
        *,
        message: str | None = None,
    ) -> FailureRecord:
        """See `bedrock_failure`; ``message``, when given, replaces the body's."""
        failure = bedrock_failure(status, body, headers)
        if message is not None:
            failure["message"] = message
        return failure

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """The Anthropic reading of ``body``, its ``model`` and ``stream`` from the path.

        Raises:
            BadRequest: As the Anthropic wire refuses, answered as a Bedrock
                ``ValidationException``.
        """
        out = dict(super().canonical(body, path=path, history=history))
        found = _PATH.search(path)
        if found is not None:
            out["model"] = unquote(found["model"])
        out["stream"] = found is not None and found["verb"] == _STREAMED
        return out

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> AnthropicBedrockEncoder:
        """An `AnthropicBedrockEncoder`."""
        return AnthropicBedrockEncoder(model=model, message_id=call_id, replay_state=replay_state)

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """``<base_url><path>``; ``model`` replaces the path's model when set (body unchanged).

        The model keeps a raw ``:``, as the anthropic SDK sends (and signs) it.
        """
        return model_upstream(base_url, path, model, _PATH, safe=":"), body

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """See `bedrock_auth_headers` (SigV4 by botocore, else a Bedrock API key)."""
        return bedrock_auth_headers(api_key, url, body)

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """An exception message (``{"<name>Exception": {"message"}}``): `bedrock_failure`."""
        return CONVERSE.stream_failure(event)

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """``ANTHROPIC_BEDROCK_BASE_URL`` (the root); the AWS variables are the Converse wire's.

        ``AnthropicBedrock`` reads ``ANTHROPIC_BEDROCK_BASE_URL``, ``AWS_REGION`` /
        ``AWS_DEFAULT_REGION`` and botocore's credential chain (``AWS_ACCESS_KEY_ID``,
        ``AWS_SECRET_ACCESS_KEY``: dummies, the endpoint reads no signature).
        """
        return {"ANTHROPIC_BEDROCK_BASE_URL": root, **CONVERSE.endpoint_env(root, api_key)}

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """``anthropic.AnthropicBedrock`` (``AsyncAnthropicBedrock``) on the endpoint in process.

        Given ``base_url`` (the in-process root), the endpoint's ``http_client``, dummy
        AWS keys (``aws_access_key``, ``aws_secret_key``) and ``aws_region``
        (``us-east-1``) unless ``options`` set them (or an ``api_key`` or
        ``aws_profile``). The SDK signs each request with botocore; the endpoint reads
        no signature. Where ``AWS_BEARER_TOKEN_BEDROCK`` is set (the SDK would send it
        and refuse AWS keys beside it), the dummy key is the ``api_key`` instead.

        Raises:
            DshReplayError: The ``anthropic`` package (or ``boto3``, which it signs
                with) is not installed.
        """
        module = import_sdk("anthropic")
        cls = module.AsyncAnthropicBedrock if asynchronous else module.AnthropicBedrock
        if "api_key" not in options and "aws_profile" not in options:
            keys = {"aws_access_key", "aws_secret_key"} & options.keys()
            if os.environ.get(_TOKEN_VARIABLE) and not keys:
                options["api_key"] = http.api_key  # the SDK takes no AWS keys beside it
            else:
                options.setdefault("aws_access_key", _DUMMY_KEY_ID)
                options.setdefault("aws_secret_key", http.api_key)
        options.setdefault("aws_region", _REGION)
        options.setdefault("base_url", http.url)
        return cls(http_client=http.http_client(asynchronous), **options)


WIRE: Final = AnthropicBedrockWire()
"""Anthropic Messages on Amazon Bedrock."""
