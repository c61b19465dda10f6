"""The wire seam: what every HTTP wire implements, and what the wires share.

A *wire* is one provider's HTTP API for model calls, in both directions: the chunks of a
replayed call become that provider's stream events (or its whole response), a recorded
failure becomes the provider's HTTP error, and, while recording through the proxy, the
live provider's events become chunks again. Each wire module (:mod:`.openai`,
:mod:`.anthropic`) implements :class:`Wire`; :mod:`.table` maps the endpoint's routes to
them. Code outside this package asks a :class:`Wire` and never compares wire names.

What the wires share lives here: the HTTP status a recorded failure is answered with
(:func:`failure_status`), the wording of a context-window overflow
(:data:`CONTEXT_OVERFLOW`), ``retry-after`` parsing (:func:`retry_after_ms`), the
server-sent-events splitter (:class:`SSEParser`) and the HTTP client library the SDKs use
(:func:`httpx_module`).
"""

from __future__ import annotations

import itertools
import math
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Final, Protocol

import orjson

from .._errors import DshReplayError
from .._format.events import JSONObject, StreamChunk

__all__ = [
    "CONTEXT_OVERFLOW",
    "Answered",
    "BadRequest",
    "Decoder",
    "Encoder",
    "Failure",
    "History",
    "Refusal",
    "SSEParser",
    "Wire",
    "WireError",
    "delta_run",
    "failure_headers",
    "failure_status",
    "feed_each",
    "httpx_module",
    "join_path",
    "misshapen",
    "refuse_misshapen",
    "retry_after_ms",
]

Failure = Mapping[str, Any]
"""A dsh failure: ``{"message", "code", "status"?, "providerRetryAfterMs"?, "requestId"?}``."""

CONTEXT_OVERFLOW: Final = re.compile(
    r"context[\s_-]*(length|window)|maximum context|maximum (allowed )?(number of )?tokens"
    r"|too many (input )?tokens|prompt is too long|input is too long",
    re.IGNORECASE,
)
"""Wording of a 400/413 that is a context-window overflow, not another bad parameter."""

_STATUS_BY_CODE: Final = {
    "AUTH": 401,
    "MISSING_CREDENTIAL": 401,
    "QUOTA": 402,
    "RATE_LIMIT": 429,
    "CONTEXT_WINDOW_EXCEEDED": 400,
    "INVALID_REQUEST": 400,
    "CONTENT_FILTER": 400,
    "SERVER": 500,
}
_JSON: Final = ("content-type", "application/json")


@dataclass(frozen=True, slots=True)
class WireError:
    """An HTTP error response as a wire answers it.

    Attributes:
        status: The HTTP status (400-599).
        headers: ``(name, value)`` pairs, lower-case names (``content-type`` first).
        body: The provider's error body, serialized.
    """

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class BadRequest(Exception):
    """A request a wire refuses the way its provider does (an unknown response id, say).

    Args:
        error: The provider's HTTP error for it.
    """

    def __init__(self, error: WireError):
        super().__init__(error.body.decode("utf-8", "replace"))
        self.error = error


class Refusal(Protocol):
    """A wire's :meth:`Wire.refusal`."""

    def __call__(self, status: int, message: str, *, param: str | None = None) -> WireError:
        """The provider's error body for a refused request."""
        ...


@dataclass(frozen=True, slots=True)
class Answered:
    """An answer the endpoint served in this test and kept, for a request that continues it.

    Attributes:
        request: The request it answered, as the wire's :meth:`Wire.canonical` read it
            (the in-process shape: ``messages``, ``system``?, ``tools``?, ...).
        chunks: The answer's chunks, in order (its ``finish`` last).
    """

    request: Mapping[str, Any]
    chunks: Sequence[StreamChunk]


class History(Protocol):
    """What a wire reads one request with: the answers the endpoint served in this test.

    Only answers the endpoint kept are known: every answer on a wire that
    :attr:`~Wire.remembers`, and the answer to a request whose reading called
    :meth:`hold`.
    """

    def conversation(self, call_id: str) -> list[Any] | None:
        """The messages of the served call ``call_id`` with its answer last, or ``None``."""
        ...

    def answered(self, call_id: str) -> Answered | None:
        """The kept answer ``call_id`` (its id as served) and its request, or ``None``."""
        ...

    def hold(self) -> None:
        """Keep the answer to the request being read, for a later request to continue."""
        ...


