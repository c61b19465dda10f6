"""Comparing the logs of a run with a recording, and writing them as a recording would.

`Redaction` turns a session into what a recording writes (secrets redacted, the
working directory as ``{{cwd}}``, the user's hooks run); `first_difference` finds
the first difference between recorded and live logs (compared as they are first, and
redacted only when something differs, so a report never shows a live secret);
`unchanged_recording` tells whether a re-record would write what is there already
(`recorded_pairing`: which new log each recorded file holds, children as a set);
`race_report` says that a failed replay met a race inside the agent's runtime.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .._errors import DshReplayError
from .._format.events import Event, JSONObject, SessionHeader, SessionLike, SessionLog
from .._format.jsonl import iter_records, read_session_log
from .._format.redact import Redactor
from .._scripts.entries import ChunksEntry
from .._scripts.scenario import PRIMARY_LOG
from .normalize import (
    LogDifference,
    Normalizer,
    RunTexts,
    canonical_log,
    normalized_form,
    records_form,
    segments_form,
    tokenize_cwd,
)

__all__ = [
    "Comparison",
    "Drift",
    "Redaction",
    "drift_of",
    "first_difference",
    "forms_agree",
    "lines_forms",
    "log_forms",
    "logs_agree",
    "race_report",
    "recorded_pairing",
    "unchanged_recording",
]


class Comparison(Protocol):
    """A log comparison: ``diff_logs`` or the runtime's model-view comparison."""

    def __call__(
        self,
        file: str,
        expected: tuple[SessionHeader, Sequence[Event]],
        actual: tuple[SessionHeader, Sequence[Event]],
        *,
        expected_normalizer: Normalizer,
        actual_normalizer: Normalizer,
    ) -> LogDifference | None:
        """The first difference, or ``None``."""


@dataclass(frozen=True)
class Redaction:
    """What happens to a session before it is written or shown.

    Attributes:
        redactor: The secret rules.
        event_hook: Extra redaction, called with each event copy (changes it in place).
        header_hook: Extra redaction, called with each header's JSON object.
    """

    redactor: Redactor
    event_hook: Callable[[Event], object] | None = None
    header_hook: Callable[[dict[str, Any]], object] | None = None

    def apply(self, header: SessionHeader, events: Sequence[Event]) -> SessionLog:
        """The session as a recording writes it: redacted, the cwd as ``{{cwd}}``."""
        out: list[Event] = []
        for event in self.redactor.redact_events(events):
            copy: Event = tokenize_cwd(event, header.cwd)
            if self.event_hook is not None:
                self.event_hook(copy)
            out.append(copy)
        raw = tokenize_cwd(self.redactor.redact(header.to_json()), header.cwd)
        if self.header_hook is not None:
            self.header_hook(raw)
        return SessionLog(SessionHeader.from_json(raw), out)


def _normalizers(
    recorded: Sequence[SessionHeader],
    live: Sequence[SessionHeader],
    aliases: Mapping[str, str] | None = None,
) -> tuple[Normalizer, Normalizer]:
    def of(headers: Sequence[SessionHeader], aliases: Mapping[str, str] | None) -> Normalizer:
        return Normalizer(
            session_ids=[h.id for h in headers],
            cwds=[h.cwd for h in headers if h.cwd],
            aliases=aliases,
        )

    return of(recorded, None), of(live, aliases)


