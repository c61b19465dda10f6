"""Recording through the endpoint: a proxy to the live provider.

Under ``--dsh-record`` the model endpoint forwards each HTTP call to the live provider
(`proxy_stream`, used by the built-in live model): the request body goes out
unchanged (the model name is replaced only when ``DSH_RECORD_MODEL`` asks for it), the
API key is added by the proxy (the agent only ever holds a dummy key), and the provider's
answer comes back to the client byte for byte through a `Relay`, while the same
bytes are decoded into dsh chunks that the recorder logs into the calling session.

Where calls go is the wire's (`upstream`):
``/v1/chat/completions`` to ``<DSH_RECORD_BASE_URL>/chat/completions`` and
``/v1/responses`` to ``<DSH_RECORD_BASE_URL>/responses`` (the base URL includes the
version, as OpenAI clients take it);
``/v1/messages`` to ``<DSH_RECORD_ANTHROPIC_BASE_URL>/v1/messages`` (``/messages`` when
that base already ends in ``/v1``; default: ``DSH_RECORD_BASE_URL``); the Gemini routes
to ``<DSH_RECORD_GEMINI_BASE_URL><path>`` (default: ``DSH_RECORD_BASE_URL``; see
[docs/wires.md#recording-proxy](../wires.md#recording-proxy)).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._format.events import StreamChunk
from .._format.redact import REDACTED, Redactor, builtin_redactor, shown_url
from .._format.reply import finish_failure
from .._wire.base import Decoder, Wire
from .._wire.framing import Frame
from .._wire.shapes import FailureRecord

__all__ = ["UPSTREAM_IDLE_TIMEOUT_S", "Relay", "decoded_whole", "proxy_stream"]

UPSTREAM_IDLE_TIMEOUT_S: Final = 120.0
"""The longest the live provider may send nothing, in seconds, while recording.

