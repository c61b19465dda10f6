"""Which scenario a test uses, and whether it records or replays it (pytest-free).

The plugin turns each ``pytest.Item`` into a `CollectedTest` and asks
here: where the test's scenario lives (its ``dsh_scenario`` marker, else a name derived
from the module and the test), whether it records under ``--dsh-record``, whether its
replayed logs are compared, and which paths pytest must not collect.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final

from .._errors import DshReplayError, ScenarioError

if TYPE_CHECKING:
    from .collected import CollectedTest
    from .suite import SuiteState

__all__ = [
    "DEFAULT_SNAPSHOT_DIR",
    "MARKER_KEYWORDS",
    "ScenarioMarkerError",
    "ScenarioNameError",
    "appends",
    "closest_scenario",
    "compare_logs",
    "ignores",
    "max_age",
    "recording_test",
    "records",
    "refuse_recording_outside",
    "resolved_root",
    "scenario_path",
    "snapshot_root",
    "writes",
]

DEFAULT_SNAPSHOT_DIR: Final = "dsh_snapshots"
"""The snapshot root beside each test module when ``dsh_snapshot_dir`` is not set."""

MARKER_KEYWORDS: Final = frozenset({"compare_logs", "max_age", "pace", "record"})
"""The keyword arguments ``@pytest.mark.dsh_scenario`` accepts."""
_SWITCHES: Final = ("record", "compare_logs")  # the keywords that take True or False

_DEFAULT_ROOT_PART: Final = f"{os.sep}{DEFAULT_SNAPSHOT_DIR}{os.sep}"


class ScenarioMarkerError(DshReplayError, ValueError):
    """A ``dsh_scenario`` marker cannot name a scenario.

    The message starts with the test's node id, then says what the marker takes and
    what it got (the plugin shows it as a usage error).
    """


class ScenarioNameError(ScenarioMarkerError):
    """A ``dsh_scenario`` name is refused: it is not a directory strictly inside the root.

    The message starts with the test's node id, then quotes the name and the rule
    ([docs/limits.md#paths](../limits.md#paths)). The plugin fails that test at set-up,
    before any live model is asked, instead of stopping the run.
    """


def snapshot_root(test: CollectedTest, state: SuiteState) -> Path:
    """The directory a test's scenario names are relative to.

    Returns:
        ``dsh_snapshot_dir`` when set, else ``dsh_snapshots/`` beside the test module.
    """
    if state.ini_root is not None:
        return state.ini_root
    return test.path.parent / DEFAULT_SNAPSHOT_DIR


def resolved_root(state: SuiteState, root: Path) -> str:
    """``str(root.resolve())``, resolved once per run and root (kept in ``state``)."""
    resolved = state.resolved_roots.get(root)
    if resolved is None:
        resolved = state.resolved_roots[root] = str(root.resolve())
    return resolved


def scenario_path(test: CollectedTest, state: SuiteState) -> Path:
    """The scenario a test replays or records.

    Args:
        test: The test.
        state: The run's state (the snapshot root, the roots resolved so far).

    Returns:
        The marker's name resolved against the snapshot root (an absolute path as it
        is); without a named scenario, ``<root>/<derived name>``, named after the module
        (relative to the rootdir when ``dsh_snapshot_dir`` is set, so modules sharing
        one root never collide) and the test.

    Raises:
        ScenarioMarkerError: The marker has other than one ``str``/``PathLike``
            argument, an unknown keyword, or a ``record`` or ``compare_logs`` that is not
            a ``bool``.
        ScenarioNameError: Its relative name does not resolve to a directory strictly
            inside the snapshot root (``.``, ``./``, ``a/..``, ``../x``, a symbolic link
            leaving the root, an empty name).
    """
    from .naming import resolve_scenario, scenario_name

    for key in _SWITCHES:
        value = test.scenario_kwargs.get(key, True)
        if not isinstance(value, bool):  # "false" and 0 would read as the opposite
            raise ScenarioMarkerError(
                f"{test.nodeid}: @pytest.mark.dsh_scenario({key}=...) takes True or False, "
                f"got {value!r}"
            )
    unknown = set(test.scenario_kwargs) - MARKER_KEYWORDS  # with or without a name
    if "name_or_path" in unknown:  # given by keyword beside a positional name
        raise ScenarioMarkerError(
            f"{test.nodeid}: @pytest.mark.dsh_scenario names the scenario twice, as its "
            "argument and as name_or_path=: give one"
        )
    if unknown:
        raise ScenarioMarkerError(
            f"{test.nodeid}: @pytest.mark.dsh_scenario accepts the keywords "
            f"{', '.join(sorted(MARKER_KEYWORDS))}, got {', '.join(sorted(unknown))}"
        )
    root = snapshot_root(test, state)
    if not test.names_scenario:
        rel = Path(test.path.name)
        if state.ini_root is not None and test.relpath is not None:
            rel = test.relpath
        return root / scenario_name("::".join([*rel.with_suffix("").parts, test.name]))
    args = test.scenario_args
    if len(args) != 1 or not isinstance(args[0], str | os.PathLike):
        raise ScenarioMarkerError(
            f"{test.nodeid}: @pytest.mark.dsh_scenario takes one scenario name or path, "
            f"got args={args!r}"
        )
    try:
        return resolve_scenario(root, args[0], resolved_root=resolved_root(state, root))
    except ScenarioError as err:
        raise ScenarioNameError(f"{test.nodeid}: {err}") from None


def refuse_recording_outside(test: CollectedTest, state: SuiteState, path: Path) -> None:
    """Refuse to record a scenario that is not strictly inside the snapshot root.

    A relative or derived name is inside by construction (`scenario_path`); an
    absolute marker path is replayed wherever it is, but recording replaces the whole
    directory, so it is recorded only strictly inside the root.

    Args:
        test: A test that records ``path``.
        state: The run's state.
        path: Its scenario (`scenario_path`).

    Raises:
        ScenarioNameError: ``path`` is absolute and resolves to the snapshot root, to a
            place outside it, or to one of its ancestors.
    """
    from .naming import SCENARIO_RULE, inside_root

    name = test.scenario_args[0] if test.names_scenario else None
    if not (isinstance(name, str | os.PathLike) and Path(os.fspath(name)).is_absolute()):
        return  # a relative name was checked by scenario_path
    root = snapshot_root(test, state)
    if inside_root(root, path, resolved_root=resolved_root(state, root)):
        return
    raise ScenarioNameError(
        f"{test.nodeid}: {root}: scenario path {str(path)!r} is not inside the snapshot root: "
        f"{SCENARIO_RULE}; an absolute path is replayed as it is, but recorded only inside the "
        "snapshot root (mark the test record=False to only replay it)"
    )


def compare_logs(test: CollectedTest, state: SuiteState) -> bool:
    """Whether the test's replayed logs are compared: the marker's say, else the ini's."""
    if "compare_logs" in test.scenario_kwargs:
        return bool(test.scenario_kwargs["compare_logs"])
    return state.compare_logs


def max_age(test: CollectedTest, state: SuiteState) -> timedelta | None:
    """The largest age the test allows its recording: the marker's ``max_age``, else the ini's.

    Raises:
        MaxAgeError: The marker's ``max_age`` names no duration (the ini's is read at
            start-up).
    """
    if "max_age" in test.scenario_kwargs:
        from .age import parse_max_age

        where = f"{test.nodeid}: @pytest.mark.dsh_scenario(max_age=...)"
        return parse_max_age(test.scenario_kwargs["max_age"], where)
    return state.max_age


def records(test: CollectedTest, state: SuiteState, path: Path, *, expired: bool = False) -> bool:
    """Whether the test records (rather than replays) ``path`` under the run's options.

    The run's record mode (`RecordMode`) says, from whether the scenario
    exists and whether its recording is ``expired``; without ``--dsh-record`` nothing
    records, and a replay-only test (``record=False``) never records.
    """
    if test.replay_only or state.record is None:
        return False  # another test records this scenario, or the run replays
    return state.record.records(exists=path.exists(), expired=expired)


def appends(test: CollectedTest, state: SuiteState, path: Path, *, expired: bool = False) -> bool:
    """Whether the test replays ``path`` and appends its new calls to it (``--dsh-record=new``).

    See [docs/recording.md#record-new](../recording.md#record-new); as `records`, never
    without ``--dsh-record`` nor for a replay-only test.
    """
    if test.replay_only or state.record is None:
        return False
    return state.record.appends(exists=path.exists(), expired=expired)


def writes(test: CollectedTest, state: SuiteState, path: Path) -> bool:
    """Whether the test may write ``path``: it records it, or appends to it."""
    return records(test, state, path) or appends(test, state, path)


def recording_test(
    path: Path, recorders: Iterable[CollectedTest], state: SuiteState
) -> CollectedTest | None:
    """The first of ``recorders`` that records ``path``, or ``None``."""
    target = path.resolve()
    for other in recorders:
        try:
            if scenario_path(other, state).resolve() == target:
                return other
        except ScenarioMarkerError:
            continue  # a broken marker fails that test on its own
    return None


def closest_scenario(path: Path) -> Path | None:
    """The existing scenario beside ``path`` whose name is closest to its name, if any.

    For a missing recording: a mistyped ``dsh_scenario`` name (``"captial"`` for
    ``"capital"``) or a renamed test. The candidates are the scenarios in ``path``'s
    directory (directories holding a primary log, and single log files); closeness is
    `difflib.get_close_matches`' (ratio at least 0.6).

    Returns:
        That scenario's path, or ``None`` when no name is close (or the directory does
        not exist).
    """
    import difflib

    from .._scripts.scenario import holds_primary_log

    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return None
    names = [
        e.name
        for e in entries
        if e.name != path.name
        and not e.name.startswith(".")
        and (holds_primary_log(Path(e.path)) if e.is_dir() else ".jsonl" in e.name)
    ]
    found = difflib.get_close_matches(path.name, names, n=1)
    return path.parent / found[0] if found else None


def ignores(state: SuiteState, collection_path: Path) -> bool:
    """Whether pytest must not collect ``collection_path``: a recorded scenario.

    A directory under a snapshot root (``dsh_snapshot_dir``, else any ``dsh_snapshots``
    directory) that holds a primary session log holds session logs, never tests;
    grouping directories between the root and the scenarios are collected as usual.
    """
    # Cheap string tests first: pytest asks about every file and directory it meets.
    text = str(collection_path)
    if state.ini_root_prefix is not None:
        if not text.startswith(state.ini_root_prefix):
            return False
    elif _DEFAULT_ROOT_PART not in text:
        return False
    from .._scripts.scenario import holds_primary_log

    return holds_primary_log(collection_path)
