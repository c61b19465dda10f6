"""A loopback provider that answers each call with exact bytes (for recording tests).

:class:`Upstream` listens on 127.0.0.1 and answers its calls in order, each with the
status line, headers and body pieces a test gives, then closes the connection (the body
ends where the connection does: no length, no chunking). Between pieces it may pause
(:class:`Gap`, a trickling provider) or go silent until the test is done with it
(:data:`SILENT`, a provider that never ends its answer). It stops by itself once every
answer was served, when no call comes for a while, and when the ``with`` block ends.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Final

import orjson

SILENT: Final = object()
"""A step: send nothing more until the test is done with the upstream."""

_ACCEPT_S: Final = 10.0  # the longest wait for the next call (then the upstream stops)


@dataclass(frozen=True)
class Gap:
    """A step: pause this many seconds before the next piece (a trickling provider)."""

    seconds: float


@dataclass
class Reply:
    """One answer: its body in pieces (bytes, :class:`Gap`, :data:`SILENT`), sent in order."""

    steps: Sequence[object]
    content_type: str = "text/event-stream"
    status: int = 200
    requests: list[bytes] = field(default_factory=list)
    #: Send the body chunked and close without its last chunk: the client's HTTP library
    #: sees an incomplete body (a protocol error), not a clean end.
    chunked_cut: bool = False
    #: Send nothing at all, not even the response's head, until the test is done.
    silent_head: bool = False


class Upstream:
    """Serves ``replies`` to the calls it gets, one per connection, in order."""

    def __init__(self, *replies: Reply):
        self._replies = list(replies)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_ACCEPT_S)
        self._done = threading.Event()
        self.served = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: where a recording sends its calls."""
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    def __enter__(self) -> Upstream:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._done.set()
        self._thread.join(_ACCEPT_S)

    def _serve(self) -> None:
        try:
            for reply in self._replies:
                try:
                    connection, _ = self._listener.accept()
                except OSError:  # no call came, or the test is done
                    return
                with connection:
                    self._answer(connection, reply)
                self.served += 1
        finally:
            self._listener.close()

    def _answer(self, connection: socket.socket, reply: Reply) -> None:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reply.requests.append(_request(connection))
        framing = "transfer-encoding: chunked\r\n" if reply.chunked_cut else ""
        head = (
            f"HTTP/1.1 {reply.status} OK\r\ncontent-type: {reply.content_type}\r\n"
            f"{framing}connection: close\r\n\r\n"
        )
        if reply.silent_head:
            self._done.wait(_ACCEPT_S)
            return
        try:
            connection.sendall(head.encode())
            for step in reply.steps:
                if step is SILENT:
                    self._done.wait(_ACCEPT_S)
                elif isinstance(step, Gap):
                    time.sleep(step.seconds)  # the provider's own pace
                elif isinstance(step, bytes) and reply.chunked_cut:
                    connection.sendall(b"%x\r\n%s\r\n" % (len(step), step))
                elif isinstance(step, bytes):
                    connection.sendall(step)
        except OSError:  # the caller gave up on this answer
            return


def _request(connection: socket.socket) -> bytes:
    """Read one request (head and ``Content-Length`` body); its body."""
    data = b""
    while b"\r\n\r\n" not in data:
        piece = connection.recv(65536)
        if not piece:
            return b""
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        piece = connection.recv(65536)
        if not piece:
            break
        body += piece
    return body


def sse(data: object, event: str | None = None, *, newline: bytes = b"\n") -> bytes:
    """One server-sent event: ``data`` as JSON (bytes and ``str`` as they are)."""
    if isinstance(data, bytes):
        payload = data
    elif isinstance(data, str):
        payload = data.encode()
    else:
        payload = orjson.dumps(data)
    head = b"" if event is None else b"event: " + event.encode() + newline
    return head + b"data: " + payload + newline + newline


def chat_events(*texts: str, finish: str | None = "stop", newline: bytes = b"\n") -> list[bytes]:
    """A chat-completions stream's events: a role delta, one per text, the finish frame.

    ``finish=None`` leaves the finish frame out; ``[DONE]`` is not among them.
    """
    base = {"id": "chatcmpl-up-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def frame(delta: dict[str, object], reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": reason}
        return sse({**base, "choices": [choice]}, newline=newline)

    events = [frame({"role": "assistant", "content": ""})]
    events += [frame({"content": text}) for text in texts]
    if finish is not None:
        events.append(frame({}, finish))
    return events


DONE: Final = b"data: [DONE]\n\n"


def messages_events(
    *texts: str, stop: str | None = "end_turn", newline: bytes = b"\n"
) -> list[bytes]:
    """An Anthropic Messages stream's events, up to ``message_delta`` (no ``message_stop``).

    ``stop=None`` sends a ``message_delta`` without a stop reason.
    """
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_up_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 0},
        },
    }
    events = [
        sse(start, "message_start", newline=newline),
        sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
            newline=newline,
        ),
    ]
    for text in texts:
        delta = {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "text_delta", "text": text},
        }
        events.append(sse(delta, "content_block_delta", newline=newline))
    events.append(
        sse({"type": "content_block_stop", "index": 0}, "content_block_stop", newline=newline)
    )
    delta = {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 2}}
    events.append(sse(delta, "message_delta", newline=newline))
    return events


MESSAGE_STOP: Final = sse({"type": "message_stop"}, "message_stop")


def pieces(data: bytes, size: int, gap: float) -> list[object]:
    """``data`` in ``size``-byte pieces with a :class:`Gap` between each two."""
    out: list[object] = []
    for at in range(0, len(data), size):
        if out:
            out.append(Gap(gap))
        out.append(data[at : at + size])
    return out