def first_difference(
    pairs: Sequence[tuple[str, SessionLog, SessionLike]],
    *,
    recorded: Sequence[SessionHeader],
    live: Sequence[SessionHeader],
    compare: Comparison,
    redaction: Redaction,
    aliases: Mapping[str, str] | None = None,
) -> tuple[str, LogDifference] | None:
    """The first difference between recorded and live logs, in pair order.

    Args:
        pairs: ``(file, recorded (header, events), live log)`` per session.
        recorded: Every recorded session's header (ids and cwds are normalized).
        live: Every live session's header.
        compare: How two logs are compared.
        redaction: Applied to both sides before a difference is reported.
        aliases: ``{recorded id: live id}`` of the bound sessions: a recorded id that the
            replayed side repeats (in a served answer) counts as its live id.

    Returns:
        ``(file, difference)`` for the first pair that differs, else ``None``.
    """
    if logs_agree(pairs, recorded=recorded, live=live, compare=compare, aliases=aliases):
        return None
    # Logs that agree as they are agree redacted too; redaction, the costly part, is
    # needed only to tell a secret from its [REDACTED] and to report without one.
    expected, actual = _normalizers(recorded, live, aliases)
    for file, (header, events), log in pairs:
        mine = redaction.apply(log.header, log.events)
        diff = compare(
            file,
            (header, redaction.redactor.redact_events(events)),
            (mine.header, mine.events),
            expected_normalizer=expected,
            actual_normalizer=actual,
        )
        if diff is not None:
            return file, diff
    return None


def logs_agree(
    pairs: Sequence[tuple[str, SessionLog, SessionLike]],
    *,
    recorded: Sequence[SessionHeader],
    live: Sequence[SessionHeader],
    compare: Comparison,
    aliases: Mapping[str, str] | None = None,
) -> bool:
    """Whether `first_difference` finds none: every pair compared as it is (no redaction).

    The arguments are `first_difference`'s. Logs that agree as they are agree redacted
    too, so ``True`` is `first_difference`'s ``None``; ``False`` is a difference, which
    `first_difference` finds again on the redacted logs for its report.
    """
    expected, actual = _normalizers(recorded, live, aliases)
    return all(
        compare(
            file,
            recorded_log,
            (log.header, log.events),
            expected_normalizer=expected,
            actual_normalizer=actual,
        )
        is None
        for file, recorded_log, log in pairs
    )


@dataclass(frozen=True)
class Drift:
    """The log check's first difference, with the events around it on both sides.

    What a picture of a drifted replay shows side by side
    ([docs/guide/picture.md#drift](../guide/picture.md#drift)).

    Attributes:
        file: The recorded log's name (``session.1.jsonl``).
        difference: The difference, as the check found it.
        report: The check's words for it (`describe_difference`).
        first: The index of the first event shown (0 for a header difference).
        recorded: The recorded events from ``first`` on (at most ``2 * context + 1``),
            redacted and normalized (ids numbered within these events, times and
            envelopes dropped); the header alone for a header difference.
        replayed: The replayed events at the same indexes, alike.
    """

    file: str
    difference: LogDifference
    report: str
    first: int
    recorded: tuple[JSONObject, ...]
    replayed: tuple[JSONObject, ...]


def drift_of(
    file: str,
    difference: LogDifference,
    recorded: SessionLike,
    replayed: SessionLike,
    *,
    redaction: Redaction,
    report: str,
    headers: tuple[Sequence[SessionHeader], Sequence[SessionHeader]] = ((), ()),
    aliases: Mapping[str, str] | None = None,
    context: int = 3,
) -> Drift:
    """The events around ``difference`` on both sides, as the check compares them.

    Args:
        file: The recorded log's name.
        difference: What `first_difference` found in this pair.
        recorded: The recorded log.
        replayed: The replayed log.
        redaction: Applied to both sides before anything is shown.
        report: The check's report of the difference.
        headers: Every recorded and every replayed session's header (their ids and
            working directories are normalized as the check normalizes them).
        aliases: ``{recorded id: live id}`` of the bound sessions (the replayed side).
        context: How many events before and after the differing one are kept.
    """
    sides: list[tuple[JSONObject, ...]] = []
    index = difference.index
    first = 0 if index is None else max(0, index - context)
    for log, others, alias in ((recorded, headers[0], None), (replayed, headers[1], aliases)):
        shown = redaction.apply(log.header, log.events)
        every = [log.header, *others]
        normalizer = Normalizer(
            session_ids=[h.id for h in every], cwds=[h.cwd for h in every if h.cwd], aliases=alias
        )
        header = normalizer.header(shown.header)
        if index is None:
            sides.append((header,))
            continue
        events = shown.events[: index + context + 1]
        sides.append(tuple(normalizer.event(e) for e in events)[first:])
    return Drift(file, difference, report, first, sides[0], sides[1])


