"""A scripted model on loopback HTTP, speaking every wire the model endpoint speaks.

[`ScriptedServer`][pytest_dsh_replay.ScriptedServer] puts a
[`ScriptedModel`][pytest_dsh_replay.ScriptedModel] behind the model endpoint and its
loopback server: the model's chunks are rendered by the same wire encoders that serve
replays (chat completions streamed or whole, OpenAI Responses, Anthropic Messages, Gemini;
[docs/wires.md](../wires.md)), so an agent process, an SDK or the dsh runtime can call it as
a provider, and the recording proxy can record through it
(``DSH_RECORD_BASE_URL=<base_url>/v1``). It listens on 127.0.0.1 at a free port, and stops
when its ``with`` block ends or after ``idle_timeout`` seconds without a request.

See [docs/recording.md#scripted-server](../recording.md#scripted-server).
"""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from .._endpoint.endpoint import Endpoint, EndpointResponse, StreamingModel
from .._endpoint.routing import Route, Router
from .._endpoint.server import MAX_BODY_BYTES, EndpointServer
from .._endpoint.transport import endpoint_env
from .._errors import DshReplayError, ReplayBindingError
from .._format.events import StreamChunk
from .._identity.options import CallOptions, OptionsModel, Request, Waitable
from .._wire.table import WIRES
from .checks import Scripted, fail, seconds

__all__ = ["ReceivedRequest", "ScriptedServer"]

_WATCH_S: Final = 0.1  # how often the idle watch looks
_KEY_HEADERS: Final = tuple(
    dict.fromkeys(["x-api-key", "x-goog-api-key", *(h for w in WIRES for h in w.key_headers)])
)
"""The headers a key may come in, besides ``Authorization: Bearer`` (each wire's
`key_headers` among them)."""


@dataclass
class ReceivedRequest:
    """One HTTP request a `ScriptedServer` received, and what it answered.

    Attributes:
        method: The HTTP method.
        path: The path, with its query string.
        headers: The headers, lower-case names.
        body: The parsed JSON body (``None`` when it is not JSON).
        status: The answer's HTTP status (``None`` until answered, and for a dropped
            connection).
        response: The answer's body bytes as sent so far (before the chunked framing).
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any = field(repr=False)
    status: int | None = None
    response: bytearray = field(default_factory=bytearray, repr=False)


class _AnyRouter(Router):
    """Routing that never refuses: a provider answers two identical requests alike."""

    def route(self, headers: Mapping[str, str], request: Mapping[str, object]) -> Route:
        try:
            return super().route(headers, request)
        except ReplayBindingError:
            return Route(f"scripted-{uuid.uuid4().hex[:12]}", None, None, None, "content", True)


class _Cancel:
    """A call's cancel: the endpoint's (the client went away) or the server stopping."""

    def __init__(self, call: Waitable | None, stopped: threading.Event):
        self._call = call
        self._stopped = stopped

    def is_set(self) -> bool:
        return self._stopped.is_set() or (self._call is not None and self._call.is_set())

    def wait(self, timeout: float | None = None) -> bool:
        step = 0.05 if timeout is None else min(timeout, 0.05)
        if self._call is not None:
            return bool(self._call.wait(step)) or self._stopped.is_set()
        return self._stopped.wait(step)


class _Served(OptionsModel):
    """The model as the endpoint calls it: each call's cancel also ends when the server stops."""

    def __init__(self, model: StreamingModel, stopped: threading.Event):
        self.model = model
        self._stopped = stopped

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        cancel = options.cancel
        waits = None if cancel is None or isinstance(cancel, asyncio.Event) else cancel
        cut = _Cancel(waits, self._stopped)
        return self.model.stream_call(request, options.with_cancel(cut))


class _Tracked:
    """A response body that tells the server when it has been sent (or dropped)."""

    def __init__(self, body: Iterator[bytes], done: Callable[[], None], kept: bytearray):
        self._body = body
        self._done = done
        self._kept = kept
        self._ended = False

    def __iter__(self) -> _Tracked:
        return self

    def __next__(self) -> bytes:
        try:
            piece = next(self._body)
        except BaseException:
            self.close()
            raise
        self._kept.extend(piece)
        return piece

    def close(self) -> None:
        if not self._ended:
            self._ended = True
            close = getattr(self._body, "close", None)
            try:
                if close is not None:
                    close()
            finally:
                self._done()


class _ScriptedEndpoint(Endpoint):
    def __init__(self, server: ScriptedServer):
        super().__init__(_Served(server.model, server._stopped))
        self.router = _AnyRouter()
        self._owner = server

    def handle(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        probe: Callable[[], bool] | None = None,
        timeout: float | None = None,
    ) -> EndpointResponse:
        owner = self._owner
        received = owner._began(method, path, headers, body)
        response: EndpointResponse | None = None
        try:
            if not owner._authorized(headers):
                response = self.refuse(path, 401, "Incorrect API key provided.")
            else:
                response = super().handle(method, path, headers, body, probe=probe, timeout=timeout)
        finally:
            if response is None or response.drop:
                owner._ended()
        if response.drop:
            return response
        received.status = response.status
        response.body = _Tracked(response.body, owner._ended, received.response)
        return response


