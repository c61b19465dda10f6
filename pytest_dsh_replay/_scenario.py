"""Scenarios: a primary session and its children, as ordered replay scripts (SPEC 7, 8.1).

A scenario directory holds the primary log ``session.jsonl`` and one log per child,
``session.1.jsonl``, ``session.2.jsonl``, ... with no gaps (``.jsonl.zst`` /
``.jsonl.zstd`` compressed logs are accepted too). ``replay.override.json`` patches or
replaces the primary's script; beyond the reference, ``replay.<n>.override.json`` does
the same for child ``n``.

:func:`load_scenario` returns the scripts in replay order: the primary first, then the
children by (``createdAt``, id). A child's script comes only from its events at or after
its header ``seedLength`` (a fork child's inherited prefix is not its own work); the
primary is never sliced (SPEC 6.5, 13.4).
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from ._atomic import replace_path
from ._errors import RecordingError, ScenarioError, SessionLogError
from ._events import Event, JSONObject, SessionHeader, is_safe_integer
from ._jsonl import (
    dump_session_log,
    header_from,
    iter_log_lines,
    open_log,
    raw_lines,
)
from ._script import (
    Override,
    ReplayEntry,
    ScriptBuilder,
    apply_override,
    load_override,
)

__all__ = [
    "PRIMARY_LOG",
    "Scenario",
    "SessionLike",
    "SessionScript",
    "iter_scenario_dirs",
    "load_scenario",
    "load_session_script",
    "locale_sort_key",
    "nested_scenario",
    "order_sessions",
    "refuse_nested",
    "scenario_files",
    "write_scenario",
]

PRIMARY_LOG: Final = "session.jsonl"
_LOG_SUFFIXES: Final = ("", ".zst", ".zstd")
_CHILD_LOG: Final = re.compile(r"session\.([1-9][0-9]*)\.jsonl(\.zst|\.zstd)?")
_CHILD_OVERRIDE: Final = re.compile(r"replay\.([1-9][0-9]*)\.override\.json")
_PRIMARY_OVERRIDE: Final = "replay.override.json"
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"


@dataclass(frozen=True, slots=True)
class SessionScript:
    """One recorded session's replay script.

    Attributes:
        file: The log's name inside the scenario (``session.jsonl``,
            ``session.2.jsonl``; for a SQLite store ``<store>#<session id>``).
        recorded_id: The recorded session id (header ``id``; ``""`` when absent).
        created_at: The recorded creation time, Unix ms (header ``createdAt``).
        seed_length: Leading events inherited from a fork parent (header ``seedLength``).
        parent_session: The recorded parent's id, ``None`` for a top-level session.
        primary: ``True`` for the primary session.
        entries: The model calls in call order, one entry per ``stream()`` call.
        path: The log file on disk, when there is one.
        header: The full header.
        event_count: Logical events in the log, seed included.
        first_user_text: The text of the session's first own ``user/message`` (at or
            after ``seed_length`` for children), used to bind concurrent children.
    """

    file: str
    recorded_id: str
    created_at: int
    seed_length: int
    parent_session: str | None
    primary: bool
    entries: tuple[ReplayEntry, ...]
    path: Path | None = None
    header: SessionHeader = field(default_factory=SessionHeader, compare=False)
    event_count: int = 0
    first_user_text: str | None = None

    def to_json(self) -> JSONObject:
        """``{"file", "recordedId", "createdAt", "seedLength", "primary", "entries"}``."""
        return {
            "file": self.file,
            "recordedId": self.recorded_id,
            "createdAt": self.created_at,
            "seedLength": self.seed_length,
            "primary": self.primary,
            "entries": [e.to_json() for e in self.entries],
        }


@dataclass(frozen=True, slots=True)
class Scenario:
    """A loaded scenario: every recorded session's script, in replay order.

    Attributes:
        path: The scenario directory, log file or SQLite store it was loaded from.
        scripts: The primary's script first, then the children by (``createdAt``, id).
    """

    path: Path
    scripts: tuple[SessionScript, ...]

    @property
    def primary(self) -> SessionScript:
        """The primary session's script."""
        return self.scripts[0]

    @property
    def children(self) -> tuple[SessionScript, ...]:
        """The children's scripts, in replay order."""
        return self.scripts[1:]

    @property
    def call_count(self) -> int:
        """The number of recorded model calls over every session."""
        return sum(len(s.entries) for s in self.scripts)

    def to_json(self) -> JSONObject:
        """``{"scripts": [SessionScript.to_json(), ...]}`` in replay order."""
        return {"scripts": [s.to_json() for s in self.scripts]}


