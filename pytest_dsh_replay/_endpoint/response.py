"""HTTP pieces of the model endpoint: responses, errors as providers send them, cancels.

:class:`EndpointResponse` is what a transport sends; :func:`http_error` the error a
provider answers for a recorded failure; :class:`CallCancel` ends a call that waits
(a ``hang`` entry) when its client goes away, its read timeout passes, or the endpoint
closes. :class:`DroppedConnection` and :class:`TimedOut`, raised by a response body,
tell the transport to drop the connection or report a read timeout.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._wire.openai import CONTEXT_OVERFLOW

__all__ = [
    "ANTHROPIC",
    "OPENAI",
    "CallCancel",
    "DroppedConnection",
    "EndpointResponse",
    "TimedOut",
    "http_error",
    "json_response",
]

OPENAI: Final = "openai"
ANTHROPIC: Final = "anthropic"
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
_ANTHROPIC_TYPES: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_OPENAI_TYPES: Final = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    402: ("insufficient_quota", "insufficient_quota"),
    403: ("permission_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}
_JSON: Final = ("content-type", "application/json")
_STEP_S: Final = 0.05  # how often a waiting call looks at its client and deadline


class EndpointResponse:
    """One response: status, headers and a body of bytes pieces.

    Attributes:
        status: The HTTP status.
        headers: ``(name, value)`` pairs, lower-case names.
        body: The body, produced as it is read (a stream ends when the call does).
        drop: Whether the connection is to be dropped without a response (a recorded
            transport failure); when the body raises :class:`DroppedConnection` the
            connection is dropped mid-stream.
    """

    __slots__ = ("_cancel", "body", "drop", "headers", "status")

    def __init__(
        self,
        status: int,
        headers: list[tuple[str, str]],
        body: Iterator[bytes],
        *,
        drop: bool = False,
        cancel: threading.Event | None = None,
    ):
        self.status = status
        self.headers = headers
        self.body = body
        self.drop = drop
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
        super().__init__()
        self._probe = probe
        self._timeout = timeout
        self._deadline = math.inf
        self.timed_out = False
        self.touch()

    def touch(self) -> None:
        """Restart the read deadline (a piece of the body went out)."""
        if self._timeout is not None:
            self._deadline = time.monotonic() + self._timeout

    def wait(self, timeout: float | None = None) -> bool:
        """Wait like :meth:`threading.Event.wait`, also watching the client and deadline."""
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
    """A JSON response, ``extra`` headers added."""
    return EndpointResponse(status, [_JSON, *(extra or [])], iter((orjson.dumps(body),)))


def _seconds(ms: int) -> str:
    return str(ms // 1000) if ms % 1000 == 0 else f"{ms / 1000:g}"


def http_error(wire: str, failure: Mapping[str, Any]) -> EndpointResponse:
    """The HTTP error response a provider sends for a recorded failure.

    Args:
        wire: ``"openai"`` or ``"anthropic"``.
        failure: ``{"message", "code", "status"?, "providerRetryAfterMs"?, "requestId"?}``.

    Returns:
        The status recorded in ``failure`` (400-599), else one chosen by code; the
        wire's error body; ``retry-after`` for a recorded retry delay; the request id.
    """
    code = str(failure.get("code", "UNKNOWN"))
    message = str(failure.get("message", "")) or code
    status = failure.get("status")
    if not (isinstance(status, int) and 400 <= status <= 599):
        if code == "OVERLOADED":
            status = 529 if wire == ANTHROPIC else 503
        elif code.startswith("HTTP_") and code[5:].isdigit() and 400 <= int(code[5:]) <= 599:
            status = int(code[5:])
        else:
            status = _STATUS_BY_CODE.get(code, 500)
    if code == "CONTEXT_WINDOW_EXCEEDED" and not CONTEXT_OVERFLOW.search(message):
        message = f"{message} (prompt is too long for the model's context window)"
    headers: list[tuple[str, str]] = [_JSON]
    retry = failure.get("providerRetryAfterMs")
    if isinstance(retry, int) and not isinstance(retry, bool) and retry > 0:
        headers.append(("retry-after", _seconds(retry)))
        headers.append(("retry-after-ms", str(retry)))
    request_id = failure.get("requestId")
    if isinstance(request_id, str) and request_id:
        headers.append(("x-request-id", request_id))
        headers.append(("request-id", request_id))
    if wire == ANTHROPIC:
        kind = _ANTHROPIC_TYPES.get(
            status, "api_error" if status >= 500 else "invalid_request_error"
        )
        if code == "OVERLOADED":
            kind = "overloaded_error"
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        kind, wire_code = _OPENAI_TYPES.get(status, ("server_error", None))
        if code == "CONTEXT_WINDOW_EXCEEDED":
            kind, wire_code = "invalid_request_error", "context_length_exceeded"
        body = {"error": {"message": message, "type": kind, "param": None, "code": wire_code}}
    return EndpointResponse(status, headers, iter((orjson.dumps(body),)))
