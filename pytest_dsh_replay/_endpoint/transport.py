"""The endpoint in process: ``httpx`` transports that call it without a socket.

The ``openai`` and ``anthropic`` SDKs send their requests through an ``httpx`` client
(``httpx2`` in their current releases, ``httpx`` in older ones); a client built on
`sync_transport` or `async_transport` hands each request straight to the
`Endpoint`. The SDK parses the same bytes it would
read from a socket.

- The request's read timeout (``httpx``'s ``timeout`` extension) bounds how long a
  hanging call waits for its next piece; past it the body raises ``ReadTimeout``.
- A recorded transport failure raises ``RemoteProtocolError`` (before the response) or
  ``ReadError`` (mid-stream), as a dropped connection would.
- The async transport runs the endpoint in a worker thread (at most
  `MAX_WORKERS` at once) so that a hanging call never blocks the event loop; each
  streamed response is read by one worker and handed over through a queue.

``httpx`` is imported when a transport is made: importing this module is cheap.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from types import ModuleType
from typing import Any, Final

from .._errors import EndpointError
from .._format.json_values import ABSENT
from .._wire.base import httpx_module
from .._wire.table import endpoint_env as wires_env
from .._wire.table import wire_named
from .endpoint import Endpoint, ended_response
from .response import DroppedConnection, EndpointResponse, TimedOut

__all__ = [
    "DUMMY_API_KEY",
    "MAX_WORKERS",
    "EndpointLink",
    "async_transport",
    "endpoint_env",
    "sdk_client",
    "sync_transport",
]

MAX_WORKERS: Final = 16
"""Worker threads of one endpoint's async transports."""


def _read_timeout(request: Any) -> float | None:
    timeout = request.extensions.get("timeout")
    if isinstance(timeout, dict):
        read = timeout.get("read")
        if isinstance(read, (int, float)) and not isinstance(read, bool):
            return float(read)
    return None


def _headers(request: Any) -> dict[str, str]:
    return {name.lower(): value for name, value in request.headers.items()}


def _path(request: Any) -> str:
    """The request's path and query, as a socket would carry them (``/p?api-version=1``).

    The query is kept: the recording proxy sends it on (an Azure ``api-version``), as
    it does for a call to the loopback server.
    """
    return bytes(request.url.raw_path).decode("ascii")


class EndpointLink:
    """How a transport reaches its endpoint: cut when the test ends.

    An SDK client is a reference cycle of its own (its resources point back at it), so a
    client a test drops is freed by the garbage collector, not at once; through a link
    cut at the end of the test (`cut`), the client no longer keeps the endpoint,
    the replay and the test's sessions alive until then
    ([docs/api/store.md#api-stores](store.md#api-stores)). Every request after the cut, a
    model list or an unserved route too, is answered 503 (the test has ended).
    """

    __slots__ = ("endpoint",)

    def __init__(self, endpoint: Endpoint):
        self.endpoint: Endpoint | None = endpoint

    def cut(self) -> None:
        """Let go of the endpoint."""
        self.endpoint = None


def _linked(endpoint: Endpoint | EndpointLink) -> EndpointLink:
    return endpoint if isinstance(endpoint, EndpointLink) else EndpointLink(endpoint)


def sync_transport(endpoint: Endpoint | EndpointLink, httpx: ModuleType | None = None) -> Any:
    """An ``httpx.BaseTransport`` that calls ``endpoint``.

    Args:
        endpoint: What answers (or the link to it).
        httpx: The ``httpx`` flavour the client is built on (``httpx`` or ``httpx2``;
            default `httpx_module`): an SDK on plain ``httpx`` (``ollama``) needs its
            transport from that module.
    """
    return _sync_classes(httpx or httpx_module())[1](_linked(endpoint))


_SYNC_CLASSES: dict[Any, tuple[type, type]] = {}  # httpx module -> its two classes


def _sync_classes(httpx: Any) -> tuple[type, type]:
    """The sync stream and transport classes for ``httpx``, made once per module.

    Made once, not per client: a class is a reference cycle of its own, and a class
    made per client would keep the client's endpoint in it until the garbage collector
    runs ([docs/api/store.md#api-stores](store.md#api-stores)).
    """
    found = _SYNC_CLASSES.get(httpx)
    if found is not None:
        return found

    class _Stream(httpx.SyncByteStream):  # type: ignore[misc]
        def __init__(self, response: EndpointResponse, request: Any):
            self._response = response
            self._request = request

        def __iter__(self) -> Iterator[bytes]:
            try:
                yield from self._response.body
            except DroppedConnection as error:
                raise httpx.ReadError(str(error), request=self._request) from None
            except TimedOut as error:
                raise httpx.ReadTimeout(str(error), request=self._request) from None

        def close(self) -> None:
            self._response.close()

    class _Transport(httpx.BaseTransport):  # type: ignore[misc]
        def __init__(self, link: EndpointLink):
            self._link = link

        def handle_request(self, request: Any) -> Any:
            response = _answer(self._link.endpoint, request, request.read())
            return _httpx_response(httpx, response, request, _Stream(response, request))

    found = _SYNC_CLASSES[httpx] = (_Stream, _Transport)
    return found


