"""The session log format versions, one table entry each.

See [docs/format.md#formats-1-3](../format.md#formats-1-3).

Every layer that reads or writes a log asks the log's `FormatSpec` what its
format holds (``spec.seeded``, ``spec.streams_in_message``, ``spec.event_types``, ...)
and never compares version numbers: this table is the one place that knows which
version does what, so a new format version is one entry in `FORMATS`.
"""

from __future__ import annotations

from typing import Final

from .._errors import SessionLogError
from .vocabulary import EVENT_TYPES_V0, EVENT_TYPES_V4

__all__ = [
    "ALL_EVENT_TYPES",
    "FORMATS",
    "FormatSpec",
    "format_spec",
    "known_spec",
    "lenient_spec",
    "newest_format",
    "unknown_format",
]


class FormatSpec:
    """What one session log format version holds ([docs/format.md](../format.md)).

    Attributes:
        version: The version number a header declares (``"version"``).
        seeded: The header says ``isSeeded`` and a fork child's inherited prefix ends at
            its last ``session/end-seed`` event with ``inherited: true``; otherwise the
            header counts the prefix in ``seedLength``.
        streams_in_message: A model call's chunks are the ``data.stream`` records of its
            ``assistant/message`` or ``assistant/attempt``; otherwise they are
            ``assistant/chunk`` events, runs of deltas packed into chunk rows.
        whole_events: Every event is written whole, with its ``seq`` and ``time``: the
            log has no packed rows and no committed (projected) form.
        event_types: The event types a log may hold without ``"ignorable": true``.
        header_keys: The fields a header may have, checked exactly when the header is
            read for replay; ``None`` for a format whose header is read leniently (only
            a present ``seedLength`` must be a count).
        origins: The values a strictly read header's ``origin`` may hold.
        stored: The session store writes and reopens logs of this format
            ([docs/format.md#jsonl-store](../format.md#jsonl-store)).
    """

    __slots__ = (
        "event_types",
        "header_keys",
        "origins",
        "seeded",
        "stored",
        "streams_in_message",
        "version",
        "whole_events",
    )

    def __init__(
        self,
        version: int,
        *,
        seeded: bool,
        streams_in_message: bool,
        whole_events: bool,
        event_types: frozenset[str],
        header_keys: frozenset[str] | None = None,
        origins: frozenset[str] = frozenset({"subagent"}),
        stored: bool = False,
    ):
        self.version = version
        self.seeded = seeded
        self.streams_in_message = streams_in_message
        self.whole_events = whole_events
        self.event_types = event_types
        self.header_keys = header_keys
        self.origins = origins
        self.stored = stored

    def replace(self, **changes: object) -> FormatSpec:
        """A copy with ``changes`` (field name -> value): the next version's spec."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        return FormatSpec(**{**fields, **changes})

    def __repr__(self) -> str:
        return f"FormatSpec(version={self.version}, seeded={self.seeded}, ...)"


_V4_HEADER_KEYS: Final = frozenset(
    {
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "isSeeded",
        "origin",
        "delegationDepth",
        "agentPreset",
    }
)

_V0: Final = FormatSpec(
    0,
    seeded=False,
    streams_in_message=False,
    whole_events=False,
    event_types=EVENT_TYPES_V0,
    stored=True,
)
_V4: Final = FormatSpec(
    4,
    seeded=True,
    streams_in_message=True,
    whole_events=True,
    event_types=EVENT_TYPES_V4,
    header_keys=_V4_HEADER_KEYS,
)

FORMATS: dict[int, FormatSpec] = {
    0: _V0,
    1: _V0.replace(version=1, stored=False),
    2: _V4.replace(version=2),
    3: _V4.replace(version=3),
    4: _V4,
    5: _V4.replace(version=5, origins=_V4.origins | {"automation"}),
}
"""Every format version this package reads, by number.

See [docs/format.md#formats-1-3](../format.md#formats-1-3).

Formats 0 and 1 are read like format 0 (the harness's logs: ``seedLength``, chunk
events and packed rows), formats 2 to 5 like format 4 (the dsh runtime's logs).
"""

ALL_EVENT_TYPES: Final[frozenset[str]] = EVENT_TYPES_V0 | EVENT_TYPES_V4
"""The event types of any format: what events of unknown origin may hold."""


def newest_format() -> int:
    """The newest format version this build reads."""
    return max(FORMATS)


def unknown_format(version: int) -> str:
    """The message for a log of a format version the table does not hold.

    Only a version above the newest is a newer harness's (the upgrade hint); one below
    the oldest no harness writes: the header is damaged.
    """
    known = f"v{min(FORMATS)} to v{newest_format()}"
    if version < min(FORMATS):
        return (
            f"session log format v{version} is no format version ({known}): the header is damaged"
        )
    return (
        f"session log format v{version} is not one this build reads ({known}); "
        "a newer harness wrote it: upgrade pytest-dsh-replay"
    )


def known_spec(version: int) -> FormatSpec | None:
    """The spec of format ``version``; ``None`` when the table has no such version."""
    return FORMATS.get(version)


def format_spec(version: int) -> FormatSpec:
    """The spec of format ``version``.

    Raises:
        SessionLogError: The table has no such version (callers add file and line).
    """
    spec = FORMATS.get(version)
    if spec is None:
        raise SessionLogError(unknown_format(version))
    return spec


def lenient_spec(version: int | None) -> FormatSpec:
    """The spec a header of ``version`` is read leniently as.

    A known version is its own; an absent one reads as the oldest format, a version
    beyond the newest as the newest and one below the oldest as the oldest (what a
    lenient reader makes of a header it does not validate).
    """
    if version is None:
        return FORMATS[min(FORMATS)]
    spec = FORMATS.get(version)
    if spec is not None:
        return spec
    return FORMATS[max(FORMATS) if version > max(FORMATS) else min(FORMATS)]
