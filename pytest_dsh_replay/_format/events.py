"""Typed shapes of the dsh session format ([docs/format.md](../format.md)).

Events and stream chunks are kept as the plain JSON objects they are on the wire
(``dict`` with string keys): the replay parser is deliberately lenient
([docs/format.md#lenient-reading](../format.md#lenient-reading)) and passes unknown fields
through untouched, so a closed ``TypedDict`` would misdescribe them. The aliases below name
the shapes; the header, which every consumer reads field by field, is a real dataclass.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple, Protocol, TypeAlias

from .formats import FORMATS, FormatSpec, known_spec, lenient_spec, newest_format, unknown_format
from .json_values import (
    as_safe_integer,
    describe_json,
    holds_lone_surrogate,
    is_count,
    is_safe_integer,
    js_json,
)

__all__ = [
    "CHUNK_TYPES",
    "END_SEED",
    "NEWEST_FORMAT",
    "SEEDED_FORMAT",
    "ChunkRun",
    "Event",
    "HeaderMode",
    "JSONObject",
    "JSONValue",
    "SessionHeader",
    "SessionLike",
    "SessionLog",
    "StreamChunk",
    "header_problem",
    "header_version",
]

JSONValue: TypeAlias = Any
"""A value JSON can hold: ``None``, ``bool``, ``int``, ``float``, ``str``, list, dict."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object with string keys."""

Event: TypeAlias = dict[str, Any]
"""One session event: ``{"type", "seq", "time", "data", ...}``.

See [docs/format.md#envelopes](../format.md#envelopes).

``type`` is a string such as ``"assistant/chunk"``; ``seq`` is its 0-based position in
the decoded log; ``time`` is Unix milliseconds; ``data`` is the payload. Optional keys:
``sourceEventSeqs``, ``surfaceOp``, ``ignorable``.
"""

StreamChunk: TypeAlias = dict[str, Any]
"""One model stream chunk: ``{"type": <one of CHUNK_TYPES>, ...}``.

See [docs/format.md#stream-chunks](../format.md#stream-chunks).

For example ``{"type": "text-delta", "index": 0, "text": "hi"}`` or
``{"type": "finish", "reason": {"kind": "stop"}}``.
"""

