"""The wire seam: what every HTTP wire implements, and what the wires share.

A *wire* is one provider's HTTP API for model calls, in both directions: the chunks of a
replayed call become that provider's stream events (or its whole response), a recorded
failure becomes the provider's HTTP error, and, while recording through the proxy, the
live provider's events become chunks again. Each wire module (`openai`,
`responses`, `anthropic`, `gemini`) subclasses `BaseWire`, which
has a default for most of what a wire does; `table` lists the wires. Code outside
this package asks a `Wire` (its framing, its clients, its variables) and never
compares wire names or names a media type
([docs/architecture.md#wire-seam](../architecture.md#wire-seam)).

What the wires share lives here: the HTTP status a recorded failure is answered with
(`failure_status`), the wording of a context-window overflow
(`CONTEXT_OVERFLOW`), ``retry-after`` parsing (`retry_after_ms`), the SDK
import (`import_sdk`) and the HTTP client library the SDKs use
(`httpx_module`); stream framings live in `framing`.
"""

from __future__ import annotations

import importlib
import itertools
import math
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Final, Protocol

import orjson

from .._errors import DshReplayError
from .._format.events import ChunkRun, JSONObject, StreamChunk
from .framing import JSON_HEADERS, SSE, Frame, Framing, SSEParser
from .shapes import FailureRecord

__all__ = [
    "CONTEXT_OVERFLOW",
    "SDK",
    "Answered",
    "BadRequest",
    "BaseWire",
    "Decoder",
    "Encoder",
    "Failure",
    "History",
    "InProcess",
    "Refusal",
    "Reply",
    "RunsEncoder",
    "SSEParser",
    "SentBlock",
    "Wire",
    "WireError",
    "copy_settings",
    "delta_run",
    "failure_headers",
    "failure_record",
    "failure_status",
    "feed_each",
    "httpx_module",
    "import_sdk",
    "join_path",
    "json_items",
    "misshapen",
    "refuse_misshapen",
    "retry_after_ms",
    "sent_marks",
    "status_code",
]

Failure = Mapping[str, object]
"""A recorded dsh failure as the layers above pass it.

See [docs/format.md#failures](../format.md#failures).

Its keys are those of `FailureRecord`; it was read from a log, so each
value is checked before use (``object`` values, narrowed where read).
"""

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
    """A wire's `Wire.refusal`."""

    def __call__(self, status: int, message: str, *, param: str | None = None) -> WireError:
        """The provider's error body for a refused request."""
        ...


@dataclass(frozen=True, slots=True)
class Answered:
    """An answer the endpoint served in this test and kept, for a request that continues it.

    Attributes:
        request: The request it answered, as the wire's `Wire.canonical` read it
            (the in-process shape: ``messages``, ``system``?, ``tools``?, ...).
        chunks: The answer's chunks, in order (its ``finish`` last).
    """

    request: Mapping[str, object]
    chunks: Sequence[StreamChunk]


class History(Protocol):
    """What a wire reads one request with: the answers the endpoint served in this test.

    Only answers the endpoint kept are known: every answer on a wire that
    `remembers`, and the answer to a request whose reading called
    `hold`.
    """

    def conversation(self, call_id: str) -> list[JSONObject] | None:
        """The messages of the served call ``call_id`` with its answer last, or ``None``."""
        ...

    def answered(self, call_id: str) -> Answered | None:
        """The kept answer ``call_id`` (its id as served) and its request, or ``None``."""
        ...

    def hold(self) -> None:
        """Keep the answer to the request being read, for a later request to continue."""
        ...


def copy_settings(settings: object, names: Iterable[tuple[str, str]], out: JSONObject) -> None:
    """Copy a provider's generation settings into the in-process request ``out``.

    Args:
        settings: The request's settings object (a mapping; anything else copies nothing).
        names: ``(provider's name, in-process name)`` pairs, in order; a setting that is
            absent or ``null`` is skipped, and the first pair to set a name wins.
        out: The in-process request being built (changed in place).
    """
    if not isinstance(settings, Mapping):
        return
    for wire, key in names:
        if settings.get(wire) is not None and key not in out:
            out[key] = settings[wire]