class ScriptedServer:
    """A [`ScriptedModel`][pytest_dsh_replay.ScriptedModel] on ``http://127.0.0.1:<free port>``.

    It serves the model endpoint's routes ([docs/wires.md#routes](../wires.md#routes)): ``POST
    /v1/chat/completions`` (streamed or not), ``/v1/responses``, ``/v1/messages`` and
    ``/v1beta/models/{model}:streamGenerateContent`` / ``:generateContent``, and ``GET
    /v1/models``. A provider failure is answered with its status, the wire's error body
    and ``Retry-After``; a hang keeps the response from starting until the client goes
    away or the server stops. It listens from construction, serves each connection
    from a daemon thread, and stops when its ``with`` block ends, when
    [`stop`][pytest_dsh_replay.ScriptedServer.stop] is called, or by itself after
    ``idle_timeout`` seconds without a request.

    Args:
        model: What answers the calls.
        api_key: When set, a request that does not carry it (``Authorization: Bearer``,
            ``x-api-key``, ``x-goog-api-key`` or a wire's `key_headers`, such as
            Azure's ``api-key``) is answered 401 in its wire's shape;
            ``None`` accepts any key.
        idle_timeout: Seconds without a request (and none in progress) after which the
            server stops by itself (> 0).
        max_body_bytes: The largest request body accepted (a larger one gets 413).

    Attributes:
        model: The scripted model.
        requests: Every request received, in arrival order.
        errors: What went wrong answering (a call no rule answers, an unserved route):
            [`DshReplayError`][pytest_dsh_replay.DshReplayError] objects, in order.

    Raises:
        ScriptedModelError: ``model`` is not a scripted model, ``api_key`` is empty,
            ``idle_timeout`` is not a positive number of seconds or ``max_body_bytes``
            not a positive integer.
    """

    def __init__(
        self,
        model: StreamingModel,
        *,
        api_key: str | None = None,
        idle_timeout: float = 60.0,
        max_body_bytes: int = MAX_BODY_BYTES,
    ):
        if not isinstance(model, Scripted):
            raise fail(f"ScriptedServer(model) takes a ScriptedModel, got {model!r}")
        if api_key is not None and (not isinstance(api_key, str) or not api_key):
            raise fail("ScriptedServer(api_key=...) must be a non-empty string or None")
        if (
            isinstance(max_body_bytes, bool)
            or not isinstance(max_body_bytes, int)
            or max_body_bytes <= 0
        ):
            raise fail(
                f"ScriptedServer(max_body_bytes=...) must be a positive number of bytes, got "
                f"{max_body_bytes!r}"
            )
        self.model = model
        self.api_key = api_key
        self.idle_timeout = seconds(idle_timeout, "ScriptedServer(idle_timeout=...)", zero=False)
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._active = 0
        self._last = time.monotonic()
        self._stopped = threading.Event()
        self.endpoint = _ScriptedEndpoint(self)
        self._server = EndpointServer(self.endpoint, max_body_bytes=max_body_bytes)
        self._watch = threading.Thread(target=self._idle, name="scripted-idle", daemon=True)
        self._watch.start()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "serving"
        return f"ScriptedServer({self.base_url!r}, {state}, requests={len(self.requests)})"

    @property
    def base_url(self) -> str:
        """The root URL, ``http://127.0.0.1:<port>`` (OpenAI clients take ``base_url + "/v1"``)."""
        return self._server.base_url

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1."""
        return int(self.base_url.rsplit(":", 1)[1])

    @property
    def env(self) -> dict[str, str]:
        """The variables that point an agent process at the server (like ``dsh_replay.env``).

        ``OPENAI_BASE_URL`` (``<base_url>/v1``), ``ANTHROPIC_BASE_URL``,
        ``DEEPSEEK_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL`` (the root), their ``*_API_KEY``
        (and ``GEMINI_API_KEY``, ``GOOGLE_API_KEY``) holding `api_key` or a dummy
        key, and ``NO_PROXY`` for the loopback address.
        """
        env = endpoint_env(self.base_url)
        if self.api_key is not None:
            for name in env:
                if name.endswith("_API_KEY"):
                    env[name] = self.api_key
        return env

    @property
    def errors(self) -> list[DshReplayError]:
        """What went wrong answering, so far (see the class)."""
        return list(self.endpoint.errors)

    @property
    def running(self) -> bool:
        """Whether the server still serves."""
        return not self._stopped.is_set()

    def stop(self) -> None:
        """Stop serving: hanging calls end, the port closes (idempotent; about a second)."""
        self._stopped.set()
        self._server.stop()

    def __enter__(self) -> ScriptedServer:
        return self

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        """Stop; when the block raised nothing, raise the first of `errors`."""
        self.stop()
        if kind is None and self.endpoint.errors:
            raise self.endpoint.errors[0]

    # --- bookkeeping ------------------------------------------------------------------------

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        key = self.api_key
        if key is None:
            return True
        given = [headers.get(name, "") for name in _KEY_HEADERS]
        bearer = headers.get("authorization", "")
        given.append(bearer[7:] if bearer.lower().startswith("bearer ") else "")
        return any(hmac.compare_digest(value.encode(), key.encode()) for value in given if value)

    def _began(
        self, method: str, path: str, headers: Mapping[str, str], body: bytes
    ) -> ReceivedRequest:
        try:
            parsed = orjson.loads(body) if body else None
        except orjson.JSONDecodeError:
            parsed = None
        received = ReceivedRequest(method, path, dict(headers), parsed)
        with self._lock:
            self.requests.append(received)
            self._active += 1
            self._last = time.monotonic()
        return received

    def _ended(self) -> None:
        with self._lock:
            self._active -= 1
            self._last = time.monotonic()

    def _idle(self) -> None:
        while not self._stopped.wait(_WATCH_S):
            with self._lock:
                idle = self._active == 0 and time.monotonic() - self._last > self.idle_timeout
            if idle:
                self.stop()
                return