def log_forms(
    logs: Sequence[tuple[SessionHeader, Sequence[Any]]],
    headers: Sequence[SessionHeader],
    aliases: Mapping[str, str] | None = None,
    *,
    segmented: bool = False,
    runs: RunTexts | None = None,
) -> tuple[tuple[bytes, ...], ...] | None:
    """The normalized forms of one side's logs, in order: the log check's digest.

    One side of `first_difference` as `diff_logs` normalizes it: one
    normalizer over ``headers`` (the side's every session; ``aliases`` on the replayed
    side), fed each log's header and events in order
    ([docs/checks.md#log-check](../checks.md#log-check)). With ``segmented``, each log is
    given as its header and its segments (`segments_form`: the log check by reference's
    worked-out logs, [docs/checks.md#by-reference](../checks.md#by-reference)); ``runs``:
    the recorded runs entries were derived from (`lines_forms`), a whole entry's run
    (`EntryRun`) then taken as that run by identity.

    Returns:
        Each log's `normalized_form`, or
        ``None`` when one of them cannot vouch for its values (compare in full then).
    """
    normalizer = Normalizer(
        session_ids=[h.id for h in headers], cwds=[h.cwd for h in headers if h.cwd], aliases=aliases
    )
    forms = []
    for header, events in logs:
        form = (
            segments_form(header, events, normalizer, runs=runs)
            if segmented
            else normalized_form(header, events, normalizer)
        )
        if form is None:
            return None
        forms.append(form)
    return tuple(forms)


def lines_forms(
    logs: Sequence[tuple[SessionHeader, Sequence[tuple[int, Any]], str, Sequence[object]]],
    headers: Sequence[SessionHeader],
) -> tuple[tuple[tuple[bytes, ...], ...], RunTexts] | None:
    """`log_forms` of the recorded logs, made from the lines their load parsed.

    The recording's side of the log check by reference
    ([docs/checks.md#by-reference](../checks.md#by-reference)), made once per loaded
    scenario: no event is built (`records_form`), and the runs each entry was derived
    from are noted for the replayed side to take by identity.

    Args:
        logs: Per recorded log in order: its header, its body lines as parsed
            (``(line, value)``), its name for messages, and the entries derived from it.
        headers: Every recorded session's header.

    Returns:
        ``(forms, runs)``, or ``None`` when a form cannot vouch for its values or a
        line does not read (compare in full then).
    """
    normalizer = Normalizer(
        session_ids=[h.id for h in headers], cwds=[h.cwd for h in headers if h.cwd]
    )
    runs: RunTexts = {}
    forms = []
    for header, lines, source, entries in logs:
        origins: dict[tuple[int, int], ChunksEntry] = {}
        for entry in entries:
            if isinstance(entry, ChunksEntry) and entry.origin is not None:
                origins[entry.origin] = entry
        try:
            records = list(iter_records(iter(lines), source=source))
        except DshReplayError:
            return None
        form = records_form(header, records, normalizer, origins, runs)
        if form is None:
            return None
        forms.append(form)
    return tuple(forms), runs


def forms_agree(
    recorded_forms: tuple[tuple[bytes, ...], ...] | None,
    pairs: Sequence[tuple[str, SessionLog, SessionLike]],
    *,
    live: Sequence[SessionHeader],
    aliases: Mapping[str, str] | None = None,
) -> bool:
    """Whether the digests say that `first_difference` (with ``diff_logs``) finds none.

    ``recorded_forms`` are `log_forms` of the pairs' recorded logs (over every
    recorded header); the live logs are reduced to the same form. ``True`` only when
    every form is equal: then ``diff_logs`` finds no difference in any pair (equal
    normalized values, the normalizers fed alike). ``False`` says nothing: compare in
    full, for the verdict and its message.
    """
    if recorded_forms is None or len(recorded_forms) != len(pairs):
        return False
    mine = log_forms([(log.header, log.events) for _, _, log in pairs], live, aliases)
    return mine is not None and mine == recorded_forms


