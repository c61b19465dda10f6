"""The model endpoint: provider HTTP requests in, a model's stream out on the same wire.

`Endpoint` handles one request independently of the transport:
``handle(method, path, headers, body)`` returns an `EndpointResponse` whose body
is an iterator of bytes. The socket server (`server`) and the in-process ``httpx``
transports (`transport`) are thin adapters over it.

Which wire a request speaks is the route's (the table in ``_wire.table``: OpenAI chat
completions on ``POST /v1/chat/completions``, Anthropic Messages on ``POST /v1/messages``,
each also without ``/v1``); ``"stream": true`` gives the wire's stream events in its
framing (`framing`), otherwise one JSON object. See
[docs/wires.md](../wires.md).

Each request goes to the model the test uses (``dsh_replay.model``) as one call: the
parsed JSON body, read once into a request view, is the ``request``, with ``session_id``
and ``parent_session_id`` from `routing`. So HTTP calls bind, replay and are logged
exactly like in-process calls. What the call's chunks become:

- content chunks stream as the wire's events; the ``finish`` ends the stream;
- an error ``finish`` (or a ``throw`` entry) before any content becomes the HTTP error
  the provider sends for that failure (the wire's status and body for the code); after
  content it is the wire's in-stream error event. ``EMPTY_RESPONSE`` is an empty answer,
  ``STREAM_CLOSED`` a stream cut before its end, and ``TRANSPORT``, ``NETWORK``,
  ``TIMEOUT``, ``ABORTED`` a dropped connection;
- a ``hang`` entry keeps the response open until the client goes away, its read
  timeout passes, or the endpoint closes (the test ends);
- a replay error (binding, exhausted, placeholder, script) answers
  `REPLAY_ERROR_STATUS` (400) with the message in the wire's error shape, a status
  that neither the SDKs nor the dsh runtime retry
  ([docs/wires.md#replay-errors](../wires.md#replay-errors)), and is
  kept in `Endpoint.errors`, so the test fails with the typed error.
"""

from __future__ import annotations

import itertools
import operator
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Final, Protocol

import orjson

from .._errors import (
    DshReplayError,
    EndpointError,
    ReplayCancelledError,
    ReplayedModelError,
    UnservedRouteError,
)
from .._format.events import ChunkRun, JSONObject, StreamChunk
from .._format.redact import builtin_redact
from .._format.reply import finish_failure
from .._identity.answers import (
    ServedAnswer,
    ToolCallMark,
    runs_tool_call_marks,
    tool_call_marks,
)
from .._identity.options import (
    CallOptions,
    OptionsModel,
    ReplayOptions,
    Request,
    options_model,
)
from .._recording.proxy import Relay
from .._wire.base import Answered, BadRequest, Encoder, Failure, Wire, WireError
from .._wire.openai import openai_refusal
from .._wire.request import RequestView, answer_message
from .._wire.table import closest_route, list_wire, served_routes, wire_for
from .response import (
    CallCancel,
    DroppedConnection,
    EndpointResponse,
    TimedOut,
    json_response,
)
from .routing import Route, Router

if TYPE_CHECKING:
    from .._replay.model import ReplayModel
    from .._scripts.entries import ChunksEntry, ThrowEntry

__all__ = [
    "REPLAY_ERROR_STATUS",
    "UNNAMED_MODEL",
    "Endpoint",
    "EndpointResponse",
    "ReplaySessions",
    "StreamingModel",
    "ended_response",
]

UNNAMED_MODEL: Final = "dsh-replay"
"""The model an answer names when its request names none, and the model lists' fallback."""

REPLAY_ERROR_STATUS: Final = 400
"""The HTTP status of a replay error's answer, and of a live model the recording proxy
cannot reach: a client error that no SDK and not the dsh runtime retries, so the run
ends at once ([docs/wires.md#replay-errors](../wires.md#replay-errors))."""

_CONTENT: Final = frozenset({"text-delta", "reasoning-delta", "tool-call-delta"})
# Failures that are a stream of their own rather than an HTTP error.
_IN_STREAM: Final = frozenset({"EMPTY_RESPONSE", "CONTENT_FILTER", "STREAM_CLOSED"})
# Failures that finish a stream normally (the stream shows them, no error event).
_FINISHING: Final = frozenset({"EMPTY_RESPONSE", "CONTENT_FILTER"})
_DROP_CODES: Final = frozenset({"TRANSPORT", "NETWORK", "TIMEOUT", "ABORTED"})
_NOTHING: Final = ServedAnswer()
_BY_CONTENT: Final = ReplayOptions(True, None, None, False)  # how the endpoint's calls bind


StreamingModel = OptionsModel
"""What the endpoint streams a call from: a replay model, or the recorder around one (a
model of this package, which takes the call's `CallOptions` as one value)."""


class ReplaySessions(Protocol):
    """What the endpoint asks a replay about live sessions before a call."""

    def bind(
        self,
        request: Request,
        *,
        session_id: str | None,
        parent_session_id: str | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
    ) -> object:
        """Bind a new live session now (its recorded parent becomes known)."""
        ...

    def live_parent(self, session_id: str | None) -> str | None:
        """The live session bound to the recorded parent of ``session_id``'s recording."""
        ...

    def may_wait(self, session_id: str | None) -> bool:
        """Whether the next call of ``session_id`` may wait before its chunks end."""
        ...

    def recorded_models(self) -> list[str]:
        """The model names the recording used, sorted."""
        ...


class LiveCalls(Protocol):
    """What says, replaying, which calls go to the live model (``--dsh-record=new``).

    See [docs/recording.md#record-new](../recording.md#record-new).
    """

    def goes_live(self, request: Request, options: CallOptions) -> bool:
        """Whether this call goes to the live model (through the recording proxy)."""
        ...


_DROPPED: Final = (
    "the model's answer ended with a transport error (the live provider's connection "
    "failed there when the call was recorded, or a Fault.disconnect injected by "
    "dsh_replay.inject)"
)
# What a connection dropped mid-stream says, however the answer was served (at once,
# streamed, relayed while recording), so an SDK's exception reads alike in every mode.


