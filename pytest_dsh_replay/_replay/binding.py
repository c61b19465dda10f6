"""Which recorded session each live session replays, and how far it got.

`LiveSessions` is the replay model's bookkeeping of live sessions: their bindings,
cursors and the calls they are admitted; it is also what the HTTP endpoint asks before a
call (`LiveSessions.bind`, `live_parent`,
`may_wait`). `Binder` (which `LiveSessions` is) chooses the script of a new live
session at its first call; everything binds through it. The rules:

- A call without ``parent_session_id`` (and without ``by_content``) takes the next
  unbound script in scenario order: first-call order, the primary first.
- A call with ``parent_session_id``, or any new conversation found by the endpoint's
  content routing (``by_content``), takes the primary when it is unbound and the parent
  is not a bound live session (unless the request opens otherwise than the primary and
  as an unbound recorded child does: that child); otherwise the unbound recorded child
  whose first own user message the request opens with (see
  `pytest_dsh_replay._replay.matching`), among the recorded children of the session the
  live parent replays (all children when that is unknown). Several matches: the one of
  the same kind (fork or not) first, then arrival order. No match: the reason names the
  live message and every candidate's; a child recorded without any user message, or a
  request without one, takes the first free candidate (there is nothing to compare).

Recordings hold redacted text (a secret became ``[REDACTED]``), so with a redactor the
live first messages are compared, and quoted in errors, through the same redaction
(see ``[docs/checks.md#redaction](../checks.md#redaction)``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._errors import ReplayBindingError, ReplayExhaustedError
from .._identity.announce import Announcement, announcing
from .._scripts.entries import ChunksEntry, HangEntry
from .._scripts.scenario import Scenario, SessionScript
from .call import (
    BoundSession,
    ReplayCall,
    SessionKey,
    describe_session,
    entry_has_placeholders,
    wake_all,
)
from .matching import shared_start, trim
from .plan import ReplayPlan, plan_of

# The request view is imported where it is read (binding by content, error messages),
# not here: replaying in first-call order never reads it, and it is a cold start's cost.
if TYPE_CHECKING:
    import asyncio

    from .order import OrderGate

__all__ = ["Binder", "LiveSessions", "ReplayBinding", "missing_children"]

RERECORD: Final = "re-record with --dsh-record"
"""How a replay error says to re-record when it does not know the exact command."""


def _every_bound(size: int) -> str:
    """Why a session without a parent finds no script: every one of ``size`` is bound."""
    return f"the scenario recorded {size} session(s) and every one is already bound"


def _all_bound(files: list[str]) -> str:
    """``one recorded child, a, is already bound``; ``2 recorded children, a and b, ...``."""
    if len(files) == 1:
        return f"one recorded child, {files[0]}, is already bound"
    listed = ", ".join(files[:-1]) + f" and {files[-1]}"
    return f"{len(files)} recorded children, {listed}, are all already bound"


class Binder:
    """The bookkeeping and choice of bindings over one scenario's scripts.

    What the choice reads of the scenario alone comes from its `ReplayPlan` (made once
    per loaded scenario); which scripts this model bound, and what depends on its
    redaction, is the binder's own. `LiveSessions` is one (a model's one object of
    bookkeeping); not thread-safe by itself: `LiveSessions` calls it under its lock.

    Args:
        plan: The scenario's replay plan (`plan_of`).
        redact: Applied to every live text before it is compared or quoted (the
            recording's redaction; ``None``: texts as they are).
    """

    __slots__ = ("_links", "_next", "plan", "redact", "scripts", "taken")

    def __init__(self, plan: ReplayPlan, redact: Callable[[str], str] | None = None):
        self.plan = plan
        self.scripts = plan.scripts
        self.redact = redact
        self.taken = [False] * plan.size
        self._next = 0  # no script before this index is unbound
        # parent script -> recorded child -> the call that announced it (made when asked:
        # it reads the recorded tool calls through this model's redaction)
        self._links: dict[int, dict[int, tuple[int, int]]] | None = None

    def next_free(self) -> int | None:
        """The next unbound script in replay order (first-call order); ``None``: none left."""
        taken = self.taken
        index = self._next
        size = len(taken)
        while index < size and taken[index]:
            index += 1
        self._next = index
        return index if index < size else None

    def first_message(self, messages: object) -> str | None:
        """The live request's opening user text, as messages quote it (redacted).

        Its text blocks are joined with ``BLOCK_SEPARATOR`` (see
        [docs/limits.md#block-separator](../limits.md#block-separator)), unless a secret
        spans two of them: then the whole text is redacted and shown joined as it is compared.
        """
        from .._format.text import join_blocks
        from .._wire.request import opening_units

        units = opening_units(messages)
        if not units:
            return None
        joined = self._redacted(["".join(units)])[0]
        redacted = self._redacted(units)
        return join_blocks(redacted) if "".join(redacted) == joined else joined

    def _redacted(self, texts: list[str]) -> list[str]:
        return texts if self.redact is None else [self.redact(text) for text in texts]

    def choose(
        self,
        request: Mapping[str, object],
        *,
        parent: str | None,
        parent_script: SessionScript | None,
        seed_length: int | None,
        by_content: bool,
        served: Served | None = None,
        live_id: str | None = None,
    ) -> Choice | str:
        """The script a new live session takes, or why there is none.

        Args:
            request: The live session's first request.
            parent: The live parent's id, when the call names one.
            parent_script: The script that live parent replays, when it is bound.
            seed_length: Events a fork child inherited (``0``: none; ``None``: judged from
                the request).
            by_content: A new conversation found by content (no parent needed to match).
            served: What the live parent was served so far, and which of its tool calls
                already announced a live child
                ([docs/scenarios.md#announcement](../scenarios.md#announcement)).
            live_id: The live session's id: among recorded children alike, the one
                recorded under this id (a header or ``session_id`` the code gave it).

        Returns:
            The choice (call `take` with its index), or the reason as a phrase.
        """
        if parent is None and not by_content:
            index = self.next_free()
            return _every_bound(self.plan.size) if index is None else Choice(index)
        if parent_script is None and not self.taken[0]:
            # A new conversation: the primary first, unless it opens otherwise and an
            # unbound recorded session opens as it does (two conversations started at
            # once: whichever calls first, each replays its own recording).
            other = self._not_the_primary(request, seed_length)
            return Choice(0 if other is None else other)
        where = "in the scenario"
        owner = "the scenario's"
        kids: Sequence[int] | None = None
        if parent_script is not None:
            recorded = parent_script.recorded_id
            kids = self.plan.children.get(recorded) if recorded else None
            if kids:
                where = (
                    f"under {parent_script.file} (recorded session {recorded!r}), which its "
                    f"live parent session {parent!r} replays"
                )
                owner = (
                    f"its live parent session {parent!r} replays {parent_script.file} "
                    f"(recorded session {recorded!r}), whose"
                )
        if not kids:
            kids = self.plan.others
            if not kids:
                return "the scenario recorded no child session, and its primary is bound"
        free = [i for i in kids if not self.taken[i]]
        if not free:
            return f"{owner} {_all_bound([self.scripts[i].file for i in kids])}"
        from .._wire.request import RequestView  # only here: first-call order needs no view

        view = RequestView.of(request)
        seeded = bool(view.seed) if seed_length is None else seed_length > 0
        openings = self._redacted(view.openings)
        announced = self._announced(served, self._redacted(view.opening))
        if announced is not None:
            linked = [i for i in free if self._linked(served, i) == announced.key]
            if len(linked) == 1:
                return Choice(linked[0], announced.key)
        found = self._match(free, openings, seeded, self._redacted(view.run), live_id)
        if found is None and not openings and not by_content and len(free) == 1:
            found = free[0]  # the caller named the parent, and one child is left
        if found is not None:
            return Choice(found, None if announced is None else announced.key)
        # No match: quote the live message and each candidate's, text blocks visibly apart.
        shown = self.first_message(request.get("messages"))
        if not openings:
            listed = "; ".join(
                f"{self.scripts[i].file}: {trim(self.scripts[i].opening_shown)}" for i in free
            )
            return (
                "its first request ends without a user message, so nothing tells which "
                f"unbound recorded child {where} it is (unbound: {listed}); a request that "
                "continues a conversation with an answer that differs from the one served "
                "(rewritten text or tool calls) starts a new one"
            )
        nearest = self._nearest(free, openings[-1])
        listed = "; ".join(
            f"{self.scripts[i].file}: {trim(self.scripts[i].opening_shown, near=shown)}"
            for i in free
        )
        near = None if nearest is None else self.scripts[nearest].opening_shown
        return (
            f"its first user message {trim(shown, near=near)} matches no "
            f"unbound recorded child {where} (unbound: {listed})"
        )

    def _not_the_primary(
        self, request: Mapping[str, object], seed_length: int | None
    ) -> int | None:
        """The unbound non-primary script a new conversation opens as; ``None``: the primary.

        Only when the primary's opening is another and an unbound script's is the
        request's ([docs/scenarios.md#binding](../scenarios.md#binding)).
        """
        free = [i for i in self.plan.others if not self.taken[i]]
        if not free:
            return None  # (most scenarios: no opening is even compiled)
        primary = self.plan.opener(0)
        if primary is None:
            return None
        from .._wire.request import RequestView

        view = RequestView.of(request)
        openings = self._redacted(view.openings)
        if not openings or primary.matches(openings):
            return None
        seeded = bool(view.seed) if seed_length is None else seed_length > 0
        found = self._match(free, openings, seeded, self._redacted(view.run))
        if found is None or self.plan.opener(found) is None:
            return None  # no recorded session opens so: the primary, which reports the drift
        return found

    def _announced(self, served: Served | None, openings: list[str]) -> Announcement | None:
        """The live parent's tool call that announces the live child, if any."""
        if served is None or not openings:
            return None
        calls = self.plan.tool_calls(served.index)[: served.cursor]
        return announcing(calls, openings, served.claimed)

    def _linked(self, served: Served | None, child: int) -> tuple[int, int] | None:
        """The recorded parent's tool call that announced recorded child ``child``."""
        if served is None:
            return None
        known = self._links
        if known is None:
            known = self._links = {}
        links = known.get(served.index)
        if links is None:
            links = known[served.index] = self._recorded_links(served.index)
        return links.get(child)

    def _recorded_links(self, parent: int) -> dict[int, tuple[int, int]]:
        """Each recorded child of script ``parent`` -> the tool call that announced it.

        The children in replay order, each linked to the earliest tool call not linked
        before it ([docs/scenarios.md#announcement](../scenarios.md#announcement)), as live
        children are.
        """
        recorded = self.scripts[parent].recorded_id
        calls = self.plan.tool_calls(parent)
        links: dict[int, tuple[int, int]] = {}
        claimed: set[tuple[int, int]] = set()
        for child in self.plan.children.get(recorded, ()) if recorded else ():
            blocks = self.scripts[child].opening_blocks
            if blocks is None:
                text = self.scripts[child].opening_text
                blocks = () if text is None else (text,)
            openings = self._redacted(list(itertools.accumulate(blocks)))
            found = announcing(calls, openings, claimed)
            if found is not None:
                links[child] = found.key
                claimed.add(found.key)
        return links

    def take(self, index: int) -> SessionScript:
        """Mark a script bound; return it."""
        self.taken[index] = True
        return self.scripts[index]

    def _nearest(self, free: list[int], live: str) -> int | None:
        """The unbound recorded child whose first message shares the longest start with ``live``."""
        known = [i for i in free if self.scripts[i].opening_text is not None]
        return max(
            known,
            key=lambda i: shared_start(self.scripts[i].opening_text or "", live),
            default=None,
        )

    def _match(
        self,
        free: list[int],
        openings: list[str],
        seeded: bool,
        run: list[str],
        live_id: str | None = None,
    ) -> int | None:
        """The free recorded child whose opening the request opens with.

        Among several, the one whose whole run of user messages is the request's (two
        questions asked after the same task), then the one of the same kind, then the
        one recorded under the live session's id (children alike that the code names),
        then the first. ``None`` when none matches (and there is something to compare).
        """
        matching = []
        for i in free:
            opener = self.plan.opener(i)
            if opener is not None and opener.matches(openings):
                matching.append(i)
        if matching:
            if len(matching) > 1:
                live = tuple(run)
                matching = [i for i in matching if self.scripts[i].opening_run == live] or matching
            same = [i for i in matching if (self.scripts[i].seed_length > 0) == seeded]
            return self._named(same or matching, live_id)
        # Recorded children without an opening have nothing to compare: they bind in
        # arrival order, as sessions without a parent do (the recording holds no more).
        return self._named([i for i in free if self.scripts[i].opening_text is None], live_id)

    def _named(self, candidates: list[int], live_id: str | None) -> int | None:
        """The candidate recorded under ``live_id``, else the first (``None``: none)."""
        if len(candidates) > 1 and live_id is not None:
            for i in candidates:
                if self.scripts[i].recorded_id == live_id:
                    return i
        return candidates[0] if candidates else None


@dataclass(slots=True)  # not frozen (read only, by convention): made at every binding
class Choice:
    """The script a new live session binds to.

    Attributes:
        index: The script's index in the scenario.
        announced: ``(call, ordinal)`` of the live parent's tool call that announced it,
            when one did (claimed for it, so a sibling cannot take the same one).
    """

    index: int
    announced: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class Served:
    """What a live parent was served: for linking a new child to its announcement.

    Attributes:
        index: The script the live parent replays.
        cursor: How many of its calls it made.
        claimed: ``(call, ordinal)`` of its tool calls already linked to live children.
    """

    index: int
    cursor: int
    claimed: frozenset[tuple[int, int]]


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


def _binding(bound: BoundSession) -> ReplayBinding:
    return ReplayBinding(
        bound.script.recorded_id, bound.script.file, bound.cursor, len(bound.entries)
    )


class LiveSessions(Binder):
    """The live sessions of one replay: their bindings and cursors (thread-safe).

    Each live session (keyed by its ``session_id``; ``None`` is the anonymous session)
    binds to one recorded script at its first call (the rules of the `Binder` it is:
    one object per model, not two) and takes
    that script's entries one per call. The replay model admits its calls here; the HTTP
    endpoint binds a new session here before its call, to learn its recorded parent.

    Args:
        scenario: The scenario replayed.
        paced: Whether calls wait before their chunks (`may_wait`).
        redact: The recording's redaction of a text, applied to live first messages
            before they are matched or quoted (``None``: none).
        rerecord: The command that re-records the scenario, or a callable giving it
            (called once, when the first error that quotes it is made): the binding and
            exhausted errors end with ``re-record: <command>``. ``None``:
            `RERECORD`.
        append: The command that appends what the recording lacks (``--dsh-record=new``),
            or a callable giving it (called once): the errors of a run that made more
            calls or sessions than were recorded name it after the re-record command.
            ``None``: they do not.
    """

    __slots__ = (
        "_append",
        "_bound",
        "_claimed",
        "_first",
        "_models",
        "_paced",
        "_raised",
        "_rerecord",
        "_unrecorded",
        "lock",
        "scenario",
    )

    def __init__(
        self,
        scenario: Scenario,
        paced: bool = False,
        redact: Callable[[str], str] | None = None,
        rerecord: str | Callable[[], str] | None = None,
        append: str | Callable[[], str] | None = None,
    ):
        # plan, scripts, redact (the recording's redaction of a live text, None: none),
        # which scripts are bound: the binder's
        Binder.__init__(self, plan_of(scenario), redact)
        self.scenario = scenario
        self._rerecord = rerecord
        self._append = append
        self.lock = threading.Lock()
        self._paced = paced
        self._bound: dict[SessionKey, BoundSession] = {}
        # live key -> how many calls of it were refused (made when one is)
        self._unrecorded: dict[SessionKey, int] | None = None
        # live parent -> the (call, ordinal) of its tool calls that announced live children
        # (made when one is claimed)
        self._claimed: dict[SessionKey, set[tuple[int, int]]] | None = None
        # live key -> its first request's messages (a shallow copy: the caller may add to
        # its list); the first message is read from them only for an error message.
        self._first: dict[SessionKey, object] = {}
        self._models: list[str] | None = None
        # the binding and exhausted errors made for calls, in order (see take_raised)
        self._raised: list[ReplayBindingError | ReplayExhaustedError] = []

    # --- what the endpoint asks ---------------------------------------------------------

    def bind(
        self,
        request: Mapping[str, object],
        *,
        session_id: str | None,
        parent_session_id: str | None = None,
        seed_length: int | None = None,
        by_content: bool = False,
    ) -> ReplayBinding:
        """Bind a live session now, without a call (a bound session stays as it is).

        Args:
            request: The session's first request (its messages choose the recording).
            session_id: The live session.
            parent_session_id: The live session that started it, if known.
            seed_length: Events a fork child inherited (``0``: none; ``None``: unknown).
            by_content: Bind by the first user message once the primary is bound.

        Returns:
            The session's binding.

        Raises:
            ReplayBindingError: No recorded session is left for it, or none matches its
                first user message.
        """
        with self.lock:
            bound = self._bound.get(session_id)
            if bound is None:
                found = self._bind(session_id, parent_session_id, request, seed_length, by_content)
                if isinstance(found, str):
                    raise self._binding_error(session_id, self._refused(session_id), found)
                bound = found
            return _binding(bound)

    def recorded_models(self) -> list[str]:
        """The model names the recorded sessions used, sorted (read once, then kept).

        Read from the logs on disk: each ``request/header``'s ``config.model`` and each
        ``assistant/message``'s ``source.model`` (``"unknown"`` left out). A session
        stored in SQLite, or a log that no longer reads, adds none.
        """
        with self.lock:
            if self._models is None:
                self._models = sorted(
                    {name for script in self.scripts for name in _models_of(script)}
                )
            return list(self._models)

    def may_wait(self, session_id: str | None) -> bool:
        """Whether the next call of a live session may wait before its chunks end.

        True with pacing, for a ``hang`` entry, and for a session that is not bound yet
        (nothing is known); the HTTP endpoint answers calls that cannot wait in one piece.
        """
        if self._paced:
            return True
        with self.lock:
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
        with self.lock:
            bound = self._bound.get(session_id)
            if bound is None or not bound.script.parent_session:
                return None
            for key, other in self._bound.items():
                if other.script.recorded_id == bound.script.parent_session:
                    return key
        return None

    # --- what the replay model asks -----------------------------------------------------

    def admit(
        self,
        request: Mapping[str, object],
        key: SessionKey,
        parent: SessionKey,
        flag: threading.Event | asyncio.Event | None,
        seed_length: int | None,
        by_content: bool,
        gate: OrderGate | None,
    ) -> ReplayCall:
        """Admit one call of a live session: bind it if new, take its next entry.

        The one place where the cursor of a bound session moves. A call that cannot be
        served carries the error it raises when read
        ([`ReplayBindingError`][pytest_dsh_replay.ReplayBindingError],
        [`ReplayExhaustedError`][pytest_dsh_replay.ReplayExhaustedError]).
        """
        with self.lock:
            bound = self._bound.get(key)
            if bound is None:
                found = self._bind(key, parent, request, seed_length, by_content)
                if isinstance(found, str):
                    error = self._binding_error(key, self._refused(key), found)
                    return ReplayCall(error=error)
                bound = found
            index = bound.cursor
            entries = bound.entries
            if index < len(entries):
                # Asked when the call is made, the cursor not moved yet: a large log's
                # payload that breaks a rule fails its own call
                # (docs/format.md#raw-payloads), and that call can be made again.
                entry = entries[index]
                placeholders = (
                    entry.has_placeholders  # the common kind without a call
                    if entry.__class__ is ChunksEntry
                    else entry_has_placeholders(entry)
                )
            bound.cursor = index + 1
        if index >= len(entries):
            return ReplayCall(error=self._exhausted(bound, index + 1))
        order = None
        if gate is not None:
            order = (bound.index, index)
            gate.arrived(*order)
        # bound, number, entry, placeholders, request, flag, error, order
        return ReplayCall(bound, index + 1, entry, placeholders, request, flag, None, order)

    def upcoming(
        self,
        request: Mapping[str, object],
        key: SessionKey,
        parent: SessionKey,
        seed_length: int | None,
        by_content: bool,
    ) -> ReplayCall | None:
        """The call a live session's next call would replay, its cursor left where it is.

        The session binds first if it is new (as its call would bind it). ``None``: no
        recorded session is left for it, or it made every call recorded.
        """
        with self.lock:
            bound = self._bound.get(key)
            if bound is None:
                found = self._bind(key, parent, request, seed_length, by_content)
                if isinstance(found, str):
                    return None
                bound = found
            index = bound.cursor
        if index >= len(bound.entries):
            return None
        entry = bound.entries[index]
        return ReplayCall(bound, index + 1, entry, entry_has_placeholders(entry), request)

    def snapshot(self) -> dict[str | None, ReplayBinding]:
        """Live session id -> its `ReplayBinding`, in the order they bound."""
        with self.lock:
            return {key: _binding(b) for key, b in self._bound.items()}

    def cancel(self, key: SessionKey) -> None:
        """Cancel every unfinished call a live session made so far (see ``ReplayModel.cancel``)."""
        with self.lock:
            bound = self._bound.get(key)
            if bound is None:
                return
            waiters = bound.cancel()
        wake_all(waiters)

    def unconsumed(self) -> list[str]:
        """One line per replayed session with unused calls and per session never replayed."""
        problems: list[str] = []
        with self.lock:
            for key, b in self._bound.items():
                if b.cursor < len(b.entries):
                    problems.append(
                        f"{self._who(key)} made {b.cursor} of the {len(b.entries)} call(s) "
                        f"recorded in {b.script.file} (recorded session {b.script.recorded_id!r})"
                    )
            for i, script in enumerate(self.scripts):
                if not self.taken[i] and script.entries:
                    problems.append(
                        f"recorded session {script.recorded_id!r} ({script.file}, "
                        f"{len(script.entries)} call(s)) was never replayed: no session "
                        "of the code under test started as it did"
                    )
        return problems

    def __len__(self) -> int:
        return len(self._bound)

    # --- binding ------------------------------------------------------------------------

    def _bind(
        self,
        key: SessionKey,
        parent: SessionKey,
        request: Mapping[str, object],
        seed_length: int | None,
        by_content: bool,
    ) -> BoundSession | str:
        """Bind ``key`` (the lock is held); return the binding or why there is none."""
        messages = request.get("messages")
        self._first[key] = list(messages) if messages.__class__ is list else messages
        if parent is None and not by_content:  # first-call order: the next free script
            index = self.next_free()
            if index is None:
                return _every_bound(self.plan.size)
            return self._take(key, index)
        live_parent = self._bound.get(parent)
        served = None
        if live_parent is not None:
            claimed = self._claimed
            served = Served(
                live_parent.index,
                live_parent.cursor,
                frozenset(() if claimed is None else claimed.get(parent, ())),
            )
        found = self.choose(
            request,
            parent=parent,
            parent_script=None if live_parent is None else live_parent.script,
            seed_length=seed_length,
            by_content=by_content,
            served=served,
            live_id=key,
        )
        if isinstance(found, str):
            return found
        if found.announced is not None:
            claimed = self._claimed
            if claimed is None:
                claimed = self._claimed = {}
            claimed.setdefault(parent, set()).add(found.announced)
        return self._take(key, found.index)

    def _take(self, key: SessionKey, index: int) -> BoundSession:
        bound = BoundSession(key, index, self.take(index), self.lock, self.redact)
        self._bound[key] = bound
        return bound

    def _refused(self, key: SessionKey) -> int:
        """Count one more refused call of an unrecorded session; its number."""
        refused = self._unrecorded
        if refused is None:
            refused = self._unrecorded = {}
        number = refused.get(key, 0) + 1
        refused[key] = number
        return number

    # --- messages -----------------------------------------------------------------------

    def rerecord_hint(self) -> str:
        """How the errors say to re-record: ``re-record: <command>``, else `RERECORD`."""
        rerecord = self._rerecord
        if rerecord is None:
            return RERECORD
        if not isinstance(rerecord, str):
            rerecord = self._rerecord = rerecord()  # computed once, for the first error
        return f"re-record: {rerecord}"

    def grown_hint(self) -> str:
        """`rerecord_hint` for a run that made more than was recorded, with the append command."""
        append = self._append
        if append is None:
            return self.rerecord_hint()
        if not isinstance(append, str):
            append = self._append = append()  # computed once, for the first error
        if not append:  # none to give (the test that records it is not in the run)
            return self.rerecord_hint()
        return (
            f"{self.rerecord_hint()}, or keep the recorded calls and append the new ones: {append}"
        )

    def _who(self, key: SessionKey) -> str:
        who = describe_session(key)
        first = self.first_message(self._first.get(key))
        return who if first is None else f"{who} (first user message {trim(first)})"

    def _binding_error(self, key: SessionKey, number: int, reason: str) -> ReplayBindingError:
        bound = ", ".join(
            f"{b.script.file} -> {'anonymous' if k is None else repr(k)}"
            for k, b in list(self._bound.items())[:8]
        )
        more = " ..." if len(self._bound) > 8 else ""
        if "ends without a user message" in reason:
            cause = (
                "Content alone could not tell this request's session: send the "
                "x-dsh-session-id header (docs/wires.md#calling-session)"
            )
        elif "matches no unbound recorded child" in reason:
            # A child whose log was lost is no changed task: say so first, even while
            # other recorded children are still unbound.
            cause = _missing_child_files(self.scenario) or (
                "The child's first message differs from every unbound recorded child's (its "
                "task changed, or it is a session the recording does not have)"
            )
        else:
            missing = _missing_child_files(self.scenario)
            cause = missing or "The code under test started more sessions than were recorded"
            if not missing:
                return self._binding_failure(key, number, reason, bound, more, cause, grown=True)
        return self._binding_failure(key, number, reason, bound, more, cause)

    def _binding_failure(
        self,
        key: SessionKey,
        number: int,
        reason: str,
        bound: str,
        more: str,
        cause: str,
        *,
        grown: bool = False,
    ) -> ReplayBindingError:
        hint = self.grown_hint() if grown else self.rerecord_hint()
        error = ReplayBindingError(
            f"{self._who(key)} made model call #{number}, but no "
            "recorded session is left for it: "
            f"{reason} (scenario {self.scenario.path}; bound: {bound or 'none'}{more}). "
            f"{cause}; {hint}"
        )
        self._raised.append(error)
        return error

    def _exhausted(self, bound: BoundSession, number: int) -> ReplayExhaustedError:
        script = bound.script
        length = len(bound.entries)
        error = ReplayExhaustedError(
            f"{self._who(bound.key)} asked for call #{number}, "
            f"but its recording ({script.file}, "
            f"recorded session {script.recorded_id!r}) has {length} call(s); the code under "
            f"test made more model calls than were recorded; {self.grown_hint()}",
            session_id=bound.key,
            recorded_id=script.recorded_id,
            file=script.file,
            call_number=number,
            recorded=length,
        )
        self._raised.append(error)
        return error

    def take_raised(self) -> list[ReplayBindingError | ReplayExhaustedError]:
        """The binding and exhausted errors made for calls since the last take, in order.

        What the fixture reports first at the end of a test when the code under test
        did not let such an error reach it (it swallowed it, or met it in another
        thread): [docs/scenarios.md#binding](../scenarios.md#binding).
        """
        with self.lock:
            raised, self._raised = self._raised, []
        return raised


def missing_children(scenario: Scenario, known: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The children a scenario's logs name that it has no log of: ``(naming file, id)``.

    A parent's log names each child the dsh runtime started (``subagent/catalog``
    ``childId``); a named child no script replays lost its file (deleted, never
    committed). ``known``: session ids found elsewhere (other directories of a runtime's
    sessions root), not missing.
    """
    recorded = {script.recorded_id for script in scenario.scripts} | set(known)
    missing: list[tuple[str, str]] = []
    for script in scenario.scripts:
        for child in _named_children(script):
            if child not in recorded and child not in (m[1] for m in missing):
                missing.append((script.file, child))
    return missing


def _missing_child_files(scenario: Scenario) -> str | None:
    """Which child logs an incomplete recording lacks, as a cause phrase; ``None``: none.

    See `missing_children`. In a scenario directory, the next child numbers are the files
    missing.
    """
    missing = missing_children(scenario)
    if not missing:
        return None
    children = sum(1 for script in scenario.scripts if not script.primary)
    named = "; ".join(
        f"{file} names child session {child!r}"
        + (f" (its log would be session.{children + k}.jsonl)" if scenario.path.is_dir() else "")
        for k, (file, child) in enumerate(missing, start=1)
    )
    return (
        f"The recording is incomplete: {named}, but the scenario has no log of it; "
        "restore the missing file (from version control) or re-record the scenario"
    )


def _named_children(script: SessionScript) -> list[str]:
    """The child session ids a recorded log names (``subagent/catalog`` events)."""
    from .._errors import DshReplayError
    from .._format.jsonl import read_session_log

    path = script.path
    if path is None or "#" in script.file:
        return []
    try:
        events = read_session_log(path).events
    except (OSError, DshReplayError):
        return []
    named: list[str] = []
    for event in events:
        data = event.get("data")
        if event.get("type") == "subagent/catalog" and isinstance(data, Mapping):
            child = data.get("childId")
            if isinstance(child, str) and child and child not in named:
                named.append(child)
    return named


def _models_of(script: SessionScript) -> set[str]:
    """The model names one recorded session's log names (see ``recorded_models``)."""
    from .._errors import DshReplayError
    from .._format.jsonl import read_session_log

    path = script.path
    if path is None or "#" in script.file:
        return set()
    try:
        events = read_session_log(path).events
    except (OSError, DshReplayError):
        return set()
    names: set[str] = set()
    for event in events:
        data = event.get("data")
        if not isinstance(data, Mapping):
            continue
        if event.get("type") == "request/header":
            header = data.get("header")
            config = header.get("config") if isinstance(header, Mapping) else None
            found = config.get("model") if isinstance(config, Mapping) else None
        elif event.get("type") == "assistant/message":
            message = data.get("message")
            source = message.get("source") if isinstance(message, Mapping) else None
            found = source.get("model") if isinstance(source, Mapping) else None
        else:
            continue
        if isinstance(found, str) and found and found != "unknown":
            names.add(found)
    return names
