"""Recording: a model wrapper that logs every streamed chunk into the calling session.

:class:`RecordingModel` has the interface of :class:`~pytest_dsh_replay.model.ReplayModel`
(``stream`` / ``astream``). It passes each call to another model (the live model in
record mode, the replay model in replay mode) and appends every chunk the caller sees to
the calling session's log as an ``assistant/chunk`` event, so the log derives back into
exactly those chunks (SPEC 7). A stream that raises is logged as a call ending in an
error ``finish`` (SPEC 2, "How a failed model attempt is logged") and the error is
re-raised; a stream the caller abandons ends in an ``aborted`` finish.

The built-in live model, an OpenAI-compatible chat-completions adapter, lives in
:mod:`pytest_dsh_replay.live_openai`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import ExitStack
from typing import Any, Protocol

from ._errors import RecordingError
from ._events import StreamChunk
from ._script import last_user_text

__all__ = ["LiveModel", "RecordingModel", "failure_finish"]


class LiveModel(Protocol):
    """What the recorder needs of a model: ``stream`` (and ``astream`` for async callers)."""

    def stream(self, request: Mapping[str, Any], **kwargs: Any) -> Iterator[StreamChunk]:
        """Stream the chunks of one call."""


def failure_finish(error: BaseException, *, kind: str = "error") -> StreamChunk:
    """The terminal ``finish`` chunk that stands for a failed stream (SPEC 2, 3).

    Args:
        error: The exception the stream raised. Its ``code`` attribute (a string) is
            used when present, else ``UNKNOWN``; an integer ``status`` or
            ``status_code`` in 100..599 is kept as ``status``.
        kind: ``"error"`` or ``"aborted"``.

    Returns:
        ``{"type": "finish", "reason": {"kind", "failure": {"message", "code", "status"?}}}``.
    """
    code = getattr(error, "code", None)
    message = str(error) or type(error).__name__
    failure: dict[str, Any] = {
        "message": message,
        "code": code if isinstance(code, str) and code else "UNKNOWN",
    }
    status = getattr(error, "status", getattr(error, "status_code", None))
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        failure["status"] = status
    return {"type": "finish", "reason": {"kind": kind, "failure": failure}}


_ABANDONED: StreamChunk = {
    "type": "finish",
    "reason": {
        "kind": "aborted",
        "failure": {"message": "the caller stopped reading the stream", "code": "ABORTED"},
    },
}


class _Call:
    """One call's logging: the session, its (turn, step), whether ``finish`` was seen."""

    __slots__ = ("finished", "session", "step", "turn")

    def __init__(self, session: Any, turn: Any, step: Any):
        self.session = session
        self.turn = turn
        self.step = step
        self.finished = False

    def log(self, chunk: StreamChunk) -> None:
        if self.session is not None:
            self.session.append(
                "assistant/chunk", {"turn": self.turn, "step": self.step, "chunk": chunk}
            )
        if chunk.get("type") == "finish":
            self.finished = True

    def end(self, error: BaseException | None) -> None:
        """Close the call's log after the stream stopped early or failed."""
        if self.finished:
            return
        if error is None:
            self.log(dict(_ABANDONED))
        elif isinstance(error, Exception):
            self.log(failure_finish(error))

    def batch(self) -> ExitStack:
        """Group this call's appends into one write (closed when the stream ends)."""
        stack = ExitStack()
        if self.session is not None:
            stack.enter_context(self.session.batch())
        return stack

    def check_complete(self) -> None:
        if not self.finished:
            raise RecordingError(
                "the model's stream ended without a finish chunk; such a call cannot be "
                "replayed from the log (every stream must end with a finish chunk)"
            )


