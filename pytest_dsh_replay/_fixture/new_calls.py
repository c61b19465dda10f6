"""``--dsh-record=new``: recorded calls replay, the calls past the recording go live.

[docs/recording.md#record-new](../recording.md#record-new). `NewCallsModel` answers each
call of a run that appends to a recording: a call of a live session bound to a recorded
session that still has calls is replayed (the replay model binds it exactly as a replay
does, by the same code); a call past its session's recording, and every call of a
session the recording lacks (a new spawn or fork child, or a child of one), goes to the
live model. The recorder around it logs both alike, so the run's logs hold the recorded
part and the new calls after it; the fixture then writes only what is new
(`appended_logs`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final

from .._check.normalize import standalone_ids
from .._errors import ReplayBindingError
from .._format.events import Event, SessionLike, SessionLog, StreamChunk
from .._format.json_values import map_strings
from .._identity.options import NO_REPLAY, CallOptions, OptionsModel, Request

if TYPE_CHECKING:
    from .._replay.binding import ReplayBinding
    from .._replay.model import ReplayModel
    from .._scripts.scenario import SessionScript

__all__ = [
    "AppendedLogs",
    "NewCallsModel",
    "NewSplit",
    "appended_logs",
    "continues_closed_turn",
    "rename_ids",
    "split_sessions",
]


class NewCallsModel(OptionsModel):
    """Replays what the recording holds and sends every other call to the live model.

    Args:
        replay: The replay model of the recording (its bindings decide, as in a replay,
            which recorded session a live session is).
        live: The live model (the watched one of the fixture), an `OptionsModel`.

    A call is live when its session is new (no recorded session is left for it, or
    its parent is new) or its recorded session has no call left; the decision and the
    replay's admission of the call happen under one lock, so concurrent calls of one
    session take the recorded calls in order. Over HTTP the endpoint asks `goes_live`
    first (a live call is relayed to the provider by the recording proxy); the call's
    options then say what it decided: a ``relay`` is a live call, replay options a
    replayed one.
    """

    guesses_parents = True
    """`bind_session` takes the endpoint's ``parent_guess`` for a session it takes as new."""

    def __init__(self, replay: ReplayModel, live: OptionsModel):
        self.replay = replay
        self.live = live
        self._lock = threading.RLock()
        self._fresh: set[str | None] = set()  # live sessions the recording lacks
        self.live_calls = 0  # calls sent to the live model

    def __repr__(self) -> str:
        return f"NewCallsModel({self.replay!r}, {self.live!r})"

    # --- what the fixture and the endpoint ask -------------------------------------------

    @property
    def bindings(self) -> dict[str | None, ReplayBinding]:
        """The replay's bindings (live session -> recorded session); new sessions absent."""
        return self.replay.bindings

    @property
    def fresh(self) -> frozenset[str | None]:
        """The live sessions the recording lacks (their calls all went live)."""
        with self._lock:
            return frozenset(self._fresh)

    def assert_consumed(self) -> None:
        """Every recorded call was made (the replay's check: a drift, not a new call).

        Raises:
            ReplayConsumptionError: As
                [`ReplayModel.assert_consumed`][pytest_dsh_replay.ReplayModel.assert_consumed].
        """
        self.replay.assert_consumed()

    def cancel(self, session_id: str | None = None) -> None:
        """Cancel a live session's replayed calls (the replay's ``cancel``)."""
        self.replay.cancel(session_id)

    def goes_live(self, request: Request, options: CallOptions) -> bool:
        """Whether this call of ``options.session_id`` goes to the live model.

        A session not bound yet binds now, as its call would bind it (by content when
        ``options.replay.by_content``); one that binds to nothing is new from then on.
        """
        with self._lock:
            key = options.session_id
            if key in self._fresh:
                return True
            parent = options.parent_session_id
            if parent is not None and parent in self._fresh:
                self._fresh.add(key)  # a child of a new session is new too
                return True
            try:
                binding = self.replay._sessions.bind(
                    request,
                    session_id=key,
                    parent_session_id=parent,
                    seed_length=options.seed_length,
                    by_content=options.replay.by_content,
                )
            except ReplayBindingError:
                self._fresh.add(key)
                return True
            return binding.remaining == 0

    def bind_session(
        self,
        request: Request,
        *,
        session_id: str | None,
        parent_session_id: str | None = None,
        seed_length: int | None = None,
        parent_guess: str | None = None,
    ) -> str | None:
        """Bind a new session found by content (the endpoint's), or take it as new.

        As [`ReplayModel.bind_session`][pytest_dsh_replay.ReplayModel.bind_session]; a
        session no recorded one is left for is new, and its parent is
        ``parent_session_id``, else ``parent_guess`` (the endpoint's guess, as recording
        takes it).
        """
        with self._lock:
            if session_id not in self._fresh and parent_session_id not in self._fresh:
                try:
                    return self.replay.bind_session(
                        request,
                        session_id=session_id,
                        parent_session_id=parent_session_id,
                        seed_length=seed_length,
                    )
                except ReplayBindingError:
                    pass
            self._fresh.add(session_id)
            return parent_session_id or parent_guess

    # --- calls ---------------------------------------------------------------------------

    def _live_options(self, request: Request, options: CallOptions) -> bool:
        """Whether the call goes live: the endpoint's word when it gave one, else `goes_live`."""
        if options.relay is not None:
            return True
        if options.replay is not NO_REPLAY:
            return False
        return self.goes_live(request, options)

    def stream_call(self, request: Request, options: CallOptions) -> Iterator[StreamChunk]:
        """One call: replayed when its session has a recorded call left, else live."""
        with self._lock:  # the decision and the replay's admission of the call
            if not self._live_options(request, options):
                return self.replay.stream_call(request, options)
            self.live_calls += 1
        return self.live.stream_call(request, options)

    def astream_call(self, request: Request, options: CallOptions) -> AsyncIterator[StreamChunk]:
        """The async form of `stream_call`."""
        with self._lock:
            if not self._live_options(request, options):
                return self.replay.astream_call(request, options)
            self.live_calls += 1
        return self.live.astream_call(request, options)