def _answer(endpoint: Endpoint | None, request: Any, body: bytes) -> EndpointResponse:
    """The endpoint's answer to an httpx request whose body was read (``None``: cut)."""
    if endpoint is None:
        return ended_response(_path(request))
    return endpoint.handle(
        request.method, _path(request), _headers(request), body, timeout=_read_timeout(request)
    )


def _httpx_response(httpx: Any, response: EndpointResponse, request: Any, stream: Any) -> Any:
    """The ``httpx.Response`` for an answer (a dropped connection raises as httpx does)."""
    if response.drop and response.timed_out:  # an injected latency past the read timeout
        raise httpx.ReadTimeout("the answer did not start within the read timeout", request=request)
    if response.drop:
        raise httpx.RemoteProtocolError(
            "the replayed call dropped the connection (a recorded transport failure, or a "
            "Fault.disconnect injected by dsh_replay.inject)",
            request=request,
        )
    return httpx.Response(response.status, headers=response.headers, stream=stream, request=request)


class _Pool:
    """One endpoint's worker threads for async transports (created on first use)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    def get(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(
                    MAX_WORKERS, thread_name_prefix="dsh-replay-transport"
                )
            return self._executor

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)


def _pump(
    response: EndpointResponse,
    closed: threading.Event,
    loop: asyncio.AbstractEventLoop,
    queue: asyncio.Queue[Any],
) -> None:
    """Read a response body in a worker thread, handing each piece to the event loop."""
    item: Any = ABSENT
    try:
        for piece in response.body:
            if closed.is_set():
                break
            loop.call_soon_threadsafe(queue.put_nowait, piece)
    except BaseException as error:  # handed to the reader
        item = error
    finally:
        if closed.is_set():
            response.close()
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody reads any more
        loop.call_soon_threadsafe(queue.put_nowait, item)


async def _pieces(queue: asyncio.Queue[Any], httpx: Any, request: Any) -> AsyncIterator[bytes]:
    """The pieces `_pump` hands over; its errors raised as ``httpx`` raises them."""
    while True:
        item = await queue.get()
        if item is ABSENT:
            return
        if isinstance(item, DroppedConnection):
            raise httpx.ReadError(str(item), request=request)
        if isinstance(item, TimedOut):
            raise httpx.ReadTimeout(str(item), request=request)
        if isinstance(item, BaseException):
            raise item
        yield item


def _asyncio_loop() -> asyncio.AbstractEventLoop:
    """The running asyncio loop the in-process async clients need.

    Raises:
        EndpointError: The caller runs in another event loop (trio), which the
            in-process transport does not serve; the endpoint over HTTP does.
    """
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        raise EndpointError(
            "the in-process async SDK clients (async_openai_client(), ...) run in "
            "asyncio's event loop, and this call runs in another (trio?): give the SDK "
            "dsh_replay.base_url instead, the model endpoint over HTTP, which serves any loop"
        ) from None


def async_transport(
    endpoint: Endpoint | EndpointLink, pool: _Pool | None = None, httpx: ModuleType | None = None
) -> Any:
    """An ``httpx.AsyncBaseTransport`` that calls ``endpoint``.

    Args:
        endpoint: What answers (or the link to it).
        pool: The worker threads to use (`worker_pool`); a new pool when ``None``.
        httpx: The ``httpx`` flavour (see `sync_transport`; default `httpx_module`).
    """
    return _async_classes(httpx or httpx_module())(_linked(endpoint), pool or _Pool())


_ASYNC_CLASSES: dict[Any, type] = {}  # httpx module -> its async transport class


def _async_classes(httpx: Any) -> type:
    """The async transport class for ``httpx``, made once per module (see `_sync_classes`)."""
    found = _ASYNC_CLASSES.get(httpx)
    if found is not None:
        return found

    class _Stream(httpx.AsyncByteStream):  # type: ignore[misc]
        def __init__(self, response: EndpointResponse, request: Any, workers: _Pool):
            self._response = response
            self._request = request
            self._workers = workers
            self._closed = threading.Event()

        async def __aiter__(self) -> AsyncIterator[bytes]:
            loop = _asyncio_loop()
            queue: asyncio.Queue[Any] = asyncio.Queue()
            done = loop.run_in_executor(
                self._workers.get(), _pump, self._response, self._closed, loop, queue
            )
            try:
                async for piece in _pieces(queue, httpx, self._request):
                    yield piece
            finally:
                self._closed.set()
                if not done.done():
                    self._response.close()
                    await asyncio.wait([done], timeout=1.0)

        async def aclose(self) -> None:
            self._closed.set()
            self._response.close()  # ends a call that hangs in the worker

    class _Transport(httpx.AsyncBaseTransport):  # type: ignore[misc]
        def __init__(self, link: EndpointLink, workers: _Pool):
            self._link = link
            self._workers = workers

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            loop = _asyncio_loop()
            response = await loop.run_in_executor(
                self._workers.get(), _answer, self._link.endpoint, request, body
            )
            stream = _Stream(response, request, self._workers)
            return _httpx_response(httpx, response, request, stream)

        async def aclose(self) -> None:
            return None

    _ASYNC_CLASSES[httpx] = _Transport
    return _Transport


def worker_pool() -> _Pool:
    """A pool of worker threads for `async_transport` (shut it down at the end)."""
    return _Pool()


DUMMY_API_KEY: Final = "dsh-replay-dummy-key"
"""The API key the endpoint's environment and ready clients give (the endpoint ignores it)."""