def unchanged_recording(
    path: Path, logs: Sequence[SessionLog], compare: Comparison
) -> list[Path] | None:
    """The recording's log files when they hold exactly ``logs``, else ``None``.

    Exactly means ([docs/recording.md#writing](../recording.md#writing)): the directory
    holds those logs and nothing else, each in its committed form, and `recorded_pairing`
    pairs every log with a file. Then a re-record need not write: the files keep their bytes, ids,
    times and numbering.
    """
    pairing = recorded_pairing(path, logs, compare)
    if pairing is None:
        return None
    return [path / _log_name(n) for n in range(len(pairing))]


def _log_name(n: int) -> str:
    return PRIMARY_LOG if n == 0 else f"session.{n}.jsonl"


def recorded_pairing(
    path: Path, logs: Sequence[SessionLog], compare: Comparison
) -> list[int] | None:
    """Which of ``logs`` each log file of the recording at ``path`` holds, if all agree.

    The children are paired as a set ([docs/checks.md#unchanged](../checks.md#unchanged)):
    children started at once are created, and so numbered, in whichever order the scheduler
    gives, so a re-record of the same behaviour may hold ``session.1.jsonl``'s child second. The
    primaries are compared first; then each recorded child, in file order, takes the
    first remaining log that ``compare`` finds no difference with, each side
    normalized as one scenario in that order (ids numbered by first appearance, times
    and the working directory aside), so the verdict is exactly that of comparing the
    recording with ``logs`` in the returned order.

    Args:
        path: The recorded scenario directory.
        logs: The new logs, the primary first.
        compare: How two logs are compared (``diff_logs``, or the dsh runtime's
            model-view comparison).

    Returns:
        ``pairing[n]`` is the index in ``logs`` of the log that file ``n``
        (``session.jsonl``, ``session.1.jsonl``, ...) holds; ``None`` when the directory
        holds other files, a log not in its committed form, another number of logs, or
        a log that no new one agrees with.
    """
    if not path.is_dir():
        return None
    names = [_log_name(n) for n in range(len(logs))]
    try:
        if sorted(os.listdir(path)) != sorted(names):
            return None  # other files (sidecars) would not survive a write either
        old = []
        for name in names:
            data = (path / name).read_bytes()
            if canonical_log(data, source=str(path / name)) != data:
                return None  # a write would change its form
            old.append(read_session_log(path / name))
    except (OSError, DshReplayError):
        return None
    expected, actual = _normalizers([h for h, _ in old], [log.header for log in logs])
    free = list(range(len(logs)))
    pairing: list[int] = []
    for n, (name, previous) in enumerate(zip(names, old, strict=True)):
        candidates = free if n else free[:1]  # the primary only with the primary
        for k in candidates:
            mine, theirs = expected.copy(), actual.copy()
            log = logs[k]
            found = compare(
                name,
                previous,
                (log.header, log.events),
                expected_normalizer=mine,
                actual_normalizer=theirs,
            )
            if found is None:
                expected, actual = mine, theirs  # keep the numbering this pair made
                pairing.append(k)
                free.remove(k)
                break
        else:
            return None
    return pairing


def race_report(problem: str, races: Sequence[str]) -> str:
    """A failed replay that met races inside the dsh runtime: the problem, then the races.

    No re-record advice: a recording holds the one order the runtime took, and a replay
    cannot make the runtime take it again
    ([docs/limits.md#runtime-races](../limits.md#runtime-races)).

    Args:
        problem: What failed (a log difference, a call beyond the recording, ...).
        races: The races the run took otherwise, each described.
    """
    return (
        f"{problem}\n(this replay met a race inside the dsh runtime that no replay can "
        "decide (docs/limits.md#runtime-races): "
        + "; ".join(races)
        + ". Re-recording does not fix a race: the recording holds the order the runtime "
        "took that time, and a replay cannot make the runtime take it again)"
    )
