"""Recording through the endpoint: a proxy to the live provider.

Under ``--dsh-record`` the model endpoint forwards each HTTP call to the live provider
(:func:`proxy_stream`, used by the built-in live model): the request body goes out
unchanged (the model name is replaced only when ``DSH_RECORD_MODEL`` asks for it), the
API key is added by the proxy (the agent only ever holds a dummy key), and the provider's
answer comes back to the client byte for byte through a :class:`Relay`, while the same
bytes are decoded into dsh chunks that the recorder logs into the calling session.

Where calls go is the wire's (:meth:`~.._wire.base.Wire.upstream`):
``/v1/chat/completions`` to ``<DSH_RECORD_BASE_URL>/chat/completions`` and
``/v1/responses`` to ``<DSH_RECORD_BASE_URL>/responses`` (the base URL includes the
version, as OpenAI clients take it);
``/v1/messages`` to ``<DSH_RECORD_ANTHROPIC_BASE_URL>/v1/messages`` (``/messages`` when
that base already ends in ``/v1``; default: ``DSH_RECORD_BASE_URL``); the Gemini routes
to ``<DSH_RECORD_GEMINI_BASE_URL><path>`` (default: ``DSH_RECORD_BASE_URL``; see
docs/wires.md#recording-proxy).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._format.events import StreamChunk
from .._format.redact import REDACTED, Redactor, builtin_redactor, shown_url
from .._wire.base import Decoder, SSEParser, Wire

__all__ = ["Relay", "proxy_stream"]

# Request headers that are the connection's, the client's credentials, or the proxy's to set.
_NOT_FORWARDED: Final = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "transfer-encoding",
        "accept-encoding",
        "authorization",
        "x-api-key",
        "api-key",
        "te",
        "upgrade",
        "proxy-authorization",
    }
)
# Response headers the endpoint's own framing replaces.
_NOT_RELAYED: Final = frozenset(
    {"content-length", "transfer-encoding", "connection", "keep-alive", "content-encoding"}
)


class Relay:
    """Carries one HTTP call from the endpoint to the proxy and the raw answer back.

    Args:
        wire: The wire the call speaks.
        body: The request body as the client sent it.
        headers: The request headers, lower-case names.
        path: The path (and query) the client called.

    Attributes:
        call_id: The live provider's id of the answer, once its decoder read one
            (``None`` when the wire's answers carry none).
    """

    def __init__(self, wire: Wire, body: bytes, headers: Mapping[str, str], path: str = ""):
        self.wire = wire
        self.body = body
        self.headers = dict(headers)
        self.path = path
        self.call_id: str | None = None
        self.status = 0
        self.response_headers: list[tuple[str, str]] = []
        self.started = False
        self.ended = False  # the provider's answer is complete ([DONE], message_stop)
        # The secrets the proxy holds (the live key) never go back to the client.
        self.redactor = builtin_redactor()
        self.scrub = SecretScrub(())
        self._lock = threading.Lock()
        self._pending: list[bytes] = []

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """The provider answered: its status and headers (lower-case names).

        The headers are passed on with their values redacted (:attr:`redactor`).
        """
        self.status = status
        self.response_headers = [
            (k, self.redactor.redact_text(v)) for k, v in headers if k not in _NOT_RELAYED
        ]
        self.started = True

    def write(self, data: bytes, *, last: bool = False) -> None:
        """Bytes of the provider's answer, passed on as they are but the proxy's secrets.

        Each literal secret of :attr:`redactor` (the live key) becomes ``[REDACTED]``,
        even when it is split between two writes (the bytes that may start it wait for
        the next write; ``last`` lets them go).
        """
        data = self.scrub.feed(data)
        if last:
            data += self.scrub.end()
        if data:
            with self._lock:
                self._pending.append(data)

    def take(self) -> bytes:
        """The bytes written since the last call."""
        with self._lock:
            data, self._pending = b"".join(self._pending), []
        return data


class SecretScrub:
    """Replaces literal secrets in a byte stream that arrives in pieces.

    Args:
        secrets: The texts to replace, as UTF-8 bytes (none: nothing is replaced).
    """

    __slots__ = ("_held", "_secrets")

    def __init__(self, secrets: Iterable[str]):
        found = {s.encode("utf-8", "surrogateescape") for s in secrets if s}
        self._secrets = tuple(sorted(found, key=len, reverse=True))
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The bytes that may go out now (a possible start of a secret is held back)."""
        if not self._secrets:
            return data
        buf = self._held + data
        for secret in self._secrets:
            buf = buf.replace(secret, _REDACTED_BYTES)
        keep = max(_started(buf, secret) for secret in self._secrets)
        self._held = buf[len(buf) - keep :]
        return buf[: len(buf) - keep]

    def end(self) -> bytes:
        """The bytes held back (the stream ended: they cannot start a secret)."""
        held, self._held = self._held, b""
        return held


_REDACTED_BYTES: Final = REDACTED.encode()


def _started(buf: bytes, secret: bytes) -> int:
    """How many bytes at the end of ``buf`` may start ``secret`` (never all of it)."""
    return next(
        (n for n in range(min(len(secret) - 1, len(buf)), 0, -1) if buf.endswith(secret[:n])),
        0,
    )


def redacted_bytes(raw: bytes, redactor: Redactor) -> bytes:
    """Bytes of a provider's answer with every secret ``redactor`` knows redacted.

    For what is no model output (error bodies and error events): the secret shapes are
    redacted too, not only the literal secrets.
    """
    text = raw.decode("utf-8", "surrogateescape")
    return redactor.redact_text(text).encode("utf-8", "surrogateescape")


def proxy_redactor(api_key: str, *urls: str) -> Redactor:
    """The secrets a recording proxy holds: its key and its base URLs' credentials.

    Args:
        api_key: The live key (a value shorter than 8 characters is left out: it would
            garble ordinary bytes).
        urls: The base URLs calls go to (see :func:`~.._format.redact.url_secrets`).
    """
    from .._format.redact import url_secrets

    literals = [api_key] if len(api_key) >= 8 else []
    for url in urls:
        literals.extend(url_secrets(url))
    return Redactor(literals=literals)


def _not_json() -> StreamChunk:
    failure = {"message": "the provider's answer is not JSON", "code": "UNKNOWN"}
    return {"type": "finish", "reason": {"kind": "error", "failure": failure}}


def _decoded_whole(relay: Relay, raw: bytes) -> list[StreamChunk]:
    """The dsh chunks of a whole (``stream: false``) answer, through the wire's decoder.

    The answer's id (``id``; Gemini's ``responseId``) becomes :attr:`Relay.call_id`, as a
    stream decoder's does, so a later request can continue the answer by that id.
    """
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, Mapping):
        return [_not_json()]
    for key in ("id", "responseId"):
        found = answer.get(key)
        if isinstance(found, str) and found:
            relay.call_id = found
            break
    return relay.wire.decode_whole(answer)


