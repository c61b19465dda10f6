"""The state of one test run, the complete-run rule and the summary (pytest-free)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from .budget import UsageRow
from .modes import RECORD_MODES, RecordMode, RecordModes

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeAlias

    from .._fixture.usage import UsageTotals
    from .._format.events import Event, JSONObject
    from .._format.redact import Redactor
    from .._recording.live_openai import OpenAICompatibleModel
    from .._scripts.loading import ScenarioCache
    from .._store.lock import RecordingLock

    Redaction: TypeAlias = tuple[Redactor, Callable[[Event], None], Callable[[JSONObject], None]]
    """The built-in redactor, the redact hook for events and the one for headers."""

__all__ = [
    "RunScope",
    "SuiteState",
    "WorkerReport",
    "body_cap",
    "failing_line",
    "find_unused",
    "is_complete_run",
    "plural",
    "summary_lines",
    "unused_scenarios",
]


class WorkerReport(TypedDict):
    """What a ``pytest-xdist`` worker hands the controller (`SuiteState.report`)."""

    used: list[str]
    roots: list[str]
    replayed: int
    missing: int
    broken: int
    subset: bool
    recordings: list[list[str | int | bool]]
    kept: int
    not_recorded: int
    cleaned: int
    stuck: list[str]
    unwritten: int
    unwritten_new: int
    expired: int
    refreshed: int
    appended: list[list[str | int]]
    usages: list[list[str | int | float | None]]


@dataclass
class SuiteState:
    """What the plugin keeps for one pytest run (in ``config.stash``), pytest-free.

    Counts for the summary, the scenarios used (for the unused report), and what each
    test's fixture shares (the scenario cache, the redaction, the temporary base). Under
    ``pytest-xdist`` each worker keeps one and hands `report` to the controller,
    which `merge` s them.
    """

    record: RecordMode | None  # --dsh-record's mode; None replays
    ini_root: Path | None
    modes: RecordModes = RECORD_MODES  # the modes hints name (docs/recording.md#record-mode)
    used: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)
    replayed: int = 0
    missing: int = 0
    broken: int = 0  # recordings that do not load
    subset: bool = False
    compare_logs: bool = True
    fail_unused: bool = False
    max_body_bytes: int | None = None  # the endpoint's body cap (dsh_replay_max_body_bytes)
    # What gives --dsh-record its live model, named for messages (None: nothing yet).
    live_source: Callable[[], str | None] = lambda: None
    # (path, logs, calls, unchanged, guessed parents, the override sidecars it removed)
    recordings: list[tuple[str, int, int, bool, int, str]] = field(default_factory=list)
    kept: int = 0  # recordings not made (the test failed); an old one exists and stays
    not_recorded: int = 0  # recordings not made (the test failed); there was none
    unused: list[Path] | None = None
    env_model: OpenAICompatibleModel | None = None
    workbase: Path | None = None
    runs: int = 0
    redaction: Redaction | None = None
    # directory -> its hidden entries (leftovers, lock files) not dealt with yet
    recovered: dict[str, set[str]] = field(default_factory=dict)
    cleaned: int = 0  # leftovers of interrupted writes put back or removed
    stuck: list[str] = field(default_factory=list)  # leftovers that stay: what failed
    unwritten: int = 0  # recordings that could not be saved; an old one stays
    unwritten_new: int = 0  # recordings that could not be saved; there was none
    # tests interrupted (Ctrl-C) after their new recording took its place: their
    # snapshots go with it
    written_interrupted: set[str] = field(default_factory=set)
    cache: ScenarioCache | None = None
    locks: dict[str, RecordingLock] = field(default_factory=dict)  # node id -> its lock
    resolved_roots: dict[Path, str] = field(default_factory=dict)
    ini_root_prefix: str | None = None  # ini_root normalized, with a trailing separator
    max_age: timedelta | None = None  # dsh_max_age (docs/recording.md#expiry)
    strict_age: bool = False  # --dsh-strict-age: an expired recording fails its test
    expired: int = 0  # recordings replayed although older than their test allows
    refreshed: int = 0  # expired recordings recorded again by --dsh-record=missing
    # --dsh-record=new: (scenario, calls appended, files written) per recording appended to
    appended: list[tuple[str, int, int]] = field(default_factory=list)
    report_usage: bool = False  # --dsh-usage (docs/checks.md#usage)
    usages: list[UsageRow] = field(default_factory=list)  # a row per test, when reported
    pace: float = 0.0  # --dsh-pace (docs/scenarios.md#pacing)

    def __post_init__(self) -> None:
        if self.ini_root is not None and self.ini_root_prefix is None:
            self.ini_root_prefix = os.path.join(os.path.normpath(self.ini_root), "")

    def env_live_model(self) -> OpenAICompatibleModel | None:
        """The built-in live model configured from ``DSH_RECORD_*`` (one per run).

        Returns:
            The OpenAI-compatible adapter, or ``None`` when the variables are not set.

        Raises:
            RecordingError: The variables are set but ``openai`` is not installed.
        """
        if self.env_model is None:
            from .._recording.live_openai import OpenAICompatibleModel

            self.env_model = OpenAICompatibleModel.from_env()
        return self.env_model

    def merge(self, report: WorkerReport) -> None:
        """Add a worker's report (``pytest-xdist``) to this state."""
        self.used.update(report["used"])
        self.roots.update(report["roots"])
        self.replayed += report["replayed"]
        self.missing += report["missing"]
        self.broken += report["broken"]
        self.subset = self.subset or report["subset"]
        self.recordings.extend(_recording(r) for r in report["recordings"])
        self.kept += report["kept"]
        self.not_recorded += report["not_recorded"]
        self.cleaned += report["cleaned"]
        self.stuck.extend(report["stuck"])
        self.unwritten += report["unwritten"]
        self.unwritten_new += report["unwritten_new"]
        self.expired += report["expired"]
        self.refreshed += report["refreshed"]
        self.appended.extend((str(p), int(c), int(f)) for p, c, f in report["appended"])
        self.usages.extend(_usage_row(row) for row in report["usages"])

    def report(self) -> WorkerReport:
        """What a worker sends to the controller: plain, serializable values."""
        return {
            "used": sorted(self.used),
            "roots": sorted(self.roots),
            "replayed": self.replayed,
            "missing": self.missing,
            "broken": self.broken,
            "subset": self.subset,
            "recordings": [list(r) for r in self.recordings],
            "kept": self.kept,
            "not_recorded": self.not_recorded,
            "cleaned": self.cleaned,
            "stuck": list(self.stuck),
            "unwritten": self.unwritten,
            "unwritten_new": self.unwritten_new,
            "expired": self.expired,
            "refreshed": self.refreshed,
            "appended": [list(row) for row in self.appended],
            "usages": [list(row) for row in self.usages],
        }

    def add_usage(self, nodeid: str, used: UsageTotals) -> None:
        """Keep a test's usage totals for the ``--dsh-usage`` table."""
        self.usages.append(
            UsageRow(
                nodeid,
                used.calls,
                used.input_tokens,
                used.output_tokens,
                used.reasoning_tokens,
                used.cached_tokens,
                used.cost_usd,
            )
        )


