"""The state of one test run and its summary, kept by the plugin (pytest-free)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._scripts.loading import ScenarioCache

__all__ = [
    "SuiteState",
    "hook_redaction",
    "plural",
    "recording_layout_problem",
    "summary_lines",
    "unused_scenarios",
]


@dataclass
class SuiteState:
    """What the plugin keeps for one pytest run (in ``config.stash``), pytest-free.

    Counts for the summary, the scenarios used (for the unused report), and what each
    test's fixture shares (the scenario cache, the redaction, the temporary base). Under
    ``pytest-xdist`` each worker keeps one and hands :meth:`report` to the controller,
    which :meth:`merge` s them.
    """

    record: str | None
    ini_root: Path | None
    used: set[str] = field(default_factory=set)
    roots: set[str] = field(default_factory=set)
    replayed: int = 0
    missing: int = 0
    broken: int = 0  # recordings that do not load
    subset: bool = False
    compare_logs: bool = True
    fail_unused: bool = False
    recordings: list[tuple[str, int, int, bool]] = field(default_factory=list)
    kept: int = 0
    unused: list[Path] | None = None
    env_model: Any = None
    workbase: Path | None = None
    runs: int = 0
    redaction: tuple[Any, Any, Any] | None = None
    recorders: list[Any] = field(default_factory=list)  # pytest items that record
    recovered: set[str] = field(default_factory=set)
    cleaned: int = 0
    unwritten: int = 0
    cache: ScenarioCache | None = None
    resolved_roots: dict[Path, str] = field(default_factory=dict)
    ini_root_prefix: str | None = None  # ini_root normalized, with a trailing separator

    def merge(self, report: dict[str, Any]) -> None:
        """Add a worker's report (``pytest-xdist``) to this state."""
        self.used.update(report["used"])
        self.roots.update(report["roots"])
        self.replayed += report["replayed"]
        self.missing += report["missing"]
        self.broken += report["broken"]
        self.subset = self.subset or report["subset"]
        self.recordings.extend(tuple(r) for r in report["recordings"])
        self.kept += report["kept"]
        self.cleaned += report["cleaned"]
        self.unwritten += report["unwritten"]

    def report(self) -> dict[str, Any]:
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
            "cleaned": self.cleaned,
            "unwritten": self.unwritten,
        }


def hook_redaction(config: Any) -> tuple[Any, Any, Any]:
    """The built-in redactor, and the redact hook for events and for headers.

    Args:
        config: The ``pytest.Config`` whose ``pytest_dsh_replay_redact`` hooks apply.
    """
    from .._check.redact import recording_redactor

    hook = config.hook.pytest_dsh_replay_redact
    # Implementations written before headers were redacted take only ``event``: they
    # are left out of header calls.
    event_only = [impl.plugin for impl in hook.get_hookimpls() if "header" not in impl.argnames]
    header_hook = config.pluginmanager.subset_hook_caller("pytest_dsh_replay_redact", event_only)

    def redact_event(event: dict[str, Any]) -> None:
        hook(event=event, header=None)

    def redact_header(header: dict[str, Any]) -> None:
        header_hook(event=None, header=header)

    return recording_redactor(), redact_event, redact_header


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


def plural(n: int, word: str) -> str:
    """``1 session``, ``2 sessions``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_lines(state: SuiteState) -> list[str]:
    """The terminal summary's lines; ``[]`` when no test used dsh-replay."""
    if not (state.used or state.recordings or state.missing or state.unused or state.kept):
        return []  # no test of this run used dsh-replay, and nothing is unused
    parts = [
        f"{state.replayed} replayed",
        f"{len(state.recordings)} recorded",
        f"{state.missing} missing",
    ]
    if state.broken:
        parts.append(f"{state.broken} broken (the recording does not load)")
    if state.unused is not None:
        parts.append(f"{len(state.unused)} unused")
    if state.kept:
        parts.append(f"{state.kept} not re-recorded (the test did not pass; old recording kept)")
    if state.unwritten:
        parts.append(
            f"{state.unwritten} not written (the recording could not be saved; old recording kept)"
        )
    if state.cleaned:
        parts.append(
            f"{plural(state.cleaned, 'leftover')} of interrupted writes recovered or removed"
        )
    lines = ["scenarios: " + ", ".join(parts)]
    for path, logs, calls, unchanged in sorted(state.recordings):
        kept = ", unchanged (files kept as they were)" if unchanged else ""
        lines.append(
            f"recorded {path}: {plural(logs, 'session')}, {plural(calls, 'model call')}{kept}"
        )
    if state.unused:
        verdict = "failing the run (--dsh-fail-unused)" if state.fail_unused else "no test uses"
        lines.append(f"unused scenarios ({verdict}):")
        lines.extend(f"  {p}" for p in state.unused)
    return lines


def recording_layout_problem(tests: list[tuple[str, Path]]) -> tuple[str, list[int]] | None:
    """The first duplicate or nested scenario among the tests that record, if any.

    Args:
        tests: ``(node id, scenario path)`` of every selected test that records.

    Returns:
        ``(message, indexes of the tests involved)``, or ``None`` when the layout is safe:
        no two tests record one scenario, and no recorded scenario lies inside another
        (recorded or on disk), since recording replaces a whole directory.
    """
    from .._errors import RecordingError
    from .._scripts.scenario import refuse_nested

    seen: dict[str, int] = {}
    for k, (nodeid, path) in enumerate(tests):
        key = str(path.resolve())
        other = seen.get(key)
        if other is not None:
            return (
                f"--dsh-record: {tests[other][0]} and {nodeid} would both record {path}; "
                "give one of them its own @pytest.mark.dsh_scenario name"
            ), [other, k]
        seen[key] = k
    for key, k in seen.items():
        path = Path(key)
        for ancestor in path.parents:
            other = seen.get(str(ancestor))
            if other is not None:
                return (
                    f"--dsh-record: {tests[other][0]} and {tests[k][0]} record nested "
                    f"scenarios {ancestor} and {path}; recording replaces a whole directory, "
                    "so give the scenarios sibling directories"
                ), [other, k]
        if path.exists() and not path.is_dir():
            continue  # a single log or store: the fixture says it cannot be recorded into
        try:
            refuse_nested(path)
        except RecordingError as err:
            return f"{tests[k][0]}: {err}", [k]
    return None