def _pieces(data: bytes, dropped: bool) -> Iterator[bytes]:
    yield data
    if dropped:
        raise DroppedConnection(_DROPPED)


def _marks(chunks: list[StreamChunk]) -> list[str]:
    """An answer's text and tool call ids (how the next request quotes it)."""
    text = "".join(c.get("text", "") for c in chunks if c.get("type") == "text-delta")
    ids = {c["id"] for c in chunks if c.get("type") == "tool-call-delta" and c.get("id")}
    return [text, *sorted(ids)]


def _is_tool_chunk(chunk: Mapping[str, object]) -> bool:
    """Whether a chunk is part of a tool call (what `tool_call_marks` reads)."""
    kind = chunk.get("type")
    if kind == "tool-call-delta":
        return True
    if kind == "block-start":
        return chunk.get("blockType") == "tool-call"
    if kind == "block-end":
        block = chunk.get("block")
        return isinstance(block, Mapping) and block.get("type") == "tool-call"
    return False


def _served(marks: list[str] | tuple[str, ...], calls: tuple[ToolCallMark, ...]) -> ServedAnswer:
    """The answer a next request quotes: the encoder's text and ids, the chunks' calls."""
    if not marks:
        return ServedAnswer("", calls, frozenset(c.id for c in calls if c.id))
    return ServedAnswer(marks[0], calls, frozenset(marks[1:]))


def _failure_of(chunk: Mapping[str, object]) -> JSONObject | None:
    return finish_failure(chunk.get("reason"))


def _dropped(*, timed_out: bool = False) -> EndpointResponse:
    """A dropped connection (``timed_out``: the client's read timeout passed first)."""
    return EndpointResponse(0, [], iter(()), drop=True, timed_out=timed_out)


def _raised(error: ReplayedModelError) -> JSONObject:
    """The failure a raised `ReplayedModelError` stands for, its status and retry delay kept.

    An injected fault's carry both
    ([docs/recording.md#faults](../recording.md#faults)); a ``throw`` entry's neither.
    """
    failure: JSONObject = {"message": error.message, "code": error.code}
    if error.status is not None:
        failure["status"] = error.status
    if error.retry_after_ms is not None:
        failure["providerRetryAfterMs"] = error.retry_after_ms
    return failure


def _error_response(error: WireError) -> EndpointResponse:
    return EndpointResponse(error.status, list(error.headers), iter((error.body,)))


def _failure_response(wire: Wire, failure: Failure) -> EndpointResponse:
    """A failure before content: a dropped connection, or the wire's HTTP error."""
    if failure.get("code") in _DROP_CODES:
        return _dropped()
    return _error_response(wire.error(failure))


def _late_failure(encoder: Encoder, failure: Failure) -> bytes:
    """A failure after content: the wire's error event (a transport failure drops)."""
    if str(failure.get("code", "UNKNOWN")) in _DROP_CODES:
        raise DroppedConnection(_DROPPED)
    return encoder.failure_event(failure)


def _not_retried(wire: Wire | None, message: str) -> EndpointResponse:
    """`REPLAY_ERROR_STATUS` with ``message`` in the wire's error shape.

    ``wire`` is the route's (``None``: the OpenAI shape); ``x-should-retry: false`` is
    sent too ([docs/wires.md#replay-errors](../wires.md#replay-errors)).
    """
    error = (
        openai_refusal(REPLAY_ERROR_STATUS, message)
        if wire is None
        else wire.refusal(REPLAY_ERROR_STATUS, message)
    )
    headers = [*error.headers, ("x-should-retry", "false")]
    return EndpointResponse(error.status, headers, iter((error.body,)))


def _unserved_answer(method: str, path: str) -> tuple[UnservedRouteError, EndpointResponse]:
    """The error and 404 for a route the endpoint does not serve.

    See [docs/wires.md#unserved-routes](../wires.md#unserved-routes).
    """
    served = served_routes()
    closest = closest_route(method, path)
    message = f"{method.upper()} {path.split('?', 1)[0]} is not served"
    if closest is not None:
        message += f" (the closest is {closest})"
    message += f"; served: {', '.join(served)}"
    body = {"error": {"message": message, "type": "not_found", "code": "unserved_route"}}
    return UnservedRouteError(message), json_response(404, body, [("x-should-retry", "false")])


def _parse(body: bytes, wire: Wire) -> JSONObject | EndpointResponse:
    """The request body, or the wire's 400 for a body that is not a JSON object."""
    try:
        request = orjson.loads(body or b"null")
    except orjson.JSONDecodeError as err:
        return _error_response(wire.refusal(400, f"the body is not JSON: {err}"))
    if not isinstance(request, dict):
        return _error_response(wire.refusal(400, "the body must be a JSON object"))
    return request


class _Call:
    """One HTTP call being answered: its wire, request, route and what it is called."""

    __slots__ = (
        "answer_id",
        "cancel",
        "chunks",
        "entry",
        "id",
        "model",
        "request",
        "route",
        "tools",
        "wire",
    )

    def __init__(
        self,
        wire: Wire,
        request: RequestView,
        route: Route,
        number: int,
        cancel: CallCancel,
        *,
        keep: bool,
    ):
        self.wire = wire
        self.request = request
        self.route = route
        self.cancel = cancel
        self.model = str(request.get("model") or UNNAMED_MODEL)
        self.id = wire.call_id(number)
        self.answer_id = self.id  # what a later request names this answer by
        # the chunks served, kept when a later request may continue the answer by id
        self.chunks: list[StreamChunk] | None = [] if keep else None
        # the recorded entry it replays as recorded, when the replay said so
        self.entry: ChunksEntry | ThrowEntry | None = None
        # the chunks of its tool calls served so far (how a next request names them)
        self.tools: list[StreamChunk] = []

    def note(self, chunk: StreamChunk) -> None:
        """Keep a served chunk that is part of a tool call."""
        if _is_tool_chunk(chunk):
            self.tools.append(chunk)

    def recorded_id(self, response_id: str) -> None:
        """Answer under the provider's id the recording holds.

        See [docs/wires.md#provider-ids](../wires.md#provider-ids).
        """
        self.id = self.answer_id = response_id

    def replays(self, entry: ChunksEntry | ThrowEntry) -> None:
        """The replay's word: this call's chunks are ``entry``'s as recorded."""
        self.entry = entry

    def encoder(self, replay_state: object = None) -> Encoder:
        state = replay_state if isinstance(replay_state, Mapping) else None
        return self.wire.encoder(
            self.request, model=self.model, call_id=self.id, replay_state=state
        )


