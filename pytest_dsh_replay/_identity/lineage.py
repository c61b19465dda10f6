"""A new child session's lineage: spawn or fork, and the seed a fork inherits.

One rule, for recording and replay alike
([docs/scenarios.md#fork-or-spawn](../scenarios.md#fork-or-spawn)): a child whose creator
did not say (the code under test created no session for it, and the dsh runtime sent no
``seedLength``) is a **fork** when its first request starts with the conversation its
parent's completed turns hold, and then inherits those turns (the parent's log up to its
last ``turn/end``, as the harness seeds a fork); otherwise it is a **spawn** and inherits
nothing. A child started while its parent's first turn runs is therefore a spawn whatever
its request repeats: the harness seeds only completed turns.

Recording writes the lineage into the child's header (``parentSession``,
``seedLength``); replay decides it for the live child by the same function over the
live parent's log, which the replay logs as the recording did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._format.events import Event
from .._wire.request import Item
from .surface import surface_of

__all__ = ["Lineage", "completed_turns_end", "fork_seed_length"]


@dataclass(frozen=True, slots=True)
class Lineage:
    """Where a session comes from.

    Attributes:
        parent: The live parent's id (``None``: a top-level session).
        seed_length: How many of the parent's events it inherits (``0``: none, a spawn).
    """

    parent: str | None = None
    seed_length: int = 0

    @property
    def fork(self) -> bool:
        """Whether it inherits part of its parent's log."""
        return self.seed_length > 0


def completed_turns_end(events: Sequence[Event]) -> int:
    """How many leading events the completed turns hold (up to the last ``turn/end``).

    Returns:
        The index after the last ``turn/end``; ``0`` when no turn has completed.
    """
    for i in range(len(events) - 1, -1, -1):
        if events[i].get("type") == "turn/end":
            return i + 1
    return 0


def fork_seed_length(parent_events: Sequence[Event], items: Sequence[Item]) -> int:
    """How many of its parent's events a new child inherits (``0``: it is a spawn).

    Args:
        parent_events: The live parent's logged events.
        items: The child's first request, as conversation items.

    Returns:
        The length of the parent's completed-turn prefix when the request starts with
        the conversation that prefix holds (every item equal by key, in order), else 0.
    """
    end = completed_turns_end(parent_events)
    if not end:
        return 0
    inherited = surface_of(parent_events[:end])
    if not inherited or len(items) < len(inherited):
        return 0
    if any(a.key != b.key for a, b in zip(inherited, items, strict=False)):
        return 0
    return end
