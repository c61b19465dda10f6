"""HTTP pieces of the model endpoint: responses and cancels.

`EndpointResponse` is what a transport sends (the wires' own error bodies come
from their modules); `CallCancel` ends a call that waits (a ``hang`` entry) when
its client goes away, its read timeout passes, or the endpoint closes.
`DroppedConnection` and `TimedOut`, raised by a response body, tell the
transport to drop the connection or report a read timeout.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Final

import orjson

from .._wire.framing import JSON_HEADERS

__all__ = [
    "CallCancel",
    "DroppedConnection",
    "EndpointResponse",
    "TimedOut",
    "json_response",
]

_STEP_S: Final = 0.05  # how often a waiting call looks at its client and deadline
_MAKING: Final = threading.Lock()  # a CallCancel's condition is made once (CallCancel._cond)


class EndpointResponse:
    """One response: status, headers and a body of bytes pieces.

    Attributes:
        status: The HTTP status.
        headers: ``(name, value)`` pairs, lower-case names.
        body: The body, produced as it is read (a stream ends when the call does).
        drop: Whether the connection is to be dropped without a response (a recorded
            transport failure); when the body raises `DroppedConnection` the
            connection is dropped mid-stream.
        timed_out: With ``drop``: the client's read timeout passed before the answer
            started (an injected latency); in process the client's read timeout is raised.
    """

    __slots__ = ("_cancel", "body", "drop", "headers", "status", "timed_out")

    def __init__(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: Iterator[bytes],
        *,
        drop: bool = False,
        cancel: threading.Event | None = None,
        timed_out: bool = False,
    ):
        self.status = status
        self.headers = headers
        self.body = body
        self.drop = drop
        self.timed_out = timed_out
        self._cancel = cancel

    def close(self) -> None:
        """Stop producing the body (the client went away); ends the model call.

        Safe from any thread: a body being read elsewhere is cancelled and ends there.
        """
        if self._cancel is not None:
            self._cancel.set()
        close = getattr(self.body, "close", None)
        if close is not None:
            with contextlib.suppress(ValueError):  # read in another thread: cancel ends it
                close()


class DroppedConnection(Exception):
    """Raised by a response body: drop the connection here (a recorded transport failure)."""


class TimedOut(Exception):
    """Raised by a response body: the client's read timeout passed while the call hung."""


class CallCancel(threading.Event):
    """Cancels one replayed call: when the client goes away, a read timeout, or closing.

    The replay model waits on it while a ``hang`` entry blocks; each wait step also
    asks ``probe`` whether the client is still there and checks the read deadline.

    Args:
        probe: Returns ``True`` once the client has gone away (or ``None``).
        timeout: The client's read timeout in seconds (or ``None``): the longest wait
            between two pieces of the body.
    """

    def __init__(self, probe: Callable[[], bool] | None, timeout: float | None):
        # threading.Event's state, its condition made on first use (`_cond`): most
        # calls are never waited on nor set, and a condition costs more than the call's
        # other objects together (threading.Condition probes its lock by three raised
        # AttributeErrors)
        self._flag = False
        self._made: threading.Condition | None = None
        self._probe = probe
        self._timeout = timeout
        self._deadline = math.inf
        self.timed_out = False
        self.touch()

    @property
    def _cond(self) -> threading.Condition:
        """``threading.Event``'s condition (all its methods use it), made on first use."""
        made = self._made
        if made is None:
            with _MAKING:
                made = self._made
                if made is None:
                    made = self._made = threading.Condition(threading.Lock())
        return made

    def touch(self) -> None:
        """Restart the read deadline (a piece of the body went out)."""
        if self._timeout is not None:
            self._deadline = time.monotonic() + self._timeout

    def wait(self, timeout: float | None = None) -> bool:
        """Wait like `threading.Event.wait`, also watching the client and deadline."""
        left = math.inf if timeout is None else timeout
        while True:
            if self.is_set():
                return True
            if self._probe is not None and self._probe():
                self.set()
                return True
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                self.set()
                return True
            if left <= 0:
                return False
            step = min(remaining, left, _STEP_S)
            if super().wait(step):
                return True
            left -= step


def json_response(
    status: int, body: Any, extra: list[tuple[str, str]] | None = None
) -> EndpointResponse:
    """A JSON response (the wires' JSON headers), ``extra`` headers added."""
    return EndpointResponse(status, [*JSON_HEADERS, *(extra or [])], iter((orjson.dumps(body),)))