ChunkRun: TypeAlias = Any
"""A stored form of one or more consecutive stream chunks of one model call.

Either one chunk object (a ``dict``), or a run of deltas of one block as a list:
``[chunk_type, index, members]`` for ``text-delta`` / ``reasoning-delta`` runs (each
member is a chunk's ``text``), ``[chunk_type, index, members, id]`` and
``[chunk_type, index, members, id, name]`` for ``tool-call-delta`` runs (each member is a
chunk's ``argumentsDelta``; a named run puts ``name`` on every member chunk). Packed chunk
rows (formats 0 and 1) and embedded stream records (formats 2 to 5) both read into runs.
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
"""The seven ``StreamChunk`` types ([docs/format.md#stream-chunks](../format.md#stream-chunks))."""

END_SEED: Final = "session/end-seed"
"""The event that closes a seed: ``data: {}`` (a fork child's seed in formats 0 and 1, a
resume marker from format 2 on) or ``data: {"inherited": true}`` (formats 2 to 5: the end
of a fork child's inherited prefix)."""

_KNOWN_HEADER_KEYS: Final[frozenset[str]] = frozenset(
    {key for spec in FORMATS.values() for key in spec.header_keys or ()}
) | {"seedLength", "owner"}
"""Every header field of a format this package reads (``seedLength`` and ``owner``: formats
0 and 1, whose headers are read leniently)."""

SEEDED_FORMAT: Final[int] = min(v for v, spec in FORMATS.items() if spec.seeded)
"""The first log format version whose fork children mark their seed in the log.

Kept for messages and imports; readers ask the log's
`FormatSpec` (``spec.seeded``) instead.
"""

NEWEST_FORMAT: Final[int] = newest_format()
"""The newest session log format version this package reads (the runtime writes 4)."""

_STORE_HEADER_KEYS: Final = _KNOWN_HEADER_KEYS - {"isSeeded"}
_RETIRED_KEYS: Final = ("sandboxMode", "approvalPolicy")

HeaderMode: TypeAlias = Literal["lenient", "replay", "store"]
"""How strictly `header_problem` reads a header.

- ``"lenient"``: nothing is refused; mistyped fields take their defaults (how the
  dsh harness's replay parser reads a header).
- ``"replay"``: as lenient for a version 0/1 header, except that its ``type`` must be
  ``"session"`` and a ``seedLength`` that is present must be a non-negative integer;
  a version 2-5 header must follow that format's rules exactly; a newer (or negative)
  version is refused.
- ``"store"``: the session store's own rules for the version 0 logs it writes: every
  field typed as the harness writes it, no unknown field.
"""


def _shown(value: object) -> str:
    """A value as messages show it: strings JSON-quoted, the rest as Python writes them."""
    if isinstance(value, str):
        import json  # error messages only: not on the import path

        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def header_version(value: Mapping[str, object]) -> int:
    """The log format version a parsed header declares: ``0`` when absent or not a number."""
    version = as_safe_integer(value.get("version"))
    return 0 if version is None else version


def header_problem(value: object, mode: HeaderMode) -> str | None:
    """Check a parsed header line; the first rule it breaks, in words, or ``None``.

    The one header validator: every reader (replay, the session store's JSONL and SQLite
    backends, [`SessionStore.create`][pytest_dsh_replay.SessionStore.create]'s meta) checks
    headers here, at its own strictness (`HeaderMode`).

    Args:
        value: The parsed first line of a log (or a header built from stored fields).
        mode: ``"lenient"``, ``"replay"`` or ``"store"``.

    Returns:
        ``None`` when the header is acceptable; otherwise a sentence naming the field,
        what it holds and what was expected (callers add the file and line).
    """
    if not isinstance(value, dict):
        return (
            "the first line must be the session header, a JSON object like "
            f'{{"type":"session","id":...}}, got {describe_json(value)}'
        )
    if mode == "lenient":
        return None
    version = header_version(value)
    if mode == "replay":
        problem = _version_problem(value["version"]) if "version" in value else None
        if problem is not None:
            return problem
        spec = known_spec(version)
        if spec is None:
            return unknown_format(version)
        if spec.header_keys is not None:
            return _strict_header_problem(value, spec)
        if value.get("type") != "session":
            return _not_a_header(value)
        if "seedLength" in value and not is_count(value["seedLength"]):
            return (
                "header seedLength must be a non-negative integer (the number of events "
                f"inherited from the fork parent), got {value['seedLength']!r}"
            )
        return None
    return _store_problem(value, version)


def _not_a_header(value: dict[str, object]) -> str:
    """A first line without ``type: "session"``: a log that lost its header, or no log."""
    kind = value.get("type")
    held = (
        f"an event of type {kind!r}" if isinstance(kind, str) else "an object without a string type"
    )
    return (
        f'the first line must be the session header ({{"type":"session","id":...}}), but '
        f"it is {held}: the log lost its header line, or the file is not a session log"
    )


def _version_problem(value: object) -> str | None:
    """What is wrong with a header's ``version`` that is no safe integer; ``None``: nothing.

    A float JavaScript reads as a safe integer (``4.0``) is that integer; an integer
    beyond the safe range is a format no harness wrote (`unknown_format`); anything
    else is a damaged header.
    """
    if is_safe_integer(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return unknown_format(value)
    return (
        "header version must be an integer, the log format "
        f"(v{min(FORMATS)} to v{newest_format()}), got {js_json(value)}: the header is damaged"
    )


def _strict_header_problem(value: dict[str, object], spec: FormatSpec) -> str | None:
    """A strictly read header's rules (formats 2 to 5: what the dsh runtime writes and accepts)."""
    where = f"session log format v{spec.version} header"
    for key in _RETIRED_KEYS:
        if key in value:
            return f"{where}: session header uses retired policy baseline fields ({key})"
    keys = spec.header_keys or frozenset()
    for key in value:
        if key not in keys:
            hint = (
                " (a v0 field: from v2 on a fork child says isSeeded and ends its seed "
                "with an inherited session/end-seed event)"
                if key == "seedLength"
                else ""
            )
            return f"{where} has the unknown field {key!r}{hint}"
    if value.get("type") != "session":
        return f'{where}: type must be "session", got {value.get("type")!r}'
    if not isinstance(value.get("id"), str) or not value["id"]:
        return f"{where}: id must be a non-empty string, got {value.get('id')!r}"
    if not is_count(value.get("createdAt")):
        return (
            f"{where}: createdAt must be a non-negative integer (Unix ms), "
            f"got {value.get('createdAt')!r}"
        )
    if not isinstance(value.get("isSeeded"), bool):
        return f"{where}: isSeeded must be true or false, got {value.get('isSeeded')!r}"
    if not is_count(value.get("delegationDepth")):
        return (
            f"{where}: delegationDepth must be a non-negative integer, "
            f"got {value.get('delegationDepth')!r}"
        )
    for key in ("cwd", "parentSession", "agentPreset"):
        if key in value and not isinstance(value[key], str):
            return f"{where}: {key} must be a string, got {value[key]!r}"
    if "origin" in value and value["origin"] not in spec.origins:
        return f"{where}: origin must be {_one_of(spec.origins)}, got {value['origin']!r}"
    return None


def _one_of(names: frozenset[str]) -> str:
    """``"a"`` or ``"a" or "b"``: the values a field may hold, as messages show them."""
    return " or ".join(f'"{name}"' for name in sorted(names))


def _store_problem(value: dict[str, object], version: int) -> str | None:
    """The session store's rules for the version 0 logs it writes and reopens."""
    spec = known_spec(version)
    mistyped = "version" in value and not is_safe_integer(value["version"])
    if spec is None or not spec.stored or mistyped:
        return (
            f"session uses log format v{version}, but this store reads and writes only v0 "
            "(no upgrade or downgrade path exists)"
        )
    for rule in _STORE_RULES:
        problem = rule(value)
        if problem is not None:
            return problem
    return None


def _store_keys(value: dict[str, object]) -> str | None:
    for key in _RETIRED_KEYS:
        if key in value:
            return "session header uses retired policy baseline fields"
    unknown = sorted(k for k in value if k not in _STORE_HEADER_KEYS)
    if unknown:
        return f"unknown session header field(s) {', '.join(map(repr, unknown))}"
    return None


def _store_identity(value: dict[str, object]) -> str | None:
    if value.get("type") != "session":
        return f'type must be "session", got {value.get("type")!r}'
    if not isinstance(value.get("id"), str):
        return f"id must be a string, got {value.get('id')!r}"
    return None


def _store_counts(value: dict[str, object]) -> str | None:
    for key in ("createdAt", "delegationDepth"):
        if not is_count(value.get(key)):
            return f"{key} must be a non-negative safe integer, got {value.get(key)!r}"
    if "seedLength" in value and not is_count(value["seedLength"]):
        return f"seedLength must be a non-negative safe integer, got {value['seedLength']!r}"
    return None


def _store_cwd(value: dict[str, object]) -> str | None:
    if "cwd" not in value:
        return None
    cwd = value["cwd"]
    if not isinstance(cwd, str):
        return f"cwd must be a string, got {_shown(cwd)}"
    if not (cwd.startswith("/") or os.path.isabs(cwd)):
        return f"cwd must be an absolute path, got {_shown(cwd)}"
    return None


def _store_lineage(value: dict[str, object]) -> str | None:
    for key in ("parentSession", "agentPreset"):
        if key in value and not isinstance(value[key], str):
            return f"{key} must be a string, got {value[key]!r}"
    if "origin" in value and value["origin"] != "subagent":
        return f'origin must be "subagent", got {value["origin"]!r}'
    if "owner" in value and (not isinstance(value["owner"], str) or not value["owner"]):
        return f"owner must be a non-empty string, got {value['owner']!r}"
    return None


def _store_text(value: dict[str, object]) -> str | None:
    for key, text in value.items():
        if isinstance(text, str) and holds_lone_surrogate(text):
            return f"{key} holds a lone surrogate, which no file or database can hold"
    return None


_STORE_RULES: Final[tuple[Callable[[dict[str, object]], str | None], ...]] = (
    _store_keys,
    _store_text,
    _store_identity,
    _store_counts,
    _store_cwd,
    _store_lineage,
)
"""The store's header rules after the version, in the order they are checked."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The first line of a session log, read leniently as replay reads it.

    Replay needs only ``id``, ``created_at`` and the seed; a missing or mistyped value
    defaults to ``""``, ``0`` and ``0``. The other fields are ``None`` when absent or
    mistyped. Numbers count only when they are safe integers (``|n| <= 2**53 - 1``,
    integral floats included): a ``createdAt`` of ``1e300`` or ``1.5`` is mistyped here.
    `header_problem` is where headers are validated.

    Attributes:
        id: The session id (``""`` when absent or not a string).
        created_at: Creation time in Unix milliseconds (``0`` when absent or not a number).
        seed_length: Leading events inherited from a fork parent, as the header says
            (``seedLength`` on the wire, formats 0 and 1; ``0`` when absent or not a
            number). From format 2 on the header has no count: the log's last
            inherited ``session/end-seed`` event marks the end of the seed.
        seeded: Whether the header declares an inherited seed at all: a ``seedLength``
            is present (formats 0 and 1) or ``isSeeded`` is ``true`` (formats 2 to 5).
            A seeded header with ``seed_length == 0`` is a fork of an empty prefix
            (formats 0/1) or a count the log holds (formats 2-5).
        parent_session: Id of the session this one was forked or spawned from.
        cwd: The session's working directory.
        version: The log format version (``None`` when absent or not a number, which
            reads as 0).
        origin: ``"subagent"`` for subagent children.
        delegation_depth: Recursion depth of delegation (child = parent + 1).
        agent_preset: Id of the agent preset the session was composed from.
        owner: Identity partition key.
        extra: Every other header key, as found (``type`` excluded).
    """

    id: str = ""
    created_at: int = 0
    seed_length: int = 0
    seeded: bool = False
    parent_session: str | None = None
    cwd: str | None = None
    version: int | None = None
    origin: str | None = None
    delegation_depth: int | None = None
    agent_preset: str | None = None
    owner: str | None = None
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def format(self) -> int:
        """The log format version this header's log is read as (absent: 0)."""
        return 0 if self.version is None else self.version

    @property
    def spec(self) -> FormatSpec:
        """What this header's format holds, as its spec in the format table.

        The spec of [`format`][pytest_dsh_replay.SessionHeader.format]
        (`lenient_spec`): a header read for
        replay was checked to declare a version the table holds; a leniently read one
        of another version reads as the nearest (a newer one as the newest).
        """
        return lenient_spec(self.version)

    @classmethod
    def from_json(cls, value: object) -> SessionHeader:
        """Build a header from a parsed header line, leniently.

        Args:
            value: The parsed first line. Anything that is not an object gives the
                all-defaults header.

        Returns:
            The header; mistyped fields take their defaults. Validate first with
            `header_problem` where a reader must refuse bad headers.
        """
        if not isinstance(value, dict):
            return cls()
        get = value.get
        version = as_safe_integer(get("version"))
        seeded = get("isSeeded") is True if lenient_spec(version).seeded else "seedLength" in value
        return cls(
            id=_text(get("id")) or "",
            created_at=as_safe_integer(get("createdAt")) or 0,
            seed_length=as_safe_integer(get("seedLength")) or 0,
            seeded=seeded,
            parent_session=_text(get("parentSession")),
            cwd=_text(get("cwd")),
            version=version,
            origin=_text(get("origin")),
            delegation_depth=as_safe_integer(get("delegationDepth")),
            agent_preset=_text(get("agentPreset")),
            owner=_text(get("owner")),
            extra={k: v for k, v in value.items() if k not in _KNOWN_HEADER_KEYS},
        )

    def to_json(self) -> JSONObject:
        """Return the header line object in the field order its format writes.

        Formats 0 and 1: ``type, version, id, createdAt, cwd?, parentSession?,
        seedLength?, origin?, delegationDepth, agentPreset?, owner?``, then ``extra``;
        ``seedLength`` is written when `seeded` (or not 0). Formats 2 to 5: ``type, version,
        id, createdAt, cwd?, parentSession?, isSeeded, origin?, delegationDepth,
        agentPreset?``. Absent optional fields are omitted; ``delegationDepth`` defaults
        to 0 as the writers do.
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
        modern = self.spec.seeded
        if modern:
            out["isSeeded"] = self.seeded
        elif self.seeded or self.seed_length:
            out["seedLength"] = self.seed_length
        if self.origin is not None:
            out["origin"] = self.origin
        out["delegationDepth"] = 0 if self.delegation_depth is None else self.delegation_depth
        if self.agent_preset is not None:
            out["agentPreset"] = self.agent_preset
        if not modern:
            if self.owner is not None:
                out["owner"] = self.owner
            out.update(self.extra)
        return out


class SessionLog(NamedTuple):
    """A session log as read: its header and its logical events.

    The one form of "a header and its events":
    [`read_session_log`][pytest_dsh_replay.read_session_log] returns it (so
    ``header, events = read_session_log(path)`` unpacks it), and what carries more than a
    log (where it was read from, how much of it was committed) holds one. Code that only
    reads a log takes a `SessionLike`.

    Attributes:
        header: The session header.
        events: The logical events in log order (packed chunk rows expanded), each
            with ``seq`` and ``time``.
    """

    header: SessionHeader
    events: list[Event]


class SessionLike(Protocol):
    """Anything with a session header and its events, read only.

    A `SessionLog`, a store's [`Session`][pytest_dsh_replay.Session] (whose events are
    a live read-only view), a [`StoredLog`][pytest_dsh_replay.StoredLog].
    """

    @property
    def header(self) -> SessionHeader:
        """The session header."""

    @property
    def events(self) -> Sequence[Event]:
        """The session's events in log order, each with ``seq`` and ``time``."""
