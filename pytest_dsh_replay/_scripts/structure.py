"""What a scenario's sessions must agree on.

See [docs/scenarios.md#structure](../scenarios.md#structure).

A loaded scenario is a tree of sessions below the primary: each session once (no two
logs with one id), no child its own parent or its parents a cycle, the primary no
child of a session of the scenario. A fork child's seed, its first ``seedLength``
events (formats 0 and 1) or its events before the inherited ``session/end-seed``
(formats 2 to 5), must be its parent's log as far as the seed goes, event by event
(type and data; ``seq``, ``time`` and the envelope may differ), so its parent must be
in the scenario. Anything else loads as a scenario that replays what was never
recorded: a child that binds twice, a fork child that loses its call.
`check_tree` and `check_seeds` refuse it, naming the files and what
differs.

A parent the scenario does not hold: in a SQLite store, which holds every session its
writer created, it is damage and refused; in a scenario directory a child's parent may
not have been recorded (the harness's record suite pins such a session; a session
whose parent never called the model has one) and the child loads, bound as a
top-level session, unless it is a fork child. A single log is a scenario of one
session, and under the runtime's sessions root the primary is the session asked for
and its children are found from it: the primary's own ``parentSession`` may name a
session outside the scenario everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextlib import ExitStack, closing
from itertools import islice
from pathlib import Path
from typing import Any

from .._errors import ScenarioError, SessionLogError
from .._format.chunk_rows import PackedRow, expand_packed_row
from .._format.events import Event
from .._format.jsonl import body_digests, iter_records, open_session_log
from .scenario import SessionScript

__all__ = ["EventPrefix", "check_seeds", "check_tree", "log_prefix", "store_prefix"]

Prefix = Generator[tuple[int | None, Event], None, None]
EventPrefix = Callable[[SessionScript, int], Prefix]
"""Reads a session's first ``n`` logical events: ``(line or None, event)`` pairs."""


def _ids(scripts: Iterable[SessionScript], where: Path) -> dict[str, SessionScript]:
    """The scripts by recorded id; two logs of one session are refused."""
    by_id: dict[str, SessionScript] = {}
    for script in scripts:
        sid = script.recorded_id
        if not sid:
            continue  # a format 0 header may carry no id: nothing can name it
        other = by_id.get(sid)
        if other is not None:
            raise ScenarioError(
                f"{other.file} and {script.file} are the same session (id {sid!r}); a "
                "scenario holds each session's log once: remove the copy",
                path=str(where),
            )
        by_id[sid] = script
    return by_id


def _parent_problem(
    script: SessionScript, by_id: Mapping[str, SessionScript], *, parents_inside: bool
) -> str | None:
    parent = script.parent_session
    if parent and parent == script.recorded_id:
        return f"names itself as its parentSession ({parent!r})"
    if parent in by_id:
        return None
    known = ", ".join(repr(s) for s in sorted(by_id)[:8])
    if parents_inside:
        if not parent:
            return "has no parentSession; a store's one session without it is the primary"
        return (
            f"names parentSession {parent!r}, which is no session of this store (its "
            f"sessions: {known}); a store holds every session its writer created"
        )
    if (script.seed_length or script.header.seeded) and not parent:
        return (
            "has a fork seed (seedLength) but its header names no parentSession (a "
            "string): a fork's seed is a copy of its parent's log, so the header must say "
            "whose"
        )
    if script.seed_length or script.header.seeded:
        return (
            f"is a fork child of {parent!r}, which is no session of this scenario (its "
            f"sessions: {known}); a fork's seed is a copy of its parent's log, which the "
            "scenario must hold"
        )
    return None  # a parent that was not recorded: the child binds as a top-level session


def check_tree(
    scripts: tuple[SessionScript, ...], where: Path, *, parents_inside: bool = False
) -> None:
    """Refuse sessions that do not form a tree below the primary.

    Args:
        scripts: The scenario's scripts, the primary first.
        where: The scenario directory, store or sessions root, for messages.
        parents_inside: Every child's parent must be a session of the scenario (a SQLite
            store, which holds every session its writer created). Otherwise a child
            whose parent was not recorded loads (the harness's record suite pins such a
            session; a session whose parent never called the model has one), bound as
            a top-level session, unless it is a fork child.

    Raises:
        ScenarioError: Two logs of one session; a child whose ``parentSession`` is
            itself, or whose parents lead round a cycle; a fork child whose parent the
            scenario does not hold (and, with ``parents_inside``, any such child); a
            primary whose ``parentSession`` names a session of the scenario.
    """
    by_id = _ids(scripts, where)
    primary = scripts[0]
    if primary.parent_session in by_id:
        raise ScenarioError(
            f"the primary {primary.file} names parentSession {primary.parent_session!r}, "
            "a session of this scenario: the primary is the root of its sessions",
            path=str(where),
        )
    for child in scripts[1:]:
        problem = _parent_problem(child, by_id, parents_inside=parents_inside)
        if problem is not None:
            raise ScenarioError(f"child session {child.file} {problem}", path=str(where))
    for child in scripts[1:]:
        _refuse_cycle(child, by_id, where)


def _refuse_cycle(child: SessionScript, by_id: Mapping[str, SessionScript], where: Path) -> None:
    """Follow ``child``'s parents up to the primary or a parent not recorded."""
    seen = [child.file]
    node: SessionScript | None = by_id.get(child.parent_session or "")
    while node is not None and not node.primary:
        if node.file in seen:
            cycle = " -> ".join([*seen[seen.index(node.file) :], node.file])
            raise ScenarioError(
                f"child session {child.file}'s parents form a cycle that never reaches the "
                f"primary: {cycle}",
                path=str(where),
            )
        seen.append(node.file)
        node = by_id.get(node.parent_session or "")


