"""The model endpoint: OpenAI and Anthropic HTTP requests in, a model's stream out.

:class:`Endpoint` handles one request independently of the transport:
``handle(method, path, headers, body)`` returns an :class:`EndpointResponse` whose body
is an iterator of bytes. The socket server (:mod:`pytest_dsh_replay._endpoint.server`) and the
in-process ``httpx`` transports (:mod:`pytest_dsh_replay._endpoint.transport`) are thin adapters
over it.

Routes: ``POST /v1/chat/completions`` (and ``/chat/completions``) answer in the OpenAI
chat-completions wire, ``POST /v1/messages`` (and ``/messages``) in the Anthropic
Messages wire; ``"stream": true`` gives SSE, otherwise one JSON object.

Each request goes to the model the test uses (``dsh_replay.model``) as one call: the
parsed JSON body, unchanged, is the ``request``, with ``session_id`` and
``parent_session_id`` from :mod:`pytest_dsh_replay._endpoint.routing`. So HTTP calls bind, replay
and are logged exactly like in-process calls. What the call's chunks become:

- content chunks stream as the wire's events; the ``finish`` ends the stream;
- an error ``finish`` (or a ``throw`` entry) before any content becomes the HTTP error
  the provider sends for that failure (``status`` when recorded, else by code: 401
  ``AUTH``, 402 ``QUOTA``, 429 ``RATE_LIMIT`` with ``retry-after``, 400
  ``CONTEXT_WINDOW_EXCEEDED`` / ``INVALID_REQUEST``, 529/503 ``OVERLOADED``, 500
  otherwise); after content it is an in-stream error event. ``EMPTY_RESPONSE`` is an
  empty answer, ``STREAM_CLOSED`` a stream cut before its end, and ``TRANSPORT``,
  ``NETWORK``, ``TIMEOUT``, ``ABORTED`` a dropped connection;
- a ``hang`` entry keeps the response open until the client goes away, its read
  timeout passes, or the endpoint closes (the test ends);
- a replay error (binding, exhausted, placeholder, script) answers 500 with the message
  (and ``x-should-retry: false``, so SDKs do not retry it) and is kept in
  :attr:`Endpoint.errors`, so the test fails with the typed error at teardown.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._errors import DshReplayError, ReplayCancelledError, ReplayedModelError
from .._format.events import StreamChunk
from .._recording.proxy import Relay
from .._wire.anthropic import AnthropicEncoder, anthropic_message
from .._wire.openai import OpenAIEncoder, openai_completion
from .response import (
    ANTHROPIC,
    OPENAI,
    CallCancel,
    DroppedConnection,
    EndpointResponse,
    TimedOut,
    http_error,
    json_response,
)
from .routing import Route, Router

__all__ = ["Endpoint", "EndpointResponse", "http_error"]

_ROUTES: Final = {
    "/v1/chat/completions": OPENAI,
    "/chat/completions": OPENAI,
    "/v1/messages": ANTHROPIC,
    "/messages": ANTHROPIC,
}
_CONTENT: Final = frozenset({"text-delta", "reasoning-delta", "tool-call-delta"})
# Failures that are a stream of their own rather than an HTTP error.
_IN_STREAM: Final = frozenset({"EMPTY_RESPONSE", "CONTENT_FILTER", "STREAM_CLOSED"})
_DROP_CODES: Final = frozenset({"TRANSPORT", "NETWORK", "TIMEOUT", "ABORTED"})
_SSE: Final = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
]


def _pieces(data: bytes, dropped: bool) -> Iterator[bytes]:
    yield data
    if dropped:
        raise DroppedConnection("the recorded call failed with a transport error")


def _marks(chunks: list[StreamChunk]) -> list[str]:
    """An answer's text and tool call ids (how the next request quotes it)."""
    text = "".join(c.get("text", "") for c in chunks if c.get("type") == "text-delta")
    ids = {c["id"] for c in chunks if c.get("type") == "tool-call-delta" and c.get("id")}
    return [text, *sorted(ids)]


