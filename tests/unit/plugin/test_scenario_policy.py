"""Which scenario a test uses and whether it records: the policy, called without pytester."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support.collected import collected, suite_state

from pytest_dsh_replay import plugin
from pytest_dsh_replay._plugin.scenarios import (
    DEFAULT_SNAPSHOT_DIR,
    ScenarioMarkerError,
    compare_logs,
    ignores,
    recording_test,
    records,
    scenario_path,
)

NODE = "tests/test_m.py::test_x"


def test_a_derived_name_sits_beside_the_module_without_a_snapshot_dir(tmp_path: Path) -> None:
    test = collected(tmp_path, NODE)
    assert scenario_path(test, suite_state()) == tmp_path / "tests/dsh_snapshots/test_m.test_x"
    assert DEFAULT_SNAPSHOT_DIR == plugin.DEFAULT_SNAPSHOT_DIR  # the ini help names the same


def test_a_derived_name_under_a_snapshot_dir_names_the_module_from_the_rootdir(
    tmp_path: Path,
) -> None:
    root = tmp_path / "snaps"
    test = collected(tmp_path, "tests/unit/test_m.py::TestA::test_b[x-1]")
    assert scenario_path(test, suite_state(root)) == root / "tests.unit.test_m.TestA.test_b[x-1]"


def test_a_module_outside_the_rootdir_is_named_by_its_file(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    test = collected(tmp_path, NODE)
    outside = dataclasses.replace(test, relpath=None)
    assert scenario_path(outside, suite_state(root)) == root / "test_m.test_x"


def test_a_marker_without_a_name_keeps_the_derived_name(tmp_path: Path) -> None:
    test = collected(tmp_path, NODE, compare_logs=False)
    assert not test.names_scenario
    assert scenario_path(test, suite_state()).name == "test_m.test_x"


def test_a_marker_name_is_relative_to_the_root_and_an_absolute_path_stays(
    tmp_path: Path,
) -> None:
    root = tmp_path / "snaps"
    state = suite_state(root)
    assert scenario_path(collected(tmp_path, NODE, "agents/fork"), state) == root / "agents/fork"
    assert scenario_path(collected(tmp_path, NODE, "spawn"), state) == root / "spawn"
    elsewhere = tmp_path / "elsewhere"
    assert scenario_path(collected(tmp_path, NODE, elsewhere), state) == elsewhere


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (
            ("a", "b"),
            {},
            f"{NODE}: @pytest.mark.dsh_scenario takes one scenario name or path, "
            "got args=('a', 'b')",
        ),
        (
            (3,),
            {},
            f"{NODE}: @pytest.mark.dsh_scenario takes one scenario name or path, got args=(3,)",
        ),
        (
            ("a",),
            {"colour": 1, "record": False, "apply": 2},
            f"{NODE}: @pytest.mark.dsh_scenario accepts the keywords compare_logs, max_age, "
            "pace, record, got apply, colour",
        ),
        (
            ("a",),
            {"name_or_path": "b"},
            f"{NODE}: @pytest.mark.dsh_scenario names the scenario twice, as its argument and "
            "as name_or_path=: give one",
        ),
        # ... also without a name (a typo left the log check on, helper-found)
        (
            (),
            {"compare_log": False},
            f"{NODE}: @pytest.mark.dsh_scenario accepts the keywords compare_logs, max_age, "
            "pace, record, got compare_log",
        ),
        # a string or a number would read as the opposite of what it says
        (
            ("a",),
            {"record": "false"},
            f"{NODE}: @pytest.mark.dsh_scenario(record=...) takes True or False, got 'false'",
        ),
        (
            ("a",),
            {"compare_logs": 0},
            f"{NODE}: @pytest.mark.dsh_scenario(compare_logs=...) takes True or False, got 0",
        ),
    ],
)
def test_a_broken_marker_says_what_it_takes(
    tmp_path: Path, args: tuple[object, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ScenarioMarkerError) as caught:
        scenario_path(collected(tmp_path, NODE, *args, **kwargs), suite_state())
    assert str(caught.value) == message


def test_a_marker_name_that_leaves_the_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioMarkerError, match="leaves the snapshot root") as caught:
        scenario_path(collected(tmp_path, NODE, "../x"), suite_state(tmp_path / "snaps"))
    assert str(caught.value).startswith(f"{NODE}: ")


def test_the_marker_decides_the_log_check_over_the_ini(tmp_path: Path) -> None:
    state = suite_state()
    assert compare_logs(collected(tmp_path, NODE), state)
    assert not compare_logs(collected(tmp_path, NODE, compare_logs=False), state)
    state.compare_logs = False
    assert not compare_logs(collected(tmp_path, NODE), state)
    assert compare_logs(collected(tmp_path, NODE, "s", compare_logs=True), state)


@pytest.mark.parametrize(
    ("mode", "exists", "expected"),
    [
        (None, False, False),
        (None, True, False),
        ("all", False, True),
        ("all", True, True),
        ("missing", False, True),
        ("missing", True, False),
    ],
)
def test_a_test_records_per_mode_and_a_replay_only_test_never(
    tmp_path: Path, mode: str | None, exists: bool, expected: bool
) -> None:
    path = tmp_path / "scenario"
    if exists:
        path.mkdir()
    state = suite_state(record=mode)
    assert records(collected(tmp_path, NODE), state, path) is expected
    assert records(collected(tmp_path, NODE, "s", record=False), state, path) is False
    assert records(collected(tmp_path, NODE, "s", record=True), state, path) is expected


def test_the_recording_test_of_a_scenario_is_found_past_broken_markers(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps")
    recorders = [
        collected(tmp_path, "tests/test_a.py::test_broken", "a", "b"),
        collected(tmp_path, "tests/test_a.py::test_other", "other"),
        collected(tmp_path, "tests/test_a.py::test_records", "shared"),
    ]
    shared = tmp_path / "snaps/shared"
    found = recording_test(shared, recorders, state)
    assert found is not None
    assert found.nodeid == "tests/test_a.py::test_records"
    assert recording_test(tmp_path / "snaps/none", recorders, state) is None


def test_only_scenario_directories_under_a_root_are_kept_from_collection(tmp_path: Path) -> None:
    scenario = tmp_path / "tests" / "dsh_snapshots" / "group" / "s"
    scenario.mkdir(parents=True)
    (scenario / "session.jsonl").write_text("", encoding="utf-8")
    state = suite_state()
    assert ignores(state, scenario)
    assert not ignores(state, scenario.parent)  # a grouping directory: walked
    elsewhere = tmp_path / "tests" / "other" / "s"
    elsewhere.mkdir(parents=True)
    (elsewhere / "session.jsonl").write_text("", encoding="utf-8")
    assert not ignores(state, elsewhere)
    configured = suite_state(tmp_path / "tests" / "other")
    assert ignores(configured, elsewhere)
    assert not ignores(configured, scenario)  # only the configured root counts then


@pytest.mark.parametrize(
    ("module", "root"),
    [
        ("/r/tests/test_a.py", "/r"),
        ("/r/tests/test_a.py", "/r/tests"),
        ("/r/test_a.py", "/"),
        ("/rx/test_a.py", "/r"),  # a sibling whose name starts like the root
        ("/r/test_a.py", "/r/test_a.py"),
        ("/other/test_a.py", "/r"),
        ("/r", "/r/tests"),
    ],
)
def test_a_module_path_relative_to_the_rootdir_is_read_from_its_text(
    module: str, root: str
) -> None:
    # What the plugin gives the policy as relpath: Path.relative_to's answer, by strings.
    expected = Path(module).relative_to(root) if Path(module).is_relative_to(root) else None
    assert plugin._relative(module, root) == expected