def _recording(row: list[str | int | bool]) -> tuple[str, int, int, bool, int, str]:
    """A recording's summary row, as a worker's report carries it (a list), typed again."""
    path, files, calls, unchanged, guessed, removed = row
    return str(path), int(files), int(calls), bool(unchanged), int(guessed), str(removed)


def _usage_row(row: list[str | int | float | None]) -> UsageRow:
    """A usage row as a worker sent it (a JSON-like list), typed again."""
    nodeid, calls, tokens_in, tokens_out, reasoning, cached, cost = row
    return UsageRow(
        str(nodeid),
        int(calls or 0),
        int(tokens_in or 0),
        int(tokens_out or 0),
        int(reasoning or 0),
        int(cached or 0),
        None if cost is None else float(cost),
    )


def body_cap(raw: str) -> int | None:
    """The ``dsh_replay_max_body_bytes`` ini value: a positive number of bytes.

    Args:
        raw: The value as written (``""``: not set).

    Returns:
        The cap, or ``None`` when not set (the endpoint's default applies).

    Raises:
        ValueError: The value is not a positive whole number; the message names the key.
    """
    value = raw.strip()
    if not value:
        return None
    if value.isascii() and value.isdigit() and int(value) > 0:
        return int(value)
    raise ValueError(
        f"dsh_replay_max_body_bytes must be a positive whole number of bytes, got {value!r}"
    )


