"""The fake streaming model: replay recorded model calls to the sessions that call (SPEC 9).

:class:`ReplayModel` stands in for a real LLM. Each live session that calls it is bound
to one recorded session's script, and each of its calls takes the next entry of that
script::

    model = ReplayModel(load_scenario("snapshots/subagent-mixed"))
    for chunk in model.stream({"messages": messages}, session_id=session.id):
        ...
    model.assert_consumed()  # at the end of the test

Binding (SPEC 9, and beyond it):

- A live session is keyed by its ``session_id``; calls without one share one anonymous
  session.
- A new live session takes the next recorded script in scenario order (the primary
  first, then the children by ``createdAt``, id): first-call order, as the reference.
- Beyond the reference, a call that names ``parent_session_id`` binds to the unbound
  recorded child whose first own user message is the live request's first user message
  (see :mod:`pytest_dsh_replay._replay.matching`: recorded session ids in it match any id),
  among the children of the recorded session its live parent replays (all unbound
  children when that is unknown). Concurrent children therefore bind the same way every
  run, whatever order or thread they start from; children with identical first
  messages bind in arrival order. When no recorded child matches, the call fails naming
  the live message and each candidate's. ``by_content=True`` (the HTTP endpoint's
  content routing) binds a session without a parent the same way once the primary is
  bound.
- Binding and the cursor move when :meth:`ReplayModel.stream` or
  :meth:`ReplayModel.astream` is *called*, whether or not the stream is ever read.
  Errors surface when the stream is read (at its first item), as in the reference.

Binding is guarded by a lock: the model can be shared by threads and by asyncio tasks.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._errors import (
    ReplayBindingError,
    ReplayCancelledError,
    ReplayConsumptionError,
    ReplayedModelError,
    ReplayExhaustedError,
)
from .._format.events import StreamChunk
from .._scripts.builder import last_user_text
from .._scripts.entries import HangEntry
from .._scripts.loading import load_scenario
from .._scripts.scenario import Scenario
from .binding import Binder
from .call import (
    BoundSession,
    ChunkStream,
    ReplayCall,
    SessionKey,
    await_cancelled,
    cut_reads,
    describe_call,
    describe_session,
    entry_has_placeholders,
    prepare_call,
    read_chunks,
    wait_cancelled,
    wake,
    write_ready_file,
)
from .matching import trim

if TYPE_CHECKING:
    import asyncio

    from .order import OrderGate

__all__ = ["ReplayBinding", "ReplayModel", "last_user_text"]

_RERECORD: Final = "re-record with --dsh-record"


@dataclass(frozen=True, slots=True)
class ReplayBinding:
    """Which recording a live session replays, and how far it got (for diagnostics).

    Attributes:
        recorded_id: The recorded session's id (header ``id``; ``""`` when absent).
        file: The recorded session's log (``session.jsonl``, ``session.2.jsonl``, ...).
        cursor: How many calls the live session has made (the next call is number
            ``cursor + 1``); larger than ``length`` after refused calls.
        length: How many calls the recording holds.
    """

    recorded_id: str
    file: str
    cursor: int
    length: int

    @property
    def remaining(self) -> int:
        """Recorded calls not made yet (never negative)."""
        return max(self.length - self.cursor, 0)


def _who_first(key: SessionKey, first: str | None) -> str:
    who = describe_session(key)
    return who if first is None else f"{who} (first user message {trim(first)})"


class ReplayModel:
    """A fake streaming model that replays a recorded scenario.

    Args:
        scenario: The loaded scenario, or a path :func:`load_scenario` accepts.
        pace_ms: Milliseconds to wait before each replayed chunk (``hang`` prefixes are
            never paced); an integer >= 0, 0 for no waiting.
        sleep: The blocking wait used for pacing by :meth:`stream`, called with seconds.
            With the default (``time.sleep``) a :meth:`cancel` ends the wait at once;
            an injected function is called as it is, and cancellation is checked when it
            returns. Tests pass a fake so they never sleep.
        asleep: The awaitable wait used for pacing by :meth:`astream` (same rules;
            ``None``, the default: ``asyncio.sleep``).
        workdir: The directory relative ``readyFile`` paths of ``hang`` entries resolve
            against; default: the process's working directory when the file is written.
            A ``readyFile`` outside it is refused.

    Raises:
        ValueError: ``pace_ms`` is not a non-negative integer.
        DshReplayError: ``scenario`` is a path that does not load.
    """

    def __init__(
        self,
        scenario: Scenario | str | os.PathLike[str],
        *,
        pace_ms: int = 0,
        sleep: Callable[[float], object] = time.sleep,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        workdir: str | os.PathLike[str] | None = None,
    ):
        if isinstance(pace_ms, bool) or not isinstance(pace_ms, int) or pace_ms < 0:
            raise ValueError(
                f"pace_ms must be a non-negative integer (milliseconds), got {pace_ms!r}"
            )
        if not isinstance(scenario, Scenario):
            scenario = load_scenario(scenario)
        self._scenario = scenario
        self._scripts = scenario.scripts
        self._pace_ms = pace_ms
        self._pace_s = pace_ms / 1000
        self._sleep = sleep
        self._asleep = asleep
        self._default_sleep = sleep is time.sleep
        # asyncio is imported by the first astream() call, not here (a cold start cost).
        self._default_asleep = asleep is None or asleep is getattr(
            sys.modules.get("asyncio"), "sleep", None
        )
        self._workdir = None if workdir is None else Path(workdir)
        self._lock = threading.Lock()
        self._bound: dict[SessionKey, BoundSession] = {}
        self._binder = Binder(self._scripts)
        self._unrecorded: dict[SessionKey, int] = {}
        # live key -> its first request's messages (a shallow copy: the caller may add to
        # its list); the first message is read from them only for an error message.
        self._first: dict[SessionKey, object] = {}
        self._gate: OrderGate | None = None

    # --- public state ------------------------------------------------------------------

    @property
    def scenario(self) -> Scenario:
        """The scenario being replayed."""
        return self._scenario

    @property
    def pace_ms(self) -> int:
        """The wait before each replayed chunk, in milliseconds."""
        return self._pace_ms

    @property
    def bindings(self) -> dict[str | None, ReplayBinding]:
        """A snapshot: live session id (``None``: anonymous) -> its :class:`ReplayBinding`.

        Sessions appear in the order they bound. Unrecorded sessions are not bound and
        do not appear.
        """
        with self._lock:
            return {
                key: ReplayBinding(
                    recorded_id=b.script.recorded_id,
                    file=b.script.file,
                    cursor=b.cursor,
                    length=len(b.entries),
                )
                for key, b in self._bound.items()
            }

    def __repr__(self) -> str:
        return (
            f"ReplayModel({str(self._scenario.path)!r}, {len(self._scripts)} recorded "
            f"session(s), {len(self._bound)} bound)"
        )

    # --- calls -------------------------------------------------------------------------

    def stream(
        self,
        request: Mapping[str, Any],
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        cancel: threading.Event | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
        **kwargs: Any,
    ) -> Iterator[StreamChunk]:
        """Make one model call and return its recorded stream.

        The live session is bound and its cursor moves now; the chunks (and any error)
        come when the iterator is read.

        Args:
            request: The model request. ``request["messages"]`` (when present) is the
                text ``{{fromRequest:...}}`` placeholders search and, for a
                child's first call, the source of its last user message (binding).
            session_id: The live session making the call; ``None`` is the anonymous
                session.
            parent_session_id: The live session that started this one, for a
                subagent's calls; used only when this session binds (its first call).
            cancel: An event that cancels this call when set: checked before each
                chunk and ending a ``hang``.
            seed_length: How many events a fork child inherited (``0``: not a fork;
                ``None``: unknown, judged from whether the request has messages before
                its trailing user messages). Prefers recorded children of the same
                kind when several match.
            by_content: Bind a new session without ``parent_session_id`` by its first
                user message once the primary is bound (instead of first-call order).
            **kwargs: Accepted and ignored (``turn=``, ``step=``, model options).

        Returns:
            An iterator of new chunk objects, in recorded order.
            Reading it raises:

            - :class:`ReplayBindingError`: no recorded session is left for this live
              session (it stays unbound: every call of it fails the same way);
            - :class:`ReplayExhaustedError`: the session made more calls than recorded;
            - :class:`PlaceholderError`: a placeholder does not resolve;
            - :class:`ReplayedModelError`: a ``throw`` entry, after its prefix chunks;
            - :class:`ReplayCancelledError`: the call was cancelled (:meth:`cancel`,
              ``cancel``) before a chunk, during a pacing wait, or while a ``hang``
              entry blocks;
            - :class:`ScriptError`: a ``hang`` entry's ``readyFile`` is outside
              ``workdir``.

        Raises:
            TypeError: ``request`` is not a mapping, or ``cancel`` is not a
                ``threading.Event``.
        """
        if cancel is not None and not isinstance(cancel, threading.Event):
            raise TypeError(
                f"stream(cancel=...) takes a threading.Event, got {type(cancel).__name__}"
            )
        call = self._call(request, session_id, parent_session_id, cancel, seed_length, by_content)
        if self._gate is None or call.order is None:
            return self._replay(call)
        return self._gate.ordered(call, self._replay(call), self._where(call), self._cancelled)

    def astream(
        self,
        request: Mapping[str, Any],
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        cancel: asyncio.Event | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
        **kwargs: Any,
    ) -> AsyncIterator[StreamChunk]:
        """Make one model call and return its recorded stream as an async iterator.

        Same binding, chunks, order and errors as :meth:`stream`. Cancelling the task
        that reads it ends a ``hang`` (or a pacing wait) with
        :class:`asyncio.CancelledError`; :meth:`cancel` and ``cancel`` raise
        :class:`ReplayCancelledError` instead.

        Args:
            request: As for :meth:`stream`.
            session_id: As for :meth:`stream`.
            parent_session_id: As for :meth:`stream`.
            cancel: An :class:`asyncio.Event` that cancels this call when set.
            seed_length: As for :meth:`stream`.
            by_content: As for :meth:`stream`.
            **kwargs: Accepted and ignored.

        Returns:
            An async iterator of new chunk objects.

        Raises:
            TypeError: ``request`` is not a mapping, or ``cancel`` is not an
                ``asyncio.Event``.
        """
        import asyncio

        if cancel is not None and not isinstance(cancel, asyncio.Event):
            raise TypeError(
                "astream(cancel=...) takes an asyncio.Event (or cancel the task, or call "
                f"model.cancel(session_id)), got {type(cancel).__name__}"
            )
        call = self._call(request, session_id, parent_session_id, cancel, seed_length, by_content)
        if self._gate is None or call.order is None:
            return self._areplay(call)
        return self._gate.aordered(call, self._areplay(call), self._where(call), self._cancelled)

    def bind(
        self,
        request: Mapping[str, Any],
        *,
        session_id: str | None,
        parent_session_id: str | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
    ) -> ReplayBinding:
        """Bind a live session now, without making a call (a bound session stays as it is).

        The HTTP endpoint binds first to learn a session's recorded parent (see
        :meth:`live_parent`); the call that follows uses this binding.

        Args:
            request: The session's first request (its messages choose the recording).
            session_id: The live session.
            parent_session_id: As for :meth:`stream`.
            seed_length: As for :meth:`stream`.
            by_content: As for :meth:`stream`.

        Returns:
            The session's binding.

        Raises:
            ReplayBindingError: No recorded session is left for it, or none matches its
                first user message.
        """
        messages = request.get("messages") if isinstance(request, Mapping) else None
        with self._lock:
            bound = self._bound.get(session_id)
            if bound is None:
                found = self._bind(session_id, parent_session_id, messages, seed_length, by_content)
                if isinstance(found, str):
                    number = self._unrecorded.get(session_id, 0) + 1
                    self._unrecorded[session_id] = number
                    raise self._binding_error(session_id, number, found)
                bound = found
            return ReplayBinding(
                recorded_id=bound.script.recorded_id,
                file=bound.script.file,
                cursor=bound.cursor,
                length=len(bound.entries),
            )

    def may_wait(self, session_id: str | None) -> bool:
        """Whether the next call of a live session may wait before its chunks end.

        True with pacing, for a ``hang`` entry, and for a session that is not bound yet
        (nothing is known); the HTTP endpoint answers calls that cannot wait in one piece.
        """
        if self._pace_s:
            return True
        with self._lock:
            bound = self._bound.get(session_id)
            if bound is None:
                return True
            return bound.cursor < len(bound.entries) and isinstance(
                bound.entries[bound.cursor], HangEntry
            )

    def live_parent(self, session_id: str | None) -> str | None:
        """The live session bound to the recorded parent of ``session_id``'s recording.

        Returns:
            Its id, or ``None`` when ``session_id`` is not bound, its recording has no
            parent, or no live session replays that parent (or it is anonymous).
        """
        with self._lock:
            bound = self._bound.get(session_id)
            if bound is None or not bound.script.parent_session:
                return None
            for key, other in self._bound.items():
                if other.script.recorded_id == bound.script.parent_session:
                    return key
        return None

    def keep_recorded_order(self, *, timeout: float = 10.0, max_gap: float = 0.5) -> bool:
        """Serve concurrent sessions' calls in the recorded order (the dsh runtime's children).

        A call is served once the calls of other sessions that the recording shows
        starting or ending before it ended have done so, and the recorded pause since
        the latest of them (at most ``max_gap`` s) has passed; after ``timeout`` s it
        raises :class:`~pytest_dsh_replay.ReplayOrderError` instead. Children whose
        ``subagent-settled`` notices reached their parent in some order have the calls
        that settled them served in that order, ``max_gap`` s apart, whatever order the
        calls' ends show (the runtime notices children finishing close together in
        either order). Times come from logs
        of formats 2 to 4. Call it before the first call; not for one thread running
        sessions one after another (it would wait for calls made later).

        Returns:
            Whether any call waits for another session.

        Raises:
            ValueError: ``timeout`` is not > 0 or ``max_gap`` is negative.
        """
        from .order import OrderGate  # only scenarios that keep the order

        gate = OrderGate.of(self._scripts, timeout=timeout, max_gap=max_gap)
        with self._lock:
            self._gate = gate if gate.active else None
        return gate.active

    def cancel(self, session_id: str | None = None) -> None:
        """Cancel every call of a live session made so far that has not finished.

        Works for :meth:`stream` and :meth:`astream`, from any thread. A cancelled call
        raises :class:`ReplayCancelledError` before its next chunk, at once when it is
        in a ``hang`` or a default pacing wait. Calls made later are not affected.

        Args:
            session_id: The live session; ``None`` for the anonymous session. A session
                that never bound is ignored.
        """
        with self._lock:
            bound = self._bound.get(session_id)
            if bound is None:
                return
            bound.epoch += 1
            waiters = list(bound.waiters)
            cut_reads(bound)
        for waiter in waiters:
            wake(waiter)

    def assert_consumed(self) -> None:
        """Check that the code under test made every recorded call.

        Raises:
            ReplayConsumptionError: A bound session made fewer calls than its recording
                holds, or a recorded session with calls was never bound. ``problems``
                has one line for each. A never-bound recording without calls is fine.
                Calls beyond a recording and unrecorded sessions are not reported here:
                they fail when they are made.
        """
        problems: list[str] = []
        with self._lock:
            for key, b in self._bound.items():
                if b.cursor < len(b.entries):
                    problems.append(
                        f"{_who_first(key, self._first_message(key))} made {b.cursor} of the "
                        f"{len(b.entries)} call(s) recorded "
                        f"in {b.script.file} (recorded session {b.script.recorded_id!r})"
                    )
            for i, script in enumerate(self._scripts):
                if not self._binder.taken[i] and script.entries:
                    problems.append(
                        f"recorded session {script.recorded_id!r} ({script.file}, "
                        f"{len(script.entries)} call(s)) was never bound to a live session"
                    )
        if problems:
            raise ReplayConsumptionError(
                f"scenario {self._scenario.path} was not fully consumed: "
                + "; ".join(problems)
                + f". The code under test made fewer model calls than were recorded; {_RERECORD}"
                " if that is intended",
                problems=problems,
            )

    # --- binding -----------------------------------------------------------------------

    def _call(
        self,
        request: Mapping[str, Any],
        key: SessionKey,
        parent: SessionKey,
        flag: threading.Event | asyncio.Event | None,
        seed_length: int | None = None,
        by_content: bool = False,
    ) -> ReplayCall:
        if request.__class__ is not dict and not isinstance(request, Mapping):
            raise TypeError(
                "the model request must be a mapping with a 'messages' list, got "
                f"{type(request).__name__}"
            )
        messages = request.get("messages")
        with self._lock:
            bound = self._bound.get(key)
            if bound is None:
                found = self._bind(key, parent, messages, seed_length, by_content)
                if isinstance(found, str):
                    number = self._unrecorded.get(key, 0) + 1
                    self._unrecorded[key] = number
                    return ReplayCall(error=self._binding_error(key, number, found))
                bound = found
            # The one place where a call of a bound session is admitted.
            index = bound.cursor
            bound.cursor = index + 1
        entries = bound.entries
        if index >= len(entries):
            return ReplayCall(error=self._exhausted(bound, index + 1))
        order = None
        if self._gate is not None:
            order = (bound.index, index)
            self._gate.arrived(*order)
        # bound, number, entry, placeholders, messages, flag, error, order
        entry = entries[index]
        return ReplayCall(
            bound, index + 1, entry, bound.placeholders[index], messages, flag, None, order
        )

    def _bind(
        self,
        key: SessionKey,
        parent: SessionKey,
        messages: object,
        seed_length: int | None,
        by_content: bool,
    ) -> BoundSession | str:
        """Bind ``key`` (the lock is held); return the binding or why there is none."""
        self._first[key] = list(messages) if messages.__class__ is list else messages
        live_parent = None if parent is None else self._bound.get(parent)
        found = self._binder.choose(
            messages,
            parent=parent,
            parent_script=None if live_parent is None else live_parent.script,
            seed_length=seed_length,
            by_content=by_content,
        )
        return found if isinstance(found, str) else self._take(key, found)

    def _take(self, key: SessionKey, index: int) -> BoundSession:
        script = self._binder.take(index)
        flags = tuple(map(entry_has_placeholders, script.entries))
        bound = BoundSession(key, index, script, flags)
        self._bound[key] = bound
        return bound

    def _first_message(self, key: SessionKey) -> str | None:
        return self._binder.first_message(self._first.get(key))

    def _binding_error(self, key: SessionKey, number: int, reason: str) -> ReplayBindingError:
        bound = ", ".join(
            f"{b.script.file} -> {'anonymous' if k is None else repr(k)}"
            for k, b in list(self._bound.items())[:8]
        )
        more = " ..." if len(self._bound) > 8 else ""
        cause = (
            "The child's first message differs from every unbound recorded child's (its "
            "task changed, or it is a session the recording does not have)"
            if "matches no unbound recorded child" in reason
            else "The code under test started more sessions than were recorded"
        )
        return ReplayBindingError(
            f"{_who_first(key, self._first_message(key))} made model call #{number}, but no "
            "recorded session is left for it: "
            f"{reason} (scenario {self._scenario.path}; bound: {bound or 'none'}{more}). "
            f"{cause}; {_RERECORD}"
        )

    def _exhausted(self, bound: BoundSession, number: int) -> ReplayExhaustedError:
        script = bound.script
        length = len(bound.entries)
        return ReplayExhaustedError(
            f"{_who_first(bound.key, self._first_message(bound.key))} asked for call #{number}, "
            f"but its recording ({script.file}, "
            f"recorded session {script.recorded_id!r}) has {length} call(s); the code under "
            f"test made more model calls than were recorded; {_RERECORD}",
            session_id=bound.key,
            recorded_id=script.recorded_id,
            file=script.file,
            call_number=number,
            recorded=length,
        )

    # --- replaying one call ---------------------------------------------------------------

    def _where(self, call: ReplayCall) -> str:
        return describe_call(call)

    def _cancelled(self, call: ReplayCall, during: str = "") -> ReplayCancelledError:
        return ReplayCancelledError(f"{describe_call(call)} was cancelled{during}")

    def _steps(self, call: ReplayCall) -> Iterator[StreamChunk | _Pause]:
        """One call's replay, the same for both drivers: its chunks, and where it pauses.

        The sync and async drivers only carry out the pauses (a pacing wait before a
        chunk, or a ``hang`` entry's wait until the call is cancelled) their own way.
        """
        if call.error is not None:
            raise call.error
        chunks, message, code, ready = prepare_call(call)
        if isinstance(call.entry, HangEntry):
            yield chunks[0]
            yield chunks[1]
            if ready is not None:
                write_ready_file(call, ready, self._workdir)
            yield _HANG
            raise self._cancelled(call, " while its recorded stream hung")
        # Only paced calls and calls with a caller's event come here (see _replay).
        pace = _PACE if self._pace_s else None
        for chunk in chunks:
            if call.cancelled():
                raise self._cancelled(call)
            if pace is not None:
                yield pace
            yield chunk
        if message is not None:
            assert code is not None
            raise ReplayedModelError(message, code)

    def _pauses(self, call: ReplayCall) -> bool:
        """Whether the call can pause at all (pacing, or a ``hang`` entry)."""
        return bool(self._pace_s) or isinstance(call.entry, HangEntry)

    def _replay(self, call: ReplayCall) -> Iterator[StreamChunk]:
        if not self._pace_s and call.flag is None and call.entry.__class__ is not HangEntry:
            # No frame per chunk: a list iterator hands them out (see read_chunks).
            return ChunkStream.of(read_chunks(call, self._cancelled))
        if not self._pauses(call):
            return self._steps(call)  # type: ignore[return-value]
        return self._paced(call)

    def _paced(self, call: ReplayCall) -> Iterator[StreamChunk]:
        for step in self._steps(call):
            if isinstance(step, _Pause):
                if step is _HANG:
                    wait_cancelled(self._lock, call, None)
                elif self._default_sleep:
                    if wait_cancelled(self._lock, call, self._pace_s):
                        raise self._cancelled(call, " while pacing")
                else:
                    self._sleep(self._pace_s)
                    if call.cancelled():
                        raise self._cancelled(call, " while pacing")
            else:
                yield step

    async def _areplay(self, call: ReplayCall) -> AsyncIterator[StreamChunk]:
        if not self._pace_s and call.flag is None and call.entry.__class__ is not HangEntry:
            for item in chain.from_iterable(read_chunks(call, self._cancelled)):
                yield item
            return
        if not self._pauses(call):
            for chunk in self._steps(call):
                yield chunk  # type: ignore[misc]
            return
        for step in self._steps(call):
            if isinstance(step, _Pause):
                if step is _HANG:
                    await await_cancelled(self._lock, call, None)
                elif self._default_asleep:
                    if await await_cancelled(self._lock, call, self._pace_s):
                        raise self._cancelled(call, " while pacing")
                else:
                    assert self._asleep is not None
                    await self._asleep(self._pace_s)
                    if call.cancelled():
                        raise self._cancelled(call, " while pacing")
            else:
                yield step

    # --- waiting until cancelled --------------------------------------------------------


class _Pause:
    """A step of a replayed call where the driver waits (see ``ReplayModel._steps``)."""

    __slots__ = ()


_HANG: Final = _Pause()  # wait until the call is cancelled
_PACE: Final = _Pause()  # wait pace_ms before the next chunk