# --- ordering ------------------------------------------------------------------------------


def locale_sort_key(text: str) -> tuple[tuple[tuple[int, str], ...], tuple[int, ...]]:
    """A sort key approximating JavaScript ``localeCompare`` (ICU root collation).

    The reference breaks ``createdAt`` ties between children with
    ``a.localeCompare(b)`` (SPEC 7 step 4, 13.9). ICU's default order compares letters
    case-insensitively first (lowercase before uppercase only as a tie-break) and puts
    whitespace, then punctuation, then symbols, then digits before letters. This key
    reproduces that order for the ids that occur in practice (UUIDs, ``session-<n>``,
    labels); it is not a full Unicode Collation Algorithm.

    Returns:
        ``(primary, tertiary)``: per character a (group, case-folded letter) pair, then
        the per-character case flags (0 lower, 1 upper).
    """
    primary: list[tuple[int, str]] = []
    tertiary: list[int] = []
    for ch in unicodedata.normalize("NFD", text):
        if unicodedata.combining(ch):
            continue
        cat = unicodedata.category(ch)
        if ch.isspace():
            group = 0
        elif cat.startswith("P"):
            group = 1
        elif cat.startswith("S"):
            group = 2
        elif ch.isdigit():
            group = 3
        else:
            group = 4
        primary.append((group, ch.casefold()))
        tertiary.append(1 if ch.isupper() else 0)
    return tuple(primary), tuple(tertiary)


def _child_order(script: SessionScript) -> tuple[int, Any]:
    return script.created_at, locale_sort_key(script.recorded_id)


# --- reading one log -------------------------------------------------------------------


def _raw_seed_length(header: SessionHeader, source: str, line: int) -> int:
    if "seedLength" not in header.raw:
        return 0
    value = header.raw["seedLength"]
    if not is_safe_integer(value) or value < 0:
        raise SessionLogError(
            f"header seedLength must be a non-negative integer (the number of events "
            f"inherited from the fork parent), got {value!r}",
            path=source,
            line=line,
        )
    return int(value)


def load_session_script(
    path: str | os.PathLike[str],
    *,
    primary: bool = True,
    override: Override | None = None,
    file: str | None = None,
) -> SessionScript:
    """Read one log file and derive its script (SPEC 7, 6.5).

    Args:
        path: A ``.jsonl`` / ``.jsonl.zst`` / ``.jsonl.zstd`` log.
        primary: ``True`` derives from every event; ``False`` (a child) derives from the
            events at or after the header's ``seedLength``.
        override: A sidecar to apply (SPEC 8.2). A bare-array override replaces the
            script and the log's calls are not derived at all.
        file: The name to report as :attr:`SessionScript.file` (default: the file name).

    Returns:
        The session's script.

    Raises:
        SessionLogError: The log is unreadable or malformed, or its ``seedLength`` is
            not a non-negative integer or exceeds the log's event count.
        ScriptError: A call cannot be derived (names the file and line).
        OverrideError: The override's patches do not fit the derived script.
    """
    p = Path(path)
    source = str(p)
    with open_log(p) as f:
        raw = raw_lines(f)
        lines = iter_log_lines(raw, source=source)
        first = next(lines, None)
        if first is None:
            raise SessionLogError(
                "empty session log: expected a session header line (a JSON object) first",
                path=source,
            )
        header_line, header_value = first
        header = header_from(header_value, header_line, source)
        seed_length = _raw_seed_length(header, source, header_line)
        derive = override is None or override.replace is None
        builder = ScriptBuilder(skip=0 if primary else seed_length, source=source, derive=derive)
        lines.close()  # the header is read: the rest goes through the builder's fast path
        builder.feed_raw(raw, header_line)
    entries = builder.finish()
    if not primary and seed_length > builder.event_count:
        raise SessionLogError(
            f"header seedLength {seed_length} is larger than the log's "
            f"{builder.event_count} events; a fork child's seed is a prefix of its own log",
            path=source,
            line=header_line,
        )
    if override is not None:
        entries = apply_override(entries, override)
    return SessionScript(
        file=file if file is not None else p.name,
        recorded_id=header.id,
        created_at=header.created_at,
        seed_length=header.seed_length if seed_length else 0,
        parent_session=header.parent_session,
        primary=primary,
        entries=tuple(entries),
        path=p,
        header=header,
        event_count=builder.event_count,
        first_user_text=builder.first_user_text,
    )


