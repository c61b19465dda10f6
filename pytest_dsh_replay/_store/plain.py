"""What the log rules may know of a store's session without importing the store.

A store's [`Session`][pytest_dsh_replay.Session] holds plain JSON values (the store copies what it
is given as JSON), so its events are copied by a serializer's round trip; the log rules
([`completed_turn_prefix`][pytest_dsh_replay.completed_turn_prefix]) ask this marker instead
of the session module, which imports them.
"""

from __future__ import annotations

__all__ = ["PlainJSONEvents"]


class PlainJSONEvents:
    """Marks a session whose events are plain JSON values (a store's session)."""

    __slots__ = ()
