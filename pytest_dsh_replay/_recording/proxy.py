"""Recording through the endpoint: a proxy to the live provider.

Under ``--dsh-record`` the model endpoint forwards each HTTP call to the live provider
(:func:`proxy_stream`, used by the built-in live model): the request body goes out
unchanged (the model name is replaced only when ``DSH_RECORD_MODEL`` asks for it), the
API key is added by the proxy (the agent only ever holds a dummy key), and the provider's
answer comes back to the client byte for byte through a :class:`Relay`, while the same
bytes are decoded into dsh chunks that the recorder logs into the calling session.

Where calls go: ``/v1/chat/completions`` to ``<DSH_RECORD_BASE_URL>/chat/completions``
(the base URL includes the version, as OpenAI clients take it);
``/v1/messages`` to ``<DSH_RECORD_ANTHROPIC_BASE_URL>/v1/messages`` (``/messages`` when
that base already ends in ``/v1``; default: ``DSH_RECORD_BASE_URL``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._format.events import StreamChunk
from .._wire.anthropic import AnthropicDecoder, anthropic_failure
from .._wire.openai import OpenAIDecoder, openai_failure

__all__ = ["Relay", "SSEParser", "messages_url", "proxy_stream"]

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
        route: ``"openai"`` or ``"anthropic"``.
        body: The request body as the client sent it.
        headers: The request headers, lower-case names.
    """

    def __init__(self, route: str, body: bytes, headers: Mapping[str, str]):
        self.route = route
        self.body = body
        self.headers = dict(headers)
        self.status = 0
        self.response_headers: list[tuple[str, str]] = []
        self.started = False
        self.ended = False  # the provider's answer is complete ([DONE], message_stop)
        self._lock = threading.Lock()
        self._pending: list[bytes] = []

    def start(self, status: int, headers: list[tuple[str, str]]) -> None:
        """The provider answered: its status and headers (lower-case names)."""
        self.status = status
        self.response_headers = [(k, v) for k, v in headers if k not in _NOT_RELAYED]
        self.started = True

    def write(self, data: bytes) -> None:
        """Bytes of the provider's answer, to be passed on unchanged."""
        if data:
            with self._lock:
                self._pending.append(data)

    def take(self) -> bytes:
        """The bytes written since the last call."""
        with self._lock:
            data, self._pending = b"".join(self._pending), []
        return data


class SSEParser:
    """Splits a byte stream into server-sent events: ``(event name or None, data)``."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[tuple[str | None, str]]:
        """The events completed by ``data``."""
        self._buffer += data.replace(b"\r\n", b"\n")
        events: list[tuple[str | None, str]] = []
        while True:
            end = self._buffer.find(b"\n\n")
            if end < 0:
                return events
            block, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
            name: str | None = None
            data_lines: list[str] = []
            for line in block.decode("utf-8", "replace").split("\n"):
                if line.startswith("event:"):
                    name = line[6:].strip()
                elif line.startswith("data:"):
                    data_lines.append(line[5:].removeprefix(" "))
            if data_lines:
                events.append((name, "\n".join(data_lines)))


def messages_url(base_url: str) -> str:
    """The Messages URL for a base URL, by the dsh runtime's rule (``/v1`` not doubled)."""
    base = base_url.rstrip("/")
    return f"{base}/messages" if base.endswith("/v1") else f"{base}/v1/messages"


def _decoded_whole(route: str, raw: bytes) -> list[StreamChunk]:
    """The dsh chunks of a whole (``stream: false``) answer, through the stream decoders."""
    try:
        answer = orjson.loads(raw)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, Mapping):
        return [
            {
                "type": "finish",
                "reason": {
                    "kind": "error",
                    "failure": {"message": "the provider's answer is not JSON", "code": "UNKNOWN"},
                },
            }
        ]
    if route == "anthropic":
        decoder = AnthropicDecoder()
        out = decoder.feed({"type": "message_start", "message": {"usage": {}}})
        for index, block in enumerate(answer.get("content") or ()):
            if not isinstance(block, Mapping):
                continue
            start = dict(block)
            if block.get("type") == "tool_use":
                start["input"] = {}
            out += decoder.feed(
                {"type": "content_block_start", "index": index, "content_block": start}
            )
            if block.get("type") == "tool_use":
                partial = orjson.dumps(block.get("input", {})).decode()
                delta = {"type": "input_json_delta", "partial_json": partial}
                out += decoder.feed({"type": "content_block_delta", "index": index, "delta": delta})
            out += decoder.feed({"type": "content_block_stop", "index": index})
        usage = answer.get("usage")
        stop = {"stop_reason": answer.get("stop_reason")}
        out += decoder.feed({"type": "message_delta", "delta": stop, "usage": usage})
        return out + decoder.feed({"type": "message_stop"})
    openai_decoder = OpenAIDecoder()
    chunk: dict[str, Any] = {"usage": answer.get("usage")}
    choices = []
    for choice in answer.get("choices") or ():
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
    chunk["choices"] = choices
    return openai_decoder.feed(chunk) + openai_decoder.end()


