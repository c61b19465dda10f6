"""Scenario layouts the plugin refuses before any test runs (pytest-free).

Two tests whose derived scenario names differ only in letter case would share one
directory on a case-insensitive file system; two tests that record one scenario, or
scenarios nested in each other, would overwrite each other's recording. The plugin asks
here at collection and fails the tests concerned (or the run) with these messages.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from .collected import CollectedTest
    from .suite import SuiteState

__all__ = ["case_collisions", "recording_layout_problem", "transcript_collisions"]


def case_collisions(
    tests: Sequence[CollectedTest], state: SuiteState
) -> list[tuple[str, tuple[int, int]]]:
    """Tests whose derived scenario names differ only in letter case.

    Derived names are injective, but a case-insensitive file system (macOS, Windows)
    would give two such tests one directory, and one would replay the other's recording.
    A test that names its scenario is left out: sharing a name is the user's choice.

    Args:
        tests: The collected tests, in collection order.
        state: The run's state.

    Returns:
        ``(message, (first, other))`` per collision, indexes into ``tests``, in the order
        found: each later test is paired with the first one that took its name.
    """
    from .scenarios import MARKER_KEYWORDS, scenario_path

    found: list[tuple[str, tuple[int, int]]] = []
    seen: dict[str, tuple[int, Path]] = {}
    for k, test in enumerate(tests):
        if not test.uses_replay or test.names_scenario:
            continue
        if not MARKER_KEYWORDS.issuperset(test.scenario_kwargs):
            continue  # a broken marker: the test's set-up says so
        path = scenario_path(test, state)  # derived: no name to be broken
        key = str(path).casefold()
        first = seen.get(key)
        if first is None:
            seen[key] = (k, path)
            continue
        other, other_path = first
        if other_path == path:  # (two modules of one name: --import-mode=importlib)
            clash = f"derive the same scenario name ({path.name}): they would share one recording"
        else:
            clash = (
                f"derive scenario names that differ only in letter case ({other_path.name}, "
                f"{path.name}): on a case-insensitive file system (macOS, Windows) they "
                "would share one recording"
            )
        message = (
            f"{tests[other].nodeid} and {test.nodeid} {clash}; give one of them "
            "a @pytest.mark.dsh_scenario name or another parametrize id"
        )
        found.append((message, (other, k)))
    return found


_NOT_IN_FILE_NAMES: Final = frozenset('\\/?*:|"<>')  # what syrupy drops from one


def _transcript_file(name: str) -> str:
    """The file name stem syrupy gives a single-file snapshot of test ``name``.

    It drops the characters a file name may not hold and control characters, so two
    parametrize ids that differ only in those share one file.
    """
    dotted = name.replace("::", ".")
    return "".join(
        c
        for c in dotted
        if c not in _NOT_IN_FILE_NAMES and not unicodedata.category(c).startswith("C")
    )


def transcript_collisions(tests: Sequence[CollectedTest]) -> list[tuple[str, tuple[int, int]]]:
    """Tests whose ``dsh_transcript`` snapshots would share one file.

    Returns:
        ``(message, (first, other))`` per collision, indexes into ``tests``: each later
        test is paired with the first one whose file name it would take.
    """
    found: list[tuple[str, tuple[int, int]]] = []
    seen: dict[tuple[Path, str], int] = {}
    for k, test in enumerate(tests):
        if "dsh_transcript" not in test.fixturenames:
            continue
        stem = _transcript_file(test.name)
        first = seen.setdefault((test.path, stem), k)
        if first == k or tests[first].name == test.name:
            continue
        found.append(
            (
                f"{tests[first].nodeid} and {test.nodeid} would share one dsh_transcript "
                f'file ({stem}.md): syrupy drops \\ / ? * : | " < > and control '
                "characters from file names; give one of them another parametrize id",
                (first, k),
            )
        )
    return found


def recording_layout_problem(
    tests: Sequence[CollectedTest], state: SuiteState
) -> tuple[str, list[int]] | None:
    """The first duplicate or nested scenario among the tests that record, if any.

    Args:
        tests: The selected tests, in collection order (those that do not request
            ``dsh_replay`` or do not record under the run's options are skipped).
        state: The run's state (``--dsh-record``'s mode, the snapshot root).

    Returns:
        ``(message, indexes into tests of the tests involved)``, or ``None`` when the
        layout is safe: no two tests record one scenario, and no recorded scenario lies
        inside another (recorded or on disk), since recording replaces a whole directory.

    Raises:
        ScenarioMarkerError: A test that requests ``dsh_replay`` has a broken marker (a
            refused name is left out: its test fails at set-up, see
            `ScenarioNameError`).
    """
    from .scenarios import ScenarioNameError, refuse_recording_outside, scenario_path, writes

    recording: list[tuple[int, Path]] = []
    for k, test in enumerate(tests):
        if not test.uses_replay:
            continue
        try:
            path = scenario_path(test, state)
            if writes(test, state, path):
                refuse_recording_outside(test, state, path)
                recording.append((k, path))
        except ScenarioNameError:
            continue  # a refused name fails its own test at set-up
    found = _layout_problem([(tests[k].nodeid, path) for k, path in recording])
    if found is None:
        return None
    message, which = found
    return message, [recording[i][0] for i in which]


def _layout_problem(tests: list[tuple[str, Path]]) -> tuple[str, list[int]] | None:
    """`recording_layout_problem` over ``(node id, scenario path)`` pairs."""
    from .._errors import RecordingError
    from .._scripts.scenario import refuse_nested

    seen: dict[str, int] = {}
    for k, (nodeid, path) in enumerate(tests):
        key = str(path.resolve())
        other = seen.get(key)
        if other is not None:
            return (
                f"--dsh-record: {tests[other][0]} and {nodeid} would both record {path}; "
                "give one of them its own @pytest.mark.dsh_scenario name, or mark the one "
                "that only replays it record=False (docs/guide/writing-tests.md)"
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