class _Reading:
    """The history one request is read with (`History`).

    The endpoint's kept answers, and whether the wire asked to keep this request's own.
    """

    __slots__ = ("_endpoint", "held")

    def __init__(self, endpoint: Endpoint):
        self._endpoint = endpoint
        self.held = False

    def conversation(self, call_id: str) -> list[JSONObject] | None:
        return self._endpoint.conversation(call_id)

    def answered(self, call_id: str) -> Answered | None:
        return self._endpoint.answered(call_id)

    def hold(self) -> None:
        self.held = True


class Endpoint:
    """Serves model calls over the provider wires (one per test).

    Args:
        model: What calls stream from: a model of this package (``stream_call(request,
            options)``; the request is a read-only mapping, the request view), or any
            object with ``stream(request, **kwargs)``, called as a live model is
            ([docs/recording.md#live-model-calls](../recording.md#live-model-calls)).
        sessions: The replay's live sessions, asked before a new session's call (it
            binds first, so a child found by content is logged under the live session
            its recording's parent is bound to); ``None`` when nothing binds first.
        record: Whether ``model`` records from the live provider: calls carry a
            `Relay` for the recording proxy, and no cancel
            and no `ReplayOptions` (the live provider's answer is relayed).
        redact: Applied to live texts the endpoint's messages quote (the recording's
            redaction); ``None``: quoted as they are.
        live: Replaying, what says which calls go to the live model instead
            (``--dsh-record=new``): they carry a `Relay` as recorded calls do.
    """

    def __init__(
        self,
        model: StreamingModel | object,
        *,
        sessions: ReplaySessions | None = None,
        record: bool = False,
        redact: Callable[[str], str] | None = None,
        live: LiveCalls | None = None,
    ):
        self.model = options_model(model)
        self.sessions = sessions
        self.replay = not record
        self.live = live
        self.router = Router(redact)
        self._redact = builtin_redact if redact is None else redact
        self.errors: list[DshReplayError] = []
        self._lock = threading.Lock()
        self._cancels: set[CallCancel] = set()
        self._closed = False
        self._count = 0
        # answer id -> the request it answered and its chunks, for answers kept for
        # continuation by id (the message built on use)
        self._served: dict[str, Answered] = {}
        self._models: dict[str, None] = {}  # the models requested, in order

    @classmethod
    def replaying(
        cls,
        replay: ReplayModel,
        *,
        model: StreamingModel | None = None,
        redact: Callable[[str], str] | None = None,
        live: LiveCalls | None = None,
    ) -> Endpoint:
        """An endpoint over a replay model: new sessions bind through its live sessions.

        Args:
            replay: The replay model.
            model: What calls stream from (the fixture's recorder around ``replay``);
                default: ``replay`` itself.
            redact: What quoted live texts go through; default: the replay model's
                redaction.
            live: What says which calls go to the live model (``--dsh-record=new``).
        """
        sessions = replay._sessions
        return cls(
            replay if model is None else model,
            sessions=sessions,
            redact=sessions.redact if redact is None else redact,
            live=live,
        )

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
        """Answer one HTTP request.

        Args:
            method: The HTTP method.
            path: The request path (a query string is ignored).
            headers: The request headers, lower-case names.
            body: The request body.
            probe: Returns ``True`` once the client has gone away (ends a ``hang``).
            timeout: The client's read timeout in seconds, if it has one.

        Returns:
            The response; its body streams while the caller reads it. An unexpected
            exception is answered 500 and kept (see `internal_error`).
        """
        try:
            return self._handle(method, path, headers, body, probe, timeout)
        except Exception as error:
            return self.internal_error(method, path, error)

    def refuse(self, path: str, status: int, message: str) -> EndpointResponse:
        """The error for a request refused before it is read (a bad header, a large body).

        Args:
            path: The request path: its wire's error shape
                ([docs/wires.md#refused](../wires.md#refused)), the
                OpenAI shape for any other path.
            status: The HTTP status (400-599).
            message: What is wrong (redacted like every live text a message quotes).

        Returns:
            A JSON response; nothing is kept (the test does not fail for it).
        """
        wire = wire_for(path)
        text = self._redact(message)
        error = openai_refusal(status, text) if wire is None else wire.refusal(status, text)
        return _error_response(error)

    def internal_error(self, method: str, path: str, error: BaseException) -> EndpointResponse:
        """Keep an unexpected exception met answering a request, and answer it as a replay error.

        Args:
            method: The request's method.
            path: Its path (a query string is left out of the message).
            error: The exception.

        Returns:
            The answer: `REPLAY_ERROR_STATUS` with ``"EndpointError: ..."`` in the
            route's error shape; the `EndpointError` (a replay error as
            it is) is kept in `errors`, so the test fails with it.
        """
        wire = wire_for(path)
        if isinstance(error, DshReplayError):
            return self._replay_error(error, wire)
        where = f"{method.upper()} {path.split('?', 1)[0]}"
        failure = EndpointError(
            self._redact(
                f"the model endpoint failed answering {where}: {type(error).__name__}: {error}"
            )
        )
        failure.__cause__ = error
        return self._replay_error(failure, wire)

    def _handle(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        probe: Callable[[], bool] | None,
        timeout: float | None,
    ) -> EndpointResponse:
        wire = wire_for(path)
        if wire is not None and method.upper() != "POST":
            where = path.split("?", 1)[0]
            return _error_response(wire.refusal(405, f"{where} takes POST, not {method.upper()}"))
        if wire is None:
            return (
                self._get(path, headers)
                if method.upper() == "GET"
                else self._unserved(method, path)
            )
        if self._closed:
            return ended_response(path)
        body_json = _parse(body, wire)
        if isinstance(body_json, EndpointResponse):
            return body_json
        reading = _Reading(self)
        try:
            request = RequestView(wire.canonical(body_json, path=path, history=reading))
        except BadRequest as refused:
            return _error_response(refused.error)
        try:
            route = self.router.route(headers, request)
            parent = self._parent(route, request)
        except DshReplayError as error:
            return self._replay_error(error, wire)
        with self._lock:
            self._count += 1
            number = self._count
            self._models[str(request.get("model") or "")] = None
        keep = wire.remembers or reading.held
        call = _Call(wire, request, route, number, CallCancel(probe, timeout), keep=keep)
        relay = None
        if not self.replay or self._goes_live(route, parent, request):
            relay = Relay(wire, body, headers, path)
        response = self._answer(call, parent, relay)
        if response.drop or response.status != 200:
            self.router.answered(route.session_id, failed=True)
        return response

    def _get(self, path: str, headers: Mapping[str, str]) -> EndpointResponse:
        """A ``GET``: a wire's model list, else a 404.

        See [docs/wires.md#model-lists](../wires.md#model-lists).
        """
        wire = list_wire(path, headers)
        if wire is None:
            return self._unserved("GET", path)
        return json_response(200, wire.model_list(self.model_names()))

    def _unserved(self, method: str, path: str) -> EndpointResponse:
        error, response = _unserved_answer(method, path)
        self._keep(error)
        return response

    def model_names(self) -> list[str]:
        """The models the model lists show: the recording's, else those requested so far.

        Returns:
            Sorted names; ``[UNNAMED_MODEL]`` when neither says any.
        """
        names = self.sessions.recorded_models() if self.sessions is not None else []
        if not names:
            with self._lock:
                names = sorted(name for name in self._models if name)
        return names or [UNNAMED_MODEL]

    def answered(self, call_id: str) -> Answered | None:
        """An answer served in this test, and the request it answered.

        Only answers that ended well are kept, and only on wires that continue every
        answer by id (`remembers`) or for requests whose wire
        asked to keep theirs (`hold`); ``None`` for any
        other id.
        """
        with self._lock:
            return self._served.get(call_id)

    def conversation(self, call_id: str) -> list[JSONObject] | None:
        """The messages of a kept answer's request, its answer last (see `answered`)."""
        served = self.answered(call_id)
        if served is None:
            return None
        return [*RequestView.of(served.request).messages, answer_message(served.chunks)]

    def _answer(self, call: _Call, parent: str | None, relay: Relay | None) -> EndpointResponse:
        route = call.route
        sessions = self.sessions
        whole = sessions is not None and not sessions.may_wait(route.session_id)
        streamed = call.request.get("stream") is True
        # seed_length: declared by the dsh runtime; session_cwd: a new session's header
        # holds it (tokenized)
        if relay is None:
            options = CallOptions(
                route.session_id,
                parent,
                route.seed_length,
                route.cwd,
                cancel=call.cancel,
                read_only_chunks=True,  # served chunks are only encoded
                replay=ReplayOptions(
                    True,  # by content
                    call.recorded_id,
                    call.replays,
                    whole or not streamed,  # read at once: nothing sets cancel between
                ),
            )
        else:
            options = CallOptions(
                route.session_id, parent, route.seed_length, route.cwd, relay=relay
            )
        chunks = iter(self.model.stream_call(call.request, options))
        if relay is not None:
            relayed, head = self._relayed(call, relay, chunks)
            if relayed is not None:
                return relayed
            chunks = itertools.chain(head, chunks)
        if not streamed:
            return self._whole(call, chunks)
        if whole:  # nothing can wait: the whole stream in one piece
            return self._at_once(call, chunks)
        return self._streamed(call, chunks)

    def _goes_live(self, route: Route, parent: str | None, request: RequestView) -> bool:
        """Replaying with ``live``: whether this call goes to the live model."""
        live = self.live
        if live is None:
            return False
        options = CallOptions(route.session_id, parent, route.seed_length, replay=_BY_CONTENT)
        return live.goes_live(request, options)

    def _parent(self, route: Route, request: RequestView) -> str | None:
        """A new session's parent: the model creates (and, replaying, binds) it now.

        The model that logs calls decides the session's lineage (its parent, spawn or
        fork) as replay decides it
        ([docs/scenarios.md#fork-or-spawn](../scenarios.md#fork-or-spawn)); a model that logs
        nothing (the scripted server's) gets the route's parent, or its guess.
        """
        if not route.new:
            return route.parent_session_id
        open_session = getattr(self.model, "open_session", None)
        if open_session is None:
            return self._parent_unlogged(route, request)
        lineage = open_session(
            request,
            session_id=route.session_id,
            parent_session_id=route.parent_session_id,
            parent_guess=route.parent_guess,
            seed_length=route.seed_length,
            cwd=route.cwd,
        )
        return lineage.parent  # type: ignore[no-any-return]

    def _parent_unlogged(self, route: Route, request: RequestView) -> str | None:
        """A new session's parent when the model logs nothing: the route's, or its guess.

        Replaying, the session binds now, and the recording it binds to names the parent
        that content did not.
        """
        if not self.replay or self.sessions is None:
            return route.parent_session_id or route.parent_guess
        self.sessions.bind(
            request,
            session_id=route.session_id,
            parent_session_id=route.parent_session_id,
            seed_length=route.seed_length,
            by_content=True,
        )
        return route.parent_session_id or self.sessions.live_parent(route.session_id)

    def _replay_error(self, error: DshReplayError, wire: Wire | None) -> EndpointResponse:
        self._keep(error)
        return _not_retried(wire, f"{type(error).__name__}: {error}")

    # --- the recording proxy's answer --------------------------------------------------

    def _relayed(
        self, call: _Call, relay: Relay, chunks: Iterator[StreamChunk]
    ) -> tuple[EndpointResponse | None, list[StreamChunk]]:
        """A recording proxy's answer, byte for byte (``None``: encoded as replay serves it).

        The call's head (its chunks up to the first content or the ``finish``) is read
        first. The provider's bytes are relayed when it answered a stream as asked; an
        answer that failed before any content, or one that is no stream where the client
        asked for one, reaches the client as its replay will serve it
        ([docs/recording.md#upstream-answers](../recording.md#upstream-answers)).

        Returns:
            The response, or ``None`` and the chunks already read when the answer is
            encoded like a replayed one (so is a live model's that answers in dsh chunks
            only).
        """
        head: list[StreamChunk] = []
        try:
            for chunk in chunks:
                head.append(chunk)
                if chunk.get("type") in _CONTENT or chunk.get("type") == "finish":
                    break
        except ReplayedModelError as error:
            if relay.started:
                raise
            return _failure_response(call.wire, _raised(error)), []  # an injected fault
        except Exception as error:
            if not relay.started:
                if isinstance(error, DshReplayError):  # a ScriptedModelError, ...: the test
                    self._keep(error)  # fails with it first (docs/recording.md#live-model-failures)
                message = self._redact(f"the live model failed: {type(error).__name__}: {error}")
                return _not_retried(call.wire, message), []
            raise
        failure = _head_failure(head)
        if not relay.started:
            if failure is not None and failure.get("code") == "NETWORK":
                for _ in chunks:  # the call ends (and is logged) as it failed
                    pass
                message = self._redact(str(failure["message"]))
                return _not_retried(call.wire, message), []
            return None, head
        if relay.status < 400 and (
            failure is not None or (call.request.get("stream") is True and not relay.streamed)
        ):
            return None, head  # what the client gets is what its replay serves
        if relay.status >= 400:
            self.router.answered(call.route.session_id, failed=True)
        raw = self._relay_body(call, relay, head, chunks)
        return EndpointResponse(relay.status, relay.response_headers, raw), []

    def _relay_body(
        self,
        call: _Call,
        relay: Relay,
        head: list[StreamChunk],
        chunks: Iterator[StreamChunk],
    ) -> Iterator[bytes]:
        """The provider's answer as it relays it; a failed answer ends as its replay ends.

        The events before the answer's end go out as the provider sent them. Its end
        (``[DONE]``, ``message_stop``, ...) goes out once the call is logged as finished,
        when it finished normally; after a failure (an error event, a stream cut or
        stalled, no finish reason) the client gets instead what the replay of the
        recorded chunks sends from there: the wire's error event, nothing (a cut stream)
        or a dropped connection.
        """
        close = getattr(chunks, "close", None)
        seen: list[StreamChunk] = []
        tail = -1  # where in seen the chunks of the answer's end begin
        failure: Failure | None = None
        held = b""  # what the read that ends the answer brought waits for the call's end
        try:
            for chunk in itertools.chain(head, chunks):
                data = relay.take()
                if tail < 0 and relay.ended:
                    tail = len(seen)
                seen.append(chunk)
                if chunk.get("type") == "finish":
                    failure = self._relayed_finish(call, relay, chunk)
                elif call.chunks is not None:
                    call.chunks.append(chunk)
                call.note(chunk)
                if relay.holding:
                    held += data
                elif data:
                    yield data
            held += relay.take()
        finally:
            if close is not None:
                close()
        if failure is None:
            held += relay.take_ending()
            if held:
                yield held
            return
        ending = _replayed_end(call, relay, seen, max(tail, 0), failure)
        held += next(ending)
        if held:
            yield held
        yield from ending

    def _relayed_finish(self, call: _Call, relay: Relay, finish: StreamChunk) -> Failure | None:
        """Take note of a relayed call's ``finish``; the failure its end is served as, if any."""
        if call.chunks is not None:
            call.chunks.append(finish)
        if relay.status >= 400:
            return None  # the provider's error answer, as it sent it
        if relay.call_id:
            call.answer_id = relay.call_id  # the live provider's id
        self._answered(call, finish, _served((), tool_call_marks(call.tools)))
        failure = _failure_of(finish)
        return None if failure is None or failure.get("code") in _FINISHING else failure

    # --- replayed answers --------------------------------------------------------------

    def _whole(self, call: _Call, chunks: Iterator[StreamChunk]) -> EndpointResponse:
        """The whole (``stream: false``) answer."""
        try:
            collected = list(chunks)
        except ReplayedModelError as error:
            return _failure_response(call.wire, _raised(error))
        except ReplayCancelledError:
            return _dropped(timed_out=call.cancel.timed_out)
        except DshReplayError as error:
            return self._replay_error(error, call.wire)
        finish = next((c for c in reversed(collected) if c.get("type") == "finish"), None)
        failure = None if finish is None else _failure_of(finish)
        if failure is not None and failure.get("code") not in _IN_STREAM:
            return _failure_response(call.wire, failure)
        call.chunks = collected if call.chunks is not None else None
        self._answered(call, finish, _served(_marks(collected), tool_call_marks(collected)))
        body = call.wire.whole(collected, model=call.model, call_id=call.id)
        return json_response(200, body)

    def _at_once(self, call: _Call, chunks: Iterator[StreamChunk]) -> EndpointResponse:
        """A streamed answer produced at once (the call cannot wait): one body piece."""
        kept = _kept_encoding(call, chunks)
        if kept is not None:
            return self._sent(call, kept)
        framed = _runs_encoding(call, chunks)
        if isinstance(framed, _Encoding):
            return self._sent(call, framed)
        if framed is not None:
            return _failure_response(call.wire, framed)
        collected: list[StreamChunk] = []
        failure: Failure | None = None
        try:
            collected.extend(chunks)  # what came before a failure stays in the list
        except ReplayedModelError as error:
            failure = _raised(error)
        except ReplayCancelledError:  # an injected latency the client did not wait for
            return _dropped(timed_out=call.cancel.timed_out)
        except DshReplayError as error:
            return self._replay_error(error, call.wire)
        content = any(c.get("type") in _CONTENT for c in collected)
        if not content:
            early = _early_failure(collected)
            failure = early if early is not None else failure
            if failure is not None:
                return _failure_response(call.wire, failure)
        encoded = self._encoding(call, collected, failure)
        if call.chunks is not None:
            call.chunks.extend(collected[: encoded.used])
        return self._sent(call, encoded)

    def _sent(self, call: _Call, encoded: _Encoding) -> EndpointResponse:
        """Serve an encoded answer: the router and the kept answers are told how it ended."""
        if encoded.answered >= 0:
            self._answered_as(call, encoded.kind, encoded.served)
        elif encoded.failed:
            self.router.answered(call.route.session_id, failed=True)
        headers = list(call.wire.framing.headers)
        return EndpointResponse(200, headers, _pieces(encoded.body, encoded.dropped))

    def _encoding(
        self, call: _Call, collected: list[StreamChunk], failure: Failure | None
    ) -> _Encoding:
        """The call's streamed answer, kept with its entry.

        See [docs/wires.md#encoded-once](../wires.md#encoded-once).

        Built once per entry, wire, encoder options, model and call id; an entry with
        placeholders, or a call whose chunks the replay did not vouch for, is encoded
        every time.
        """
        entry = call.entry
        if entry is None or len(collected) != entry.chunk_count:
            return _encode_all(call, collected, failure)
        return _kept_as(call, entry, lambda: _encode_all(call, collected, failure))

    def _answered(
        self, call: _Call, finish: Mapping[str, object] | None, served: ServedAnswer
    ) -> None:
        self._answered_as(call, _finish_kind(finish), served)

    def _answered_as(self, call: _Call, kind: object, served: ServedAnswer) -> None:
        """The router (and the kept answers) told an answer ended with ``kind``."""
        failed = kind not in ("stop", "tool-calls", "max-tokens")
        self.router.answered(
            call.route.session_id,
            wants_tools=kind == "tool-calls",
            failed=failed,
            served=served,
        )
        if call.chunks is not None and not failed:
            answered = Answered(call.request, call.chunks)
            with self._lock:
                self._served[call.answer_id] = answered

    def _streamed(self, call: _Call, chunks: Iterator[StreamChunk]) -> EndpointResponse:
        """A streamed answer: its head is read now (a failure before content is an error)."""
        head: list[StreamChunk] = []
        try:
            for chunk in chunks:
                head.append(chunk)
                kind = chunk.get("type")
                if kind in _CONTENT:
                    break
                if kind == "finish":
                    failure = _failure_of(chunk)
                    if failure is not None and failure.get("code") not in _IN_STREAM:
                        for _ in chunks:  # let the call end (and be logged) as recorded
                            pass
                        return _failure_response(call.wire, failure)
                    break
        except ReplayedModelError as error:
            return _failure_response(call.wire, _raised(error))
        except ReplayCancelledError:
            return _dropped(timed_out=call.cancel.timed_out)
        except DshReplayError as error:
            return self._replay_error(error, call.wire)
        body = self._body(call, call.encoder(), head, chunks)
        return EndpointResponse(200, list(call.wire.framing.headers), body, cancel=call.cancel)

    def _body(
        self,
        call: _Call,
        encoder: Encoder,
        head: list[StreamChunk],
        chunks: Iterator[StreamChunk],
    ) -> Iterator[bytes]:
        cancel = call.cancel
        with self._lock:
            self._cancels.add(cancel)
        close = getattr(chunks, "close", None)
        try:
            yield from self._events(call, encoder, head, chunks, cancel)
        except ReplayedModelError as error:
            self.router.answered(call.route.session_id, failed=True)
            yield _late_failure(encoder, _raised(error))
        except ReplayCancelledError:
            if cancel.timed_out:
                raise TimedOut("the call hung past the client's read timeout") from None
            raise DroppedConnection("the call was cancelled") from None
        except DshReplayError as error:
            self._keep(error)
            yield encoder.replay_error_event(f"{type(error).__name__}: {error}")
        finally:
            with self._lock:
                self._cancels.discard(cancel)
            if close is not None:
                close()

    def _events(
        self,
        call: _Call,
        encoder: Encoder,
        head: list[StreamChunk],
        chunks: Iterator[StreamChunk],
        cancel: CallCancel,
    ) -> Iterator[bytes]:
        """The stream's events: the head in one piece, then one piece per chunk."""
        pending = encoder.start()
        for chunk in head:
            out, done = self._encode(call, encoder, chunk)
            pending += out
            if done:
                yield pending
                return
        yield pending
        cancel.touch()
        for chunk in chunks:
            out, done = self._encode(call, encoder, chunk)
            if out:
                yield out
                cancel.touch()
            if done:
                for _ in chunks:
                    pass
                return

    def _encode(self, call: _Call, encoder: Encoder, chunk: StreamChunk) -> tuple[bytes, bool]:
        if call.chunks is not None:
            call.chunks.append(chunk)
        if chunk.get("type") != "finish":
            call.note(chunk)
            return encoder.feed(chunk), False
        failure = _failure_of(chunk)
        if failure is None or failure.get("code") in _FINISHING:
            self._answered(call, chunk, _served(encoder.marks(), tool_call_marks(call.tools)))
            reason = chunk.get("reason")
            return encoder.finish(reason if isinstance(reason, Mapping) else {}), True
        self.router.answered(call.route.session_id, failed=True)
        if failure.get("code") == "STREAM_CLOSED":
            return b"", True
        return _late_failure(encoder, failure), True


