"""The endpoint over loopback HTTP: a small threaded server for agent processes.

:class:`EndpointServer` serves an :class:`~pytest_dsh_replay._endpoint.endpoint.Endpoint` on
``127.0.0.1`` at a free port (port 0), from the standard library's
``ThreadingHTTPServer``: HTTP/1.1 with keep-alive, streamed bodies sent with chunked
transfer encoding, one daemon thread per connection and at most :data:`MAX_CONNECTIONS`
connections served at once (more wait to be accepted); an idle keep-alive connection
is closed after :data:`IDLE_TIMEOUT_S`. While a call hangs, its thread
checks every few hundredths of a second whether the client has closed the connection.

:meth:`EndpointServer.stop` closes the endpoint (every hanging call ends), stops
accepting, and waits a little for the connection threads to finish.
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

from .endpoint import Endpoint
from .response import DroppedConnection, TimedOut

__all__ = ["IDLE_TIMEOUT_S", "MAX_CONNECTIONS", "EndpointServer"]

MAX_CONNECTIONS: Final = 32
"""Connections served at once; further connections wait to be accepted."""

IDLE_TIMEOUT_S: Final = 30.0
"""Seconds an idle keep-alive connection stays open."""

_JOIN_S: Final = 2.0


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.active: dict[threading.Thread, socket.socket] = {}
        self.active_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that closed or reset its connection is no error worth printing."""
        error = sys.exc_info()[1]
        if isinstance(error, OSError):
            return
        super().handle_error(request, client_address)

    def process_request(self, request: Any, client_address: Any) -> None:
        self.slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        current = threading.current_thread()
        with self.active_lock:
            self.active[current] = request
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.active_lock:
                self.active.pop(current, None)
            self.slots.release()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT_S
    disable_nagle_algorithm = True  # small SSE writes go out at once
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: a test's output is not the place for access logs."""

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
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length > 0 else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        response = self.server.endpoint.handle(
            self.command, self.path, headers, body, probe=self._gone
        )
        if response.drop:
            self.close_connection = True
            self._abort()
            return
        self.send_response(response.status)
        for name, value in response.headers:
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        try:
            for piece in response.body:
                if piece:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (DroppedConnection, TimedOut):
            self.close_connection = True
            self._abort()
        except OSError:  # the client went away
            self.close_connection = True
            response.close()

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


class EndpointServer:
    """An :class:`~pytest_dsh_replay._endpoint.endpoint.Endpoint` on ``http://127.0.0.1:<port>``.

    Args:
        endpoint: What answers the requests.

    The server starts listening when constructed and serves from a daemon thread;
    :meth:`stop` ends it (also safe to call twice).
    """

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self._server = _Server(endpoint)
        port = self._server.server_address[1]
        self.base_url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"dsh-replay-endpoint-{port}",
            daemon=True,
        )
        self._thread.start()
        self._stopped = False

    def stop(self) -> None:
        """Stop serving: hanging calls end, the port closes, connection threads finish."""
        if self._stopped:
            return
        self._stopped = True
        self.endpoint.close()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(_JOIN_S)
        with self._server.active_lock:
            active = list(self._server.active.items())
        for _, connection in active:  # idle keep-alive connections wait for a request
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for thread, _ in active:
            thread.join(_JOIN_S)