# --- the scenario directory (SPEC 8.1) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Inventory:
    primary: str
    children: tuple[str, ...]
    overrides: dict[int, str]


def scenario_files(directory: str | os.PathLike[str]) -> tuple[str, list[str], dict[int, str]]:
    """List a scenario directory's logs and sidecars by the naming rules of SPEC 8.1.

    Args:
        directory: The scenario directory.

    Returns:
        ``(primary, children, overrides)``: the primary log's name, the child logs'
        names in number order (``session.1.jsonl`` first), and the override sidecars by
        session number (0 is the primary).

    Raises:
        ScenarioError: ``session.jsonl`` is missing; a ``session.*.jsonl`` or
            ``replay.*.override.json`` name breaks the rules; child numbers have a gap;
            a log exists both plain and compressed; an override names a missing child.
    """
    d = Path(directory)
    try:
        names = sorted(os.listdir(d))
    except OSError as err:
        raise ScenarioError(
            f"cannot list scenario directory: {err.strerror or err}", path=str(d)
        ) from None
    inv = _inventory(d, names)
    return inv.primary, list(inv.children), inv.overrides


def _is_log_name(name: str) -> bool:
    return name.startswith("session.") and any(
        name.endswith(".jsonl" + suffix) for suffix in _LOG_SUFFIXES
    )


def _inventory(d: Path, names: list[str]) -> _Inventory:
    primaries: list[str] = []
    children: dict[int, str] = {}
    overrides: dict[int, str] = {}
    for name in names:
        if _is_log_name(name):
            if name in {PRIMARY_LOG + s for s in _LOG_SUFFIXES}:
                primaries.append(name)
                continue
            m = _CHILD_LOG.fullmatch(name)
            if m is None:
                raise ScenarioError(
                    f"invalid child session log name {name!r}: child logs are named "
                    "session.<n>.jsonl with n = 1, 2, ... (no leading zeros)",
                    path=str(d / name),
                )
            n = int(m.group(1))
            if n in children:
                raise ScenarioError(
                    f"child session {n} has two logs, {children[n]!r} and {name!r}; keep one",
                    path=str(d),
                )
            children[n] = name
        elif name.startswith("replay.") and name.endswith(".override.json"):
            if name == _PRIMARY_OVERRIDE:
                overrides[0] = name
                continue
            m = _CHILD_OVERRIDE.fullmatch(name)
            if m is None:
                raise ScenarioError(
                    f"invalid override sidecar name {name!r}: expected replay.override.json "
                    "(primary) or replay.<n>.override.json (child n)",
                    path=str(d / name),
                )
            overrides[int(m.group(1))] = name
    if not primaries:
        raise ScenarioError(
            f"missing {PRIMARY_LOG}: a scenario directory needs its primary session log",
            path=str(d),
        )
    if len(primaries) > 1:
        raise ScenarioError(
            f"the primary session has several logs ({', '.join(primaries)}); keep one",
            path=str(d),
        )
    ordered: list[str] = []
    for k, n in enumerate(sorted(children), start=1):
        if n != k:
            raise ScenarioError(
                f"child session logs must be contiguous: expected session.{k}.jsonl, "
                f"found {children[n]}",
                path=str(d / children[n]),
            )
        ordered.append(children[n])
    for n, name in overrides.items():
        if n > len(ordered):
            raise ScenarioError(
                f"override sidecar {name} has no child log session.{n}.jsonl to apply to",
                path=str(d / name),
            )
    return _Inventory(primaries[0], tuple(ordered), overrides)