_IN_PROCESS_URL: Final = "http://dsh-replay.invalid"


def endpoint_env(root: str) -> dict[str, str]:
    """Environment variables that point an agent process at the endpoint at ``root``.

    Each wire's (`endpoint_env`: base URLs and
    `DUMMY_API_KEY` as the keys), and ``NO_PROXY`` for the loopback address.
    """
    return {
        **wires_env(root, DUMMY_API_KEY),
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


class _InProcess:
    """How a wire's SDK client reaches ``endpoint`` (`InProcess`)."""

    url: Final = _IN_PROCESS_URL
    api_key: Final = DUMMY_API_KEY

    def __init__(self, endpoint: Endpoint | EndpointLink, pool: _Pool | None):
        self._endpoint = endpoint
        self._pool = pool

    def http_client(self, asynchronous: bool) -> object:
        """An ``httpx`` client on the endpoint's sync or async transport."""
        httpx = httpx_module()
        return (httpx.AsyncClient if asynchronous else httpx.Client)(
            transport=self.transport(asynchronous, httpx)
        )

    def transport(self, asynchronous: bool, httpx: ModuleType | None = None) -> object:
        """The endpoint's sync or async transport, of the ``httpx`` flavour ``httpx``."""
        if not asynchronous:
            return sync_transport(self._endpoint, httpx)
        return async_transport(self._endpoint, self._pool, httpx)

    def send(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        timeout: float | None = None,
    ) -> _Reply:
        """One request to the endpoint (`InProcess.send`)."""
        endpoint = _linked(self._endpoint).endpoint
        if endpoint is None:
            response = ended_response(path)
        else:
            response = endpoint.handle(method, path, dict(headers), body, timeout=timeout)
        if response.drop and response.timed_out:
            raise TimeoutError("the answer did not start within the read timeout")
        if response.drop:
            raise ConnectionResetError(
                "the replayed call dropped the connection (a recorded transport failure, or a "
                "Fault.disconnect injected by dsh_replay.inject)"
            )
        return _Reply(response)


class _Reply:
    """An `EndpointResponse` whose body raises the built-in errors (`Reply`)."""

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: EndpointResponse):
        self._response = response
        self.status = response.status
        self.headers = response.headers

    @property
    def body(self) -> Iterator[bytes]:
        """The body; a dropped connection or a read timeout raise as sockets do."""
        return self._pieces()

    def _pieces(self) -> Iterator[bytes]:
        try:
            yield from self._response.body
        except DroppedConnection as error:
            raise ConnectionResetError(str(error)) from None
        except TimedOut as error:
            raise TimeoutError(str(error)) from None

    def close(self) -> None:
        """Stop producing the body (the client went away)."""
        self._response.close()


def sdk_client(
    wire: str, endpoint: Endpoint | EndpointLink, pool: _Pool | None, options: dict[str, object]
) -> object:
    """The SDK client of the wire called ``wire`` on ``endpoint``, in process.

    Args:
        wire: A wire's name (``"openai"``, ``"anthropic"``, ``"gemini"``, ...); its
            `client` makes the client.
        endpoint: What answers (or the link to it).
        pool: Worker threads for an async client; ``None`` gives a sync client.
        options: Passed to the client's constructor (``max_retries``, ``timeout``, ...).

    Raises:
        UnknownWireError: No wire is called ``wire``.
        DshReplayError: The SDK package is not installed, or the wire has no client.
    """
    found = wire_named(wire)
    return found.client(_InProcess(endpoint, pool), options, asynchronous=pool is not None)