def _expanded(
    records: Iterable[tuple[int | None, Event | PackedRow]],
) -> Iterator[tuple[int | None, Event]]:
    for line, record in records:
        if isinstance(record, PackedRow):
            for event in expand_packed_row(record):
                yield line, event
        else:
            yield line, record


def log_prefix(script: SessionScript, n: int) -> Prefix:
    """A log file's first ``n`` logical events with their lines (an `EventPrefix`)."""
    assert script.path is not None
    with open_session_log(script.path) as (_, _, lines):
        records = iter_records(lines, source=str(script.path))
        yield from islice(_expanded(records), n)


def store_prefix(records: Callable[[str], list[Any]]) -> EventPrefix:
    """An `EventPrefix` over a store's sessions, from its committed records."""

    def prefix(script: SessionScript, n: int) -> Prefix:
        found = records(script.recorded_id)
        yield from islice(_expanded((None, r) for r in found), n)

    return prefix


def _difference(child: Event, parent: Event) -> str | None:
    """How a seed event differs from its parent's, in words; ``None`` when it does not."""
    kind, parent_kind = child.get("type"), parent.get("type")
    if kind != parent_kind:
        return f"a {kind!r} event where the parent has {parent_kind!r}"
    data, parent_data = child.get("data"), parent.get("data")
    if data == parent_data:
        return None
    if isinstance(data, dict) and isinstance(parent_data, dict):
        keys = [k for k in {**parent_data, **data} if data.get(k) != parent_data.get(k)]
        return f"a {kind!r} event whose data differ in {', '.join(map(repr, keys))}"
    return f"a {kind!r} event whose data differ"


def _seed_error(
    child: SessionScript, parent: SessionScript, index: int, line: int | None, why: str
) -> SessionLogError:
    where = child.file if child.path is None else str(child.path)
    if line is None and child.path is not None:  # a store's session: <store>#<id>
        where = f"{child.path}#{child.recorded_id}"
    return SessionLogError(
        f"the fork seed differs from its parent's log: event {index} of its "
        f"{child.seed_length}-event seed is {why} (parent {parent.file}); a fork child's "
        "seed is a copy of its parent's log up to the fork",
        path=where,
        line=line,
    )


def _same_bytes(scripts: tuple[SessionScript, ...], by_id: Mapping[str, SessionScript]) -> set[str]:
    """The fork children whose seed lines are, byte for byte, their parent's first lines.

    What the runtime and the recorder write (a seed is copied as it is): then the events
    are the same without reading them again. Each parent's head is read once, as far as
    its longest such seed.
    """
    wanted: dict[str, list[SessionScript]] = {}
    for child in scripts[1:]:
        parent = by_id.get(child.parent_session or "")
        if child.seed_digest is not None and parent is not None and parent.path is not None:
            wanted.setdefault(parent.recorded_id, []).append(child)
    same: set[str] = set()
    for parent_id, children in wanted.items():
        path = by_id[parent_id].path
        assert path is not None
        digests = body_digests(path, (c.seed_digest[0] for c in children if c.seed_digest))
        if digests is None:
            continue
        same.update(
            c.recorded_id
            for c in children
            if c.seed_digest is not None and digests.get(c.seed_digest[0]) == c.seed_digest[1]
        )
    return same


def check_seeds(scripts: tuple[SessionScript, ...], prefix: EventPrefix) -> None:
    """Refuse a fork child whose seed is not its parent's log up to the fork.

    A seed whose lines are the parent's own, byte for byte, matches without being read
    as events; any other is read again, beside its parent's log, and compared event by
    event: the same type and the same data
    ([docs/scenarios.md#structure](../scenarios.md#structure)).

    Args:
        scripts: The scenario's scripts, the primary first (the primary is never
            compared: it replays unsliced).
        prefix: Reads a session's first events.

    Raises:
        SessionLogError: A seed event differs from its parent's (naming the child's
            file and line, the parent's file and what differs), or the parent's log
            is shorter than the seed.
    """
    by_id = {s.recorded_id: s for s in scripts if s.recorded_id}
    same = _same_bytes(scripts, by_id)
    forks: dict[str, list[SessionScript]] = {}
    for child in scripts[1:]:
        parent = by_id.get(child.parent_session or "")
        if child.seed_length and parent is not None and child.recorded_id not in same:
            forks.setdefault(parent.recorded_id, []).append(child)
    for parent_id, children in forks.items():
        _check_against(by_id[parent_id], children, prefix)


def _check_against(
    parent: SessionScript, children: list[SessionScript], prefix: EventPrefix
) -> None:
    """Compare every fork child's seed with ``parent``'s log, reading each log once.

    The parent's head is read once, as far as the longest seed, and each child's seed
    beside it in the same pass (a parent with many fork children is not read again for
    each).

    Raises:
        SessionLogError: As `check_seeds`.
    """
    longest = max(child.seed_length for child in children)
    with ExitStack() as stack:
        theirs = stack.enter_context(closing(prefix(parent, longest)))
        active = [(c, stack.enter_context(closing(prefix(c, c.seed_length)))) for c in children]
        for index in range(longest):
            found = next(theirs, None)
            still: list[tuple[SessionScript, Prefix]] = []
            for child, mine in active:
                got = next(mine, None) if index < child.seed_length else None
                if got is None:
                    continue  # this seed ends here
                line, event = got
                why = (
                    f"past the end of the parent's {index} events"
                    if found is None
                    else _difference(event, found[1])
                )
                if why is not None:
                    raise _seed_error(child, parent, index, line, why)
                still.append((child, mine))
            if not still:
                return
            active = still