def proxy_stream(
    relay: Relay,
    *,
    client: Any,
    base_url: str,
    api_key: str,
    model: str | None,
    timeout: float,
    on_network_error: Callable[[str], None],
    redactor: Redactor | None = None,
) -> Iterator[StreamChunk]:
    """Forward one call to the provider; yield its dsh chunks, relaying its raw answer.

    Nothing the proxy passes on or says holds a secret it knows
    (docs/recording.md#recording-secrets): the literal secrets of ``redactor`` are
    replaced in every byte of the answer; header values, error bodies and error events
    go through all its rules, and so do the failures it yields and its own messages
    (URLs shown without credentials).

    Args:
        relay: The call (wire, body, headers) and where its answer goes.
        client: An ``httpx`` client (``httpx2`` with current SDKs).
        base_url: The provider's base URL for this wire (the wire joins the path).
        api_key: Sent in the wire's authentication headers.
        model: When set, replaces the body's ``"model"`` (the user asked for it).
        timeout: Seconds for connecting and for each read.
        on_network_error: Called with a message naming ``url`` and the network error
            when the provider cannot be reached or the connection fails.
        redactor: The secrets the proxy holds; default: :func:`proxy_redactor` of
            ``api_key`` and ``base_url``.

    Yields:
        The answer as dsh chunks, ending in one ``finish`` (an error ``finish`` for an
        HTTP error or a network failure).
    """
    wire = relay.wire
    rules = proxy_redactor(api_key, base_url) if redactor is None else redactor
    relay.redactor = rules
    relay.scrub = SecretScrub(rules.literals)
    url, body = wire.upstream(base_url, relay.path, relay.body, model)
    headers = _outgoing(relay, api_key)
    decoder = wire.decoder()
    try:
        with client.stream("POST", url, content=body, headers=headers, timeout=timeout) as answer:
            relay.start(answer.status_code, [(k.lower(), v) for k, v in answer.headers.items()])
            if answer.status_code >= 400:
                raw = answer.read()
                relay.write(redacted_bytes(raw, rules), last=True)
                yield decoder.failed(_http_failure(wire, answer, raw, rules))
                return
            if "text/event-stream" not in answer.headers.get("content-type", ""):
                raw = answer.read()
                relay.write(raw, last=True)
                yield from _decoded_whole(relay, raw)
                return
            if (yield from _relay_events(relay, answer, decoder)):
                return
    except Exception as error:
        if not _is_network_error(error):
            raise
        cause = f"{type(error).__name__}: {error}"
        message = rules.redact_text(
            f"cannot reach the live model at {shown_url(url, rules)}: {cause}"
        )
        on_network_error(message)
        yield decoder.failed({"message": message, "code": "NETWORK"})
        return
    yield from decoder.end()