class _Encoding:
    """A streamed answer as `Endpoint._at_once` serves it, and what it tells.

    Attributes:
        body: The stream's bytes, framed by the wire.
        dropped: The connection drops after them (a transport failure).
        used: How many of the call's chunks were encoded (up to the one that ended it).
        answered: The index of the ``finish`` that answered normally, else -1.
        failed: The answer ended failed (the router is told so).
        served: The answer at the normal ``finish`` as a next request quotes it.
        kind: That ``finish``'s reason kind (``"stop"``, ...; ``None``: none).
    """

    __slots__ = ("answered", "body", "dropped", "failed", "kind", "served", "used")

    def __init__(
        self,
        body: bytes,
        dropped: bool,
        used: int,
        answered: int,
        failed: bool,
        served: ServedAnswer,
        kind: object = None,
    ):
        self.body = body
        self.dropped = dropped
        self.used = used
        self.answered = answered
        self.failed = failed
        self.served = served
        self.kind = kind


def _encode_all(call: _Call, collected: list[StreamChunk], failure: Failure | None) -> _Encoding:
    """Encode a call's collected chunks at once, touching nothing.

    See [docs/wires.md#openai-stream](../wires.md#openai-stream).

    ``failure`` is the recorded failure the chunks end with (a ``throw`` entry's), if any.
    """
    n, finish = _finishes(collected)
    encoder = call.encoder(finish.get("replayState") if finish is not None else None)
    # What follows the first finish (at n) is never sent.
    out = [encoder.start(), encoder.feed_all(collected[:n])]
    if n < len(collected):
        return _finished(encoder, out, n, collected[n], lambda: tool_call_marks(collected[:n]))
    if failure is None:
        return _Encoding(b"".join(out), False, n, -1, False, _NOTHING)
    dropped = failure.get("code") in _DROP_CODES
    if not dropped:
        out.append(encoder.failure_event(failure))
    return _Encoding(b"".join(out), dropped, n, -1, True, _NOTHING)


