"""The fake streaming model: replay recorded model calls to the sessions that call.

How live sessions find their recordings: [docs/scenarios.md#binding](../scenarios.md#binding).

[`ReplayModel`][pytest_dsh_replay.ReplayModel] stands in for a real LLM. Each live session
that calls it is bound to one recorded session's script, and each of its calls takes the
next entry of that script::

    model = ReplayModel(load_scenario("snapshots/subagent-mixed"))
    for chunk in model.stream({"messages": messages}, session_id=session.id):
        ...
    model.assert_consumed()  # at the end of the test

Binding ([docs/scenarios.md#binding](../scenarios.md#binding); this goes beyond the dsh
harness, which binds by call order alone):

- A live session is keyed by its ``session_id``; calls without one share one anonymous
  session.
- A new live session takes the next recorded script in scenario order (the primary
  first, then the children by ``createdAt``, id): first-call order, as the dsh harness.
- Beyond the dsh harness, a call that names ``parent_session_id`` binds to the unbound
  recorded child whose first own user message is the live request's first user message
  (see `pytest_dsh_replay._replay.matching`: recorded session ids in it match any id),
  among the children of the recorded session its live parent replays (all unbound
  children when that is unknown). Concurrent children therefore bind the same way every
  run, whatever order or thread they start from; children with identical first
  messages bind in arrival order. When no recorded child matches, the call fails naming
  the live message and each candidate's. ``by_content=True`` (the HTTP endpoint's
  content routing) binds a session without a parent the same way once the primary is
  bound.
- Binding and the cursor move when [`ReplayModel.stream`][pytest_dsh_replay.ReplayModel.stream] or
  [`ReplayModel.astream`][pytest_dsh_replay.ReplayModel.astream] is *called*, whether or not
  the stream is ever read. Errors surface when the stream is read (at its first item), as
  the dsh harness's model streams raise.

Binding is guarded by a lock: the model can be shared by threads and by asyncio tasks.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import DshReplayError, PlaceholderError, ReplayConsumptionError
from .._format.events import Event, StreamChunk
from .._format.redact import Redactor, TextRedaction, builtin_redact
from .._identity.options import CallOptions, OptionsModel, Request
from .._scripts.builder import last_user_text
from .._scripts.entries import HangEntry
from .._scripts.loading import load_scenario
from .._scripts.scenario import Scenario
from .binding import RERECORD, LiveSessions, ReplayBinding
from .call import NO_PACING, Pacing, ReplayCall
from .pace import check_pace

if TYPE_CHECKING:
    import asyncio

    from .._scripts.entries import ChunksEntry, ThrowEntry
    from .order import LiveLogs, OrderGate

__all__ = ["ReplayBinding", "ReplayModel", "last_user_text"]


def _text_redaction(
    redactor: Redactor | None, hook: Callable[[Event], object] | None
) -> Callable[[str], str]:
    """The redaction of a live text (the cheapest form that does what is asked)."""
    if hook is not None:
        return TextRedaction(redactor, hook)
    return builtin_redact if redactor is None else redactor.redact_text


class ReplayModel(OptionsModel):
    """A fake streaming model that replays a recorded scenario.

    Args:
        scenario: The loaded scenario, or a path
            [`load_scenario`][pytest_dsh_replay.load_scenario] accepts.
        pace_ms: Milliseconds to wait before each replayed chunk (``hang`` prefixes are
            never paced); an integer >= 0, 0 for no waiting.
        pace: Serve chunks at their recorded times scaled by this factor: before each
            chunk wait its recorded gap in ms
            ([`ChunksEntry.gaps_ms`][pytest_dsh_replay.ChunksEntry]) times ``pace``
            (``1``: as recorded, ``0.5``: twice as fast), plus ``pace_ms``; a finite
            number >= 0, 0 (the default) for as fast as possible
            ([docs/scenarios.md#pacing](../scenarios.md#pacing)).
        sleep: The blocking wait used for pacing by
            [`stream`][pytest_dsh_replay.ReplayModel.stream], called with seconds. With the
            default (``time.sleep``) a [`cancel`][pytest_dsh_replay.ReplayModel.cancel] ends
            the wait at once; an injected function is called as it is, and cancellation is
            checked when it returns. Tests pass a fake so they never sleep.
        asleep: The awaitable wait used for pacing by
            [`astream`][pytest_dsh_replay.ReplayModel.astream] (same rules; ``None``, the
            default: ``asyncio.sleep``).
        workdir: The directory relative ``readyFile`` paths of ``hang`` entries resolve
            against; default: the process's working directory when the file is written.
            A ``readyFile`` outside it is refused.
        redactor: The secret rules the recording was redacted with (a recording holds
            ``[REDACTED]`` where the live session had a secret): live first user messages
            are compared with the recorded ones, placeholders that match nothing in the
            live request are looked up in its redacted text, and errors quote live text,
            through it.
            ``None`` (the default): the built-in rules; the fixture passes the run's
            redactor (the built-in rules plus the recording API key).
        redact_hook: The event redaction the recording also went through (the
            ``pytest_dsh_replay_redact`` hooks; changes an event in place): live texts
            pass through it after ``redactor``, as a ``user/message``'s text, before they
            are compared or quoted. ``None``: none.
        rerecord: The command that re-records the scenario (or a callable giving it,
            called at most once, when the first error that quotes it is made):
            [`ReplayBindingError`][pytest_dsh_replay.ReplayBindingError] and
            [`ReplayExhaustedError`][pytest_dsh_replay.ReplayExhaustedError] end with
            ``re-record: <command>``. ``None`` (the default): they end with
            ``re-record with --dsh-record``. The fixture passes the test's own command.
        append: The command that appends what the recording lacks (or a callable giving
            it, called at most once): the errors of a run that made more calls or
            sessions than were recorded name it too. ``None`` (the default): they do not.

    Raises:
        ValueError: ``pace_ms`` is not a non-negative integer, or ``pace`` not a finite
            number >= 0.
        DshReplayError: ``scenario`` is a path that does not load.
    """

    def __init__(
        self,
        scenario: Scenario | str | os.PathLike[str],
        *,
        pace_ms: int = 0,
        pace: float = 0.0,
        sleep: Callable[[float], object] = time.sleep,
        asleep: Callable[[float], Awaitable[object]] | None = None,
        workdir: str | os.PathLike[str] | None = None,
        redactor: Redactor | None = None,
        redact_hook: Callable[[Event], object] | None = None,
        rerecord: str | Callable[[], str] | None = None,
        append: str | Callable[[], str] | None = None,
    ):
        if isinstance(pace_ms, bool) or not isinstance(pace_ms, int) or pace_ms < 0:
            raise ValueError(
                f"pace_ms must be a non-negative integer (milliseconds), got {pace_ms!r}"
            )
        if pace.__class__ is not float or pace:  # the default 0.0 needs no check
            pace = check_pace(pace)
        if not isinstance(scenario, Scenario):
            if not isinstance(scenario, str | os.PathLike):
                raise TypeError(
                    f"ReplayModel takes a Scenario or a path (str or os.PathLike), got {scenario!r}"
                )
            scenario = load_scenario(scenario)
        self._scenario = scenario
        self._scripts = scenario.scripts
        self._pace_ms = pace_ms
        # scenario, paced, redact, rerecord, append (positional: a model per test)
        self._sessions = LiveSessions(
            scenario,
            pace_ms > 0 or pace > 0,
            _text_redaction(redactor, redact_hook),
            rerecord,
            append,
        )
        self._pacing = NO_PACING
        if pace_ms or pace or sleep is not time.sleep or asleep is not None or workdir is not None:
            self._pacing = Pacing(
                pace_ms / 1000,
                sleep,
                asleep,
                sleep is time.sleep,
                # asyncio is imported by the first astream() call, not here (a cold start).
                asleep is None or asleep is getattr(sys.modules.get("asyncio"), "sleep", None),
                None if workdir is None else Path(workdir),
                pace,
            )
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
    def pace(self) -> float:
        """The factor recorded chunk gaps are scaled by (``0.0``: not paced by them)."""
        return self._pacing.factor  # kept there only: a model's attributes stay as they were

    @property
    def bindings(self) -> dict[str | None, ReplayBinding]:
        """A snapshot: live session id (``None``: anonymous) -> its `ReplayBinding`.

        Sessions appear in the order they bound. Unrecorded sessions are not bound and
        do not appear.
        """
        return self._sessions.snapshot()

    def take_raised(self) -> list[DshReplayError]:
        """The binding and exhausted errors this model made for calls since the last take.

        In order; each is taken once. A test harness reports them when the code under
        test swallowed them or met them in another thread (the fixture does so).
        """
        return list(self._sessions.take_raised())

    def __repr__(self) -> str:
        return (
            f"ReplayModel({str(self._scenario.path)!r}, {len(self._scripts)} recorded "
            f"session(s), {len(self._sessions)} bound)"
        )

    # --- calls -------------------------------------------------------------------------

    def stream(
        self,
        request: Request,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        cancel: threading.Event | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
        on_response_id: Callable[[str], object] | None = None,
        on_entry: Callable[[ChunksEntry | ThrowEntry], object] | None = None,
        cancel_waits_only: bool = False,
        **ignored: object,
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
            on_response_id: Given the provider's id of the recorded answer, before the
                call streams, when the recording holds one (the model endpoint serves
                it, [docs/wires.md#provider-ids](../wires.md#provider-ids)).
            on_entry: Given the recorded entry the call replays, before it streams,
                when its chunks are the entry's as recorded (a chunks or throw entry
                without placeholders; the model endpoint keeps the entry's encoding,
                [docs/wires.md#encoded-once](../wires.md#encoded-once)).
            cancel_waits_only: ``cancel`` only ends waits (a ``hang``, a pacing pause)
                and is not checked before each chunk, for a caller that reads the whole
                stream at once (the model endpoint, mostly).
            **ignored: Accepted and ignored (``turn=``, ``step=``, model options).

        Returns:
            An iterator of new chunk objects, in recorded order.
            Reading it raises:

            - [`ReplayBindingError`][pytest_dsh_replay.ReplayBindingError]: no recorded
            session is left for this live
              session (it stays unbound: every call of it fails the same way);
            - [`ReplayExhaustedError`][pytest_dsh_replay.ReplayExhaustedError]: the session
            made more calls than recorded;
            - [`PlaceholderError`][pytest_dsh_replay.PlaceholderError]: a placeholder does
            not resolve;
            - [`ReplayedModelError`][pytest_dsh_replay.ReplayedModelError]: a ``throw``
            entry, after its prefix chunks;
            - [`ReplayCancelledError`][pytest_dsh_replay.ReplayCancelledError]: the call was
            cancelled ([`cancel`][pytest_dsh_replay.ReplayModel.cancel],
              ``cancel``) before a chunk, during a pacing wait, or while a ``hang``
              entry blocks;
            - [`ScriptError`][pytest_dsh_replay.ScriptError]: a ``hang`` entry's
            ``readyFile`` is outside
              ``workdir``.

        Raises:
            TypeError: ``request`` is not a mapping, or ``cancel`` is not a
                ``threading.Event``.
        """
        return self._stream(
            request,
            session_id,
            parent_session_id,
            cancel,
            seed_length,
            by_content,
            on_response_id,
            on_entry,
            cancel_waits_only,
        )

    def _stream(
        self,
        request: Request,
        session_id: str | None,
        parent_session_id: str | None,
        cancel: object,
        seed_length: int | None,
        by_content: bool,
        on_response_id: Callable[[str], object] | None,
        on_entry: Callable[[ChunksEntry | ThrowEntry], object] | None,
        cancel_waits_only: bool,
    ) -> Iterator[StreamChunk]:
        """`stream`, its options positional (`stream_call` passes a call's without a dict).

        ``cancel`` is checked here: a `CallOptions`' may be any waitable.
        """
        if cancel is not None and not isinstance(cancel, threading.Event):
            raise TypeError(
                f"stream(cancel=...) takes a threading.Event, got {type(cancel).__name__}"
            )
        if request.__class__ is not dict and not isinstance(request, Mapping):
            raise _not_a_request(request)
        gate = self._gate
        call = self._sessions.admit(
            request, session_id, parent_session_id, cancel, seed_length, by_content, gate
        )
        if on_response_id is not None or on_entry is not None:
            _tell_callbacks(call, on_response_id, on_entry)
        if cancel_waits_only and call.flag is not None:
            _waits_only(call, self._pacing)
        if gate is None or call.order is None:
            return call.stream(self._pacing)
        return gate.ordered(call, call.stream(self._pacing))

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """[`stream`][pytest_dsh_replay.ReplayModel.stream] with the call's options as one value.

        How the recorder and the model endpoint call it; what only a replay reads is
        ``options.replay``.

        Raises:
            TypeError: As [`stream`][pytest_dsh_replay.ReplayModel.stream].
        """
        replay = options.replay
        return self._stream(
            request,
            options.session_id,
            options.parent_session_id,
            options.cancel,
            options.seed_length,
            replay.by_content,
            replay.on_response_id,
            replay.on_entry,
            replay.cancel_waits_only,
        )

    def upcoming(self, request: Request, options: CallOptions) -> list[StreamChunk]:
        """The chunks a call would get, without making it: the cursor does not move.

        What an injected disconnect hands out before it cuts
        ([docs/recording.md#faults](../recording.md#faults)). A new session binds as its
        call would bind it.

        Returns:
            The next entry's chunks (placeholders resolved; a ``throw`` or ``hang``
            entry's prefix), or ``[]`` when the session has no call left or a
            placeholder does not resolve.
        """
        call = self._sessions.upcoming(
            request,
            options.session_id,
            options.parent_session_id,
            options.seed_length,
            options.replay.by_content,
        )
        if call is None:
            return []
        try:
            return list(call.prepare()[0])
        except PlaceholderError:
            return []

    def astream(
        self,
        request: Request,
        *,
        session_id: str | None = None,
        parent_session_id: str | None = None,
        cancel: asyncio.Event | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
        on_response_id: Callable[[str], object] | None = None,
        on_entry: Callable[[ChunksEntry | ThrowEntry], object] | None = None,
        cancel_waits_only: bool = False,
        **ignored: object,
    ) -> AsyncIterator[StreamChunk]:
        """Make one model call and return its recorded stream as an async iterator.

        Same binding, chunks, order and errors as
        [`stream`][pytest_dsh_replay.ReplayModel.stream]. Cancelling the task that reads it
        ends a ``hang`` (or a pacing wait) with `asyncio.CancelledError`;
        [`cancel`][pytest_dsh_replay.ReplayModel.cancel] and ``cancel`` raise
        [`ReplayCancelledError`][pytest_dsh_replay.ReplayCancelledError] instead.

        Args:
            request: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            session_id: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            parent_session_id: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            cancel: An `asyncio.Event` that cancels this call when set.
            seed_length: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            by_content: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            on_response_id: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            on_entry: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].
            cancel_waits_only: Accepted and ignored (an async call's waits are the
                event loop's).
            **ignored: As for [`stream`][pytest_dsh_replay.ReplayModel.stream].

        Returns:
            An async iterator of new chunk objects.

        Raises:
            TypeError: ``request`` is not a mapping, or ``cancel`` is not an
                ``asyncio.Event``.
        """
        if cancel is not None and not _is_async_event(cancel):
            raise TypeError(
                "astream(cancel=...) takes an asyncio.Event (or cancel the task, or call "
                f"model.cancel(session_id)), got {type(cancel).__name__}"
            )
        if request.__class__ is not dict and not isinstance(request, Mapping):
            raise _not_a_request(request)
        gate = self._gate
        call = self._sessions.admit(
            request, session_id, parent_session_id, cancel, seed_length, by_content, gate
        )
        if on_response_id is not None or on_entry is not None:
            _tell_callbacks(call, on_response_id, on_entry)
        if gate is None or call.order is None:
            return call.astream(self._pacing)
        return gate.aordered(call, call.astream(self._pacing))

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """[`astream`][pytest_dsh_replay.ReplayModel.astream] with the call's options as one value.

        Raises:
            TypeError: As [`astream`][pytest_dsh_replay.ReplayModel.astream].
        """
        return self.astream(request, **_keywords(options))

    def bind_session(
        self,
        request: Request,
        *,
        session_id: str | None,
        parent_session_id: str | None = None,
        seed_length: int | None = None,
    ) -> str | None:
        """Bind a new live session now, before its first call (a bound one stays as it is).

        For a session that the model endpoint found by content
        ([docs/wires.md#calling-session](../wires.md#calling-session)): it binds as a call
        with ``by_content=True`` would (its parent's recorded children when
        ``parent_session_id`` is given, else the primary first, then every recorded child,
        by its opening), and the recording it binds to tells its parent.

        Args:
            request: The session's first request.
            session_id: The live session.
            parent_session_id: Its live parent, when content proved one.
            seed_length: Events it inherits (``0``: a spawn; ``None``: judged from the
                request), preferring recorded children of the same kind.

        Returns:
            ``parent_session_id``, else the live session bound to the recorded parent of
            the recording it binds to (``None``: none, or it is the primary).

        Raises:
            ReplayBindingError: No recorded session is left for it.
        """
        self._sessions.bind(
            request,
            session_id=session_id,
            parent_session_id=parent_session_id,
            seed_length=seed_length,
            by_content=True,
        )
        return parent_session_id or self._sessions.live_parent(session_id)

    def keep_recorded_order(
        self, *, timeout: float = 10.0, max_gap: float = 0.5, live: LiveLogs | None = None
    ) -> bool:
        """Serve concurrent sessions' calls in the recorded order (the dsh runtime's children).

        With ``live`` (the logs the sessions under test are writing, read as they write
        them; the fixture passes the dsh runtime's), the recorded interleaving is kept on
        those logs: a message one session sends another (a child's ``subagent-settled``
        notice) is made to land in the same step of the receiver as recorded. The call
        that precedes the message is answered only once the receiver's live log has
        reached the recorded position where the message's window opens, and the
        receiver's call that ends that step only once the message is in its live log
        ([docs/recording.md#runtime-recording](../recording.md#runtime-recording)). Messages
        no call can place (two that opened one turn together) are races inside the runtime:
        the check names them.

        Without ``live``, the order comes from the recorded times: a call is served once
        the calls of other sessions that the recording shows starting or ending before it
        ended have done so, and the recorded pause since the latest of them (at most
        ``max_gap`` s) has passed. Children whose ``subagent-settled`` notices reached
        their parent in some order have the calls that settled them served in that
        order, ``max_gap`` s apart, whatever order the calls' ends show. Times come from
        logs of formats 2 to 5.

        Either way, a call that waits longer than ``timeout`` s raises
        [`ReplayOrderError`][pytest_dsh_replay.ReplayOrderError] naming the session and the recorded
        event it waited for. Call it before the first call; not for one thread running
        sessions one after another (it would wait for calls made later).

        Returns:
            Whether any call waits for another session.

        Raises:
            ValueError: ``timeout`` is not > 0 or ``max_gap`` is negative.
        """
        from .order import LogOrderGate, OrderGate  # only scenarios that keep the order

        gate: OrderGate
        if live is not None:
            gate = LogOrderGate.of_logs(self._scripts, live, timeout=timeout)
        else:
            gate = OrderGate.of(self._scripts, timeout=timeout, max_gap=max_gap)
        with self._sessions.lock:
            self._gate = gate if gate.active else None
        return gate.active

    def cancel(self, session_id: str | None = None) -> None:
        """Cancel every call of a live session made so far that has not finished.

        Works for [`stream`][pytest_dsh_replay.ReplayModel.stream] and
        [`astream`][pytest_dsh_replay.ReplayModel.astream], from any thread. A cancelled
        call raises [`ReplayCancelledError`][pytest_dsh_replay.ReplayCancelledError] before
        its next chunk, at once when it is in a ``hang`` or a default pacing wait. Calls
        made later are not affected.

        Args:
            session_id: The live session; ``None`` for the anonymous session. A session
                that never bound is ignored.
        """
        self._sessions.cancel(session_id)

    def assert_consumed(self) -> None:
        """Check that the code under test made every recorded call.

        Raises:
            ReplayConsumptionError: A bound session made fewer calls than its recording
                holds, or a recorded session with calls was never bound. ``problems``
                has one line for each. A never-bound recording without calls is fine.
                Calls beyond a recording and unrecorded sessions are not reported here:
                they fail when they are made.
        """
        problems = self._sessions.unconsumed()
        if problems:
            raise ReplayConsumptionError(
                f"scenario {self._scenario.path} was not fully consumed: "
                + "; ".join(problems)
                + ". The code under test made fewer model calls than were recorded"
                + _rerecord_if_intended(self._sessions.rerecord_hint()),
                problems=problems,
            )


def _rerecord_if_intended(hint: str) -> str:
    """The end of a consumption error: the generic advice only when no command is known.

    A caller that knows the command (the pytest plugin) adds it once, itself.
    """
    return f"; {RERECORD} if that is intended" if hint == RERECORD else ""


def _keywords(options: CallOptions) -> dict[str, Any]:
    """A call's options as `ReplayModel.stream`'s (and ``astream``'s) keyword arguments."""
    replay = options.replay
    return {
        "session_id": options.session_id,
        "parent_session_id": options.parent_session_id,
        "cancel": options.cancel,  # checked by the call
        "seed_length": options.seed_length,
        "by_content": replay.by_content,
        "on_response_id": replay.on_response_id,
        "on_entry": replay.on_entry,
        "cancel_waits_only": replay.cancel_waits_only,
    }


def _is_async_event(cancel: object) -> bool:
    """Whether ``cancel`` is an `asyncio.Event` (asyncio imported only for a call given one)."""
    import asyncio

    return isinstance(cancel, asyncio.Event)


def _not_a_request(request: object) -> TypeError:
    return TypeError(
        f"the model request must be a mapping with a 'messages' list, got {type(request).__name__}"
    )


def _waits_only(call: ReplayCall, pacing: Pacing) -> None:
    """Drop the cancel event of a call that never waits (``cancel_waits_only``).

    Without pauses nothing waits on it, so the call reads from its chunk list.
    """
    if not pacing.paced and call.entry.__class__ is not HangEntry:
        call.flag = None


def _tell_callbacks(
    call: ReplayCall,
    on_response_id: Callable[[str], object] | None,
    on_entry: Callable[[ChunksEntry | ThrowEntry], object] | None,
) -> None:
    """Tell a call's callbacks about its entry (see `ReplayModel.stream`).

    ``on_response_id`` gets the recorded answer's provider id, if any; ``on_entry`` the
    entry, when the call replays it as recorded.
    """
    entry = call.entry
    if entry is None:
        return
    if on_response_id is not None:
        found = entry.response_id
        if found is not None:
            on_response_id(found)
    if (
        on_entry is not None
        and not call.placeholders
        and call.error is None
        and not isinstance(entry, HangEntry)
    ):
        on_entry(entry)