class RecordingModel:
    """Wraps a model and logs every chunk into the calling session of ``store``.

    Args:
        model: The model that answers: anything with ``stream(request, **kwargs)``
            returning dsh stream chunks, and ``astream`` for async callers (without it,
            ``astream`` iterates ``stream`` in the event loop's thread).
        store: The :class:`~pytest_dsh_replay.store.SessionStore` holding the callers'
            sessions.
        create_sessions: Whether a call from a session the store does not have creates
            it (a child when ``parent_session_id`` is given: ``parentSession``,
            ``origin: "subagent"``, the parent's ``delegationDepth`` + 1), starting with
            a ``user/message`` holding the request's last user message. So code that
            never touches the store still leaves a replayable recording whose children
            bind by their task. The ids of such sessions are kept in :attr:`created`.

    Each call's chunks are logged with the caller's ``turn`` and ``step`` keyword
    arguments; without them every call of a session gets the next turn and step 1. All
    keyword arguments (``session_id``, ``parent_session_id``, ``turn``, ``step``, ...)
    are passed through to ``model``.
    """

    def __init__(self, model: Any, store: Any, *, create_sessions: bool = True):
        self.model = model
        self.store = store
        self.create_sessions = create_sessions
        self._lock = threading.Lock()
        self._turns: dict[str, int] = {}
        self._anonymous: str | None = None
        self.created: set[str] = set()

    def _session(
        self, request: Mapping[str, Any], session_id: str | None, parent_session_id: str | None
    ) -> Any:
        with self._lock:
            if session_id is None:
                if not self.create_sessions:
                    return None
                if self._anonymous is not None:
                    return self.store.get(self._anonymous)
                session = self._create(request, None, parent_session_id)
                self._anonymous = session.id
                return session
            session = self.store.get(session_id)
            if session is None and self.create_sessions:
                session = self._create(request, session_id, parent_session_id)
            return session

    def _create(
        self, request: Mapping[str, Any], session_id: str | None, parent: str | None
    ) -> Any:
        """Create a session the caller never created; its first event is the user's ask."""
        meta: dict[str, Any] | None = None
        if parent is not None:
            parent_session = self.store.get(parent)
            depth = 0 if parent_session is None else parent_session.header.delegation_depth or 0
            meta = {"parentSession": parent, "origin": "subagent", "delegationDepth": depth + 1}
        session = self.store.create(session_id, meta=meta)
        self.created.add(session.id)
        text = last_user_text(request.get("messages"))
        if text is not None:
            message = {
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "user"},
                "role": "user",
                "id": str(uuid.uuid4()),
            }
            session.append("user/message", message, surfaceOp="append")
        return session

    def _call(self, request: Mapping[str, Any], kwargs: dict[str, Any]) -> _Call:
        session = self._session(request, kwargs.get("session_id"), kwargs.get("parent_session_id"))
        turn, step = kwargs.get("turn"), kwargs.get("step")
        if session is not None and turn is None:
            with self._lock:
                turn = self._turns[session.id] = self._turns.get(session.id, 0) + 1
        return _Call(session, turn, 1 if step is None else step)

    def stream(self, request: Mapping[str, Any], **kwargs: Any) -> Iterator[StreamChunk]:
        """Stream one call from the wrapped model, logging each chunk before it is yielded.

        Args:
            request: The request mapping, passed through.
            **kwargs: Passed through; ``session_id``, ``parent_session_id``, ``turn`` and
                ``step`` also choose where the chunks are logged.

        Raises:
            RecordingError: The wrapped stream ended without a ``finish`` chunk.
            Exception: Whatever the wrapped model raises, after the call was logged
                with an error ``finish``.
        """
        call = self._call(request, kwargs)
        upstream = iter(self.model.stream(request, **kwargs))
        return self._relay(call, upstream)

    def _relay(self, call: _Call, upstream: Iterator[StreamChunk]) -> Iterator[StreamChunk]:
        error: BaseException | None = None
        completed = False
        batch = call.batch()
        try:
            for chunk in upstream:
                call.log(chunk)
                yield chunk
            completed = True
        except GeneratorExit:
            close = getattr(upstream, "close", None)
            if close is not None:
                close()
            raise
        except BaseException as err:
            error = err
            raise
        finally:
            if not completed:
                call.end(error)
            batch.close()
        call.check_complete()

    def astream(self, request: Mapping[str, Any], **kwargs: Any) -> AsyncIterator[StreamChunk]:
        """The async form of :meth:`stream`: the same logging, the same errors."""
        call = self._call(request, kwargs)
        astream = getattr(self.model, "astream", None)
        if astream is None:
            return self._arelay_sync(call, iter(self.model.stream(request, **kwargs)))
        return self._arelay(call, astream(request, **kwargs))

    async def _arelay(
        self, call: _Call, upstream: AsyncIterator[StreamChunk]
    ) -> AsyncIterator[StreamChunk]:
        error: BaseException | None = None
        completed = False
        batch = call.batch()
        try:
            async for chunk in upstream:
                call.log(chunk)
                yield chunk
            completed = True
        except GeneratorExit:
            aclose = getattr(upstream, "aclose", None)
            if aclose is not None:
                await aclose()
            raise
        except BaseException as err:
            error = err
            raise
        finally:
            if not completed:
                call.end(error)
            batch.close()
        call.check_complete()

    async def _arelay_sync(
        self, call: _Call, upstream: Iterator[StreamChunk]
    ) -> AsyncIterator[StreamChunk]:
        for chunk in self._relay(call, upstream):
            yield chunk

    def __getattr__(self, name: str) -> Any:
        # Anything else (assert_consumed, bindings, cancel, ...) is the wrapped model's.
        return getattr(self.model, name)