def _load_directory(d: Path) -> Scenario:
    inv = _inventory(d, sorted(os.listdir(d)))

    def override_for(n: int) -> Override | None:
        name = inv.overrides.get(n)
        return None if name is None else load_override(d / name)

    primary = load_session_script(d / inv.primary, primary=True, override=override_for(0))
    children = [
        load_session_script(d / name, primary=False, override=override_for(n))
        for n, name in enumerate(inv.children, start=1)
    ]
    children.sort(key=_child_order)
    return Scenario(path=d, scripts=(primary, *children))


def _is_sqlite(p: Path) -> bool:
    try:
        with open(p, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Load a scenario: every recorded session's replay script, in replay order.

    Args:
        path: One of
            - a scenario directory (``session.jsonl``, ``session.<n>.jsonl``, optional
              ``replay.override.json`` and ``replay.<n>.override.json``; SPEC 8.1);
            - a single log file (``.jsonl``, ``.jsonl.zst``, ``.jsonl.zstd``): one
              primary script, unsliced;
            - a dsh SQLite session store: every session in it; the primary is the one
              without ``parentSession`` (SPEC 5).

    Returns:
        The scenario. ``scripts[0]`` is the primary; children follow by (``createdAt``,
        id), each derived from its events at or after its ``seedLength``.

    Raises:
        ScenarioError: Nothing exists at ``path``, or the directory breaks the naming
            rules (missing ``session.jsonl``, a gap, an unknown ``session.*.jsonl``).
        SessionLogError: A log is malformed (file and line named).
        ScriptError: A call cannot be derived (file, line and call key named).
        OverrideError: A sidecar is invalid.
        SchemaVersionError: A SQLite store has a foreign schema.
    """
    p = Path(path)
    if p.is_dir():
        return _load_directory(p)
    if p.is_file():
        if _is_sqlite(p):
            from ._sqlite import load_store_scenario

            return load_store_scenario(p)
        return Scenario(path=p, scripts=(load_session_script(p, primary=True),))
    raise ScenarioError(
        "no scenario here: expected a scenario directory, a session log or a SQLite store",
        path=str(p),
    )


def iter_scenario_dirs(root: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield every directory under ``root`` (itself included) that holds a ``session.jsonl``.

    Directories are yielded in sorted path order; hidden directories are skipped.
    """
    base = Path(root)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
        if any(n in filenames for n in (PRIMARY_LOG + s for s in _LOG_SUFFIXES)):
            yield Path(dirpath)


# --- writing a scenario (SPEC 10.3, 10.4) -----------------------------------------------


class SessionLike(Protocol):
    """Anything :func:`write_scenario` can write: a header and its events."""

    @property
    def header(self) -> SessionHeader:
        """The session header."""

    @property
    def events(self) -> Sequence[Event]:
        """The session's events, each with ``seq`` and ``time``."""


def order_sessions(sessions: Iterable[SessionLike]) -> list[SessionLike]:
    """Order sessions as a scenario stores them: primary, then children (SPEC 10.3).

    The primary is the one session without ``parentSession``; the children follow by
    (``createdAt``, id), the order replay binds them in.

    Raises:
        RecordingError: No session, or more than one, lacks ``parentSession``.
    """
    items = list(sessions)
    roots = [s for s in items if s.header.parent_session is None]
    if len(roots) != 1:
        ids = ", ".join(repr(s.header.id) for s in roots) or "none"
        raise RecordingError(
            "a scenario needs exactly one primary session (a session without "
            f"parentSession); found {len(roots)}: {ids}"
        )
    children = [s for s in items if s is not roots[0]]
    children.sort(key=lambda s: (s.header.created_at, locale_sort_key(s.header.id)))
    return [roots[0], *children]


def write_scenario(path: str | os.PathLike[str], sessions: Iterable[SessionLike]) -> list[Path]:
    """Write sessions as a scenario directory in the committed form, atomically.

    The primary goes to ``session.jsonl`` and the children to ``session.<n>.jsonl`` in
    replay order (:func:`order_sessions`). Each log is written as the harness commits
    fixtures (SPEC 1.5): the header line, then every event with delta runs packed into
    chunk rows and the top-level ``seq``/``time`` envelope removed.

    The directory is replaced as a whole: everything is written and flushed to a hidden
    sibling first, which then takes the place of ``path`` (on Linux in one step, so
    ``path`` never stops existing). If anything fails, ``path`` is left exactly as it
    was; files of an older recording (a child that no longer exists) do not survive a
    successful write. After a crash mid-write, the next write (or
    :func:`~pytest_dsh_replay._atomic.recover`) finds the old or the new recording and
    removes the hidden leftovers.

    Args:
        path: The scenario directory to create or replace.
        sessions: The sessions to write; exactly one has no ``parentSession``.

    Returns:
        The written log files, primary first.

    Raises:
        RecordingError: Not exactly one primary session; ``path`` holds another
            scenario below it or lies inside one (replacing it would delete the other);
            or the directory cannot be written or replaced (the message names the
            error).
    """
    target = Path(path)
    ordered = order_sessions(sessions)
    refuse_nested(target)
    blobs = [dump_session_log(s.header, s.events, envelope=False) for s in ordered]
    names = [PRIMARY_LOG] + [f"session.{n}.jsonl" for n in range(1, len(ordered))]

    def fill(staging: Path) -> None:
        for name, blob in zip(names, blobs, strict=True):
            with open(staging / name, "xb") as f:
                f.write(blob)
                f.flush()
                os.fsync(f.fileno())

    try:
        replace_path(target, fill)
    except OSError as err:
        raise RecordingError(f"cannot write scenario {target}: {err}") from err
    return [target / name for name in names]


def nested_scenario(path: str | os.PathLike[str]) -> Path | None:
    """Another scenario directory below ``path`` or above it, if there is one.

    A scenario directory is replaced as a whole when it is recorded, so a scenario kept
    inside another would be deleted by the outer one's next recording.

    Args:
        path: A scenario directory (it need not exist yet).

    Returns:
        The first scenario directory found strictly below ``path`` (hidden directories
        skipped), else the nearest ancestor of ``path`` that holds a primary log, else
        ``None``.
    """
    target = Path(path)
    if target.is_dir():
        for found in iter_scenario_dirs(target):
            if found != target:
                return found
    for ancestor in target.absolute().parents:
        if any((ancestor / (PRIMARY_LOG + s)).is_file() for s in _LOG_SUFFIXES):
            return ancestor
    return None


def refuse_nested(path: str | os.PathLike[str]) -> None:
    """Refuse to record ``path`` when another scenario lies below or above it.

    Raises:
        RecordingError: Naming both scenarios and how to lay them out instead.
    """
    target = Path(path)
    other = nested_scenario(target)
    if other is None:
        return
    where = "inside it" if target.absolute() in other.absolute().parents else "around it"
    raise RecordingError(
        f"cannot record scenario {target}: scenario {other} is {where}, and recording "
        "replaces the whole directory; give the scenarios sibling directories (for "
        "example agents/main and agents/fork instead of agents and agents/fork)"
    )
