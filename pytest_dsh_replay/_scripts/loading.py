"""Where scenarios come from: directories, single logs, SQLite stores, a runtime's sessions.

[`load_scenario`][pytest_dsh_replay.load_scenario] accepts

- a scenario directory: the primary's log ``session.jsonl`` and one log per child,
  ``session.1.jsonl``, ``session.2.jsonl``, ... with no gaps; each may carry a format
  generation (``session.v4.jsonl``, ``session.1.v4.jsonl``) and be zstd-compressed
  (``.zst``/``.zstd``); ``replay.override.json`` patches or replaces the primary's
  script and ``replay.<n>.override.json`` child ``n``'s;
- a single log file: one primary script, unsliced;
- a dsh SQLite session store: every session in it;
- the dsh runtime's sessions root (``$DSH_HOME/sessions``:
  ``<root>/<project key>/<session id>/session.v4.jsonl[.zstd]``) plus a session id: that
  session is the primary, its descendants by ``parentSession`` are the children.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar, cast

from .._errors import DshReplayError, ScenarioError, SessionLogError
from .._format.events import SessionHeader, SessionLog
from .._format.formats import newest_format, unknown_format
from .._format.jsonl import (
    open_session_log,
    parse_session_header,
    read_log_bytes,
    read_session_log,
    session_log_from_body,
)
from .._format.log_names import LogName, parse_log_name
from .builder import ScriptBuilder
from .scenario import (
    PRIMARY_LOG,
    Scenario,
    SessionScript,
    derived_script,
    holds_primary_log,
    iter_scenario_dirs,
    load_session_script,
    looks_like_sidecar,
    scenario_of,
    seed_end_problem,
    sidecar_number,
)
from .structure import EventPrefix, check_seeds, check_tree, log_prefix, store_prefix

if TYPE_CHECKING:
    from .._store.backends.sqlite import SqliteBackend
    from .override import Override

__all__ = [
    "KeptLines",
    "ScenarioCache",
    "is_sqlite_store",
    "iter_scenario_dirs",
    "load_scenario",
    "scenario_files",
]

_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_T = TypeVar("_T")
_UNMADE: Final = object()  # a derived value asked for once, not made yet


# --- the scenario directory -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Inventory:
    primary: str
    children: tuple[str, ...]
    overrides: dict[int, str]


def scenario_files(directory: str | os.PathLike[str]) -> tuple[str, list[str], dict[int, str]]:
    """List a scenario directory's logs and sidecars by the naming rules.

    Args:
        directory: The scenario directory.

    Returns:
        ``(primary, children, overrides)``: the primary log's name, the child logs'
        names in number order (``session.1.jsonl`` first), and the override sidecars by
        session number (0 is the primary).

    Raises:
        ScenarioError: The directory cannot be listed; there is no primary log; a
            ``session.*.jsonl`` name or a sidecar's (any name starting with
            ``replay`` that mentions ``override``) breaks the rules;
            child numbers have a gap; one session has two logs of its newest format
            generation (older generations are ignored); an override names a missing
            child.
    """
    d = Path(directory)
    inv = _inventory(d, _names(d))
    return inv.primary, list(inv.children), inv.overrides


def _names(d: Path) -> list[str]:
    try:
        return sorted(os.listdir(d))
    except OSError as err:
        raise ScenarioError(
            f"cannot list scenario directory: {err.strerror or err}", path=str(d)
        ) from None


def _is_log_name(name: str) -> bool:
    return name.startswith("session.") and name.endswith((".jsonl", ".jsonl.zst", ".jsonl.zstd"))


def _inventory(d: Path, names: list[str]) -> _Inventory:
    logs: dict[int, dict[int, list[str]]] = {}  # session number -> generation -> names
    overrides: dict[int, str] = {}
    for name in names:
        if _is_log_name(name):
            _add_log(d, name, logs)
        elif looks_like_sidecar(name):  # a misspelled one is refused, never ignored
            overrides[_override_number(d, name)] = name
    for generations in logs.values():
        _no_newer_plain_log(d, generations)
    primary = _the_primary(d, names, _newest(logs.pop(0, {})))
    children: dict[int, str] = {}
    for n, generations in logs.items():
        newest = _newest(generations)
        if len(newest) > 1:
            raise ScenarioError(
                f"child session {n} has two logs, {newest[0]!r} and {newest[1]!r}; keep one",
                path=str(d),
            )
        children[n] = newest[0]
    ordered = _contiguous_children(d, children)
    for n, name in overrides.items():
        if n > len(ordered):
            raise ScenarioError(
                f"override sidecar {name} has no child log session.{n}.jsonl to apply to",
                path=str(d / name),
            )
    return _Inventory(primary, tuple(ordered), overrides)


def _add_log(d: Path, name: str, logs: dict[int, dict[int, list[str]]]) -> None:
    """File a log name under its session (0: the primary) and its format generation."""
    parsed: LogName | None = parse_log_name(name)
    if parsed is None:
        raise ScenarioError(
            f"invalid session log name {name!r}: logs are named session.jsonl "
            "(the primary) and session.<n>.jsonl with n = 1, 2, ... (children, no "
            "leading zeros), optionally with a format generation (session.v4.jsonl) "
            "and .zst or .zstd",
            path=str(d / name),
        )
    generations = logs.setdefault(parsed.child or 0, {})
    generations.setdefault(parsed.version or 0, []).append(name)


def _no_newer_plain_log(d: Path, generations: dict[int, list[str]]) -> None:
    """Refuse a plain-named log beside a generation name whose header is no older.

    A plain name (``session.1.jsonl``) carries no generation: its header says which
    format it holds. Beside ``session.1.v4.jsonl`` it ranks as the oldest and is left
    unread, which is right only when its header is older; a newer header (a v6 log the
    upgrade hint must name) or the same one (two logs of one session) is refused
    ([docs/format.md#v5](../format.md#v5)).
    """
    plain = generations.get(0)
    newest = max(generations)
    if not plain or newest == 0:
        return
    for name in plain:
        try:
            version = parse_session_header(read_log_bytes(d / name)).format
        except (DshReplayError, OSError):
            continue  # unreadable: an older log the load does not read anyway
        if version > newest_format():  # a newer harness's: never read as an older one
            raise ScenarioError(unknown_format(version), path=str(d / name))
        if version >= newest:
            raise ScenarioError(
                f"{name} holds format v{version} beside {generations[newest][0]}, which "
                f"names generation v{newest}; one session's logs must not disagree: keep "
                "the one to read (a plain name is read by its header)",
                path=str(d / name),
            )


def _newest(generations: dict[int, list[str]]) -> list[str]:
    """The names of a session's highest format generation: the log that is read.

    A directory may keep an older generation beside a newer one; only the newest is read
    ([docs/format.md#v4-files](../format.md#v4-files)). Two names at that generation (one
    compressed) are the caller's error to report.
    """
    return generations[max(generations)] if generations else []


def _override_number(d: Path, name: str) -> int:
    """The session an override sidecar patches: 0 for the primary, ``n`` for child ``n``."""
    number = sidecar_number(name)
    if number is None:
        raise ScenarioError(
            f"invalid override sidecar name {name!r}: expected replay.override.json "
            "(primary) or replay.<n>.override.json (child n); a file that is no "
            "sidecar belongs outside the scenario directory",
            path=str(d / name),
        )
    return number


def _the_primary(d: Path, names: list[str], primaries: list[str]) -> str:
    """The one primary log, or the error for none or several."""
    if not primaries:
        hint = _home_hint(d, "")
        if not hint and any((d / n).is_dir() and n.startswith("--") for n in names):
            hint = (
                "; this looks like the dsh runtime's sessions root: pass the primary's "
                "session id too (load_scenario(root, session_id=...), dsh-replay ... "
                "--session ID)"
            )
        raise ScenarioError(
            f"missing {PRIMARY_LOG}: a scenario directory needs its primary session log{hint}",
            path=str(d),
        )
    if len(primaries) > 1:
        raise ScenarioError(
            f"the primary session has several logs ({', '.join(primaries)}); keep one",
            path=str(d),
        )
    return primaries[0]


def _contiguous_children(d: Path, children: dict[int, str]) -> list[str]:
    """The child logs in number order, refusing a gap."""
    ordered: list[str] = []
    for k, n in enumerate(sorted(children), start=1):
        if n != k:
            raise ScenarioError(
                f"child session logs must be contiguous: expected session.{k}.jsonl, "
                f"found {children[n]}",
                path=str(d / children[n]),
            )
        ordered.append(children[n])
    return ordered


def _load_directory(
    d: Path,
    bodies: dict[str, list[tuple[int, Any]]] | None = None,
    names: list[str] | None = None,
) -> Scenario:
    """The scenario of a directory; ``bodies`` receives each log's body lines by name.

    ``names`` is the directory's listing, sorted, when the caller listed it already.
    """
    inv = _inventory(d, _names(d) if names is None else names)

    def override_for(n: int) -> Override | None:
        name = inv.overrides.get(n)
        if name is None:
            return None
        from .override import load_override  # only for a sidecar

        return load_override(d / name)

    def body(name: str) -> list[tuple[int, Any]] | None:
        return None if bodies is None else bodies.setdefault(name, [])

    primary = load_session_script(
        d / inv.primary, primary=True, override=override_for(0), body=body(inv.primary)
    )
    children = [
        load_session_script(d / name, primary=False, override=override_for(n), body=body(name))
        for n, name in enumerate(inv.children, start=1)
    ]
    return _checked(scenario_of(d, primary, children), log_prefix)


def _checked(scenario: Scenario, prefix: EventPrefix, *, store: bool = False) -> Scenario:
    """``scenario``, once its sessions form a tree and its fork seeds fit their parents.

    ``store``: the scenario is a SQLite store, which holds every session its writer
    created, so a child's parent must be one of them
    ([docs/scenarios.md#structure](../scenarios.md#structure)).
    """
    if len(scenario.scripts) > 1:
        check_tree(scenario.scripts, scenario.path, parents_inside=store)
        check_seeds(scenario.scripts, prefix)
    return scenario


# --- a SQLite store ----------------------------------------------------------------------


def is_sqlite_store(p: Path) -> bool:
    """Whether ``p`` is a SQLite file (a dsh session store); ``False`` when unreadable."""
    try:
        with open(p, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _store_script(path: Path, header: SessionHeader, backend: SqliteBackend) -> SessionScript:
    primary = header.parent_session is None
    source = f"{path}#{header.id}"
    seed_length = header.seed_length if header.seeded else 0
    skip = 0 if primary else seed_length
    builder = ScriptBuilder(skip=skip, source=source, rows=True)
    seed = _StoredSeed(source, skip)
    for record in backend.records(header.id, complete=True):
        if seed.open:
            seed.next(builder.event_count, record)
        builder.record(record)
    if seed.open and builder.event_count == skip:
        seed.next(skip, None)
    return derived_script(
        builder,
        header,
        file=f"{path.name}#{header.id}",
        path=path,
        primary=primary,
        seed_length=seed_length,
    )


class _StoredSeed:
    """Where a stored fork child's seed ends, checked as its records are fed."""

    __slots__ = ("last", "open", "seed_length", "source", "start")

    def __init__(self, source: str, seed_length: int) -> None:
        self.source = source
        self.seed_length = seed_length
        self.open = seed_length > 0
        self.start = 0
        self.last: object = None

    def next(self, count: int, record: object) -> None:
        """The next record, from seq ``count`` on (``None``: the rows end)."""
        if count < self.seed_length and record is not None:
            self.start, self.last = count, record
            return
        self.open = False
        problem = seed_end_problem(self.seed_length, self.start, self.last, count, record)
        if problem is not None:
            raise SessionLogError(f"the sessions row's seed_length {problem}", path=self.source)


def _stored_header(path: Path, backend: SqliteBackend, session_id: str) -> SessionHeader:
    """The header of a session the store lists; one its id does not find is damage."""
    header = backend.header(session_id)
    if header is None:
        raise SessionLogError(
            f"corrupt SQLite store: session {session_id!r} is listed but not found by its "
            "id (a damaged index)",
            path=str(path),
        )
    return header


def _load_store(p: Path) -> Scenario:
    """Every session of a store; the primary is the one without ``parentSession``."""
    from .._store.backends.sqlite import (
        SqliteBackend,  # imported only for a store: sqlite3 is not cheap
    )

    with SqliteBackend(p, read_only=True) as backend:
        backend.check_pages()
        headers = [_stored_header(p, backend, sid) for sid in backend.session_ids()]
        roots = [h for h in headers if h.parent_session is None]
        if len(roots) != 1:
            ids = ", ".join(repr(h.id) for h in roots) or "none"
            raise ScenarioError(
                f"a store scenario needs exactly one primary session (one without "
                f"parentSession); this store has {len(headers)} session(s) and "
                f"{len(roots)} primary: {ids}",
                path=str(p),
            )
        scripts = [_store_script(p, h, backend) for h in headers]
        primary = next(s for s in scripts if s.primary)
        scenario = scenario_of(p, primary, (s for s in scripts if not s.primary))
        prefix = store_prefix(partial(backend.records, complete=True))
        return _checked(scenario, prefix, store=True)


# --- the runtime's sessions root ------------------------------------------------------


def _session_log(session_dir: Path) -> Path | None:
    """The log the runtime reads in a session directory: the highest generation."""
    found: dict[int, list[str]] = {}
    try:
        names = os.listdir(session_dir)
    except OSError:
        return None
    for name in names:
        parsed = parse_log_name(name)
        if parsed is None or parsed.child is not None or name.endswith(".zst"):
            continue
        found.setdefault(parsed.version or 0, []).append(name)
    newest = _newest(found)
    if len(newest) > 1:
        raise ScenarioError(
            f"session directory holds one generation twice ({', '.join(sorted(newest))}), "
            "compressed and plain; keep one",
            path=str(session_dir),
        )
    return session_dir / newest[0] if newest else None


def _runtime_sessions(root: Path) -> dict[str, tuple[Path, SessionHeader]]:
    """Every session under a sessions root: id -> (its log, its header)."""
    from .._store.backends.jsonl import decode_segment

    sessions: dict[str, tuple[Path, SessionHeader]] = {}
    try:
        projects = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError as err:
        raise ScenarioError(
            f"cannot list the sessions root: {err.strerror or err}", path=str(root)
        ) from None
    for project in projects:
        for session_dir in sorted(project.iterdir()):
            if not session_dir.is_dir() or decode_segment(session_dir.name) is None:
                continue
            log = _session_log(session_dir)
            if log is None:
                continue
            with open_session_log(log) as (header, _, _lines):
                pass
            if header.id in sessions:
                raise ScenarioError(
                    f"session id {header.id!r} appears twice under the sessions root: "
                    f"{sessions[header.id][0]} and {log}",
                    path=str(root),
                )
            sessions[header.id] = (log, header)
    return sessions


def _load_sessions_root(root: Path, session_id: str) -> Scenario:
    sessions = _runtime_sessions(root)
    if session_id not in sessions:
        known = ", ".join(repr(s) for s in sorted(sessions)[:8]) or "none"
        raise ScenarioError(
            f"no session {session_id!r} under this sessions root (sessions found: {known})"
            + _home_hint(root, session_id),
            path=str(root),
        )
    descendants: list[str] = []
    frontier = [session_id]
    while frontier:
        parent = frontier.pop()
        kids = sorted(s for s, (_, h) in sessions.items() if h.parent_session == parent)
        if session_id in kids:  # the primary below itself: its parents lead back to it
            raise ScenarioError(
                f"session {session_id!r} names parentSession "
                f"{sessions[session_id][1].parent_session!r}, which is itself or one of its "
                "own descendants: its sessions form a cycle",
                path=str(sessions[session_id][0]),
            )
        descendants.extend(kids)
        frontier.extend(kids)

    def script(sid: str, primary: bool) -> SessionScript:
        log = sessions[sid][0]
        return load_session_script(log, primary=primary, file=str(log.relative_to(root)))

    scenario = scenario_of(root, script(session_id, True), (script(s, False) for s in descendants))
    return _checked(scenario, log_prefix)


def _home_hint(d: Path, session_id: str) -> str:
    """The hint for a directory that is the runtime's home (``$DSH_HOME``), else ``""``.

    The runtime keeps its logs in ``$DSH_HOME/sessions``; given the home itself, the
    error says to pass that directory instead (see
    [docs/scenarios.md#naming](../scenarios.md#naming)).
    """
    sessions = d / "sessions"
    if not sessions.is_dir() or holds_primary_log(d):
        return ""
    session = session_id or "ID"
    return (
        f"; this looks like the dsh runtime's home ($DSH_HOME), whose sessions root is "
        f"{sessions}: pass that directory (load_scenario({str(sessions)!r}, "
        f"session_id={session!r}), dsh-replay show {sessions} --session {session})"
    )


# --- the entry point ---------------------------------------------------------------------


def load_scenario(path: str | os.PathLike[str], session_id: str | None = None) -> Scenario:
    """Load a scenario: every recorded session's replay script, in replay order.

    Args:
        path: One of
            - a scenario directory (``session.jsonl``, ``session.<n>.jsonl``, optional
              ``replay.override.json`` and ``replay.<n>.override.json``);
            - a single log file (``.jsonl``, ``.jsonl.zst``, ``.jsonl.zstd``; any format
              0 to 5): one primary script, unsliced;
            - a dsh SQLite session store: every session in it; the primary is the one
              without ``parentSession``;
            - with ``session_id``: the dsh runtime's sessions root
              (``$DSH_HOME/sessions``).
        session_id: The primary's id under a sessions root (the id the runtime printed);
            its descendants by ``parentSession`` become the children.

    Returns:
        The scenario. ``scripts[0]`` is the primary; children follow by (``createdAt``,
        id), each derived from its own events only (after its seed).

    Raises:
        ScenarioError: Nothing exists at ``path``; the directory breaks the naming
            rules; a session id is given with a file or a scenario directory, or is not
            under the root; a store has no single primary.
        SessionLogError: A log is malformed or of a format version this build does not
            read (file and line named).
        ScriptError: A call cannot be derived (file, line and call key named).
        OverrideError: A sidecar is invalid.
        SchemaVersionError: A SQLite store has a foreign schema.
        TypeError: ``path`` is not a ``str`` or ``os.PathLike`` (named in the message).
    """
    if isinstance(path, str) and not path.strip():  # Path("") would be the current dir
        raise ScenarioError("an empty path names no scenario", path=repr(path))
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"load_scenario takes a path (str or os.PathLike), got {path!r}")
    p = path if isinstance(path, Path) else Path(path)  # Path(Path) parses it again
    if session_id is not None:
        if not p.is_dir():
            raise ScenarioError(
                "a session id goes with the runtime's sessions root (a directory of project "
                "directories), not with a file",
                path=str(p),
            )
        if holds_primary_log(p):
            raise ScenarioError(
                "this is a scenario directory (it holds its primary log), and a session id "
                "goes with the runtime's sessions root ($DSH_HOME/sessions) only: load it "
                "without session_id",
                path=str(p),
            )
        return _load_sessions_root(p, session_id)
    if p.is_dir():
        return _load_directory(p)
    if p.is_file():
        if is_sqlite_store(p):
            return _load_store(p)
        return scenario_of(p, load_session_script(p, primary=True), ())
    raise ScenarioError(
        "no scenario here: expected a scenario directory, a session log or a SQLite store",
        path=str(p),
    )


# --- sharing loaded scenarios ------------------------------------------------------------


_FileSignature: TypeAlias = tuple[int, int, int]
"""A file's ``(inode, size, modification time in ns)``."""

_DirSignature: TypeAlias = tuple[int, int, tuple[tuple[str, int, int, int], ...]]
"""A directory's ``(inode, modification time in ns, entries)``, each entry a file's
``(name, inode, size, modification time in ns)``, sorted."""

_Signature: TypeAlias = _FileSignature | _DirSignature

_Stamp: TypeAlias = tuple[int, _Signature]
"""``(bytes, signature)``: what `_stamp` gives."""


def _stamp(path: Path) -> _Stamp | None:
    """What identifies the files at ``path`` as they are now: ``(bytes, signature)``.

    A directory's signature covers the directory itself and every entry in it (name,
    inode, size, modification time), so a rewrite (a recording replaces the directory),
    an edit or a new sidecar changes it. ``None`` when ``path`` cannot be examined.
    """
    try:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            return st.st_size, (st.st_ino, st.st_size, st.st_mtime_ns)
        total = 0
        entries = []
        with os.scandir(path) as found:
            for entry in found:
                est = entry.stat()
                total += est.st_size
                entries.append((entry.name, est.st_ino, est.st_size, est.st_mtime_ns))
    except OSError:
        return None
    entries.sort()
    return total, (st.st_ino, st.st_mtime_ns, tuple(entries))


def _outline(path: str) -> tuple[int, ...] | None:
    """What one ``stat`` of ``path`` tells of a change: `_outline_of` its stamp.

    A directory's inode and modification time (it changes when the directory is replaced,
    as a recording replaces it, or when an entry is added, removed or renamed, as atomic
    writes do; not when a file is rewritten in place); a file's inode, size and
    modification time. ``None`` when ``path`` cannot be examined.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISDIR(st.st_mode):
        return st.st_ino, st.st_mtime_ns
    return st.st_ino, st.st_size, st.st_mtime_ns


def _outline_of(signature: _Signature) -> tuple[int, ...]:
    """The part of a `_stamp` signature that `_outline` sees."""
    last = signature[2]
    if isinstance(last, tuple):
        return signature[0], signature[1]  # a directory's: (inode, mtime, entries)
    return signature[0], signature[1], last


def _file_stamps(stamp: _Stamp) -> dict[str, _Stamp] | None:
    """Each file's stamp, from a directory's `_stamp`; ``None`` for a file's.

    The stamps are the ones `_stamp` gives for each file itself.
    """
    entries = stamp[1][2]
    if not isinstance(entries, tuple):
        return None  # a file's signature: (inode, size, mtime)
    return {name: (size, (ino, size, mtime)) for name, ino, size, mtime in entries}


class _Lru:
    """One table of `ScenarioCache`: ``key -> (signature, bytes, value)``, oldest first."""

    __slots__ = ("entries", "total")

    def __init__(self) -> None:
        self.entries: OrderedDict[str, tuple[_Signature, int, object]] = OrderedDict()
        self.total = 0  # the bytes of every entry


class KeptLines:
    """A recorded log's body lines kept from a load, turned into its events when asked.

    Not a log: the lines are the load's parsed values, expanded into events
    (`session_log_from_body`) only when the log is asked for, which most loads never
    do; the log check by reference reads its recorded side from the lines themselves
    ([docs/checks.md#by-reference](../checks.md#by-reference)). Read-only.

    Attributes:
        header: The log's header.
        lines: The body lines as parsed, ``(line number, value)``.
        source: The log's path, for messages.
    """

    __slots__ = ("_log", "header", "lines", "source")

    def __init__(self, header: SessionHeader, lines: list[tuple[int, Any]], source: str):
        self.header = header
        self.lines = lines
        self.source = source
        self._log: SessionLog | None = None

    def log(self) -> SessionLog:
        """The log's events (built once, then shared; the lines are let go then).

        Raises:
            SessionLogError: As `session_log_from_body`.
        """
        log = self._log
        if log is None:
            log = self._log = session_log_from_body(self.header, self.lines, source=self.source)
            self.lines = []  # the events hold what they need: one copy kept, not two
        return log

    @property
    def built(self) -> bool:
        """Whether `log` was asked for (the lines are gone then)."""
        return self._log is not None


class ScenarioCache:
    """Loaded scenarios and recorded logs, shared while their files stay unchanged.

    Many tests of a run replay the same scenario: each gets the one loaded
    [`Scenario`][pytest_dsh_replay.Scenario] (it is read-only; every replayed call
    still builds new chunk objects). At most ``max_entries`` scenarios and ``max_bytes``
    bytes of logs are kept, least recently used dropped first, so memory does not grow
    with the number of scenarios a suite replays. Thread-safe.

    When a kept scenario counts as unchanged depends on ``recheck``: with ``True`` its
    files are examined (their names, inodes, sizes and modification times) at every
    `load` and `recorded_log`, and a change loads them again. With ``False``
    they are examined once, when they are loaded; later loads make one ``stat`` of the
    scenario's path, which sees the directory replaced (as a recording replaces it) or
    its entries added, removed or renamed, and a single file changed, but not a log
    rewritten in place inside the directory; kept logs are served unexamined until the
    scenario is loaded again or `forget` is called
    ([docs/scenarios.md#loaded-once](../scenarios.md#loaded-once)).

    Args:
        max_entries: How many scenarios (and, separately, recorded logs) to keep: tests
            that replay one scenario mostly run one after the other, and every entry
            kept is work for the garbage collector while it lives.
        max_bytes: The most log bytes kept; a larger scenario is loaded every time.
        recheck: Examine the files at every use (``True``), or only when they are loaded
            (``False``: the pytest plugin's cache, which also forgets a scenario it
            records).
    """

    def __init__(
        self, *, max_entries: int = 8, max_bytes: int = 64 * 1024 * 1024, recheck: bool = True
    ):
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.recheck = recheck
        self._lock = threading.Lock()
        self._scenarios = _Lru()
        self._logs = _Lru()
        self._derived: OrderedDict[tuple[int, ...], tuple[tuple[object, ...], object]] = (
            OrderedDict()
        )
        self._listed: dict[str, _Stamp] = {}  # `listing`'s stamps, for the next `load`

    def _get(self, table: _Lru, key: str, signature: _Signature) -> object:
        with self._lock:
            found = table.entries.get(key)
            if found is None or found[0] != signature:
                return None
            table.entries.move_to_end(key)
            return found[2]

    def _kept(self, table: _Lru, key: str) -> tuple[_Signature, int, object] | None:
        """What ``table`` keeps for ``key``, unexamined: ``(signature, bytes, value)``."""
        with self._lock:
            found = table.entries.get(key)
            if found is not None:
                table.entries.move_to_end(key)
            return found

    def _put(self, table: _Lru, key: str, stamp: _Stamp, value: object) -> None:
        size, signature = stamp
        if size > self.max_bytes:
            return
        with self._lock:
            entries = table.entries
            old = entries.pop(key, None)
            if old is not None:
                table.total -= old[1]
            entries[key] = (signature, size, value)
            table.total += size
            while len(entries) > self.max_entries or table.total > self.max_bytes:
                table.total -= entries.popitem(last=False)[1][1]

    def listing(self, path: str | os.PathLike[str]) -> list[str] | None:
        """The names in the scenario directory at ``path``, listed as `load` lists it.

        The listing (with each entry's inode, size and modification time) is kept for
        the next `load` of ``path``, which uses it instead of listing the directory again
        while one ``stat`` finds the directory unchanged: the pytest plugin looks for a
        killed writer's leftovers in it before a test's first load
        ([docs/recording.md#writing](../recording.md#writing)). ``None`` when ``path`` is
        no directory or cannot be listed.
        """
        key = os.fspath(path)
        stamp = _stamp(Path(key))
        entries = None if stamp is None else stamp[1][2]
        if not isinstance(entries, tuple):
            return None
        with self._lock:
            self._listed[key] = stamp  # type: ignore[assignment]
        return [entry[0] for entry in entries]

    def forget(self, path: str | os.PathLike[str]) -> None:
        """Drop what is kept for the files at ``path``: the next use reads them again.

        Call it after writing a scenario (the pytest plugin does after each recording):
        the scenario kept for ``path`` and the recorded logs kept for files under it are
        dropped, whichever spelling of the path they were kept under (paths are compared
        resolved).

        Args:
            path: A scenario directory, log file or store.
        """
        target = os.path.realpath(path)
        inside = os.path.join(target, "")
        with self._lock:
            self._listed.clear()
            for table in (self._scenarios, self._logs):
                for key in list(table.entries):
                    real = os.path.realpath(key)
                    if real == target or real.startswith(inside):
                        table.total -= table.entries.pop(key)[1]

    def load(self, path: str | os.PathLike[str], *, keep_logs: bool = False) -> Scenario:
        """`load_scenario` ``(path)``, or the copy loaded before from the same files.

        Args:
            path: As for [`load_scenario`][pytest_dsh_replay.load_scenario].
            keep_logs: The caller will read the recorded logs (`recorded_log`):
                when a scenario directory is read, its logs' lines are kept as the
                load parsed them, so the logs are not read a second time (logs of
                `TYPED_MIN_BYTES` or more are read
                again when asked for).

        Raises:
            DshReplayError: As [`load_scenario`][pytest_dsh_replay.load_scenario] (errors
                are not cached).
        """
        key = os.fspath(path)
        with self._lock:
            listed = self._listed.pop(key, None)
        if not self.recheck:
            kept = self._kept(self._scenarios, key)
            if kept is not None and _outline(key) == _outline_of(kept[0]):
                return cast("Scenario", kept[2])
        p = Path(key)
        # The directory as `listing` saw it, while one stat says it is unchanged.
        fresh = listed is not None and _outline(key) == _outline_of(listed[1])
        stamp = listed if fresh else _stamp(p)
        if stamp is None:
            return load_scenario(key)
        if self.recheck:
            found = self._get(self._scenarios, key, stamp[1])
            if found is not None:
                return cast("Scenario", found)
        files = _file_stamps(stamp)
        bodies: dict[str, list[tuple[int, Any]]] = {}
        if files is None:
            scenario = load_scenario(key)
        else:  # a directory: the stamp listed it already
            names = list(files)  # the stamp's entries, sorted by name
            scenario = _load_directory(p, bodies if keep_logs else None, names)
        # Unchanged while loading (examined again only when the files are rechecked).
        if not self.recheck or _stamp(p) == stamp:
            if not self.recheck:
                self._drop_logs(os.path.join(os.fspath(p), ""))  # kept from an older load
            self._put(self._scenarios, key, stamp, scenario)
            if files is not None and keep_logs:
                self._keep_bodies(files, scenario, bodies)
        return scenario

    def _drop_logs(self, prefix: str) -> None:
        """Drop the recorded logs kept under ``prefix`` (a directory, separator last)."""
        with self._lock:
            table = self._logs
            for key in [k for k in table.entries if k.startswith(prefix)]:
                table.total -= table.entries.pop(key)[1]

    def _keep_bodies(
        self,
        files: dict[str, _Stamp],
        scenario: Scenario,
        bodies: dict[str, list[tuple[int, Any]]],
    ) -> None:
        """Keep the logs' lines as `recorded_log` entries, stamped as the files are."""
        for script in scenario.scripts:
            if script.path is None:
                continue
            name = script.path.name
            lines = bodies.get(name)
            if lines and name in files:
                key = os.fspath(script.path)  # as the log check asks for it
                self._put(self._logs, key, files[name], KeptLines(script.header, lines, key))

    def recorded_log(self, path: str | os.PathLike[str]) -> SessionLog:
        """[`read_session_log`][pytest_dsh_replay.read_session_log] ``(path)``, shared.

        The events are shared with other callers: treat them as read-only.

        Raises:
            SessionLogError: As ``read_session_log``.
        """
        key = os.fspath(path)
        if not self.recheck:
            kept = self._kept(self._logs, key)
            if kept is not None:
                return self._log_of(kept[2])
        stamp = _stamp(Path(key))
        if stamp is not None:
            found = self._get(self._logs, key, stamp[1])
            if found is not None:
                return self._log_of(found)
        log = read_session_log(key)
        if stamp is not None:
            self._put(self._logs, key, stamp, log)
        return log

    def kept_lines(self, path: str | os.PathLike[str]) -> KeptLines | None:
        """The body lines of the log at ``path`` as its scenario's load kept them.

        ``None`` unless that load kept them (`load` with ``keep_logs``, a log under
        `TYPED_MIN_BYTES`), no one asked for the log since (`recorded_log`) and, when
        files are rechecked, the file is unchanged.
        """
        key = os.fspath(path)
        if not self.recheck:
            kept = self._kept(self._logs, key)
            found = None if kept is None else kept[2]
        else:
            stamp = _stamp(Path(key))
            found = None if stamp is None else self._get(self._logs, key, stamp[1])
        return found if isinstance(found, KeptLines) and not found.built else None

    def derived(
        self, sources: tuple[object, ...], make: Callable[[], _T], *, now: bool = False
    ) -> _T | None:
        """``make()``, computed once for these very objects, from their second use on.

        What a run derives from cached values (the log check's normalized forms of the
        recorded logs `recorded_log` returned,
        [docs/checks.md#log-check](../checks.md#log-check)) is kept beside them. The first
        ask for a set of objects (by identity) only notes it and returns ``None``, so a
        value that pays only when reused is never made for a scenario that one test replays;
        later asks return the value, made once. At most ``max_entries`` are kept, least
        recently used dropped.

        Args:
            sources: The objects the value is derived from (kept alive with it).
            make: Computes the value; it must depend on ``sources`` only.
            now: Make it on the first ask too (a value that pays from its first use).

        Returns:
            The value, or ``None`` on the first ask (unless ``now``).
        """
        key = tuple(map(id, sources))
        with self._lock:
            found = self._derived.get(key)
            fresh = found is None or not all(a is b for a, b in zip(found[0], sources, strict=True))
            if fresh:
                self._derived[key] = found = (sources, _UNMADE)
                while len(self._derived) > self.max_entries:
                    self._derived.popitem(last=False)
                if not now:
                    return None
            assert found is not None
            self._derived.move_to_end(key)
            if found[1] is not _UNMADE:
                return cast("_T", found[1])
        value = make()
        with self._lock:
            if key in self._derived:
                self._derived[key] = (sources, value)
        return value

    @staticmethod
    def _log_of(found: object) -> SessionLog:
        """A kept log; kept lines give the log (built once, kept with the lines)."""
        if isinstance(found, KeptLines):
            return found.log()
        return cast(SessionLog, found)