def _finished(
    encoder: Encoder,
    out: list[bytes],
    n: int,
    chunk: StreamChunk,
    calls: Callable[[], tuple[ToolCallMark, ...]],
) -> _Encoding:
    """An encoded answer that ends with its first ``finish``, ``chunk`` (chunk ``n``).

    ``out``: the answer's bytes before it; ``calls``: the tool calls of the chunks
    before it (asked for only when the answer ends normally).
    """
    found = _failure_of(chunk)
    if found is None or found.get("code") in _FINISHING:
        served = _served(encoder.marks(), calls())
        reason = chunk.get("reason")
        out.append(encoder.finish(reason if isinstance(reason, Mapping) else {}))
        return _Encoding(b"".join(out), False, n + 1, n, False, served, _finish_kind(chunk))
    closed = found.get("code") == "STREAM_CLOSED"  # cut: nothing more is sent
    dropped = not closed and str(found.get("code", "UNKNOWN")) in _DROP_CODES
    if not closed and not dropped:
        out.append(encoder.failure_event(found))
    return _Encoding(b"".join(out), dropped, n + 1, -1, True, _NOTHING)


def _runs_encoding(call: _Call, chunks: Iterator[StreamChunk]) -> _Encoding | Failure | None:
    """The call's answer framed from its entry's chunk runs, without building its chunks.

    See [docs/wires.md#encoded-once](../wires.md#encoded-once).

    Only when the replay vouched for the chunks, the call keeps no chunks of its own
    (no continuation by id), the wire has a `RunsEncoder` (`BaseWire.runs_encoder`) and
    the stream can be read whole as runs (the replay model's: ``read_runs``, for a
    chunks entry without placeholders whose one ``finish`` is its last chunk).

    Returns:
        The encoding (kept for the entry as `Endpoint._encoding` keeps one); the
        failure of an answer that fails before any content (the HTTP error to answer);
        ``None``, ``chunks`` unread: read and encode them as usual.
    """
    entry = call.entry
    if entry is None or call.chunks is not None or entry.kind != "chunks":
        return None
    encoder = call.wire.runs_encoder(call.request, model=call.model, call_id=call.id)
    read_runs: Callable[[], list[ChunkRun] | None] | None = getattr(chunks, "read_runs", None)
    if encoder is None or read_runs is None:
        return None
    runs = read_runs()
    if runs is None:
        return None
    body, finish = runs[:-1], runs[-1]  # its one finish is its last chunk
    failure = _failure_of(finish)
    if (
        failure is not None
        and failure.get("code") not in _IN_STREAM
        and not any(map(_holds_content, body))
    ):
        return failure
    n = entry.chunk_count - 1

    def build() -> _Encoding:
        if list not in map(type, body):  # chunk objects only: the runs are the chunks
            # (asked once here, not by each of feed_runs and runs_tool_call_marks)
            out = [encoder.start(), encoder.feed_all(body)]
            return _finished(encoder, out, n, finish, lambda: tool_call_marks(body))
        out = [encoder.start(), encoder.feed_runs(body)]
        return _finished(encoder, out, n, finish, lambda: runs_tool_call_marks(body))

    return _kept_as(call, entry, build)


