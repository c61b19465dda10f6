"""The endpoint over loopback HTTP: a small threaded server for agent processes.

`EndpointServer` serves an `Endpoint` on
``127.0.0.1`` at a free port (port 0), from the standard library's
``ThreadingHTTPServer``: HTTP/1.1 with keep-alive, streamed bodies sent with chunked
transfer encoding, one daemon thread per connection. What holds it up under load and
abuse ([docs/limits.md#endpoint-limits](../limits.md#endpoint-limits)):

- the listen backlog is `LISTEN_BACKLOG` (the kernel may cap it lower), and at most
  [`MAX_CONNECTIONS`][pytest_dsh_replay.MAX_CONNECTIONS] connections are served at once;
  when that many are open, the one that has waited longest for its next request is closed to
  make room (a connection whose request is being answered is never closed for that);
- a connection gets [`REQUEST_TIMEOUT_S`][pytest_dsh_replay.REQUEST_TIMEOUT_S] to send its
whole request (head and
  body) once it starts one, and a new connection as long for its first byte; an idle
  keep-alive connection is closed after [`IDLE_TIMEOUT_S`][pytest_dsh_replay.IDLE_TIMEOUT_S];
- a ``Content-Length`` that is not a decimal number, is missing from a ``POST`` or
  ``PUT``, or comes with chunked transfer encoding is answered 400; a body above the
  cap ([`MAX_BODY_BYTES`][pytest_dsh_replay.MAX_BODY_BYTES] unless the server is given
  another) 413, before any of it is read. These answers are JSON in the route's wire's error
  shape and close the connection; a malformed request line or header block is answered the same way;
- an unexpected exception while answering is a 500 (the endpoint keeps it, so the test
  fails at teardown); nothing is printed.

While a call hangs, its thread checks every few hundredths of a second whether the
client has closed the connection. `EndpointServer.stop` closes the endpoint (every
hanging call ends), stops accepting, and shuts every open connection down.
"""

from __future__ import annotations

import contextlib
import io
import math
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final

from .endpoint import Endpoint

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer
from .response import DroppedConnection, EndpointResponse, TimedOut

__all__ = [
    "IDLE_TIMEOUT_S",
    "LISTEN_BACKLOG",
    "MAX_BODY_BYTES",
    "MAX_CONNECTIONS",
    "REQUEST_TIMEOUT_S",
    "EndpointServer",
]

MAX_CONNECTIONS: Final = 512
"""Connections served at once; past it the longest-idle connection is closed for a new one."""

LISTEN_BACKLOG: Final = 1024
"""Connections the kernel queues before they are accepted (``listen()``'s backlog)."""

MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""The largest request body accepted, in bytes (32 MiB); a larger one is answered 413.