class Encoder(Protocol):
    """Turns the chunks of one call into a wire's stream events, in order.

    :meth:`start` gives the opening events, :meth:`feed` those of each chunk (``b""``
    when a chunk has no event of its own), :meth:`finish` the closing events for the
    ``finish`` chunk's reason. Failures are the caller's: before any content they become
    a :class:`WireError`; after content :meth:`failure_event` or
    :meth:`replay_error_event` ends the stream.
    """

    def start(self) -> bytes:
        """The events that open the stream."""
        ...

    def feed(self, chunk: Mapping[str, Any]) -> bytes:
        """The events for one chunk (``b""`` when it has none of its own)."""
        ...

    def feed_all(self, chunks: Sequence[Mapping[str, Any]]) -> bytes:
        """The events for ``chunks`` in order: the bytes :meth:`feed` gives each, joined."""
        ...

    def finish(self, reason: Mapping[str, Any]) -> bytes:
        """The events that close the stream, for a ``finish`` chunk's ``reason``."""
        ...

    def marks(self) -> list[str]:
        """The answer's text and sorted tool call ids so far (how a next request quotes it)."""
        ...

    def failure_event(self, failure: Failure) -> bytes:
        """The in-stream error event of a recorded failure after content started."""
        ...

    def replay_error_event(self, message: str) -> bytes:
        """The in-stream error event of a replay error (not the provider's) mid-stream."""
        ...


def delta_run(chunks: Sequence[Mapping[str, Any]], i: int, kind: Any, index: Any) -> list[str]:
    """The texts of the run of ``kind`` deltas at ``index`` from ``chunks[i]`` on.

    The run is each chunk of that type, at an equal ``index`` (``0`` when it has none),
    whose ``text`` is a string; it ends at the first chunk that is not (``[]`` when
    ``chunks[i]`` is not). For an encoder's :meth:`Encoder.feed_all`.
    """
    texts: list[str] = []
    for chunk in itertools.islice(chunks, i, None):
        text = chunk.get("text", "")
        if chunk.get("type") != kind or text.__class__ is not str or chunk.get("index", 0) != index:
            break
        texts.append(text)
    return texts


def feed_each(encoder: Encoder, chunks: Sequence[Mapping[str, Any]]) -> bytes:
    """:meth:`Encoder.feed_all` for an encoder without a faster way: each chunk fed in turn."""
    feed = encoder.feed
    return b"".join([feed(chunk) for chunk in chunks])


class Decoder(Protocol):
    """Turns a live provider's events (parsed JSON) into dsh chunks; one per call.

    Attributes:
        done: Whether the ``finish`` chunk was produced (the answer is complete).
        response_id: The live provider's id of the answer, once an event carried it.
    """

    response_id: str | None

    @property
    def done(self) -> bool:
        """Whether the ``finish`` chunk was produced."""
        ...

    def feed(self, event: Mapping[str, Any]) -> list[StreamChunk]:
        """The chunks for one event."""
        ...

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the provider's stream ended."""
        ...

    def failed(self, failure: dict[str, Any]) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        ...