The recording proxy and the built-in live model wait this long to connect, for an
answer to start and between two reads of an answer (a provider that keeps sending, however
slowly, is never cut). An answer that stalls longer once it has started is recorded as a
``TIMEOUT`` failure and the client's connection is dropped, as its replay drops it
([docs/limits.md#upstream-idle](../limits.md#upstream-idle)).
``OpenAICompatibleModel(timeout=...)`` and the ``DSH_RECORD_TIMEOUT`` variable set another bound."""

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

    The proxy passes the provider's answer on event by event
    ([docs/wires.md#recording-proxy](../wires.md#recording-proxy)): `write` the events of
    the answer, `end` the one that ends it (the end marker, an error event), which the
    endpoint sends only when the call finished as it was recorded; an answer that failed
    ends the way its replay ends instead.

    Args:
        wire: The wire the call speaks.
        body: The request body as the client sent it.
        headers: The request headers, lower-case names.
        path: The path (and query) the client called.

    Attributes:
        call_id: The live provider's id of the answer, once its decoder read one
            (``None`` when the wire's answers carry none).
        streamed: The provider answered with an event stream (not one JSON object).
        holding: The read that ends the answer has come: the endpoint holds what it
            relays from then on until the call is logged as finished, so a client that
            closes at the answer's end cannot cut the call short.
        ended: The provider's answer is over (its end, its error, the end of its
            stream, the idle timeout); the chunks yielded from then on come from its end.
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
        self.streamed = False
        self.holding = False
        self.ended = False
        # The secrets the proxy holds (the live key) never go back to the client.
        self.redactor = builtin_redactor()
        self.scrub = SecretScrub(())
        self._lock = threading.Lock()
        self._pending: list[bytes] = []
        self._ending = b""

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """The provider answered: its status and headers (lower-case names).

        The headers are passed on with their values redacted (`redactor`).
        """
        self.status = status
        self.response_headers = [
            (k, self.redactor.redact_text(v)) for k, v in headers if k not in _NOT_RELAYED
        ]
        self.started = True

    def write(self, data: bytes, *, last: bool = False) -> None:
        """Bytes of the provider's answer, passed on as they are but the proxy's secrets.

        Each literal secret of `redactor` (the live key) becomes ``[REDACTED]``,
        even when it is split between two writes (the bytes that may start it wait for
        the next write; ``last`` lets them go).
        """
        data = self.scrub.feed(data)
        if last:
            data += self.scrub.end()
        if data:
            with self._lock:
                self._pending.append(data)

    def end(self, data: bytes = b"") -> None:
        """The provider's answer is over; ``data`` is the event that ended it, if any.

        ``data`` is kept apart (`take_ending`), its secrets replaced as by
        `write`; what `write` held back goes out with the rest.
        """
        rest = self.scrub.end()
        ending = self.scrub.feed(data) + self.scrub.end()
        with self._lock:
            if rest:
                self._pending.append(rest)
            self._ending += ending
        self.ended = True

    def take(self) -> bytes:
        """The bytes written since the last call."""
        with self._lock:
            data, self._pending = b"".join(self._pending), []
        return data

    def take_ending(self) -> bytes:
        """The event that ended the answer (see `end`), once."""
        with self._lock:
            data, self._ending = self._ending, b""
        return data


class SecretScrub:
    """Replaces literal secrets in a byte stream that arrives in pieces.

    Args:
        secrets: The texts to replace, as UTF-8 bytes (none: nothing is replaced).
    """

    __slots__ = ("_held", "_inner", "_secrets")

    def __init__(self, secrets: Iterable[str]):
        found = {s.encode("utf-8", "surrogateescape") for s in secrets if s}
        self._secrets = tuple(sorted(found, key=len, reverse=True))
        # The bytes a secret's start can end in: a piece ending in another (an event's
        # newline) holds nothing back, without looking further.
        self._inner = frozenset(b for secret in self._secrets for b in secret[:-1])
        self._held = b""

    def feed(self, data: bytes) -> bytes:
        """The bytes that may go out now (a possible start of a secret is held back)."""
        if not self._secrets:
            return data
        buf = self._held + data
        for secret in self._secrets:
            buf = buf.replace(secret, _REDACTED_BYTES)
        if not buf or buf[-1] not in self._inner:
            self._held = b""
            return buf
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
        urls: The base URLs calls go to (see `url_secrets`).
    """
    from .._format.redact import url_secrets

    literals = [api_key] if len(api_key) >= 8 else []
    for url in urls:
        literals.extend(url_secrets(url))
    return Redactor(literals=literals)


def _not_json() -> StreamChunk:
    failure = {"message": "the provider's answer is not JSON", "code": "UNKNOWN"}
    return {"type": "finish", "reason": {"kind": "error", "failure": failure}}


_CONTENT_KEYS: Final = ("choices", "content", "candidates", "output")


def decoded_whole(
    wire: Wire,
    raw: bytes,
    headers: Mapping[str, str],
    redactor: Redactor,
    relay: Relay | None = None,
) -> list[StreamChunk]:
    """The dsh chunks of a whole (one JSON object) answer, through the wire's decoder.

    An error body (``{"error": {...}}`` and no content) answered with a 2xx status is
    the call's failure, with the provider's message
    ([docs/wires.md#live-failures](../wires.md#live-failures)); so is a body that is not a
    JSON object (``UNKNOWN``). With ``relay``, the answer's id (``id``; Gemini's
    ``responseId``) becomes `Relay.call_id`, as a stream decoder's does, so a later request
    can continue the answer by that id.

    Args:
        wire: The call's wire.
        raw: The body.
        headers: The response headers, lower-case names (a request id, a retry delay).
        redactor: Applied to a failure's message (it is no model output).
        relay: The proxy's relay of the call, when it relays one.
    """
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, Mapping):
        return [_not_json()]
    if isinstance(answer.get("error"), Mapping) and not any(k in answer for k in _CONTENT_KEYS):
        failure = wire.failure(None, answer, headers)
        failure["message"] = redactor.redact_text(str(failure.get("message", "")))
        return [wire.decoder().failed(failure)]
    if relay is not None:
        for key in ("id", "responseId"):
            found = answer.get(key)
            if isinstance(found, str) and found:
                relay.call_id = found
                break
    return wire.decode_whole(answer)


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
    ([docs/recording.md#recording-secrets](../recording.md#recording-secrets)): the literal
    secrets of ``redactor`` are replaced in every byte of the answer; header values, error
    bodies and error events go through all its rules, and so do the failures it yields and
    its own messages (URLs shown without credentials).

    A streamed answer is passed on event by event (an unfinished event is never
    passed on: a stream that ends inside one loses it); bytes that are not UTF-8 are
    passed on as U+FFFD, as the decoder reads them. What the call is recorded as when
    the answer is not a complete stream
    ([docs/recording.md#upstream-answers](../recording.md#upstream-answers)):

    - the stream ends before the answer's end (no ``[DONE]``, no ``message_stop``) and
      the decoder has no finish for it: ``STREAM_CLOSED``;
    - the provider sends nothing for ``timeout`` seconds once it has answered: a
      ``TIMEOUT`` failure
      ([`UPSTREAM_IDLE_TIMEOUT_S`][pytest_dsh_replay.UPSTREAM_IDLE_TIMEOUT_S] by default);
    - a 2xx answer that is a JSON error body: the provider's error.

    Args:
        relay: The call (wire, body, headers) and where its answer goes.
        client: An ``httpx`` client (``httpx2`` with current SDKs).
        base_url: The provider's base URL for this wire (the wire joins the path).
        api_key: Sent in the wire's authentication headers.
        model: When set, replaces the body's ``"model"`` (the user asked for it).
        timeout: Seconds for connecting and for each read: the idle timeout.
        on_network_error: Called with a message naming ``url`` and the network error
            when the provider cannot be reached or the connection fails.
        redactor: The secrets the proxy holds; default: `proxy_redactor` of
            ``api_key`` and ``base_url``.

    Yields:
        The answer as dsh chunks, ending in one ``finish`` (an error ``finish`` for an
        HTTP error, a network failure or a stalled answer).
    """
    wire = relay.wire
    rules = proxy_redactor(api_key, base_url) if redactor is None else redactor
    relay.redactor = rules
    relay.scrub = SecretScrub(rules.literals)
    url, body = wire.upstream(base_url, relay.path, relay.body, model)
    headers = _outgoing(relay, api_key, url, body)
    decoder = wire.decoder()
    try:
        with client.stream("POST", url, content=body, headers=headers, timeout=timeout) as answer:
            relay.start(answer.status_code, [(k.lower(), v) for k, v in answer.headers.items()])
            if answer.status_code >= 400:
                raw = answer.read()
                relay.write(redacted_bytes(raw, rules), last=True)
                relay.end()
                yield decoder.failed(_http_failure(wire, answer, raw, rules))
                return
            if not wire.framing.carries(answer.headers.get("content-type", "")):
                raw = answer.read()
                relay.write(raw, last=True)
                relay.end()
                yield from decoded_whole(wire, raw, _lower(answer.headers), rules, relay)
                return
            relay.streamed = True
            unfinished = yield from _relay_events(relay, answer, decoder)
            if unfinished is None:
                return
    except Exception as error:
        failure = _lost(relay, error, url, timeout, rules)
        if failure is None:
            raise
        if failure["code"] == "NETWORK" and relay.streamed:
            # The connection broke in the middle of a streamed answer (an incomplete
            # body, a reset): the stream was cut before its end, as a clean close cuts
            # it; what the client got is recorded (docs/recording.md#upstream-answers).
            yield from _closing(relay, decoder, 0)
            return
        if failure["code"] == "NETWORK":
            on_network_error(failure["message"])
        relay.end()
        yield decoder.failed(failure)
        return
    yield from _closing(relay, decoder, unfinished)


def _lower(headers: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _lost(
    relay: Relay, error: Exception, url: str, timeout: float, rules: Redactor
) -> FailureRecord | None:
    """The failure of a call the connection failed (``None``: not a network error).

    A read that timed out once the provider answered is the answer stalling: ``TIMEOUT``;
    anything else (connecting, a reset, a timeout before the answer started) is
    ``NETWORK``.
    """
    if not _is_network_error(error):
        return None
    where = shown_url(url, rules)
    if relay.started and _is_read_timeout(error):
        return stalled(where, timeout, rules)
    if _is_read_timeout(error):  # connected and asked, and nothing came back in time
        message = (
            f"cannot reach the live model at {where}: it did not start its answer within "
            f"{timeout:g} s (the idle timeout, DSH_RECORD_TIMEOUT; docs/limits.md#upstream-idle)"
        )
        return {"message": rules.redact_text(message), "code": "NETWORK"}
    cause = f"{type(error).__name__}: {error}"
    message = rules.redact_text(f"cannot reach the live model at {where}: {cause}")
    return {"message": message, "code": "NETWORK"}


def stalled(where: str, timeout: float, rules: Redactor) -> FailureRecord:
    """The ``TIMEOUT`` failure of an answer that sent nothing for ``timeout`` seconds.

    Args:
        where: The URL called, as shown (no credentials).
        timeout: The idle timeout in seconds.
        rules: Applied to the message.
    """
    message = (
        f"the live model at {where} sent nothing for {timeout:g} s in the middle of its "
        "answer (the idle timeout; docs/limits.md#upstream-idle)"
    )
    return {"message": rules.redact_text(message), "code": "TIMEOUT"}


def _closing(relay: Relay, decoder: Decoder, unfinished: int) -> Iterator[StreamChunk]:
    """The chunks that close a streamed answer whose stream ended.

    A stream that ended before the answer's end, where the decoder has no finish of its
    own, is recorded as cut (``STREAM_CLOSED``): what the client got, and what its
    replay serves ([docs/wires.md#http-errors](../wires.md#http-errors)).
    """
    cut = not relay.ended
    relay.end()
    chunks = decoder.end()
    if not cut or not chunks or chunks[-1].get("type") != "finish":
        yield from chunks
        return
    *before, finish = chunks
    failure = finish_failure(finish.get("reason"))
    if failure is not None and failure.get("code") != "STREAM_CLOSED":
        message = f"the live stream was cut before the answer's end: {failure.get('message')}"
        if unfinished:
            message += f" ({unfinished} bytes of an unfinished event were dropped)"
        finish = decoder.failed({"message": message, "code": "STREAM_CLOSED"})
    yield from before
    yield finish


def _outgoing(relay: Relay, api_key: str, url: str, body: bytes) -> dict[str, str]:
    """The headers sent to the provider: the client's, the wire's for the live key added."""
    headers = {k: v for k, v in relay.headers.items() if k not in _NOT_FORWARDED}
    headers["accept-encoding"] = "identity"  # the bytes are relayed and decoded as they are
    headers.update(relay.wire.auth_headers(api_key, url=url, body=body))
    return headers


def _relay_events(
    relay: Relay, answer: Any, decoder: Decoder
) -> Generator[StreamChunk, None, int | None]:
    """Relay a streamed answer event by event and yield its chunks.

    Each complete event is written before its chunks are yielded; the event that ends
    the answer (its end marker, an error, the event that gave the ``finish``) goes to
    `Relay.end`, and the read it comes in makes the relay hold.

    Returns:
        ``None`` when the ``finish`` was yielded, else how many bytes of an unfinished
        event the stream ended in (0 when it ended between two events, or at the
        answer's end marker).
    """
    wire = relay.wire
    parser = wire.framing.splitter()
    for data in answer.iter_raw():
        events = [_Event(wire, frame, relay.redactor) for frame in parser.feed_raw(data)]
        if any(event.ends or event.failure is not None for event in events):
            relay.holding = True
        for event in events:
            chunks = event.chunks(decoder, relay.redactor)
            relay.call_id = decoder.response_id or relay.call_id
            finished = any(chunk.get("type") == "finish" for chunk in chunks)
            if event.ends or finished:
                relay.end(event.relayed(relay.redactor))
                yield from chunks
                return None if finished else 0
            relay.write(event.raw)
            yield from chunks
    relay.write(b"", last=True)
    return len(parser.pending)


class _Event:
    """One frame of a live answer (in the wire's framing), parsed once.

    A frame of a binary framing (`Framing.binary`) is never read as text: its
    payload is, and the literal secrets in it are replaced by framing it again
    (`Framing.rewritten`).
    """

    __slots__ = ("ends", "failure", "framing", "object", "raw")

    def __init__(self, wire: Wire, frame: Frame, redactor: Redactor):
        self.framing = wire.framing
        if self.framing.binary:
            self.raw = self.framing.rewritten(frame.raw, lambda p: _scrubbed(p, redactor))
        else:
            self.raw = _text_safe(frame.raw)
        self.object = _json_object(frame.data)
        self.failure = None if self.object is None else wire.stream_failure(self.object)
        self.ends = frame.data is not None and wire.ends_answer(frame, self.object)

    def relayed(self, redactor: Redactor) -> bytes:
        """Its bytes as passed on: an error event is no model output, every rule applies."""
        if self.failure is None:
            return self.raw
        return self.framing.rewritten(self.raw, lambda raw: redacted_bytes(raw, redactor))

    def chunks(self, decoder: Decoder, redactor: Redactor) -> list[StreamChunk]:
        """Its dsh chunks; a failure's message redacted (it is no model output)."""
        if self.failure is not None:
            out = [decoder.failed(self.failure)]
        elif self.object is not None:
            out = decoder.feed(self.object)
        else:
            return []
        for chunk in out:
            failure = finish_failure(chunk.get("reason")) if chunk.get("type") == "finish" else None
            if failure is not None:
                failure["message"] = redactor.redact_text(str(failure.get("message", "")))
                chunk["reason"] = {**chunk["reason"], "failure": failure}
        return out


def _scrubbed(payload: bytes, redactor: Redactor) -> bytes:
    """A whole payload, text-safe, its literal secrets replaced."""
    scrub = SecretScrub(redactor.literals)
    return scrub.feed(_text_safe(payload)) + scrub.end()


def _text_safe(raw: bytes) -> bytes:
    """An event's bytes, with what is not UTF-8 as U+FFFD (as the decoder reads it)."""
    if raw.isascii():
        return raw
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "replace").encode("utf-8")
    return raw


def _json_object(text: str | None) -> Mapping[str, Any] | None:
    """A frame's payload as a JSON object (``None``: not JSON, not an object, no payload)."""
    if text is None:
        return None
    try:
        event = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    return event if event.__class__ is dict else None


def _http_failure(wire: Wire, answer: Any, raw: bytes, redactor: Redactor) -> FailureRecord:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = None
    headers = {k.lower(): v for k, v in answer.headers.items()}
    failure = wire.failure(answer.status_code, parsed, headers)
    failure["message"] = redactor.redact_text(str(failure["message"]))
    return failure


def _is_read_timeout(error: BaseException | None) -> bool:
    """An ``httpx`` read timeout: the provider sent nothing for the read's timeout."""
    return any(
        cls.__name__ == "ReadTimeout" and cls.__module__.split(".")[0].startswith("httpx")
        for cls in type(error).__mro__
    )


def _is_network_error(error: BaseException) -> bool:
    """An ``httpx`` transport error (connect, read, timeout, protocol) or an ``OSError``."""
    if isinstance(error, OSError):
        return True
    return any(
        cls.__name__ == "TransportError" and cls.__module__.split(".")[0].startswith("httpx")
        for cls in type(error).__mro__
    )