def proxy_stream(  # noqa: C901  # split in the wire-seam work
    relay: Relay,
    *,
    client: Any,
    url: str,
    api_key: str,
    model: str | None,
    timeout: float,
    on_network_error: Callable[[str], None],
) -> Iterator[StreamChunk]:
    """Forward one call to the provider; yield its dsh chunks, relaying its raw answer.

    Args:
        relay: The call (route, body, headers) and where its answer goes.
        client: An ``httpx`` client (``httpx2`` with current SDKs).
        url: The provider's URL for this route.
        api_key: Sent as ``Authorization: Bearer`` (OpenAI) or ``x-api-key`` (Anthropic).
        model: When set, replaces the body's ``"model"`` (the user asked for it).
        timeout: Seconds for connecting and for each read.
        on_network_error: Called with a message naming ``url`` and the network error
            when the provider cannot be reached or the connection fails.

    Yields:
        The answer as dsh chunks, ending in one ``finish`` (an error ``finish`` for an
        HTTP error or a network failure).
    """
    body = relay.body
    if model is not None:
        parsed = orjson.loads(body)
        parsed["model"] = model
        body = orjson.dumps(parsed)
    headers = {k: v for k, v in relay.headers.items() if k not in _NOT_FORWARDED}
    headers["accept-encoding"] = "identity"  # the bytes are relayed and decoded as they are
    if relay.route == "anthropic":
        headers["x-api-key"] = api_key
    else:
        headers["authorization"] = f"Bearer {api_key}"
    decoder: OpenAIDecoder | AnthropicDecoder = (
        AnthropicDecoder() if relay.route == "anthropic" else OpenAIDecoder()
    )
    try:
        with client.stream("POST", url, content=body, headers=headers, timeout=timeout) as answer:
            relay.start(answer.status_code, [(k.lower(), v) for k, v in answer.headers.items()])
            if answer.status_code >= 400:
                raw = answer.read()
                relay.write(raw)
                yield decoder.failed(_http_failure(relay.route, answer, raw, api_key))
                return
            if "text/event-stream" not in answer.headers.get("content-type", ""):
                raw = answer.read()
                relay.write(raw)
                yield from _decoded_whole(relay.route, raw)
                return
            parser = SSEParser()
            for data in answer.iter_raw():
                relay.write(data)
                events = parser.feed(data)
                if any(_ends_answer(name, text) for name, text in events):
                    # Known before any chunk of this read goes out: the endpoint holds
                    # these bytes until the call is logged as finished, so a client that
                    # closes at [DONE] cannot cut the call short.
                    relay.ended = True
                for _, text in events:
                    if text == "[DONE]":
                        continue
                    try:
                        event = orjson.loads(text)
                    except orjson.JSONDecodeError:
                        continue
                    if not isinstance(event, Mapping):
                        continue
                    if relay.route != "anthropic" and isinstance(event.get("error"), Mapping):
                        error = event["error"]
                        message = str(error.get("message") or "stream error")
                        yield decoder.failed({"message": message, "code": "UNKNOWN"})
                        return
                    yield from decoder.feed(event)
                    if isinstance(decoder, AnthropicDecoder) and decoder.done:
                        relay.ended = True
                if relay.ended:
                    break
    except Exception as error:
        if not _is_network_error(error):
            raise
        cause = f"{type(error).__name__}: {error}".replace(api_key, "[REDACTED]")
        message = f"cannot reach the live model at {url}: {cause}"
        on_network_error(message)
        yield decoder.failed({"message": message, "code": "NETWORK"})
        return
    yield from decoder.end()


def _ends_answer(name: str | None, text: str) -> bool:
    """Whether a server-sent event ends the provider's answer (``[DONE]``, ``message_stop``)."""
    return text == "[DONE]" or name == "message_stop"


def _http_failure(route: str, answer: Any, raw: bytes, api_key: str) -> dict[str, Any]:
    try:
        parsed = orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = None
    headers = {k.lower(): v for k, v in answer.headers.items()}
    if route == "anthropic":
        failure = anthropic_failure(answer.status_code, parsed, headers)
    else:
        failure = openai_failure(answer.status_code, parsed, headers)
    if len(api_key) >= 8:
        failure["message"] = failure["message"].replace(api_key, "[REDACTED]")
    return failure


def _is_network_error(error: BaseException) -> bool:
    """An ``httpx`` transport error (connect, read, timeout, protocol) or an ``OSError``."""
    if isinstance(error, OSError):
        return True
    return any(
        cls.__name__ == "TransportError" and cls.__module__.split(".")[0].startswith("httpx")
        for cls in type(error).__mro__
    )