class SentBlock(Protocol):
    """A block an encoder has sent: its kind, its tool call id, its text pieces."""

    kind: str
    id: str
    sent: list[str]


def sent_marks(blocks: Iterable[SentBlock]) -> list[str]:
    """`Encoder.marks` of an encoder that keeps its sent blocks.

    The text of its ``text`` blocks, then the sorted ids of its ``tool-call`` blocks.
    """
    kept = list(blocks)
    text = "".join("".join(b.sent) for b in kept if b.kind == "text")
    return [text, *sorted(b.id for b in kept if b.kind == "tool-call" and b.id)]


class Encoder(Protocol):
    """Turns the chunks of one call into a wire's stream events, in order.

    `start` gives the opening events, `feed` those of each chunk (``b""``
    when a chunk has no event of its own), `finish` the closing events for the
    ``finish`` chunk's reason. Failures are the caller's: before any content they become
    a `WireError`; after content `failure_event` or
    `replay_error_event` ends the stream.
    """

    def start(self) -> bytes:
        """The events that open the stream."""
        ...

    def feed(self, chunk: StreamChunk) -> bytes:
        """The events for one chunk (``b""`` when it has none of its own)."""
        ...

    def feed_all(self, chunks: Sequence[StreamChunk]) -> bytes:
        """The events for ``chunks`` in order: the bytes `feed` gives each, joined."""
        ...

    def finish(self, reason: Mapping[str, object]) -> bytes:
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


class RunsEncoder(Encoder, Protocol):
    """An `Encoder` that also frames a recorded entry's chunk runs as they are stored.

    See [docs/wires.md#encoded-once](../wires.md#encoded-once) and
    [docs/architecture.md#adding-a-wire](../architecture.md#adding-a-wire).
    """

    def feed_runs(self, runs: Sequence[ChunkRun]) -> bytes:
        """The events of the chunks ``runs`` stand for: `Encoder.feed_all` of them, built.

        Args:
            runs: Chunk runs (``ChunkRun``: chunk objects, and runs of deltas of one
                block that ``materialize_runs`` builds into chunks), in order; read
                only, never changed.

        Returns:
            The same bytes as ``feed_all(materialize_runs(runs))``.
        """
        ...


def delta_run(chunks: Sequence[StreamChunk], i: int, kind: object, index: object) -> list[str]:
    """The texts of the run of ``kind`` deltas at ``index`` from ``chunks[i]`` on.

    The run is each chunk of that type, at an equal ``index`` (``0`` when it has none),
    whose ``text`` is a string; it ends at the first chunk that is not (``[]`` when
    ``chunks[i]`` is not). For an encoder's `Encoder.feed_all`.
    """
    texts: list[str] = []
    for chunk in itertools.islice(chunks, i, None):
        text = chunk.get("text", "")
        if chunk.get("type") != kind or text.__class__ is not str or chunk.get("index", 0) != index:
            break
        texts.append(text)
    return texts


def feed_each(encoder: Encoder, chunks: Sequence[StreamChunk]) -> bytes:
    """`Encoder.feed_all` for an encoder without a faster way: each chunk fed in turn."""
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

    def feed(self, event: Mapping[str, object]) -> list[StreamChunk]:
        """The chunks for one event."""
        ...

    def end(self) -> list[StreamChunk]:
        """The closing chunks when the provider's stream ended."""
        ...

    def failed(self, failure: FailureRecord) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        ...