# --- what is appended ------------------------------------------------------------------


@dataclass(frozen=True)
class AppendedLogs:
    """What a run that appends to a recording adds to it.

    Attributes:
        appended: ``(file name, events after the recorded ones)`` per recorded session
            that made calls past its recording, in the scenario's order.
        children: The sessions the recording lacks, as they are written (ids of
            recorded sessions in place of the live ones bound to them), in creation order.
        calls: The new model calls (finished calls in the appended events and children).
    """

    appended: list[tuple[str, list[Event]]]
    children: list[SessionLog]
    calls: int

    @property
    def empty(self) -> bool:
        """Nothing is new: the recording stays as it is."""
        return not self.appended and not self.children


def rename_ids(value: object, names: Mapping[str, str]) -> object:
    """``value`` (a JSON value) with each live session id of ``names`` as its recorded id.

    A string equal to an id is replaced; inside longer text an id is replaced only when
    it has at least 8 characters and stands alone, the rule of the log check's
    normalization ([docs/checks.md#normalization](../checks.md#normalization)).
    """
    if not names:
        return value
    standing = standalone_ids(names)
    pattern = None if standing is None else re.compile(standing)

    def text(found: str) -> str:
        if found in names:
            return names[found]
        if pattern is None:
            return found
        return pattern.sub(lambda m: names[m.group(0)], found)

    return map_strings(value, text)


def _finished_calls(events: Sequence[Event]) -> int:
    return sum(
        1
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"].get("type") == "finish"
    )