def _holds_content(item: ChunkRun) -> bool:
    """Whether a chunk run stands for a content chunk (see ``_CONTENT``)."""
    if item.__class__ is dict:
        return item.get("type") in _CONTENT
    return bool(item[2])  # a run of deltas, each a content chunk


def _kept_as(
    call: _Call, entry: ChunksEntry | ThrowEntry, build: Callable[[], _Encoding]
) -> _Encoding:
    """The encoding kept for the call's entry, else ``build()``'s, kept now."""
    key = _encoding_key(call)
    kept = _KEPT.of(entry)
    found = kept.get(key)
    if found is None:
        found = build()
        if len(kept) >= MAX_KEPT_ENCODINGS:
            kept.pop(next(iter(kept)), None)  # the oldest
        kept[key] = found
    return found


_KIND: Final = operator.methodcaller("get", "type")


def _finishes(collected: list[StreamChunk]) -> tuple[int, StreamChunk | None]:
    """Where the first ``finish`` chunk is (``len(collected)``: none), and the last one.

    The chunks' types are read in one pass without a Python call per chunk.
    """
    kinds = list(map(_KIND, collected))
    try:
        first = kinds.index("finish")
    except ValueError:
        return len(collected), None
    kinds.reverse()
    return first, collected[len(kinds) - 1 - kinds.index("finish")]