def unused_scenarios(state: SuiteState) -> list[Path]:
    """The scenario directories under the run's snapshot roots that no test used."""
    from .naming import find_scenario_dirs

    roots = set(state.roots)
    if state.ini_root is not None:
        roots.add(str(state.ini_root.resolve()))
    # The walk starts at resolved roots and never follows a link, so what it finds is
    # resolved already; a used path is resolved only when it is not found as written.
    found = {str(p) for root in roots for p in find_scenario_dirs(Path(root))}
    used = set(state.used)
    used.update(str(Path(u).resolve()) for u in state.used if u not in found)
    return sorted(Path(p) for p in found - used)


@dataclass(frozen=True)
class RunScope:
    """What decides whether a run was complete, read from the pytest session at its end.

    Attributes:
        collect_only: ``--collect-only``: nothing ran.
        stopped: The session stopped early (``-x``, ``--sw``, a plugin's ``shouldstop``
            or ``shouldfail``, an interrupt such as Ctrl-C).
        failed: The number of failed tests.
        maxfail: ``--maxfail`` (``0`` when unset).
        args: The paths given on the command line, as typed, or ``None`` when pytest
            chose them itself (``testpaths`` or the current directory).
        rootpath: The rootdir.
        testpaths: The ``testpaths`` ini value, relative to the rootdir.
        invocation_dir: The directory pytest was started in.
        narrowed: Collection itself left tests out, without deselecting them: ``--lf``
            (the files and tests that passed last time), ``--ignore``, ``--ignore-glob``.
    """

    collect_only: bool
    stopped: bool
    failed: int
    maxfail: int
    args: tuple[str, ...] | None
    rootpath: Path
    testpaths: tuple[str, ...]
    invocation_dir: Path
    narrowed: bool = False


def is_complete_run(scope: RunScope, state: SuiteState) -> bool:
    """Whether the run selected every test, so a scenario no test used is unused.

    A run is a subset when it only collected, stopped early or at ``--maxfail``, was
    narrowed (``-k``, ``-m``, any deselection, ``--lf``, ``--ignore``), or named paths on
    the command line other than the rootdir or its ``testpaths`` (a node id,
    ``path::test``, always narrows).
    """
    if scope.collect_only:  # nothing ran: no scenario can have been used
        return False
    if state.subset or scope.stopped or scope.narrowed:
        return False
    if scope.failed and scope.maxfail and scope.failed >= scope.maxfail:
        return False
    if scope.args is not None:
        base = scope.rootpath
        defaults = {base.resolve()} | {(base / p).resolve() for p in scope.testpaths}
        here = scope.invocation_dir
        return all("::" not in arg and (here / arg).resolve() in defaults for arg in scope.args)
    return True


def find_unused(state: SuiteState, scope: RunScope) -> bool:
    """On a complete run, note the unused scenarios in ``state.unused``.

    Returns:
        Whether they fail the run: some are unused and ``--dsh-fail-unused`` is on.
    """
    if not (state.used or state.ini_root is not None) or not is_complete_run(scope, state):
        return False
    state.unused = unused_scenarios(state)
    return bool(state.unused) and state.fail_unused


