"""Which recorded session a new live session replays: the replay model's one binder.

:class:`Binder` holds which recorded scripts are taken and chooses the script of a live
session at its first call; :class:`~pytest_dsh_replay._replay.model.ReplayModel` (and through
it the HTTP endpoint) binds only through it. The rules:

- A call without ``parent_session_id`` (and without ``by_content``) takes the next
  unbound script in scenario order: first-call order, the primary first.
- A call with ``parent_session_id``, or any new conversation found by the endpoint's
  content routing (``by_content``), takes the primary when it is unbound and the parent
  is not a bound live session; otherwise the unbound recorded child whose first own user
  message the request opens with (see :mod:`pytest_dsh_replay._replay.matching`), among the
  recorded children of the session the live parent replays (all children when that is
  unknown). Several matches: the one of the same kind (fork or not) first, then arrival
  order. No match: the reason names the live message and every candidate's; a child
  recorded without any user message, or a request without one, takes the first free
  candidate (there is nothing to compare).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._scripts.scenario import SessionScript
from .matching import FirstMessage, opening_texts, seed_messages, shared_start, trim

__all__ = ["Binder"]


def _all_bound(files: list[str]) -> str:
    """``one recorded child, a, is already bound``; ``2 recorded children, a and b, ...``."""
    if len(files) == 1:
        return f"one recorded child, {files[0]}, is already bound"
    listed = ", ".join(files[:-1]) + f" and {files[-1]}"
    return f"{len(files)} recorded children, {listed}, are all already bound"


class Binder:
    """The bookkeeping and choice of bindings over one scenario's scripts.

    Not thread-safe by itself: the replay model calls it under its lock.

    Args:
        scripts: The scenario's scripts, primary first.
    """

    def __init__(self, scripts: Sequence[SessionScript]):
        self.scripts = tuple(scripts)
        self.taken = [False] * len(self.scripts)
        self._next = 0  # no script before this index is unbound
        self._openers: list[FirstMessage | None] | None = None  # compiled on first use
        self._children: dict[str, list[int]] = {}
        for i, script in enumerate(self.scripts):
            if not script.primary and script.parent_session:
                self._children.setdefault(script.parent_session, []).append(i)

    @staticmethod
    def first_message(messages: object) -> str | None:
        """The live request's opening user text, as messages quote it."""
        openings = opening_texts(messages)
        return openings[-1] if openings else None

    def choose(
        self,
        messages: object,
        *,
        parent: str | None,
        parent_script: SessionScript | None,
        seed_length: int | None,
        by_content: bool,
    ) -> int | str:
        """The index of the script a new live session takes, or why there is none.

        Args:
            messages: The live session's first request's messages.
            parent: The live parent's id, when the call names one.
            parent_script: The script that live parent replays, when it is bound.
            seed_length: Events a fork child inherited (``0``: none; ``None``: judged from
                the request).
            by_content: A new conversation found by content (no parent needed to match).

        Returns:
            The chosen index (call :meth:`take` with it), or the reason as a phrase.
        """
        if parent is None and not by_content:
            while self._next < len(self.scripts) and self.taken[self._next]:
                self._next += 1
            if self._next >= len(self.scripts):
                return (
                    f"the scenario recorded {len(self.scripts)} session(s) and every one is "
                    "already bound"
                )
            return self._next
        if parent_script is None and not self.taken[0]:
            return 0  # a new conversation: the primary first
        where = "in the scenario"
        owner = "the scenario's"
        kids: list[int] | None = None
        if parent_script is not None:
            recorded = parent_script.recorded_id
            kids = self._children.get(recorded) if recorded else None
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
            kids = [i for i, script in enumerate(self.scripts) if not script.primary]
            if not kids:
                return "the scenario recorded no child session, and its primary is bound"
        free = [i for i in kids if not self.taken[i]]
        if not free:
            return f"{owner} {_all_bound([self.scripts[i].file for i in kids])}"
        seeded = bool(seed_messages(messages)) if seed_length is None else seed_length > 0
        return self._match(free, opening_texts(messages), seeded, where)

    def take(self, index: int) -> SessionScript:
        """Mark a script bound; return it."""
        self.taken[index] = True
        return self.scripts[index]

    def _opener(self, index: int) -> FirstMessage | None:
        if self._openers is None:
            ids = [s.recorded_id for s in self.scripts if s.recorded_id]
            paths = {s.header.cwd for s in self.scripts if s.header.cwd} | {"{{cwd}}"}
            self._openers = [
                None if s.first_user_text is None else FirstMessage(s.first_user_text, ids, paths)
                for s in self.scripts
            ]
        return self._openers[index]

    def _nearest(self, free: list[int], live: str) -> str | None:
        """The unbound recorded first message that shares the longest start with ``live``."""
        texts = [t for t in (self.scripts[i].first_user_text for i in free) if t is not None]
        return max(texts, key=lambda t: shared_start(t, live), default=None)

    def _match(self, free: list[int], openings: list[str], seeded: bool, where: str) -> int | str:
        """The free recorded child whose first user message the request opens with."""
        matching = []
        for i in free:
            opener = self._opener(i)
            if opener is not None and opener.matches(openings):
                matching.append(i)
        if matching:
            same = [i for i in matching if (self.scripts[i].seed_length > 0) == seeded]
            return (same or matching)[0]
        unknown = [i for i in free if self.scripts[i].first_user_text is None]
        if unknown or not openings:  # nothing to compare: recorded (or live) has no message
            return (unknown or free)[0]
        live = openings[-1]
        listed = "; ".join(
            f"{self.scripts[i].file}: {trim(self.scripts[i].first_user_text, near=live)}"
            for i in free
        )
        return (
            f"its first user message {trim(live, near=self._nearest(free, live))} matches no "
            f"unbound recorded child {where} (unbound: {listed})"
        )