MAX_KEPT_ENCODINGS: Final = 4
"""How many encodings of one entry `_KEPT` holds before it drops the oldest."""

_EncodingKey = tuple[str, object, str, str]  # wire, encoder options, model, call id


class _KeptEncodings:
    """Each replayed entry's streamed encodings, kept beside the entry while it lives.

    Every endpoint of the process shares it, so every test that replays the same loaded
    scenario gets the bytes one test built ([docs/wires.md#encoded-once](../wires.md#encoded-once)).
    An entry's
    encodings go when the entry does (a weak reference's callback); the caller keeps at
    most `MAX_KEPT_ENCODINGS` per entry. Only for entries without placeholders:
    their chunks are the same on every replay.
    """

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        # id(entry) -> a weak reference to it (whose callback forgets the id) and its
        # encodings; an id is forgotten before the entry's memory can be reused
        self._kept: dict[
            int, tuple[weakref.ref[ChunksEntry | ThrowEntry], dict[_EncodingKey, _Encoding]]
        ] = {}

    def of(self, entry: ChunksEntry | ThrowEntry) -> dict[_EncodingKey, _Encoding]:
        """The entry's encodings (empty at first), the same dict while the entry lives."""
        found = self._kept.get(id(entry))
        if found is None:
            key = id(entry)
            kept = self._kept
            ref = weakref.ref(entry, lambda _: kept.pop(key, None))
            found = kept.setdefault(key, (ref, {}))
        return found[1]

    def kept(self, entry: ChunksEntry | ThrowEntry) -> dict[_EncodingKey, _Encoding] | None:
        """The entry's encodings, when any were kept (`of` without making them a place)."""
        found = self._kept.get(id(entry))
        return None if found is None else found[1]