def _outgoing(relay: Relay, api_key: str) -> dict[str, str]:
    """The headers sent to the provider: the client's, the live key added."""
    headers = {k: v for k, v in relay.headers.items() if k not in _NOT_FORWARDED}
    headers["accept-encoding"] = "identity"  # the bytes are relayed and decoded as they are
    headers.update(relay.wire.auth_headers(api_key))
    return headers


def _relay_events(
    relay: Relay, answer: Any, decoder: Decoder
) -> Generator[StreamChunk, None, bool]:
    """Relay a streamed answer's bytes and yield its chunks.

    Returns:
        ``True`` when an error event in the stream ended the call (its failure was
        yielded), ``False`` when the stream ended otherwise.
    """
    wire = relay.wire
    parser = SSEParser()
    for data in answer.iter_raw():
        raw_events = parser.feed(data)
        events = list(_parsed(raw_events))
        failures = [wire.stream_failure(event) for event in events]
        failed = any(failure is not None for failure in failures)
        ending = failed or any(wire.ends_answer(name, text) for name, text in raw_events)
        # An error event is no model output: all the secret rules apply to its read.
        relay.write(redacted_bytes(data, relay.redactor) if failed else data, last=ending)
        if ending:
            # Known before any chunk of this read goes out: the endpoint holds these
            # bytes until the call is logged as finished, so a client that closes at
            # the answer's end cannot cut the call short.
            relay.ended = True
        for event, failure in zip(events, failures, strict=True):
            if failure is not None:
                failure["message"] = relay.redactor.redact_text(str(failure.get("message", "")))
                yield decoder.failed(failure)
                return True
            yield from decoder.feed(event)
            relay.call_id = decoder.response_id or relay.call_id
            if decoder.done:
                relay.ended = True
        if relay.ended:
            break
    relay.write(b"", last=True)
    return False


def _parsed(events: list[tuple[str | None, str]]) -> Iterator[Mapping[str, Any]]:
    """The JSON objects of server-sent events (``[DONE]`` and anything else skipped)."""
    for _, text in events:
        if text == "[DONE]":
            continue
        try:
            event = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, Mapping):
            yield event


def _http_failure(wire: Wire, answer: Any, raw: bytes, redactor: Redactor) -> dict[str, Any]:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = None
    headers = {k.lower(): v for k, v in answer.headers.items()}
    failure = wire.failure(answer.status_code, parsed, headers)
    failure["message"] = redactor.redact_text(str(failure["message"]))
    return failure


def _is_network_error(error: BaseException) -> bool:
    """An ``httpx`` transport error (connect, read, timeout, protocol) or an ``OSError``."""
    if isinstance(error, OSError):
        return True
    return any(
        cls.__name__ == "TransportError" and cls.__module__.split(".")[0].startswith("httpx")
        for cls in type(error).__mro__
    )