class Wire(Protocol):
    """One provider's HTTP wire: routes, encoding, errors, and decoding for recording.

    Attributes:
        name: A short name for messages and logs (``"openai"``, ``"anthropic"``).
        routes: The request paths the endpoint serves in this wire (``POST``); a
            ``{model}`` segment stands for any model name.
        list_routes: The paths of this wire's model list (``GET``), if it has one.
        remembers: Whether the endpoint keeps the conversation of every answer it
            serves on this wire, for requests that continue one by its id
            (:meth:`canonical`'s ``history``); a wire that keeps only the answers to
            some requests says so per request (:meth:`History.hold`).
        record_base_url_variable: The environment variable naming where the recording
            proxy sends this wire's calls, when it differs from ``DSH_RECORD_BASE_URL``.
    """

    @property
    def name(self) -> str:
        """A short name for messages and logs."""
        ...

    @property
    def routes(self) -> tuple[str, ...]:
        """The request paths the endpoint serves in this wire."""
        ...

    @property
    def list_routes(self) -> tuple[str, ...]:
        """The paths of this wire's model list (``GET``)."""
        ...

    @property
    def remembers(self) -> bool:
        """Whether every answer served on this wire is kept for continuation by id."""
        ...

    @property
    def record_base_url_variable(self) -> str | None:
        """The variable naming where the recording proxy sends this wire's calls."""
        ...

    def canonical(self, body: dict[str, Any], *, path: str, history: History) -> Mapping[str, Any]:
        """The request in the in-process shape the layers above read (docs/wires.md#routes).

        ``{"messages": [...], "system"?, "tools"?, "model"?, "stream"?, ...}`` with
        chat-completions messages; the chat-completions wire returns ``body`` itself,
        and so does the Messages wire for a request without a ``thread``.

        Args:
            body: The parsed JSON body (never changed).
            path: The request path (a model name in it is the request's model).
            history: What the endpoint served so far in this test.

        Raises:
            BadRequest: The provider would refuse the request (the error to answer).
        """
        ...

    def model_list(self, names: list[str]) -> JSONObject:
        """The body of this wire's model list for ``names``."""
        ...

    def call_id(self, number: int) -> str:
        """The id of the endpoint's ``number``-th answer (a completion or message id)."""
        ...

    def encoder(
        self,
        request: Mapping[str, Any],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, Any] | None = None,
    ) -> Encoder:
        """An encoder for one streamed answer to ``request``."""
        ...

    def encoder_options(self, request: Mapping[str, Any]) -> tuple[Any, ...]:
        """What of ``request`` the streamed encoding depends on, as a hashable tuple.

        Two requests with equal options get the same bytes from :meth:`encoder` for the
        same chunks, model, call id and replay state, so an encoding can be kept and
        served again (docs/wires.md#encoded-once); ``()`` when the request is not read.
        """
        ...

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """The whole (``stream: false``) response body assembled from a call's chunks."""
        ...

    def error(self, failure: Failure) -> WireError:
        """The HTTP error the provider answers for a recorded failure."""
        ...

    def refusal(self, status: int, message: str, *, param: str | None = None) -> WireError:
        """The provider's error for a request refused before any call (docs/wires.md#refused).

        Args:
            status: The HTTP status (400 a malformed request, 413 a body over the cap).
            message: What is wrong, naming the field or header.
            param: The request field at fault, where the provider's error body names one.
        """
        ...

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """Where the recording proxy sends a call, and the body it sends.

        Args:
            base_url: The configured base URL of this wire's provider.
            path: The path (and query) the client called.
            body: The body the client sent.
            model: The model that replaces the one the client asked for, if any.
        """
        ...

    def auth_headers(self, api_key: str) -> dict[str, str]:
        """The headers that carry the live provider's API key."""
        ...

    def decoder(self) -> Decoder:
        """A decoder for one live streamed answer."""
        ...

    def decode_whole(self, answer: Mapping[str, Any]) -> list[StreamChunk]:
        """The chunks of a live whole (``stream: false``) answer."""
        ...

    def failure(self, status: int | None, body: Any, headers: Mapping[str, str]) -> dict[str, Any]:
        """The dsh failure for a live HTTP error response (``body`` parsed, or not JSON)."""
        ...

    def stream_failure(self, event: Mapping[str, Any]) -> dict[str, Any] | None:
        """The failure an event of a live stream reports, when the decoder does not."""
        ...

    def ends_answer(self, name: str | None, data: str) -> bool:
        """Whether a server-sent event ends the provider's answer."""
        ...


def failure_status(failure: Failure, *, overloaded: int) -> int:
    """The HTTP status a recorded failure is answered with.

    Args:
        failure: The recorded failure.
        overloaded: The status this wire's provider uses for ``OVERLOADED``.

    Returns:
        The recorded ``status`` when it is 400-599; else by ``code``: 401 ``AUTH``, 402
        ``QUOTA``, 429 ``RATE_LIMIT``, 400 ``CONTEXT_WINDOW_EXCEEDED`` /
        ``INVALID_REQUEST`` / ``CONTENT_FILTER``, ``overloaded`` for ``OVERLOADED``, the
        number of an ``HTTP_<status>`` code, 500 otherwise.
    """
    status = failure.get("status")
    if isinstance(status, int) and 400 <= status <= 599:
        return status
    code = str(failure.get("code", "UNKNOWN"))
    if code == "OVERLOADED":
        return overloaded
    if code.startswith("HTTP_") and code[5:].isdigit() and 400 <= int(code[5:]) <= 599:
        return int(code[5:])
    return _STATUS_BY_CODE.get(code, 500)