def _failure_of(chunk: Mapping[str, Any]) -> dict[str, Any] | None:
    reason = chunk.get("reason")
    if isinstance(reason, Mapping) and reason.get("kind") in ("error", "aborted"):
        failure = reason.get("failure")
        if isinstance(failure, Mapping):
            return dict(failure)
        return {"message": "the recorded call failed", "code": "UNKNOWN"}
    return None


class Endpoint:
    """Serves model calls over the OpenAI and Anthropic HTTP wires (one per test).

    Args:
        model: The model calls go to: anything with ``stream(request, **kwargs)``. When
            it has ``bind`` and ``live_parent`` (a replay model), a new session binds
            before its call, so a child found by content is logged under the live
            session its recording's parent is bound to.
        replay: Whether ``model`` replays (replay-only keywords ``cancel``,
            ``seed_length`` and ``by_content`` are passed to it).
    """

    def __init__(self, model: Any, *, replay: bool = True):
        self.model = model
        self.replay = replay
        self.router = Router()
        self.errors: list[DshReplayError] = []
        self._lock = threading.Lock()
        self._cancels: set[CallCancel] = set()
        self._closed = False
        self._count = 0

    # --- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Cancel every call still in progress (hangs end); later requests get 503."""
        with self._lock:
            self._closed = True
            cancels = list(self._cancels)
        for cancel in cancels:
            cancel.set()

    def _keep(self, error: DshReplayError) -> None:
        with self._lock:
            self.errors.append(error)

    # --- requests ------------------------------------------------------------------------

    def handle(  # noqa: C901  # split in the wire-seam work
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        *,
        probe: Callable[[], bool] | None = None,
        timeout: float | None = None,
    ) -> EndpointResponse:
        """Answer one HTTP request.

        Args:
            method: The HTTP method.
            path: The request path (a query string is ignored).
            headers: The request headers, lower-case names.
            body: The request body.
            probe: Returns ``True`` once the client has gone away (ends a ``hang``).
            timeout: The client's read timeout in seconds, if it has one.

        Returns:
            The response; its body streams while the caller reads it.
        """
        wire = _ROUTES.get(path.split("?", 1)[0].rstrip("/") or "/")
        if wire is None:
            return json_response(
                404, {"error": {"message": f"no route {method} {path}", "type": "not_found"}}
            )
        if method.upper() != "POST":
            return json_response(
                405, {"error": {"message": f"{path} takes POST", "type": "invalid_request"}}
            )
        if self._closed:
            return json_response(
                503, {"error": {"message": "the test has ended", "type": "unavailable"}}
            )
        try:
            request = orjson.loads(body or b"null")
        except orjson.JSONDecodeError as err:
            return json_response(
                400,
                {
                    "error": {
                        "message": f"the body is not JSON: {err}",
                        "type": "invalid_request_error",
                    }
                },
            )
        if not isinstance(request, dict):
            return json_response(
                400,
                {
                    "error": {
                        "message": "the body must be a JSON object",
                        "type": "invalid_request_error",
                    }
                },
            )
        try:
            route = self.router.route(headers, request)
            parent = self._parent(route, request)
        except DshReplayError as error:
            return self._replay_error(error)
        with self._lock:
            self._count += 1
            number = self._count
        cancel = CallCancel(probe, timeout)
        kwargs: dict[str, Any] = {"session_id": route.session_id, "parent_session_id": parent}
        if route.new and route.fork:
            kwargs["fork"] = True  # it continues its parent's completed turns
        if route.cwd is not None:
            kwargs["session_cwd"] = route.cwd  # a new session's header: its cwd is tokenized
        if self.replay:
            kwargs.update(cancel=cancel, seed_length=route.seed_length, by_content=True)
        model_name = str(request.get("model") or "dsh-replay")
        call_id = f"{'msg' if wire == ANTHROPIC else 'chatcmpl'}-dsh-replay-{number}"
        relay: Relay | None = None
        if not self.replay:
            relay = kwargs["relay"] = Relay(wire, body, headers)
        may_wait = getattr(self.model, "may_wait", None)
        whole = self.replay and may_wait is not None and not may_wait(route.session_id)
        chunks = iter(self.model.stream(request, **kwargs))
        if relay is not None:
            relayed, head = self._relayed(route, relay, chunks)
            if relayed is not None:
                return relayed
            chunks = itertools.chain(head, chunks)
        if request.get("stream") is not True:
            response = self._whole(wire, route, chunks, model_name, call_id)
        elif whole:  # nothing can wait: the whole stream in one piece
            response = self._at_once(wire, route, chunks, request, model_name, call_id)
        else:
            response = self._streamed(wire, route, chunks, request, model_name, call_id, cancel)
        if response.drop or response.status != 200:
            self.router.answered(route.session_id, failed=True)
        return response

    def _relayed(
        self, route: Route, relay: Relay, chunks: Iterator[StreamChunk]
    ) -> tuple[EndpointResponse | None, list[StreamChunk]]:
        """A recording proxy's answer, byte for byte (``None``: the model did not relay).

        Returns:
            The response, or ``None`` and the chunks already read when the live model
            answers in dsh chunks only (then they are encoded like replayed ones).
        """
        try:
            first = next(chunks, None)
        except Exception as error:
            if not relay.started:
                message = f"the live model failed: {type(error).__name__}: {error}"
                return json_response(
                    502, {"error": {"message": message, "type": "bad_gateway"}}
                ), []
            raise
        if not relay.started:
            failure = None if first is None else _failure_of(first)
            if failure is not None and failure.get("code") == "NETWORK":
                for _ in chunks:  # the call ends (and is logged) as it failed
                    pass
                body = {"error": {"message": failure["message"], "type": "bad_gateway"}}
                return json_response(502, body, [("x-should-retry", "false")]), []
            return None, [] if first is None else [first]
        if relay.status >= 400:
            self.router.answered(route.session_id, failed=True)
        raw = self._relay_body(route, relay, first, chunks)
        return EndpointResponse(relay.status, relay.response_headers, raw), []

    def _relay_body(
        self,
        route: Route,
        relay: Relay,
        first: StreamChunk | None,
        chunks: Iterator[StreamChunk],
    ) -> Iterator[bytes]:
        close = getattr(chunks, "close", None)
        held = b""  # the answer's last bytes wait until the call is logged as finished
        try:
            for chunk in chunks if first is None else self._chained(first, chunks):
                data = relay.take()
                if chunk.get("type") == "finish" and relay.status < 400:
                    self._answered(route, chunk, [])
                if relay.ended:
                    held += data
                elif data:
                    yield data
            held += relay.take()
            if held:
                yield held
        finally:
            if close is not None:
                close()

    @staticmethod
    def _chained(first: StreamChunk, chunks: Iterator[StreamChunk]) -> Iterator[StreamChunk]:
        yield first
        yield from chunks

    def _parent(self, route: Route, request: Mapping[str, Any]) -> str | None:
        parent = route.parent_session_id
        if not self.replay:
            return parent or route.parent_guess
        bind = getattr(self.model, "bind", None)
        if bind is None or not route.new:
            return parent
        bind(
            request,
            session_id=route.session_id,
            parent_session_id=parent,
            seed_length=route.seed_length,
            by_content=True,
        )
        return parent or self.model.live_parent(route.session_id)

    def _replay_error(self, error: DshReplayError) -> EndpointResponse:
        self._keep(error)
        body = {
            "type": "error",
            "error": {"type": "dsh_replay_error", "message": f"{type(error).__name__}: {error}"},
        }
        return json_response(500, body, [("x-should-retry", "false")])

    def _whole(
        self,
        wire: str,
        route: Route,
        chunks: Iterator[StreamChunk],
        model_name: str,
        call_id: str,
    ) -> EndpointResponse:
        try:
            collected = list(chunks)
        except ReplayedModelError as error:
            return http_error(wire, {"message": error.message, "code": error.code})
        except ReplayCancelledError:
            return EndpointResponse(0, [], iter(()), drop=True)
        except DshReplayError as error:
            return self._replay_error(error)
        finish = next((c for c in reversed(collected) if c.get("type") == "finish"), None)
        failure = None if finish is None else _failure_of(finish)
        if failure is not None:
            code = failure.get("code")
            if code in _DROP_CODES:
                return EndpointResponse(0, [], iter(()), drop=True)
            if code not in ("EMPTY_RESPONSE", "CONTENT_FILTER", "STREAM_CLOSED"):
                return http_error(wire, failure)
        self._answered(route, finish, _marks(collected))
        if wire == ANTHROPIC:
            body = anthropic_message(collected, model=model_name, message_id=call_id)
        else:
            body = openai_completion(collected, model=model_name, completion_id=call_id)
        return json_response(200, body)

    def _at_once(
        self,
        wire: str,
        route: Route,
        chunks: Iterator[StreamChunk],
        request: Mapping[str, Any],
        model_name: str,
        call_id: str,
    ) -> EndpointResponse:
        """A streamed answer produced at once (the call cannot wait): one body piece."""
        collected: list[StreamChunk] = []
        failure: dict[str, Any] | None = None
        try:
            for chunk in chunks:
                collected.append(chunk)
        except ReplayedModelError as error:
            failure = {"message": error.message, "code": error.code}
        except DshReplayError as error:
            return self._replay_error(error)
        content = False
        for chunk in collected:
            kind = chunk.get("type")
            if kind in _CONTENT:
                content = True
            elif kind == "finish" and not content:
                found = _failure_of(chunk)
                if found is not None and found.get("code") not in _IN_STREAM:
                    failure = found
                break
        if failure is not None and not content:
            if failure.get("code") in _DROP_CODES:
                return EndpointResponse(0, [], iter(()), drop=True)
            return http_error(wire, failure)
        finish = next((c for c in reversed(collected) if c.get("type") == "finish"), None)
        state = finish.get("replayState") if finish is not None else None
        encoder = self._encoder(
            wire, request, model_name, call_id, state if isinstance(state, Mapping) else None
        )
        out = [encoder.start()]
        dropped = False
        for chunk in collected:
            try:
                piece, done = self._encode(wire, route, encoder, chunk)
            except DroppedConnection:  # a transport failure after content: cut mid-body
                dropped = True
                break
            out.append(piece)
            if done:
                break
        else:
            if failure is not None:
                self.router.answered(route.session_id, failed=True)
                if failure.get("code") in _DROP_CODES:
                    dropped = True
                else:
                    out.extend(self._late_failure(wire, encoder, failure))
        return EndpointResponse(200, list(_SSE), _pieces(b"".join(out), dropped))

    def _encoder(
        self,
        wire: str,
        request: Mapping[str, Any],
        model_name: str,
        call_id: str,
        replay_state: Mapping[str, Any] | None = None,
    ) -> OpenAIEncoder | AnthropicEncoder:
        if wire == ANTHROPIC:
            return AnthropicEncoder(model=model_name, message_id=call_id, replay_state=replay_state)
        options = request.get("stream_options")
        usage = isinstance(options, Mapping) and options.get("include_usage") is True
        return OpenAIEncoder(model=model_name, completion_id=call_id, include_usage=usage)

    def _answered(self, route: Route, finish: Mapping[str, Any] | None, served: list[str]) -> None:
        reason = finish.get("reason") if finish is not None else None
        kind = reason.get("kind") if isinstance(reason, Mapping) else None
        self.router.answered(
            route.session_id,
            wants_tools=kind == "tool-calls",
            failed=kind not in ("stop", "tool-calls", "max-tokens"),
            served=tuple(served),
        )

    def _streamed(
        self,
        wire: str,
        route: Route,
        chunks: Iterator[StreamChunk],
        request: Mapping[str, Any],
        model_name: str,
        call_id: str,
        cancel: CallCancel,
    ) -> EndpointResponse:
        head: list[StreamChunk] = []
        try:
            for chunk in chunks:
                head.append(chunk)
                kind = chunk.get("type")
                if kind in _CONTENT:
                    break
                if kind == "finish":
                    failure = _failure_of(chunk)
                    if failure is not None and failure.get("code") not in (
                        "EMPTY_RESPONSE",
                        "CONTENT_FILTER",
                        "STREAM_CLOSED",
                    ):
                        for _ in chunks:  # let the call end (and be logged) as recorded
                            pass
                        if failure.get("code") in _DROP_CODES:
                            return EndpointResponse(0, [], iter(()), drop=True)
                        return http_error(wire, failure)
                    break
        except ReplayedModelError as error:
            failure = {"message": error.message, "code": error.code}
            if failure["code"] in _DROP_CODES:
                return EndpointResponse(0, [], iter(()), drop=True)
            return http_error(wire, failure)
        except ReplayCancelledError:
            return EndpointResponse(0, [], iter(()), drop=True)
        except DshReplayError as error:
            return self._replay_error(error)
        encoder = self._encoder(wire, request, model_name, call_id)
        body = self._body(wire, route, encoder, head, chunks, cancel)
        return EndpointResponse(200, list(_SSE), body, cancel=cancel)

    def _body(
        self,
        wire: str,
        route: Route,
        encoder: OpenAIEncoder | AnthropicEncoder,
        head: list[StreamChunk],
        chunks: Iterator[StreamChunk],
        cancel: CallCancel,
    ) -> Iterator[bytes]:
        with self._lock:
            self._cancels.add(cancel)
        close = getattr(chunks, "close", None)
        try:
            pending = encoder.start()
            for chunk in head:
                out, done = self._encode(wire, route, encoder, chunk)
                pending += out
                if done:
                    yield pending
                    return
            yield pending
            cancel.touch()
            for chunk in chunks:
                out, done = self._encode(wire, route, encoder, chunk)
                if out:
                    yield out
                    cancel.touch()
                if done:
                    for _ in chunks:
                        pass
                    return
        except ReplayedModelError as error:
            self.router.answered(route.session_id, failed=True)
            yield from self._late_failure(
                wire, encoder, {"message": error.message, "code": error.code}
            )
        except ReplayCancelledError:
            if cancel.timed_out:
                raise TimedOut("the call hung past the client's read timeout") from None
            raise DroppedConnection("the call was cancelled") from None
        except DshReplayError as error:
            self._keep(error)
            yield encoder.error_event(f"{type(error).__name__}: {error}", "api_error")
        finally:
            with self._lock:
                self._cancels.discard(cancel)
            if close is not None:
                close()

    def _encode(
        self,
        wire: str,
        route: Route,
        encoder: OpenAIEncoder | AnthropicEncoder,
        chunk: StreamChunk,
    ) -> tuple[bytes, bool]:
        if chunk.get("type") != "finish":
            return encoder.feed(chunk), False
        failure = _failure_of(chunk)
        if failure is None or failure.get("code") in ("EMPTY_RESPONSE", "CONTENT_FILTER"):
            self._answered(route, chunk, encoder.marks())
            reason = chunk.get("reason")
            return encoder.finish(reason if isinstance(reason, Mapping) else {}), True
        self.router.answered(route.session_id, failed=True)
        if failure.get("code") == "STREAM_CLOSED":
            return b"", True
        return b"".join(self._late_failure(wire, encoder, failure)), True

    @staticmethod
    def _late_failure(
        wire: str, encoder: OpenAIEncoder | AnthropicEncoder, failure: Mapping[str, Any]
    ) -> Iterator[bytes]:
        code = str(failure.get("code", "UNKNOWN"))
        if code in _DROP_CODES:
            raise DroppedConnection(f"the recorded call failed with {code}")
        message = str(failure.get("message", "")) or code
        if wire == ANTHROPIC:
            kind = {
                "RATE_LIMIT": "rate_limit_error",
                "AUTH": "authentication_error",
                "OVERLOADED": "overloaded_error",
                "INVALID_REQUEST": "invalid_request_error",
            }.get(code, "api_error")
            yield encoder.error_event(message, kind)
        else:
            yield encoder.error_event(message, code)