The fixture's server takes the ``dsh_replay_max_body_bytes`` ini value instead, when set.
"""

REQUEST_TIMEOUT_S: Final = 10.0
"""Seconds a connection gets to send one whole request (head and body), once it starts."""

IDLE_TIMEOUT_S: Final = 30.0
"""Seconds an idle keep-alive connection stays open."""

_STOP_S: Final = 0.8  # how long stop() waits for the connection threads, all together
_POLL_S: Final = 0.05  # how often the serving loop looks for a stop nothing woke it for
_DRAIN_S: Final = 0.5  # how long a refused body is read and dropped before closing
_MAX_LINE: Final = 65536  # the request line, as the standard library bounds it
_SLOT_WAIT_S: Final = 0.05
_WRITE_S: Final = 1.0  # how long a refusal's answer may take to send


class _Deadline(io.RawIOBase):
    """A socket's reading side that gives up at a deadline (a monotonic time).

    Each read waits at most until `at` and raises ``TimeoutError`` once it has
    passed, so a client that sends a byte at a time cannot stretch a request beyond it.
    """

    def __init__(self, sock: socket.socket):
        super().__init__()
        self._sock = sock
        self.at = math.inf

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the connection's read deadline passed")
        self._sock.settimeout(None if left == math.inf else left)
        return self._sock.recv_into(buffer)


class _Connection:
    """One open connection: its socket, and since when it waits for a request."""

    __slots__ = ("evicted", "sock", "waiting_since")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.waiting_since: float | None = time.monotonic()
        self.evicted = False

    def shut(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, endpoint: Endpoint, max_body_bytes: int):
        self.endpoint = endpoint
        self.max_body_bytes = max_body_bytes
        self.connections: dict[socket.socket, _Connection] = {}
        self.threads: dict[socket.socket, threading.Thread] = {}
        self.changed = threading.Condition()
        self.stopping = False
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """Nothing is printed: a client that went away is no error, anything else is kept."""
        error = sys.exc_info()[1]
        if error is None or isinstance(error, OSError):
            return
        self.endpoint.internal_error("HTTP", "(connection)", error)

    def _evict(self) -> None:
        """Close the connection waiting longest for a request (one at a time)."""
        waiting = [c for c in self.connections.values() if c.waiting_since is not None]
        if not waiting or any(c.evicted for c in self.connections.values()):
            return
        oldest = min(waiting, key=lambda c: c.waiting_since or 0.0)
        oldest.evicted = True
        oldest.shut()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.changed:
            while len(self.connections) >= MAX_CONNECTIONS and not self.stopping:
                self._evict()
                self.changed.wait(_SLOT_WAIT_S)
            if self.stopping:
                self.shutdown_request(request)
                return
            self.connections[request] = _Connection(request)
            thread = threading.Thread(
                target=self.process_request_thread, args=(request, client_address), daemon=True
            )
            self.threads[request] = thread
        thread.start()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.changed:
                self.connections.pop(request, None)
                self.threads.pop(request, None)
                self.changed.notify_all()

    def connection(self, sock: socket.socket) -> _Connection:
        with self.changed:
            found = self.connections.get(sock)
        return found if found is not None else _Connection(sock)


def _content_length(values: list[str]) -> tuple[int | None, str | None]:
    """The declared body length, or the reason it is refused (``(None, None)``: none)."""
    if not values:
        return None, None
    distinct = {value.strip() for value in values}
    if len(distinct) > 1:
        return None, "the request has Content-Length headers that disagree"
    value = distinct.pop()
    if not (value.isascii() and value.isdigit()):
        return None, f"Content-Length must be a number of bytes, got {value[:40]!r}"
    return int(value), None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small SSE writes go out at once
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.rfile.close()  # read through the deadline instead
        self._deadline = _Deadline(self.connection)
        self._reader = io.BufferedReader(self._deadline)
        self.rfile = self._reader
        self._conn = self.server.connection(self.connection)
        self._deadline.at = time.monotonic() + REQUEST_TIMEOUT_S  # the first request
        self.command = self.path = self.requestline = ""
        self.request_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: a test's output is not the place for access logs."""

    # --- reading requests --------------------------------------------------------------

    def handle_one_request(self) -> None:
        """Wait for a request, read its head within the deadline, and answer it."""
        self._conn.waiting_since = time.monotonic()
        self.close_connection = True
        try:
            if not self._reader.peek(1):  # the client closed, or the server closed it
                return
        except TimeoutError:  # nothing came: close quietly (a 408 could cross a request)
            return
        self._deadline.at = min(self._deadline.at, time.monotonic() + REQUEST_TIMEOUT_S)
        try:
            self.raw_requestline = self.rfile.readline(_MAX_LINE + 1)
            if len(self.raw_requestline) > _MAX_LINE:
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return
            if not self.parse_request():  # answered (a malformed request line or head)
                return
        except TimeoutError:
            self._timed_out()
            return
        if self.request_version == "HTTP/0.9":
            self.send_error(HTTPStatus.BAD_REQUEST, "HTTP/0.9 requests are not served")
            return
        getattr(self, f"do_{self.command}", self._unsupported)()
        if not self.close_connection:
            self._deadline.at = time.monotonic() + IDLE_TIMEOUT_S

    def handle_expect_100(self) -> bool:
        """``Expect: 100-continue``: a body that would be refused is refused before it is sent."""
        problem = self._length_problem()
        if problem is not None:
            self._refuse(*problem)
            return False
        return super().handle_expect_100()

    def _timed_out(self) -> None:
        """The request did not arrive in time: answer 408 (if the client still listens)."""
        with contextlib.suppress(OSError):
            self._refuse(408, f"the request was not received within {REQUEST_TIMEOUT_S:g} s")

    def _unsupported(self) -> None:
        self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"{self.command} is not served")

    def _length_problem(self) -> tuple[int, str] | None:
        """The status and message that refuse the request's body framing, if any."""
        length, problem = _content_length(self.headers.get_all("content-length") or [])
        if problem is not None:
            return 400, problem
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            return 400, "chunked request bodies are not accepted: send a Content-Length"
        encoding = self.headers.get("content-encoding", "").strip().lower()
        if encoding not in ("", "identity"):
            return 415, (
                f"request bodies with Content-Encoding {encoding} are not accepted: send the "
                "body uncompressed"
            )
        if length is None and self.command in ("POST", "PUT"):
            return 400, f"a {self.command} request needs a Content-Length header"
        cap = self.server.max_body_bytes
        if length is not None and length > cap:
            return 413, f"the request body is {length} bytes, above the cap of {cap} bytes"
        return None

    def _body(self) -> bytes | None:
        """The request body within the deadline; ``None`` when refused (answered) or cut."""
        problem = self._length_problem()
        if problem is not None:
            self._refuse(*problem)
            return None
        length, _ = _content_length(self.headers.get_all("content-length") or [])
        body = self.rfile.read(length) if length else b""
        if len(body) < (length or 0):  # the client went away mid-body
            self.close_connection = True
            return None
        return body

    def _refusal(self, status: int, message: str) -> EndpointResponse:
        return self.server.endpoint.refuse(self.path or "/", int(status), message)

    def _refuse(self, status: int, message: str) -> None:
        """Answer a refused request, read and drop what it sends a little, then close."""
        self.close_connection = True
        self._send_whole(self._refusal(status, message))
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            self._deadline.at = time.monotonic() + _DRAIN_S
            budget = self.server.max_body_bytes
            while budget > 0 and (dropped := self.rfile.read1(min(budget, 65536))):
                budget -= len(dropped)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """A request the standard library refuses (bad request line, headers): JSON, closed."""
        self.close_connection = True
        self.request_version = "HTTP/1.1"  # a status line even for a garbled request line
        text = message or HTTPStatus(code).phrase
        with contextlib.suppress(OSError):
            self._send_whole(self._refusal(code, text))

    def _send_whole(self, response: EndpointResponse) -> None:
        body = b"".join(response.body)
        self.connection.settimeout(_WRITE_S)  # a small answer; a client that reads nothing
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("content-length", str(len(body)))
        if self.close_connection:
            self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    # --- answering -----------------------------------------------------------------------

    def _gone(self) -> bool:
        """Whether the client closed the connection (checked while a call hangs)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if not readable:
                return False
            peeked: bytes = self.connection.recv(1, socket.MSG_PEEK)
            return peeked == b""
        except (OSError, ValueError):
            return True

    def _serve(self) -> None:
        try:
            body = self._body()
        except TimeoutError:
            self._timed_out()
            return
        if body is None:
            return
        self._conn.waiting_since = None  # answering: never evicted
        self._deadline.at = math.inf
        self.connection.settimeout(IDLE_TIMEOUT_S)  # a client that reads nothing for long
        headers = {name.lower(): value for name, value in self.headers.items()}
        endpoint = self.server.endpoint
        response = endpoint.handle(self.command, self.path, headers, body, probe=self._gone)
        if response.drop:
            self.close_connection = True
            self._abort()
            return
        # An HTTP/1.0 client knows no chunked body (RFC 9112, 6.1): its body ends when
        # the connection closes.
        chunked = self.request_version != "HTTP/1.0"
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        if chunked:
            self.send_header("transfer-encoding", "chunked")
        else:
            self.close_connection = True
            self.send_header("connection", "close")
        self.end_headers()
        self._stream(response.body, response, chunked=chunked)

    def _stream(
        self, pieces: Iterator[bytes], response: EndpointResponse, *, chunked: bool = True
    ) -> None:
        try:
            for piece in pieces:
                if piece:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                    self.wfile.flush()
            if chunked:
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (DroppedConnection, TimedOut):
            self.close_connection = True
            self._abort()
        except OSError:  # the client went away
            self.close_connection = True
            response.close()
        except Exception as error:  # kept, so the test fails; the body is cut
            self.server.endpoint.internal_error(self.command, self.path, error)
            self.close_connection = True
            self._abort()

    def _abort(self) -> None:
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    do_POST = _serve
    do_GET = _serve
    do_PUT = _serve
    do_DELETE = _serve


def _shutdown_now(server: ThreadingHTTPServer) -> None:
    """``server.shutdown()``, without waiting for the serving loop's next look.

    `shutdown` asks the serving loop to end, then waits until it has; between looks the
    loop waits up to `_POLL_S` for a connection, so every stop took up to 50 ms of the
    test's teardown. The request is set first (the flag `shutdown` itself sets), then a
    connection to the listening port wakes the loop, which sees the request and ends
    without accepting the connection (`server_close` drops it). Where the standard
    library names that flag otherwise, this is `shutdown` as it was.
    """
    setattr(server, "_BaseServer__shutdown_request", True)  # noqa: B010 - name-mangled
    with contextlib.suppress(OSError):
        socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=_POLL_S).close()
    server.shutdown()


class EndpointServer:
    """An `Endpoint` on ``http://127.0.0.1:<port>``.

    Args:
        endpoint: What answers the requests.
        max_body_bytes: The largest request body accepted, in bytes; a larger one is
            answered 413 (default [`MAX_BODY_BYTES`][pytest_dsh_replay.MAX_BODY_BYTES]).

    Raises:
        ValueError: ``max_body_bytes`` is not a positive integer.

    The server starts listening when constructed and serves from a daemon thread;
    `stop` ends it (also safe to call twice).
    """

    def __init__(self, endpoint: Endpoint, *, max_body_bytes: int = MAX_BODY_BYTES):
        if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int):
            raise ValueError(f"max_body_bytes must be an integer, got {max_body_bytes!r}")
        if max_body_bytes <= 0:
            raise ValueError(f"max_body_bytes must be positive, got {max_body_bytes}")
        self.endpoint = endpoint
        self.max_body_bytes = max_body_bytes
        self._server = _Server(endpoint, max_body_bytes)
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _POLL_S},
            name=f"dsh-replay-endpoint-{port}",
            daemon=True,
        )
        self._thread.start()
        self._stopped = False

    def stop(self) -> None:
        """Stop serving: hanging calls end, the port closes, every connection is shut down.

        Returns within about a second whatever the clients do; connection threads still
        running then are daemon threads and end on their own.
        """
        if self._stopped:
            return
        self._stopped = True
        server = self._server
        self.endpoint.close()
        with server.changed:
            server.stopping = True
            server.changed.notify_all()
        _shutdown_now(server)
        server.server_close()
        self._thread.join(_STOP_S)
        with server.changed:
            open_now = list(server.connections.values())
            threads = list(server.threads.values())
        for conn in open_now:
            conn.shut()
        end = time.monotonic() + _STOP_S
        for thread in threads:
            thread.join(max(0.0, end - time.monotonic()))