def plural(n: int, word: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def failing_line(state: SuiteState) -> str | None:
    """The line that says the run fails for unused scenarios, though its tests passed."""
    if not (state.unused and state.fail_unused):
        return None
    return (
        f"FAIL: {plural(len(state.unused), 'unused scenario')} (--dsh-fail-unused): "
        "the run fails with exit status 1 even where every test passed"
    )


def _rewritten_parts(state: SuiteState) -> list[str]:
    """The summary's counts of expired recordings recorded again and recordings appended to."""
    parts = []
    if state.refreshed:
        parts.append(f"{state.refreshed} re-recorded because expired")
    appended = sum(1 for _, _, files in state.appended if files)
    if appended:  # a recording with nothing new is kept as it was: not counted
        parts.append(f"{appended} appended to (--dsh-record=new)")
    return parts


def _appended_lines(appended: list[tuple[str, int, int]]) -> list[str]:
    """One line per recording ``--dsh-record=new`` appended to (or found nothing new for)."""
    lines = []
    for path, calls, files in sorted(appended):
        if files:
            lines.append(
                f"appended to {path}: {plural(calls, 'new model call')} "
                f"({plural(files, 'file')} written, the recorded bytes kept)"
            )
        else:
            lines.append(f"appended to {path}: nothing new (files kept as they were)")
    return lines


def summary_lines(state: SuiteState) -> list[str]:
    """The terminal summary's lines; ``[]`` when no test used dsh-replay."""
    if not (
        state.used
        or state.recordings
        or state.appended
        or state.missing
        or state.unused
        or state.kept
        or state.not_recorded
    ):
        return []  # no test of this run used dsh-replay, and nothing is unused
    parts = [
        f"{state.replayed} replayed",
        f"{len(state.recordings)} recorded",
        f"{state.missing} missing",
    ]
    if state.broken:
        parts.append(f"{state.broken} broken (the recording does not load)")
    if state.expired:
        parts.append(f"{state.expired} expired (older than their max age; replayed)")
    parts.extend(_rewritten_parts(state))
    if state.unused is not None:
        parts.append(f"{len(state.unused)} unused")
    if state.kept:
        parts.append(f"{state.kept} not re-recorded (the test did not pass; old recording kept)")
    if state.not_recorded:
        parts.append(
            f"{state.not_recorded} not recorded (the test did not pass; nothing was written)"
        )
    if state.unwritten:
        parts.append(
            f"{state.unwritten} not written (the recording could not be saved; old recording kept)"
        )
    if state.unwritten_new:
        parts.append(
            f"{state.unwritten_new} not written (the recording could not be saved; there was "
            "no recording before)"
        )
    if state.cleaned:
        parts.append(
            f"{plural(state.cleaned, 'leftover')} of interrupted writes recovered or removed"
        )
    stuck = list(dict.fromkeys(state.stuck))  # xdist workers may each meet one
    if stuck:
        parts.append(
            f"{plural(len(stuck), 'leftover')} of interrupted writes could not be recovered "
            "or removed (below)"
        )
    lines = ["scenarios: " + ", ".join(parts)]
    lines.extend(f"  {line}" for line in stuck)
    for path, logs, calls, unchanged, guessed, removed in sorted(state.recordings):
        kept = ", unchanged (files kept as they were)" if unchanged else ""
        lines.append(
            f"recorded {path}: {plural(logs, 'session')}, {plural(calls, 'model call')}{kept}"
        )
        if removed:
            lines.append(
                f"  the new recording replaced the directory and its override sidecars "
                f"({removed}): add them back from version control if they still apply "
                "(docs/recording.md#writing)"
            )
        if guessed:
            lines.append(
                f"  content alone could not tell which session started "
                f"{plural(guessed, 'child session')} (several could have; the parent was "
                "guessed): send the x-dsh-session-id and x-dsh-parent-session-id headers "
                "(docs/wires.md#calling-session)"
            )
    lines.extend(_appended_lines(state.appended))
    if state.unused:
        verdict = "failing the run (--dsh-fail-unused)" if state.fail_unused else "no test uses"
        lines.append(f"unused scenarios ({verdict}):")
        lines.extend(f"  {p}" for p in state.unused)
    return lines