def _seconds(ms: int) -> str:
    return str(ms // 1000) if ms % 1000 == 0 else f"{ms / 1000:g}"


def failure_headers(failure: Failure) -> list[tuple[str, str]]:
    """The headers of an HTTP error answer: JSON, the recorded retry delay and request id."""
    headers: list[tuple[str, str]] = [_JSON]
    retry = failure.get("providerRetryAfterMs")
    if isinstance(retry, int) and not isinstance(retry, bool) and retry > 0:
        headers.append(("retry-after", _seconds(retry)))
        headers.append(("retry-after-ms", str(retry)))
    request_id = failure.get("requestId")
    if isinstance(request_id, str) and request_id:
        headers.append(("x-request-id", request_id))
        headers.append(("request-id", request_id))
    return headers


def failure_message(failure: Failure) -> str:
    """The failure's message (its code when the message is empty), overflow wording kept.

    A ``CONTEXT_WINDOW_EXCEEDED`` whose message does not say so gets the words clients
    look for (SDKs and the dsh runtime classify an overflow by its wording).
    """
    code = str(failure.get("code", "UNKNOWN"))
    message = str(failure.get("message", "")) or code
    if code == "CONTEXT_WINDOW_EXCEEDED" and not CONTEXT_OVERFLOW.search(message):
        message = f"{message} (prompt is too long for the model's context window)"
    return message


def wire_error(failure: Failure, status: int, body: Any) -> WireError:
    """A :class:`WireError` with the failure's headers and ``body`` serialized."""
    return WireError(status, failure_headers(failure), orjson.dumps(body))


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


def join_path(base_url: str, path: str) -> str:
    """``path`` appended to ``base_url``'s path, before its query and fragment.

    ``http://h/v1?key=x`` and ``/chat/completions`` give
    ``http://h/v1/chat/completions?key=x``; a query in ``path`` is added after the
    base's.
    """
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base_url)
    bare, _, extra = path.partition("?")
    query = "&".join(q for q in (parts.query, extra) if q)
    joined = parts.path.rstrip("/") + bare
    return urlunsplit((parts.scheme, parts.netloc, joined, query, parts.fragment))


def with_model(body: bytes, model: str | None) -> bytes:
    """``body`` (a JSON object) with its ``"model"`` replaced when ``model`` is set."""
    if model is None:
        return body
    parsed = orjson.loads(body)
    parsed["model"] = model
    return orjson.dumps(parsed)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an object" if isinstance(value, Mapping) else "an array"


ROLE_FIELDS: Final = frozenset({"messages", "input", "contents"})
"""The list fields whose elements carry a ``role``, which must be a string (or ``null``)."""


def misshapen(
    body: Mapping[str, Any], name: str, *, text: bool = False, single: bool = False
) -> tuple[str, str] | None:
    """Why ``body[name]`` is not an array of JSON objects, for the 400 that refuses it.

    The elements of a field of :data:`ROLE_FIELDS` must also have a string ``role``
    (when they have one): a role is compared with the roles a wire knows, and an object
    or array there is no role any provider takes (docs/wires.md#refused).

    Args:
        body: The parsed request body.
        name: The field (``"messages"``, ``"tools"``, ...); absent or ``null`` passes.
        text: A string passes too (a Responses ``input``, an Anthropic ``system``).
        single: One object passes too (a Gemini ``contents``).

    Returns:
        ``None`` when the field is acceptable, else ``(message, param)``: the message
        names the field and the index of a bad element (``"Invalid type for
        'messages[1]': expected an object, got a string"``); ``param`` is the field, or
        the role refused (``"messages[0].role"``).
    """
    value = body.get(name)
    if value is None or (text and isinstance(value, str)):
        return None
    if single and isinstance(value, Mapping):
        return _bad_role(value, name) if name in ROLE_FIELDS else None
    if not isinstance(value, list):
        wanted = "a string or an array of objects" if text else "an array of objects"
        return f"Invalid type for '{name}': expected {wanted}, got {_json_type(value)}", name
    for index, element in enumerate(value):
        where = f"{name}[{index}]"
        if not isinstance(element, Mapping):
            return (
                f"Invalid type for '{where}': expected an object, got {_json_type(element)}",
                name,
            )
        if name in ROLE_FIELDS and (bad := _bad_role(element, where)) is not None:
            return bad
    return None