class Reply(Protocol):
    """The endpoint's answer to one request made in process (`InProcess.send`).

    Attributes:
        status: The HTTP status.
        headers: ``(name, value)`` pairs, lower-case names.
        body: The body, produced as it is read (a stream ends when the call does). It
            raises ``ConnectionResetError`` where a recorded transport failure drops
            the connection, ``TimeoutError`` when the read timeout passed.
    """

    @property
    def status(self) -> int:
        """The HTTP status."""
        ...

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The headers, lower-case names."""
        ...

    @property
    def body(self) -> Iterator[bytes]:
        """The body, produced as it is read."""
        ...

    def close(self) -> None:
        """Stop producing the body (the client went away); ends the model call."""
        ...


class InProcess(Protocol):
    """How an SDK client reaches the endpoint in process (the endpoint's transports)."""

    @property
    def url(self) -> str:
        """The root URL in-process clients are given (nothing is listening there)."""
        ...

    @property
    def api_key(self) -> str:
        """The dummy key the clients send (the endpoint ignores it)."""
        ...

    def http_client(self, asynchronous: bool) -> object:
        """An ``httpx.Client`` (``httpx.AsyncClient``) whose transport is the endpoint."""
        ...

    def send(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        timeout: float | None = None,
    ) -> Reply:
        """One request to the endpoint, for a client that is no ``httpx`` client (boto3).

        Args:
            method: The HTTP method.
            path: The path (and query), as the client would send it on the wire.
            headers: The request headers, lower-case names.
            body: The request body.
            timeout: The client's read timeout in seconds, if it has one.

        Raises:
            ConnectionResetError: The replayed call drops the connection before it
                answers (a recorded transport failure, an injected disconnect).
            TimeoutError: The answer did not start within ``timeout`` (an injected
                latency, [docs/recording.md#faults](../recording.md#faults)).
        """
        ...

    def transport(self, asynchronous: bool, httpx: ModuleType | None = None) -> object:
        """The endpoint as an ``httpx`` (async) transport, for an SDK that builds its own client.

        Args:
            asynchronous: An ``AsyncBaseTransport`` rather than a ``BaseTransport``.
            httpx: The ``httpx`` flavour the SDK's client is built on (``httpx`` or
                ``httpx2``; default `httpx_module`).
        """
        ...


@dataclass(frozen=True, slots=True)
class SDK:
    """An SDK whose client takes ``base_url`` and ``http_client`` (``openai``, ``anthropic``).

    Attributes:
        module: The module to import (``"openai"``).
        client: Its sync client class (``"OpenAI"``); the async one is ``Async<client>``.
        path: What the client's base URL adds to the endpoint's root (``"/v1"``).
        package: What ``pip`` installs it as (default: ``module``).
    """

    module: str
    client: str
    path: str = ""
    package: str | None = None


def import_sdk(module: str, package: str | None = None) -> ModuleType:
    """The SDK module ``module``.

    Raises:
        DshReplayError: It is not installed (the message names ``pip install <package>``).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        wanted = package or module
        raise DshReplayError(
            f"this client needs the {wanted!r} package: pip install {wanted}"
        ) from None


class BaseWire:
    """One provider's HTTP wire: routes, framing, encoding, errors, clients and recording.

    Subclass it, set the attributes and override what the wire does differently; each
    method has a default but `encoder`, `whole`, `error`,
    `refusal`, `decoder`, `decode_whole` and `failure`, which
    raise `NotImplementedError`. A wire that is a variant of another subclasses
    it (the Responses wire is an OpenAI wire). `table` lists one instance of each
    ([docs/architecture.md#adding-a-wire](../architecture.md#adding-a-wire)).

    Attributes:
        name: A short name for messages, logs and ``DshReplay.client(name)``.
        routes: The request paths the endpoint serves in this wire (``POST``); a
            placeholder segment (``{model}``, ``{project}``...) stands for any one
            path segment (up to a ``:`` where the route has one right after it).
        list_routes: The paths of this wire's model list (``GET``), if it has one.
        list_headers: Request headers that pick this wire's model list where wires
            share a list path (``anthropic-version``).
        remembers: Whether the endpoint keeps the conversation of every answer it
            serves on this wire, for requests that continue one by its id
            (`canonical`'s ``history``); a wire that keeps only the answers to
            some requests says so per request (`History.hold`).
        framing: How its streams are framed (`SSE` by default).
        call_id_prefix: What `call_id` puts before the answer's number.
        checked_fields: The request's list fields `canonical` refuses when they
            are not arrays of objects (`refuse_misshapen`), with
            ``text_fields`` (a string passes too) and ``single_fields`` (one object
            passes too).
        upstream_path: The path the recording proxy appends to the base URL (``None``:
            the path the client called).
        record_base_url_variable: The environment variable naming where the recording
            proxy sends this wire's calls, when it differs from ``DSH_RECORD_BASE_URL``.
        sdk: The SDK whose client `client` makes, if it takes ``base_url`` and
            ``http_client``.
        key_headers: Request headers that carry this wire's key as they are (Azure's
            ``api-key``), besides ``Authorization: Bearer``: a `ScriptedServer` given a
            key accepts it there too.
    """

    name: str = ""
    routes: tuple[str, ...] = ()
    list_routes: tuple[str, ...] = ()
    list_headers: tuple[str, ...] = ()
    remembers: bool = False
    framing: Framing = SSE
    call_id_prefix: str = "dsh-replay-"
    checked_fields: tuple[str, ...] = ("messages", "tools")
    text_fields: tuple[str, ...] = ()
    single_fields: tuple[str, ...] = ()
    upstream_path: str | None = None
    record_base_url_variable: str | None = None
    sdk: SDK | None = None
    key_headers: tuple[str, ...] = ()

    def canonical(self, body: JSONObject, *, path: str, history: History) -> JSONObject:
        """The request in the in-process shape the layers above read.

        See [docs/wires.md#routes](../wires.md#routes).

        ``{"messages": [...], "system"?, "tools"?, "model"?, "stream"?, ...}`` with
        chat-completions messages. By default ``body`` itself, once its
        `checked_fields` passed.

        Args:
            body: The parsed JSON body (never changed).
            path: The request path (a model name in it is the request's model).
            history: What the endpoint served so far in this test.

        Raises:
            BadRequest: The provider would refuse the request (the error to answer).
        """
        refuse_misshapen(
            body,
            self.checked_fields,
            self.refusal,
            text=self.text_fields,
            single=self.single_fields,
        )
        return body

    def model_list(self, names: list[str]) -> JSONObject:
        """The body of this wire's model list for ``names`` (default: the OpenAI shape).

        ``{"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}``.
        """
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "created": 0, "owned_by": "dsh-replay"}
                for name in names
            ],
        }

    def call_id(self, number: int) -> str:
        """The id of the endpoint's ``number``-th answer: ``<call_id_prefix><number>``."""
        return f"{self.call_id_prefix}{number}"

    def encoder(
        self,
        request: Mapping[str, object],
        *,
        model: str,
        call_id: str,
        replay_state: Mapping[str, object] | None = None,
    ) -> Encoder:
        """An encoder for one streamed answer to ``request``, framed by `framing`."""
        raise NotImplementedError

    def runs_encoder(
        self, request: Mapping[str, object], *, model: str, call_id: str
    ) -> RunsEncoder | None:
        """An encoder that frames chunk runs (`RunsEncoder`), or ``None`` (the default).

        For a replayed answer the endpoint serves at once, it takes the recorded
        entry's runs instead of its chunk objects when this gives an encoder
        ([docs/wires.md#encoded-once](../wires.md#encoded-once)). The encoder gives the
        bytes `encoder` gives for the same request, model and call id; a wire whose
        encoding reads the answer's replay state keeps ``None``.
        """
        return None

    def encoder_options(self, request: Mapping[str, object]) -> tuple[object, ...]:
        """What of ``request`` the streamed encoding depends on, as a hashable tuple.

        Two requests with equal options get the same bytes from `encoder` for the
        same chunks, model, call id and replay state, so an encoding can be kept and
        served again ([docs/wires.md#encoded-once](../wires.md#encoded-once)); ``()`` (the
        default) when the request is not read.
        """
        return ()

    def whole(self, chunks: list[StreamChunk], *, model: str, call_id: str) -> JSONObject:
        """The whole (``stream: false``) response body assembled from a call's chunks."""
        raise NotImplementedError

    def error(self, failure: Failure) -> WireError:
        """The HTTP error the provider answers for a recorded failure."""
        raise NotImplementedError

    def refusal(self, status: int, message: str, *, param: str | None = None) -> WireError:
        """The provider's error for a request refused before any call.

        See [docs/wires.md#refused](../wires.md#refused).

        Args:
            status: The HTTP status (400 a malformed request, 413 a body over the cap).
            message: What is wrong, naming the field or header.
            param: The request field at fault, where the provider's error body names one.
        """
        raise NotImplementedError

    def upstream(
        self, base_url: str, path: str, body: bytes, model: str | None
    ) -> tuple[str, bytes]:
        """Where the recording proxy sends a call, and the body it sends.

        By default `upstream_path` (else ``path``) joined to ``base_url``
        (`join_path`), and ``body`` with its ``"model"`` replaced by ``model``.

        Args:
            base_url: The configured base URL of this wire's provider.
            path: The path (and query) the client called.
            body: The body the client sent.
            model: The model that replaces the one the client asked for, if any.
        """
        return join_path(base_url, self.upstream_path or path), with_model(body, model)

    def auth_headers(self, api_key: str, *, url: str = "", body: bytes = b"") -> dict[str, str]:
        """The headers that carry the live key on a call to ``url`` with ``body``.

        Default: ``Authorization: Bearer <key>``; a wire that signs its requests reads
        ``url`` and ``body``.
        """
        return {"authorization": f"Bearer {api_key}"}

    def decoder(self) -> Decoder:
        """A decoder for one live streamed answer."""
        raise NotImplementedError

    def decode_whole(self, answer: Mapping[str, object]) -> list[StreamChunk]:
        """The chunks of a live whole (``stream: false``) answer."""
        raise NotImplementedError

    def failure(
        self, status: int | None, body: object, headers: Mapping[str, str]
    ) -> FailureRecord:
        """The dsh failure for a live HTTP error response (``body`` parsed, or not JSON)."""
        raise NotImplementedError

    def stream_failure(self, event: Mapping[str, object]) -> FailureRecord | None:
        """The failure an event of a live stream reports, when the decoder does not.

        Default ``None``: the decoder reads every failure.
        """
        return None

    def ends_answer(self, frame: Frame, event: Mapping[str, object] | None) -> bool:
        """Whether a frame of a live stream ends the provider's answer.

        Args:
            frame: The frame as `framing` split it.
            event: Its payload as a JSON object (``None``: it is not one).

        Default ``False``: the answer ends with the decoder's ``finish`` or the stream.
        """
        return False

    def endpoint_env(self, root: str, api_key: str) -> dict[str, str]:
        """The variables that point this wire's clients at the endpoint at ``root``.

        Args:
            root: The endpoint's root URL (``http://127.0.0.1:<port>``).
            api_key: The dummy key to give.
        """
        return {}

    def client(self, http: InProcess, options: dict[str, object], *, asynchronous: bool) -> object:
        """An SDK client of this wire that reaches the endpoint in process.

        By default the `sdk` client class (``Async...`` when ``asynchronous``),
        given ``base_url`` (the in-process root and `SDK.path`), the endpoint's
        ``http_client`` and ``api_key`` (the dummy key unless ``options`` has one).

        Args:
            http: The endpoint's in-process transports.
            options: Passed to the client's constructor (``max_retries``, ...).
            asynchronous: An async client.

        Raises:
            DshReplayError: The SDK is not installed, or this wire has none.
        """
        sdk = self.sdk
        if sdk is None:
            raise DshReplayError(f"the {self.name} wire has no SDK client")
        module = import_sdk(sdk.module, sdk.package)
        cls = getattr(module, sdk.client if not asynchronous else f"Async{sdk.client}")
        options.setdefault("api_key", http.api_key)
        base = f"{http.url}{sdk.path}"
        return cls(base_url=base, http_client=http.http_client(asynchronous), **options)


Wire = BaseWire
"""What the other layers type a wire as."""


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
    headers: list[tuple[str, str]] = [*JSON_HEADERS]
    retry = failure.get("providerRetryAfterMs")
    if isinstance(retry, int) and not isinstance(retry, bool) and retry >= 0:
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


def wire_error(failure: Failure, status: int, body: JSONObject) -> WireError:
    """A `WireError` with the failure's headers and ``body`` serialized."""
    return WireError(status, failure_headers(failure), orjson.dumps(body))


def status_code(status: int | None, text: str) -> str:
    """The dsh failure code of a live HTTP error by its status (and its text).

    ``AUTH`` (401, 403), ``RATE_LIMIT`` (429), ``OVERLOADED`` (503),
    ``CONTEXT_WINDOW_EXCEEDED`` (400 or 413 whose text says the input is too long),
    else ``UNKNOWN``: what a provider without codes of its own tells.
    """
    if status in (401, 403):
        return "AUTH"
    if status == 429:
        return "RATE_LIMIT"
    if status == 503:
        return "OVERLOADED"
    if status in (400, 413) and CONTEXT_OVERFLOW.search(text):
        return "CONTEXT_WINDOW_EXCEEDED"
    return "UNKNOWN"


def failure_record(
    text: str,
    code: str,
    status: int | None,
    headers: Mapping[str, str],
    *,
    request_id_header: str = "x-request-id",
) -> FailureRecord:
    """A live error's dsh failure: ``{"message", "code", "status"?, ...}``.

    ``status`` when it is an HTTP status (100-599), ``providerRetryAfterMs`` from the
    ``retry-after`` headers (`retry_after_ms`), ``requestId`` from
    ``request_id_header`` when the response has it.
    """
    failure: FailureRecord = {"message": text, "code": code}
    if status is not None and 100 <= status <= 599:
        failure["status"] = status
    retry = retry_after_ms(headers)
    if retry is not None:
        failure["providerRetryAfterMs"] = retry
    request_id = headers.get(request_id_header)
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


def join_path(base_url: str, path: str) -> str:
    """``path`` appended to ``base_url``'s path, before its query and fragment.

    ``http://h/v1?key=x`` and ``/chat/completions`` give
    ``http://h/v1/chat/completions?key=x``; the parameters of a query in ``path`` are
    added after the base's, but for those the base's query already has: the base URL's
    value wins (``http://h?api-version=2`` and ``/p?api-version=1`` give
    ``http://h/p?api-version=2``), so no parameter is sent twice.
    """
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(base_url)
    bare, _, extra = path.partition("?")
    own = [pair for pair in parts.query.split("&") if pair]
    names = {pair.partition("=")[0] for pair in own}
    added = [pair for pair in extra.split("&") if pair and pair.partition("=")[0] not in names]
    query = "&".join([*own, *added])
    joined = parts.path.rstrip("/") + bare
    return urlunsplit((parts.scheme, parts.netloc, joined, query, parts.fragment))


def with_model(body: bytes, model: str | None) -> bytes:
    """``body`` (a JSON object) with its ``"model"`` replaced when ``model`` is set."""
    if model is None:
        return body
    parsed = orjson.loads(body)
    parsed["model"] = model
    return orjson.dumps(parsed)


def _json_type(value: object) -> str:
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
    body: Mapping[str, object], name: str, *, text: bool = False, single: bool = False
) -> tuple[str, str] | None:
    """Why ``body[name]`` is not an array of JSON objects, for the 400 that refuses it.

    The elements of a field of `ROLE_FIELDS` must also have a string ``role``
    (when they have one): a role is compared with the roles a wire knows, and an object
    or array there is no role any provider takes ([docs/wires.md#refused](../wires.md#refused)).

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


def _bad_role(element: Mapping[str, object], where: str) -> tuple[str, str] | None:
    role = element.get("role")
    if role is None or isinstance(role, str):
        return None
    return f"Invalid type for '{where}.role': expected a string, got {_json_type(role)}", (
        f"{where}.role"
    )


def refuse_misshapen(
    body: Mapping[str, object],
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
        refusal: The wire's `refusal`.
        text: Fields that may also be a string.
        single: Fields that may also be one object.

    Raises:
        BadRequest: A field is misshapen (see `misshapen`).
    """
    for name in fields:
        problem = misshapen(body, name, text=name in text, single=name in single)
        if problem is not None:
            message, param = problem
            raise BadRequest(refusal(400, message, param=param))


def int_field(value: object) -> int | None:
    """``value`` when it is an integer (not a bool), else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def json_items(value: object) -> list[object]:
    """The elements of ``value`` when it is a JSON array, else none (``[]``)."""
    return value if isinstance(value, list) else []


def httpx_module() -> ModuleType:
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
                "SDKs): pip install openai"
            ) from None
        return httpx
    return httpx2