def appended_logs(
    pairs: Sequence[tuple[str, SessionLog, SessionLike]],
    children: Sequence[SessionLike],
    names: Mapping[str, str],
    last_child_created: int,
) -> AppendedLogs:
    """What to append: each recorded session's events past its recording, and new children.

    Args:
        pairs: ``(file, recorded log, this run's log)`` per recorded session a live
            session replayed, this run's log redacted as it is written; its first events
            are the recorded ones (checked before). A new fork child's seed is taken from
            its parent's log as written (the recorded events, not this run's copies with
            their own message ids), so the recording's fork seeds stay true.
        children: This run's logs (redacted) of the sessions the recording lacks.
        names: ``{live id: recorded id}`` of the bound sessions whose ids differ.
        last_child_created: The largest ``createdAt`` of a recorded child (or of the
            primary): a new child is never created before it, so it replays in the
            order of its file ([docs/scenarios.md#child-order](../scenarios.md#child-order)).
    """
    appended: list[tuple[str, list[Event]]] = []
    calls = 0
    full: dict[str, list[Event]] = {}  # a written session's id -> all its events
    for file, recorded, live in pairs:
        extra: list[Event] = [
            rename_ids(e, names)  # type: ignore[misc]
            for e in live.events[len(recorded.events) :]
        ]
        full[recorded.header.id] = [*recorded.events, *extra]
        if extra:
            appended.append((file, extra))
            calls += _finished_calls(extra)
    written: list[SessionLog] = []
    floor = last_child_created
    for child in sorted(children, key=lambda s: (s.header.created_at, s.header.id)):
        header = child.header
        parent = header.parent_session
        floor = max(floor + 1, header.created_at)
        parent = names.get(parent, parent) if parent is not None else None
        header = replace(header, parent_session=parent, created_at=floor)
        events: list[Event] = [rename_ids(e, names) for e in child.events]  # type: ignore[misc]
        seed = header.seed_length
        if seed and parent in full:  # a fork's seed is its parent's log as written
            events[:seed] = full[parent][:seed]
        full[header.id] = events
        written.append(SessionLog(header, events))
        calls += _finished_calls(child.events[seed:])
    return AppendedLogs(appended, written, calls)


@dataclass(frozen=True)
class NewSplit:
    """A ``"new"`` run's sessions: replays of recorded sessions, and new ones.

    Attributes:
        pairs: ``(recorded script, this run's session)`` per recorded session a live
            session replayed, in the scenario's order.
        new: This run's sessions the recording lacks, in creation order.
    """

    pairs: list[tuple[SessionScript, SessionLike]]
    new: list[SessionLike]


def split_sessions(
    scripts: Sequence[SessionScript],
    sessions: Sequence[SessionLike],
    bindings: Mapping[str | None, ReplayBinding],
    fresh: Set[str | None],
) -> NewSplit:
    """Pair this run's sessions with the recorded ones they replay; the rest are new.

    A session is paired by its binding; a session that neither bound nor went live
    (the code under test created it and made no call) takes the next unpaired recorded
    session without calls, as the replayed-log check pairs such sessions; every other
    one is new.

    Args:
        scripts: The recording's scripts, in scenario order.
        sessions: This run's sessions, in creation order.
        bindings: ``{live session id: binding}`` (the anonymous session under its id).
        fresh: The live session ids whose calls went live because the recording lacks them.
    """
    by_file = {script.file: script for script in scripts}
    paired: dict[str, SessionLike] = {}
    rest: list[SessionLike] = []
    for session in sessions:
        binding = bindings.get(session.header.id)
        script = None if binding is None else by_file.get(binding.file)
        if script is not None and script.file not in paired:
            paired[script.file] = session
        else:
            rest.append(session)
    idle = [s for s in scripts if s.file not in paired and not s.entries]
    new: list[SessionLike] = []
    for session in rest:
        if session.header.id not in fresh and idle:
            paired[idle.pop(0).file] = session
        else:
            new.append(session)
    pairs = [(script, paired[script.file]) for script in scripts if script.file in paired]
    return NewSplit(pairs, new)


CONTINUED_TURN: Final = (
    "this run continues the turn that the recording ended after its last call (that call "
    "asked for tools and the agent stopped there, so the recorder closed the turn), and "
    "appending cannot keep that turn's recorded end"
)
"""What a drift in a recording's closed turn means
([docs/recording.md#record-new](../recording.md#record-new))."""


def continues_closed_turn(recorded: Sequence[Event], live: Sequence[Event]) -> bool:
    """Whether ``live`` continues the turn ``recorded`` ended after a call that asked for tools.

    The recorder closes such a turn (``step/end``, ``turn/end``) when the recording ends;
    a run that answers the tools logs their results in that turn instead.
    """
    n = len(recorded)
    if n < 3 or len(live) < n:
        return False
    tail = [event["type"] for event in recorded[-3:]]
    return tail == ["tool/call", "step/end", "turn/end"] and live[n - 2]["type"] != "step/end"