def _bad_role(element: Mapping[str, Any], where: str) -> tuple[str, str] | None:
    role = element.get("role")
    if role is None or isinstance(role, str):
        return None
    return f"Invalid type for '{where}.role': expected a string, got {_json_type(role)}", (
        f"{where}.role"
    )


def refuse_misshapen(
    body: Mapping[str, Any],
    fields: tuple[str, ...],
    refusal: Refusal,
    *,
    text: tuple[str, ...] = (),
    single: tuple[str, ...] = (),
) -> None:
    """Raise the 400 of the first of ``fields`` that is not an array of objects.

    Args:
        body: The parsed request body.
        fields: The list fields to check, in order.
        refusal: The wire's :meth:`~.base.Wire.refusal`.
        text: Fields that may also be a string.
        single: Fields that may also be one object.

    Raises:
        BadRequest: A field is misshapen (see :func:`~.base.misshapen`).
    """
    for name in fields:
        problem = misshapen(body, name, text=name in text, single=name in single)
        if problem is not None:
            message, param = problem
            raise BadRequest(refusal(400, message, param=param))


def int_field(value: Any) -> int | None:
    """``value`` when it is an integer (not a bool), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_EVENT_END: Final = re.compile(rb"\r?\n\r?\n")
r"""A blank line: where a server-sent event ends (lines end in ``\n`` or ``\r\n``)."""


class SSEParser:
    r"""Splits a byte stream into server-sent events: ``(event name or None, data)``.

    Lines end in ``\n`` or ``\r\n`` (also when a read splits the two); an event ends
    at a blank line. Bytes that are not UTF-8 read as U+FFFD.
    """

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def pending(self) -> bytes:
        """The bytes of an event not complete yet (what a stream that ends now cuts)."""
        return self._buffer

    def feed(self, data: bytes) -> list[tuple[str | None, str]]:
        """The events completed by ``data`` that carry data (comments and empty ones left out)."""
        return [(name, text) for _, name, text in self.feed_raw(data) if text is not None]

    def feed_raw(self, data: bytes) -> list[tuple[bytes, str | None, str | None]]:
        """Every event completed by ``data``: ``(its bytes, name, data)``.

        The bytes are the event's as received, its blank line included, so that what
        they make up can be passed on whole; ``data`` is ``None`` for an event without
        data lines (a comment, a keep-alive).
        """
        buffer = self._buffer + data
        at = max(len(self._buffer) - 3, 0)  # an end may begin in the bytes kept before
        start = 0
        events: list[tuple[bytes, str | None, str | None]] = []
        while (end := _EVENT_END.search(buffer, at)) is not None:
            block = buffer[start : end.start()].replace(b"\r\n", b"\n")
            events.append((buffer[start : end.end()], *_sse_fields(block)))
            start = at = end.end()
        self._buffer = buffer[start:]
        return events


def _sse_fields(block: bytes) -> tuple[str | None, str | None]:
    """An event's name and data (``None`` without data lines), from its lines."""
    name: str | None = None
    data_lines: list[str] = []
    for line in block.decode("utf-8", "replace").split("\n"):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data_lines.append(line[5:].removeprefix(" "))
    return name, "\n".join(data_lines) if data_lines else None


def httpx_module() -> Any:
    """The ``httpx`` flavour the installed SDKs use: ``httpx2`` when present, else ``httpx``.

    Raises:
        DshReplayError: Neither is installed (install ``openai`` or ``anthropic``).
    """
    try:
        import httpx2
    except ImportError:
        try:
            import httpx  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise DshReplayError(
                "the in-process clients need httpx (it comes with the openai and anthropic "
                "SDKs): pip install 'pytest-dsh-replay[record]'"
            ) from None
        return httpx
    return httpx2
