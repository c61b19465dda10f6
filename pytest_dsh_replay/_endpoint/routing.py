"""Which live session is calling the HTTP endpoint.

First answer wins:

1. **The dsh runtime's headers**: ``x-deepseek-harness-session-id`` names the session;
   ``dsh_session_log.session`` in the body gives its ``parentSession`` and, for a fork
   child, its ``seedLength``.
2. **Our own headers**, for any client: ``x-dsh-session-id`` and
   ``x-dsh-parent-session-id``.
3. **The request's content**, when nothing names the session (the OpenAI route of the
   dsh runtime, most SDK agents):

   - a request that *extends the latest request* of a live session *with the answer
     served for it* (its messages start with all of that request's messages, then an
     assistant message that is the answer, then new input) continues that session. Only
     the latest request counts: a fork child's first request extends its parent's
     *earlier* request exactly as the parent's own next request does, and must not be
     taken for the parent;
   - a request that repeats a live session's latest request and goes on with something
     other than its answer (``[*messages[:-1], question]`` while that session waits for
     its tools) is a new conversation: a fork child of that session, its seed the
     repeated part;
   - a request that *repeats* a session's latest request exactly is a retry of it when
     that call failed; after a successful answer it is a new conversation (a sibling
     child with the same first request);
   - anything else is a new conversation. When it carries earlier messages before its
     trailing user messages (a fork child's inherited seed), its parent is the earliest
     live session whose latest request starts with those messages (the live parent's own
     request, not the recording, so runtime-context and re-rendered messages compare
     equal). Without such messages, its parent is the live session whose latest answer
     has a tool call that announces it
     ([docs/scenarios.md#announcement](../scenarios.md#announcement): an argument holds the
     new conversation's opening), else it is guessed. Which recording it replays is decided
     by the replay model from its opening (the primary first).
   - when it continues two live sessions with the same latest request, the one whose
     answer (its text or a tool call id) is in the next message wins; when that does not
     decide either, the call fails with their first user messages. Children whose first
     requests are identical therefore bind in arrival order.
   - an answer re-sent with tool call ids of the client's own (some frameworks rewrite
     them) is still the answer when it names the same tools with the same arguments, in
     order, and has the same text.

The latest request of each session is kept as one serialized form per message (the
request view's ``message_keys``), so a comparison costs one pass over the messages.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Final

import orjson

from .._errors import ReplayBindingError
from .._identity.announce import announces
from .._identity.answers import ServedAnswer, ToolCallMark, is_served_answer, quotes_answer
from .._replay.matching import trim
from .._wire.request import RequestView

__all__ = ["Route", "Router"]

RUNTIME_SESSION_HEADER: Final = "x-deepseek-harness-session-id"
SESSION_HEADER: Final = "x-dsh-session-id"
PARENT_HEADER: Final = "x-dsh-parent-session-id"


@dataclass(frozen=True, slots=True)
class Route:
    """Who is calling.

    Attributes:
        session_id: The live session.
        parent_session_id: Its parent, when the request says so (headers) or content
            proves it (a fork seed).
        parent_guess: For a new conversation whose parent content could not prove: the
            live session most recently waiting for tool results (a spawn's likely
            parent), else the first live session (the primary); used only while recording.
        seed_length: The inherited events of a fork child as the dsh runtime declares
            them (``0``: not a fork); ``None`` when the request does not say (the
            recorder then decides,
            [docs/scenarios.md#fork-or-spawn](../scenarios.md#fork-or-spawn)).
        how: ``"runtime"``, ``"headers"`` or ``"content"``.
        new: Whether this is the session's first request.
        cwd: The session's working directory, when the request says (the dsh runtime's
            ``dsh_session_log.session.cwd``).
    """

    session_id: str
    parent_session_id: str | None
    parent_guess: str | None
    seed_length: int | None
    how: str
    new: bool
    cwd: str | None = None


class Router:
    """Tells live sessions apart for the endpoint (thread-safe; one per test).

    Args:
        redact: Applied to the first user messages the router keeps for its messages
            (the recording's redaction; ``None``: kept as they are).
    """

    def __init__(self, redact: Callable[[str], str] | None = None) -> None:
        self._redact = redact
        self._lock = threading.Lock()
        self._latest: dict[str, tuple[bytes, ...]] = {}  # live id -> latest request
        self._first: dict[str, str | None] = {}  # live id -> its first user message
        self._waiting: list[str] = []  # sessions whose last answer asked for tools
        self._failed: set[str] = set()  # sessions whose last call failed (may retry)
        self._served: dict[str, ServedAnswer] = {}  # live id -> its last answer
        self._announced: set[tuple[str, int]] = set()  # (session, tool call) that started one
        self.guessed: list[str] = []
        """New sessions whose parent content could not decide (it was guessed)."""

    def route(self, headers: Mapping[str, str], request: Mapping[str, object]) -> Route:
        """Find the calling session of one request.

        Args:
            headers: The request headers, lower-case names.
            request: The parsed JSON body (or its request view).

        Raises:
            ReplayBindingError: Content cannot decide (two live sessions sent the same
                latest request); the message shows their first user messages.
        """
        view = RequestView.of(request)
        runtime_id = headers.get(RUNTIME_SESSION_HEADER)
        if runtime_id:
            parent, seed, cwd = _runtime_lineage(view)
            route = self._named(runtime_id, parent, seed, "runtime", view)
            return replace(route, cwd=cwd)
        own_id = headers.get(SESSION_HEADER)
        if own_id:
            parent = headers.get(PARENT_HEADER) or None
            return self._named(own_id, parent, None, "headers", view)
        return self._by_content(view)

    def answered(
        self,
        session_id: str,
        *,
        wants_tools: bool = False,
        failed: bool = False,
        served: ServedAnswer | None = None,
    ) -> None:
        """Note how a session's call ended.

        Args:
            session_id: The live session.
            wants_tools: The answer asked for tool calls (a likely parent of what comes
                next).
            failed: The call failed (the same request again is a retry).
            served: The answer as the next request quotes it (its text and tool
                calls), to tell apart sessions whose requests were equal and to find
                the parent a tool call announces.
        """
        with self._lock:
            if session_id in self._waiting:
                self._waiting.remove(session_id)
            if wants_tools:
                self._waiting.append(session_id)
            if failed:
                self._failed.add(session_id)
            else:
                self._failed.discard(session_id)
                self._served[session_id] = served if served is not None else ServedAnswer()
                self._announced = {k for k in self._announced if k[0] != session_id}

    def first_message(self, session_id: str) -> str | None:
        """The first user message a live session sent (for messages)."""
        with self._lock:
            return self._first.get(session_id)

    def _named(
        self,
        session_id: str,
        parent: str | None,
        seed: int | None,
        how: str,
        view: RequestView,
    ) -> Route:
        with self._lock:
            new = session_id not in self._latest
            self._remember(session_id, view)
        return Route(session_id, parent, None, seed, how, new)

    def _remember(self, session_id: str, view: RequestView) -> None:
        if session_id not in self._first:
            first = view.first_user
            if first is not None and self._redact is not None:
                first = self._redact(first)
            self._first[session_id] = first
        self._latest[session_id] = view.message_keys
        self._served.pop(session_id, None)  # its answer to this request is not served yet
        if session_id in self._waiting:
            self._waiting.remove(session_id)

    def _continued(self, key: tuple[bytes, ...]) -> tuple[int, list[str], str | None, int]:
        """The sessions whose latest request ``key`` continues, and the one it repeats.

        Returns:
            ``(size, sessions, repeated, repeated_size)``: the longest latest request
            that ``key`` continues (its answer next, or a retry of a failed call) and
            the sessions that sent it; the session whose latest request ``key`` repeats
            and then goes on with something other than its answer (``None``: none), and
            how many messages it repeats.
        """
        best, tied = -1, list[str]()
        repeated: str | None = None
        repeated_size = 0
        for session_id, latest in self._latest.items():
            size = len(latest)
            if size == len(key) and session_id not in self._failed:
                continue  # the same request after an answer: not a retry
            if size > len(key) or key[:size] != latest:
                continue
            if 0 < size < len(key) and session_id not in self._failed:
                if session_id not in self._served:
                    continue  # its call is running: nothing can follow its answer yet
                if not self._answer_at(session_id, key[size]):
                    if size > repeated_size:  # a child of it while it waits for its tools
                        repeated, repeated_size = session_id, size
                    continue
            if size > best:
                best, tied = size, []
            if size == best:
                tied.append(session_id)
        if repeated_size > best:  # the longer match: a fork of a session that continued
            return best, [], repeated, repeated_size
        return best, tied, None, 0

    def _answer_at(self, session_id: str, raw: bytes) -> bool:
        """Whether ``raw``, the message after a session's latest request, is its answer.

        See `is_served_answer` (ids rewritten by the client
        count when the tools, arguments and text are the served ones).
        """
        served = self._served.get(session_id)
        if served is None:
            return False  # its call is still running: no client has its answer yet
        message = orjson.loads(raw)
        return isinstance(message, Mapping) and is_served_answer(message, served)

    def _by_content(self, view: RequestView) -> Route:
        key = view.message_keys
        with self._lock:
            best, tied, repeated, _repeated_size = self._continued(key)
            if len(tied) > 1 and best < len(key):
                following = orjson.loads(key[best])
                known = [
                    s
                    for s in tied
                    if isinstance(following, Mapping)
                    and quotes_answer(following, self._served.get(s))
                ]
                if len(known) == 1:
                    tied = known
            if len(tied) > 1 and len({_gist(self._served.get(s)) for s in tied}) == 1:
                tied = tied[:1]  # twins: the same requests, the same answers
            if len(tied) > 1:
                listed = "; ".join(f"{s}: {trim(self._first.get(s))}" for s in tied)
                raise ReplayBindingError(
                    "cannot tell which live session sent a request: it continues the latest "
                    f"request of {len(tied)} sessions alike ({listed}). Identify sessions "
                    "with the x-dsh-session-id header (and x-dsh-parent-session-id for a "
                    "child)"
                )
            if tied:
                session_id = tied[0]
                self._remember(session_id, view)
                return Route(session_id, None, None, None, "content", False)
            session_id = str(uuid.uuid4())
            if repeated is not None:  # a child of the session whose request it repeats
                parent: str | None = repeated
            else:
                parent = self._seed_parent(view) or self._announcer(view)
            guess: str | None = None
            if parent is None:
                guess = self._guess(session_id)
            self._remember(session_id, view)
            return Route(session_id, parent, guess, None, "content", True)

    def _seed_parent(self, view: RequestView) -> str | None:
        """The earliest live session whose latest request starts with the request's seed."""
        prefix = view.seed_keys
        if not prefix:
            return None
        for session_id, latest in self._latest.items():  # creation order
            if len(latest) > len(prefix) and latest[: len(prefix)] == prefix:
                return session_id
        return None

    def _announcer(self, view: RequestView) -> str | None:
        """The live session whose latest answer has a tool call announcing this request.

        [docs/scenarios.md#announcement](../scenarios.md#announcement): one of the call's
        arguments holds the request's opening. The most recently answered such session; its
        tool call counts once.
        """
        redact = self._redact or _same
        openings = [redact(text) for text in view.opening]
        if not openings:
            return None
        for session_id in reversed(list(self._served)):
            served = self._served[session_id]
            for ordinal, call in enumerate(served.calls):
                key = (session_id, ordinal)
                said = ToolCallMark(call.id, call.name, redact(call.arguments))
                if key not in self._announced and announces(said, openings):
                    self._announced.add(key)
                    return session_id
        return None

    def _guess(self, session_id: str) -> str | None:
        """A new conversation's likely parent when content proves none (recording only)."""
        if len(self._waiting) > 1 or (not self._waiting and len(self._latest) > 1):
            self.guessed.append(session_id)  # several sessions could have started it
        if self._waiting:
            return self._waiting[-1]
        return next(iter(self._latest), None)  # a child that starts after its parent went on


def _same(text: str) -> str:
    return text


def _gist(served: ServedAnswer | None) -> tuple[object, ...] | None:
    """An answer without its ids: sessions whose answers have the same gist are twins."""
    if served is None:
        return None
    return (served.text, tuple((call.name, call.arguments) for call in served.calls))


def _runtime_lineage(body: Mapping[str, object]) -> tuple[str | None, int | None, str | None]:
    """The runtime's ``dsh_session_log.session``: parent, seed length, working directory."""
    log = body.get("dsh_session_log")
    session = log.get("session") if isinstance(log, Mapping) else None
    if not isinstance(session, Mapping):
        return None, None, None
    parent = session.get("parentSession")
    seed = session.get("seedLength")
    seed_length = seed if isinstance(seed, int) and not isinstance(seed, bool) else 0
    cwd = session.get("cwd")
    return (
        parent if isinstance(parent, str) and parent else None,
        seed_length,
        cwd if isinstance(cwd, str) and os.path.isabs(cwd) else None,
    )