_KEPT: Final = _KeptEncodings()


def _encoding_key(call: _Call) -> _EncodingKey:
    """What a kept encoding of the call's entry is found by."""
    wire = call.wire
    return (wire.name, wire.encoder_options(call.request), call.model, call.id)


def _kept_encoding(call: _Call, chunks: Iterator[StreamChunk]) -> _Encoding | None:
    """The encoding kept for the call's entry, its stream read without building chunks.

    See [docs/wires.md#encoded-once](../wires.md#encoded-once).

    Only when the replay vouched for the chunks (a chunks entry without placeholders),
    the call keeps no chunks of its own (no continuation by id), an encoding is kept for
    it, and the stream can be read whole without building its chunks (the replay
    model's: ``read_unbuilt``); ``None`` leaves ``chunks`` unread.
    """
    entry = call.entry
    if entry is None or call.chunks is not None or entry.kind != "chunks":
        return None
    kept = _KEPT.kept(entry)
    found = None if kept is None else kept.get(_encoding_key(call))
    if found is None:
        return None
    read_unbuilt: Callable[[], int | None] | None = getattr(chunks, "read_unbuilt", None)
    if read_unbuilt is None or read_unbuilt() is None:
        return None
    return found


def _finish_kind(finish: Mapping[str, object] | None) -> object:
    """A ``finish`` chunk's reason kind (``None``: no finish, or no kind)."""
    reason = finish.get("reason") if finish is not None else None
    return reason.get("kind") if isinstance(reason, Mapping) else None


def _head_failure(head: list[StreamChunk]) -> Failure | None:
    """The failure of a call whose head ends in its ``finish`` (before any content)."""
    last = head[-1] if head else None
    return None if last is None or last.get("type") != "finish" else _failure_of(last)


def _replayed_end(
    call: _Call, relay: Relay, seen: list[StreamChunk], tail: int, failure: Failure
) -> Iterator[bytes]:
    """How the replay of a relayed call ends: from ``seen[tail]`` to its failed ``finish``.

    The chunks before ``tail`` went out as the provider sent them; the replay's encoder
    takes them in for its state only. Then the bytes of the chunks that came with the
    answer's end, then the failure as replay serves it
    ([docs/wires.md#http-errors](../wires.md#http-errors)):
    nothing for ``STREAM_CLOSED``, the wire's error event, or (a transport failure) a
    dropped connection, raised as `DroppedConnection`. Yields at least once.
    """
    encoder = call.wire.encoder(call.request, model=call.model, call_id=relay.call_id or call.id)
    encoder.start()
    encoder.feed_all(seen[:tail])
    yield encoder.feed_all(seen[tail:-1])
    if failure.get("code") != "STREAM_CLOSED":
        yield _late_failure(encoder, failure)


def _early_failure(collected: list[StreamChunk]) -> Failure | None:
    """The failure a call without content ends with, unless it is a stream of its own."""
    for chunk in collected:
        if chunk.get("type") == "finish":
            found = _failure_of(chunk)
            return found if found is not None and found.get("code") not in _IN_STREAM else None
    return None


ENDED: Final = (
    "the test has ended: this client (or base URL) is an earlier test's dsh_replay's; make "
    "the client in each test (docs/wires.md#routes)"
)
"""What a request after its test ended is told (with a 503)."""


def ended_response(path: str | None = None) -> EndpointResponse:
    """The answer to a request after the endpoint closed: 503, the test has ended.

    In the error shape of the wire ``path`` is a route of, else the OpenAI shape.
    """
    wire = None if path is None else wire_for(path)
    return _error_response((openai_refusal if wire is None else wire.refusal)(503, ENDED))
