"""Typed shapes of the dsh session format (SPEC 1.3, 1.4, 2, 3).

Events and stream chunks are kept as the plain JSON objects they are on the wire
(``dict[str, Any]``): the replay parser is deliberately lenient (SPEC 13.18) and passes
unknown fields through untouched, so a closed ``TypedDict`` would misdescribe them. The
aliases below name the shapes; the header, which every consumer reads field by field, is
a real dataclass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

__all__ = [
    "CHUNK_TYPES",
    "MAX_SAFE_INTEGER",
    "Event",
    "JSONObject",
    "JSONValue",
    "SessionHeader",
    "StreamChunk",
    "as_safe_integer",
    "is_safe_integer",
]

JSONValue: TypeAlias = Any
"""Any value JSON can hold: ``None``, ``bool``, ``int``, ``float``, ``str``, list, dict."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object with string keys."""

Event: TypeAlias = dict[str, Any]
"""One session event (SPEC 1.4): ``{"type", "seq", "time", "data", ...}``.

``type`` is a string such as ``"assistant/chunk"``; ``seq`` is its 0-based position in
the decoded log; ``time`` is Unix milliseconds; ``data`` is the payload. Optional keys:
``sourceEventSeqs``, ``surfaceOp``, ``ignorable``.
"""

StreamChunk: TypeAlias = dict[str, Any]
"""One model stream chunk (SPEC 3): ``{"type": <one of CHUNK_TYPES>, ...}``.

For example ``{"type": "text-delta", "index": 0, "text": "hi"}`` or
``{"type": "finish", "reason": {"kind": "stop"}}``.
"""

CHUNK_TYPES: Final[frozenset[str]] = frozenset(
    {
        "block-start",
        "text-delta",
        "reasoning-delta",
        "tool-call-delta",
        "block-end",
        "usage",
        "finish",
    }
)
"""The seven ``StreamChunk`` types (SPEC 3)."""

MAX_SAFE_INTEGER: Final[int] = 2**53 - 1
"""The largest integer a JavaScript number holds exactly (``Number.MAX_SAFE_INTEGER``)."""


def is_safe_integer(value: object) -> bool:
    """Tell whether ``value`` is a JavaScript safe integer (SPEC 4.2).

    Args:
        value: Any parsed JSON value.

    Returns:
        ``True`` for an ``int`` (not ``bool``) or an integral ``float`` with
        ``|value| <= 2**53 - 1``; ``False`` otherwise. JSON ``3.0`` is an integer in
        JavaScript, so it counts.
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return False


def as_safe_integer(value: object) -> int | None:
    """Return ``value`` as an ``int`` when :func:`is_safe_integer` holds, else ``None``."""
    if not is_safe_integer(value):
        return None
    assert isinstance(value, int | float)
    return int(value)


_KNOWN_HEADER_KEYS: Final[tuple[str, ...]] = (
    "type",
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
    "owner",
)


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The first line of a session log (SPEC 1.3), read leniently as replay reads it.

    Replay needs only ``id``, ``created_at`` and ``seed_length``; a missing or mistyped
    value defaults to ``""``, ``0`` and ``0`` (SPEC 1.3, R ``parseSessionHeader``). The
    other fields are ``None`` when absent or mistyped. Numbers count only when they are
    safe integers (``|n| <= 2**53 - 1``, integral floats included): a ``createdAt`` of
    ``1e300`` or ``1.5`` is mistyped here.

    Attributes:
        id: The session id (``""`` when absent or not a string).
        created_at: Creation time in Unix milliseconds (``0`` when absent or not a number).
        seed_length: Number of leading events inherited from a fork parent (``0`` when
            absent or not a number). On the wire: ``seedLength``.
        parent_session: Id of the session this one was forked or spawned from.
        cwd: The session's working directory.
        version: The log format version (``0`` for every log this package knows).
        origin: ``"subagent"`` for subagent children.
        delegation_depth: Recursion depth of delegation (child = parent + 1).
        agent_preset: Id of the agent preset the session was composed from.
        owner: Identity partition key.
        extra: Every other header key, as found (``type`` excluded).
        raw: The header object exactly as parsed, ``{}`` when it was not an object.
    """

    id: str = ""
    created_at: int = 0
    seed_length: int = 0
    parent_session: str | None = None
    cwd: str | None = None
    version: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None
    agent_preset: str | None = None
    owner: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_json(cls, value: object) -> SessionHeader:
        """Build a header from a parsed header line, leniently (SPEC 1.3).

        Args:
            value: The parsed first line. Anything that is not an object gives the
                all-defaults header.

        Returns:
            The header; mistyped fields take their defaults.
        """
        if not isinstance(value, dict):
            return cls()

        def text(key: str) -> str | None:
            v = value.get(key)
            return v if isinstance(v, str) else None

        def number(key: str) -> int | None:
            return as_safe_integer(value.get(key))

        return cls(
            id=text("id") or "",
            created_at=number("createdAt") or 0,
            seed_length=number("seedLength") or 0,
            parent_session=text("parentSession"),
            cwd=text("cwd"),
            version=number("version"),
            origin=text("origin"),
            delegation_depth=number("delegationDepth"),
            agent_preset=text("agentPreset"),
            owner=text("owner"),
            extra={k: v for k, v in value.items() if k not in _KNOWN_HEADER_KEYS},
            raw=value,
        )

    def to_json(self) -> JSONObject:
        """Return the header line object in the reference field order (SPEC 1.3).

        Order: ``type, version, id, createdAt, cwd?, parentSession?, seedLength?,
        origin?, delegationDepth, agentPreset?, owner?``, then ``extra`` keys. Absent
        optional fields are omitted; ``seedLength`` is written only when it is not 0
        unless the parsed header carried it; ``delegationDepth`` defaults to 0 as the
        JSONL writer does.
        """
        out: JSONObject = {
            "type": "session",
            "version": 0 if self.version is None else self.version,
            "id": self.id,
            "createdAt": self.created_at,
        }
        if self.cwd is not None:
            out["cwd"] = self.cwd
        if self.parent_session is not None:
            out["parentSession"] = self.parent_session
        if self.seed_length or "seedLength" in self.raw:
            out["seedLength"] = self.seed_length
        if self.origin is not None:
            out["origin"] = self.origin
        out["delegationDepth"] = 0 if self.delegation_depth is None else self.delegation_depth
        if self.agent_preset is not None:
            out["agentPreset"] = self.agent_preset
        if self.owner is not None:
            out["owner"] = self.owner
        out.update(self.extra)
        return out
