"""Scenarios: a primary session and its children, as ordered replay scripts.

A [`Scenario`][pytest_dsh_replay.Scenario] holds one
[`SessionScript`][pytest_dsh_replay.SessionScript] per recorded session: the primary first,
then the children by (``createdAt``, id). A child's script comes only from its own events (a
fork child's inherited prefix is not its own work); the primary is never sliced.
`load_session_script` reads one log; where scenarios are loaded from (directories, stores,
the runtime's sessions root) is [`load_scenario`][pytest_dsh_replay.load_scenario]'s
business. [`write_scenario`][pytest_dsh_replay.write_scenario] writes sessions as a scenario
directory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, TypeAlias, cast

from .._errors import RecordingError, ScenarioError, SessionLogError
from .._format.chunk_rows import PackedRow
from .._format.events import END_SEED, JSONObject, SessionHeader, SessionLike
from .._format.jsonl import dump_session_log, head_digest, open_session_log
from .._format.log_names import entry_log_name
from .builder import ScriptBuilder
from .entries import ReplayEntry

if TYPE_CHECKING:
    from .override import Override

__all__ = [
    "PRIMARY_LOG",
    "Scenario",
    "SessionScript",
    "child_order",
    "derived_script",
    "holds_primary_log",
    "is_scenario_entry",
    "iter_scenario_dirs",
    "load_session_script",
    "locale_sort_key",
    "looks_like_sidecar",
    "nested_scenario",
    "order_sessions",
    "refuse_foreign",
    "refuse_nested",
    "scenario_of",
    "sidecar_name",
    "sidecar_number",
    "write_scenario",
]

PRIMARY_LOG: Final = "session.jsonl"
"""The primary session's log in a scenario directory (children: ``session.<n>.jsonl``)."""


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
        first_user_blocks: That message's text blocks (``first_user_text`` is them
            joined without a separator); errors quote them joined with
            `BLOCK_SEPARATOR`.
        opening_blocks: The text blocks of the session's **opening**: the first message
            of the run of user messages its first own call was made after (``()``: that
            call followed no user message; ``None``: unknown, the first own user message
            stands for it). A child binds by it
            ([docs/scenarios.md#binding](../scenarios.md#binding)): for a child whose first
            request carries history (a fork that repeats its parent's turn), it is the
            question the child was started with, not the history's first message.
        opening_run: The texts of every message of that run, in order (``()``: none
            known): what tells apart children whose openings are equal (two questions
            asked after the same task).
        seed_digest: For a fork child read from a log file, the size and digest of its
            seed's lines (`head_digest`), to
            compare them with its parent's log; ``None`` otherwise.
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
    first_user_blocks: tuple[str, ...] | None = field(default=None, compare=False)
    opening_blocks: tuple[str, ...] | None = field(default=None, compare=False)
    opening_run: tuple[str, ...] = field(default=(), compare=False)

    @property
    def opening_text(self) -> str | None:
        """The text a child binds by: its opening's (blocks joined without a separator).

        The first own user message's when the opening is unknown (``None``).
        """
        blocks = self.opening_blocks
        if blocks is None:
            return self.first_user_text
        return "".join(blocks) if blocks else None

    @property
    def opening_shown(self) -> str | None:
        """`opening_text` as messages quote it: its blocks visibly joined."""
        if self.opening_blocks is None:
            return self.first_user_shown
        if not self.opening_blocks:
            return None
        from .._format.text import join_blocks

        return join_blocks(self.opening_blocks)

    seed_digest: tuple[int, int] | None = field(default=None, compare=False)

    @property
    def first_user_shown(self) -> str | None:
        """The first own user message as messages quote it: its blocks visibly joined."""
        if self.first_user_blocks is None:
            return self.first_user_text
        from .._format.text import join_blocks

        return join_blocks(self.first_user_blocks)

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
        replay_plan: What the replay computes once for every model over this scenario
            ([docs/architecture.md#replay-plan](../architecture.md#replay-plan));
            ``None`` until the first model; not part of the scenario's value.

    Raises:
        ScenarioError: ``scripts`` is empty (a scenario has a primary).
    """

    path: Path
    scripts: tuple[SessionScript, ...]
    # Left empty by the loader, filled by the replay layer (the layer above: typed object
    # here); not part of the scenario's value (equality, repr) nor of its constructor.
    replay_plan: object = field(default=None, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.scripts:
            raise ScenarioError(
                "a scenario holds at least one script, the primary's; got none",
                path=str(self.path),
            )

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


LocaleKey: TypeAlias = tuple[tuple[tuple[int, str], ...], tuple[int, ...]]
"""What `locale_sort_key` gives: per character ``(group, folded)``, then case bits."""


@lru_cache(maxsize=4096)  # ids repeat across loads of the same scenarios
def locale_sort_key(text: str) -> LocaleKey:
    """A sort key approximating JavaScript ``localeCompare`` (ICU root collation).

    The dsh harness breaks ``createdAt`` ties between children with
    ``a.localeCompare(b)`` ([docs/scenarios.md#child-order](../scenarios.md#child-order)).
    ICU's default order compares letters case-insensitively first (lowercase before
    uppercase only as a tie-break) and puts whitespace, then punctuation, then symbols, then
    digits before letters. This key reproduces that order for the ids that occur in practice
    (UUIDs, ``session-<n>``, labels); it is not a full Unicode Collation Algorithm.

    Returns:
        ``(primary, tertiary)``: per character a (group, case-folded letter) pair, then
        the per-character case flags (0 lower, 1 upper).
    """
    import unicodedata  # only to order children: not on a one-session scenario's path

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


def child_order(created_at: int, session_id: str) -> tuple[int, LocaleKey]:
    """The sort key of children in replay order: by ``createdAt``, then by id."""
    return created_at, locale_sort_key(session_id)


def _child_order(script: SessionScript) -> tuple[int, LocaleKey]:
    return child_order(script.created_at, script.recorded_id)


# --- reading one log -------------------------------------------------------------------


def load_session_script(
    path: str | os.PathLike[str],
    *,
    primary: bool = True,
    override: Override | None = None,
    file: str | None = None,
    body: list[tuple[int, Any]] | None = None,
) -> SessionScript:
    """Read one log file and derive its script.

    Args:
        path: A log of format 0 to 5, plain or zstd (``.jsonl``, ``.jsonl.zst``,
            ``.jsonl.zstd``; generation names such as ``session.v4.jsonl`` too).
        primary: ``True`` derives from every event; ``False`` (a child) derives only
            from its own events: those at or after the header's ``seedLength``
            (formats 0 and 1), or after its last inherited ``session/end-seed``
            (formats 2 to 5).
        override: A sidecar to apply. A bare-array override replaces the script and
            the log's calls are not derived at all.
        file: The name to report as `SessionScript.file` (default: the file name).
        body: A list that receives the log's body lines as read, ``(line number,
            parsed value)`` pairs, when every line of the body parsed as plain JSON (a
            log under `TYPED_MIN_BYTES`); left empty
            otherwise. `session_log_from_body` turns
            them into the log's events without reading the file again.

    Returns:
        The session's script.

    Raises:
        SessionLogError: The log is unreadable or malformed; its header breaks its
            format's rules (an unknown version, a format 2-5 header that does not
            parse as one, a ``seedLength`` that is not a non-negative integer); its
            seed does not fit the log.
        ScriptError: A call cannot be derived (names the file and line).
        OverrideError: The override's patches do not fit the derived script.
    """
    p = path if isinstance(path, Path) else Path(path)  # Path(Path) parses it again
    source = str(p)
    derive = override is None or override.replace is None
    text: list[IO[bytes]] = []
    with open_session_log(p, calls=True, text=text) as (header, header_line, lines):
        fmt = header.format
        marked = header.spec.seeded
        seed_length = header.seed_length if header.seeded and not marked else 0
        builder = ScriptBuilder(
            version=fmt,
            skip=0 if primary else seed_length,
            cut_at_marker=marked and not primary,
            source=source,
            derive=derive,
        )
        seed = (
            _SeedLines(builder, marked) if not primary and (seed_length or header.seeded) else None
        )
        fed = lines if seed is None else seed.watch(lines)
        if body is None:
            builder.feed(fed)
        else:
            builder.feed(_kept(fed, body))
            if any(value.__class__ is not dict for _, value in body):
                body.clear()  # decoded typed: not the values an event reader gets
        digest = None if seed is None or seed.end is None else head_digest(text[0], seed.end)
    if marked:
        if header.seeded and not builder.markers:
            raise SessionLogError(
                f"format v{fmt} seeded session lacks an inherited end-seed marker: its "
                'header says isSeeded but no session/end-seed event says "inherited": true',
                path=source,
                line=header_line,
            )
        if not header.seeded and builder.markers:
            raise SessionLogError(
                f"format v{fmt} unseeded session contains an inherited end-seed marker: "
                "its header says isSeeded false",
                path=source,
                line=header_line,
            )
        seed_length = builder.boundary or 0
    script = derived_script(
        builder,
        header,
        file=file if file is not None else p.name,
        path=p,
        primary=primary,
        seed_length=seed_length,
        line=None if marked else header_line,
        override=override,
    )
    return script if digest is None else replace(script, seed_digest=digest)


class _SeedLines:
    """Where a fork child's seed ends among its log's lines, noted while the log is fed.

    Formats 0 and 1: the first line whose events are the child's own (the builder has
    counted ``skip`` events before it). Formats 2 to 5: the line of the last inherited
    ``session/end-seed`` marker (one event per line: the seed is the lines before it).
    """

    __slots__ = ("builder", "end", "marked")

    def __init__(self, builder: ScriptBuilder, marked: bool) -> None:
        self.builder = builder
        self.marked = marked
        self.end: int | None = None

    def watch(self, lines: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
        builder = self.builder
        lines = iter(lines)
        if not self.marked:
            last: tuple[int, Any] | None = None
            start = 0
            for line in lines:
                count = builder.event_count
                if count >= builder.skip:
                    self.end = line[0]
                    self._closed(start, last, count, line)
                    yield line
                    yield from lines  # the child's own lines, unwatched
                    return
                yield line
                start, last = count, line
            if builder.event_count == builder.skip:
                self._closed(start, last, builder.skip, None)
            return
        for line in lines:
            markers = builder.markers
            yield line
            if builder.markers != markers:
                self.end = line[0]

    def _closed(
        self,
        start: int,
        last: tuple[int, Any] | None,
        count: int,
        here: tuple[int, Any] | None,
    ) -> None:
        seed_length = self.builder.skip
        problem = seed_end_problem(
            seed_length,
            start,
            None if last is None else last[1],
            count,
            None if here is None else here[1],
        )
        if problem is not None:
            at = last if count > seed_length or here is None else here  # the row cut
            raise SessionLogError(
                f"the header's seedLength {problem}",
                path=self.builder.source,
                line=None if at is None else at[0],
            )


def seed_end_problem(
    seed_length: int, start: int, last: object, count: int, here: object
) -> str | None:
    """Why a format 0/1 fork child's seed does not end where its header says, or ``None``.

    A seed is followed by ``session/end-seed`` at seq ``seedLength``, or ends with one
    (a seed that already closed itself gets no second marker); see
    [docs/scenarios.md#seeds](../scenarios.md#seeds). Anything else means the header's
    count and the log disagree, and slicing there would replay part of the parent's
    log as the child's own calls.

    Args:
        seed_length: The header's ``seedLength``; ``0`` is never a problem.
        start: The seq of ``last``'s first event.
        last: The record before ``here`` (an event or a packed row; ``None``: none).
        count: The seq of ``here``'s first event (the events read before it).
        here: The first record past seq ``seed_length - 1`` (``None``: the log ends).
    """
    if seed_length <= 0 or (_is_end_seed(here) and count == seed_length) or _is_end_seed(last):
        return None
    if count > seed_length:
        at = f"seq {seed_length} is inside a packed chunk row holding seqs {start} to {count - 1}"
    elif here is None:
        at = "the log ends there"
    else:
        at = f"the event at seq {seed_length} is {_kind(here)}"
    return (
        f"{seed_length} does not fit this log: {at}, and a fork child's seed "
        "is followed by a session/end-seed event at seq seedLength (or ends with one); "
        "restore the seedLength that was written, or re-record the scenario"
    )


def _is_end_seed(record: object) -> bool:
    return record.__class__ is dict and cast(dict[str, Any], record).get("type") == END_SEED


def _kind(record: object) -> str:
    if isinstance(record, PackedRow):
        return f"a packed {record.chunk_type} row"  # a row starting at the seed's end
    kind = cast(dict[str, Any], record).get("type") if record.__class__ is dict else None
    return repr(kind) if isinstance(kind, str) else "an event without a type"


def _kept(
    lines: Iterable[tuple[int, Any]], body: list[tuple[int, Any]]
) -> Iterator[tuple[int, Any]]:
    for line in lines:
        body.append(line)
        yield line


def derived_script(
    builder: ScriptBuilder,
    header: SessionHeader,
    *,
    file: str,
    path: Path,
    primary: bool,
    seed_length: int,
    line: int | None = None,
    override: Override | None = None,
) -> SessionScript:
    """A session's script from a builder that has read the whole log.

    Args:
        builder: The builder, fed every record of the log.
        header: The log's header.
        file: The name reported as `SessionScript.file`.
        path: The log (or store) the session was read from.
        primary: Whether this is the scenario's primary session.
        seed_length: The inherited prefix the builder skipped (``0`` for none); for a
            header count (formats 0 and 1, given with ``line``), it must fit the log.
        line: The header's line, when ``seed_length`` is the header's count to check.
        override: A sidecar to apply to the derived entries.

    Raises:
        ScriptError: A call cannot be derived.
        SessionLogError: A header count larger than the log.
        OverrideError: The override's patches do not fit the derived script.
    """
    entries = builder.finish()
    if not primary and seed_length > builder.event_count:
        raise SessionLogError(
            f"header seedLength {seed_length} is larger than the log's "
            f"{builder.event_count} events; a fork child's seed is a prefix of its own log",
            path=builder.source,
            line=line,
        )
    if override is not None:
        from .override import apply_override  # only for a sidecar

        entries = apply_override(entries, override)
    return SessionScript(
        file=file,
        recorded_id=header.id,
        created_at=header.created_at,
        seed_length=seed_length,
        parent_session=header.parent_session,
        primary=primary,
        entries=tuple(entries),
        path=path,
        header=header,
        event_count=builder.event_count,
        first_user_text=builder.first_user_text,
        first_user_blocks=builder.first_user_blocks,
        opening_blocks=builder.opening_blocks,
        opening_run=builder.opening_run,
    )


def scenario_of(path: Path, primary: SessionScript, children: Iterable[SessionScript]) -> Scenario:
    """A scenario from its primary and its children, the children put in replay order."""
    return Scenario(path=path, scripts=(primary, *sorted(children, key=_child_order)))


# --- writing a scenario (docs/recording.md#writing) -----------------------------------------------


def order_sessions(sessions: Iterable[SessionLike]) -> list[SessionLike]:
    """Order sessions as a scenario stores them: primary, then children.

    See [docs/scenarios.md#child-order](../scenarios.md#child-order).

    The primary is the one session without ``parentSession``; the children follow by
    (``createdAt``, id), the order replay binds them in.

    Raises:
        RecordingError: ``sessions`` is not an iterable of sessions (objects with a
            `SessionHeader` ``header`` and ``events``), or no session, or more than one,
            lacks ``parentSession``.
    """
    if isinstance(sessions, str | bytes | dict) or not isinstance(sessions, Iterable):
        raise RecordingError(f"sessions must be an iterable of sessions, got {sessions!r:.80}")
    items = list(sessions)
    for item in items:
        if not isinstance(getattr(item, "header", None), SessionHeader) or not hasattr(
            item, "events"
        ):
            raise RecordingError(
                "each session must have a SessionHeader header and its events (a store's "
                f"Session, a SessionLog, a StoredLog), got {item!r:.80}"
            )
    roots = [s for s in items if s.header.parent_session is None]
    if len(roots) != 1:
        ids = ", ".join(repr(s.header.id) for s in roots) or "none"
        raise RecordingError(
            "a scenario needs exactly one primary session (a session without "
            f"parentSession); found {len(roots)}: {ids}"
        )
    children = [s for s in items if s is not roots[0]]
    children.sort(key=lambda s: child_order(s.header.created_at, s.header.id))
    return [roots[0], *children]


def write_scenario(path: str | os.PathLike[str], sessions: Iterable[SessionLike]) -> list[Path]:
    """Write sessions as a scenario directory in the committed form, atomically.

    The primary goes to ``session.jsonl`` and the children to ``session.<n>.jsonl`` in
    replay order (`order_sessions`). Each log is written as the harness commits
    fixtures: the header line, then every event with delta runs packed into
    chunk rows and the top-level ``seq``/``time`` envelope removed.

    The directory is replaced as a whole: everything is written and flushed to a hidden
    sibling first, which then takes the place of ``path`` (on Linux in one step, so
    ``path`` never stops existing). If anything fails, ``path`` is left exactly as it
    was; files of an older recording (a child that no longer exists) do not survive a
    successful write. After a crash mid-write, the next write (or
    `recover`) finds the old or the new recording and
    removes the hidden leftovers.

    Args:
        path: The scenario directory to create or replace.
        sessions: The sessions to write; exactly one has no ``parentSession``.

    Returns:
        The written log files, primary first.

    Raises:
        RecordingError: ``path`` is empty; ``sessions`` are not sessions; not exactly
            one primary session; ``path`` holds another
            scenario below it or lies inside one (replacing it would delete the other);
            ``path`` is a file, or a directory holding entries no scenario holds (see
            `refuse_foreign`); or the directory cannot be written or replaced (the
            message names the error).
    """
    from .._store.atomic import replace_path  # writing only: reading never needs it

    if isinstance(path, str) and not path.strip():  # Path("") would be the current dir
        raise RecordingError(f"an empty path names no scenario directory: {path!r}")
    target = Path(path)
    ordered = order_sessions(sessions)
    refuse_nested(target)
    refuse_foreign(target)
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


def holds_primary_log(directory: Path) -> bool:
    """Whether ``directory`` holds a scenario's primary log (``session.jsonl`` or a variant)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return False
    return any(_is_primary_log(name) for name in names)


def _is_primary_log(name: str) -> bool:
    parsed = entry_log_name(name)
    return parsed is not None and parsed.child is None


def iter_scenario_dirs(
    root: str | os.PathLike[str],
    *,
    files: Callable[[Path], bool] | None = None,
    onerror: Callable[[OSError], None] | None = None,
) -> Iterator[Path]:
    """Yield every directory under ``root`` (itself included) that holds a primary log.

    Directories are yielded in sorted path order; hidden directories are skipped. With
    ``files``, the same walk also yields each file outside those directories (not
    hidden) that ``files`` accepts: `dsh-replay check` passes ``is_sqlite_store``.
    ``onerror`` gets each directory the walk cannot list (default: skipped).
    """
    for dirpath, dirnames, filenames in os.walk(Path(root), onerror=onerror):
        dirnames[:] = sorted(n for n in dirnames if not n.startswith("."))
        here = Path(dirpath)
        if any(_is_primary_log(name) for name in filenames):
            yield here
        elif files is not None:
            yield from (
                here / n for n in sorted(filenames) if not n.startswith(".") and files(here / n)
            )


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
        if holds_primary_log(ancestor):
            return ancestor
    return None


def is_scenario_entry(name: str) -> bool:
    """Whether ``name`` is what a scenario directory holds: a log, a sidecar, a leftover.

    Logs are the names `parse_log_name` reads (a ``session.jsonl.bak`` beside them is
    the user's), sidecars the two valid names (``replay.override.json``,
    ``replay.<n>.override.json``; a misspelled one or a backup is the user's too),
    leftovers the hidden names
    a replacement uses ([docs/recording.md#writing](../recording.md#writing)); and
    macOS's ``.DS_Store``.
    """
    from .._store.atomic import LEFTOVER

    return (
        entry_log_name(name) is not None
        or sidecar_number(name) is not None
        or LEFTOVER.fullmatch(name) is not None
        or name == ".DS_Store"  # what macOS's Finder leaves in any folder it shows
    )


_CHILD_SIDECAR: Final = r"replay\.([1-9][0-9]*)\.override\.json"  # compiled on first use


def sidecar_name(session: int) -> str:
    """The override sidecar of session ``session`` (0: the primary, ``n``: child ``n``).

    ``replay.override.json``, ``replay.<n>.override.json``
    ([docs/scenarios.md#naming](../scenarios.md#naming)).
    """
    return "replay.override.json" if session == 0 else f"replay.{session}.override.json"


def sidecar_number(name: str) -> int | None:
    """The session a valid override sidecar name patches (0: the primary); ``None``: none.

    The inverse of `sidecar_name`: a misspelled name (see `looks_like_sidecar`) is none.
    """
    if name == "replay.override.json":
        return 0
    found = re.fullmatch(_CHILD_SIDECAR, name) if name.startswith("replay.") else None
    return None if found is None else int(found.group(1))


def looks_like_sidecar(name: str) -> bool:
    """Whether ``name`` is meant as an override sidecar (misspelled ones included).

    ``replay.override.json`` and ``replay.<n>.override.json`` are the valid names; any
    other name that starts with ``replay`` and mentions ``override`` (any case:
    ``replay.overrides.json``, ``replay.1.override.JSON``, ``replay.override.json.bak``)
    is refused by loading rather than silently ignored
    ([docs/scenarios.md#naming](../scenarios.md#naming)).
    """
    lowered = name.lower()
    return lowered.startswith("replay") and "override" in lowered


def refuse_foreign(path: str | os.PathLike[str]) -> None:
    """Refuse to write a scenario over what is not one.

    Writing replaces ``path`` as a whole, so an existing ``path`` must be a directory
    holding only a scenario's entries (`is_scenario_entry`: logs, sidecars, hidden
    leftovers; none at all included): what else a user keeps there is never deleted
    ([docs/recording.md#writing](../recording.md#writing)).

    Raises:
        RecordingError: ``path`` is a file (or another non-directory), or a directory
            holding other entries (the message names up to five of them).
    """
    target = Path(path)
    if not os.path.lexists(target):
        return
    if target.is_symlink():
        raise RecordingError(
            f"cannot write scenario {target}: it is a symbolic link, and writing a scenario "
            "replaces the whole directory, the link included; name the directory it points "
            f"to ({os.path.realpath(target)}) instead"
        )
    if not target.is_dir():
        raise RecordingError(
            f"cannot write scenario {target}: it exists and is not a directory; a "
            "scenario is a directory of session logs: choose another path"
        )
    try:
        names = sorted(os.listdir(target))
    except OSError as err:
        raise RecordingError(f"cannot write scenario {target}: {err}") from err
    foreign = [n for n in names if not is_scenario_entry(n)]
    if foreign:
        shown = ", ".join(foreign[:5]) + (
            f" and {len(foreign) - 5} more" if len(foreign) > 5 else ""
        )
        what = (
            "which is no scenario's file" if len(foreign) == 1 else "which are no scenario's files"
        )
        raise RecordingError(
            f"cannot write scenario {target}: the directory holds {shown}, {what} (logs, "
            "override sidecars), and writing a scenario replaces the whole directory; move "
            "them out of it (nothing was written)"
        )


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
