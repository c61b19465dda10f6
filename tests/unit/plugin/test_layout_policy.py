"""Scenario layouts refused at collection: the policy, called without pytester."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.collected import collected, suite_state

from pytest_dsh_replay._plugin.layout import case_collisions, recording_layout_problem
from pytest_dsh_replay._plugin.scenarios import ScenarioMarkerError


def test_derived_names_that_differ_only_in_case_pair_up(tmp_path: Path) -> None:
    tests = [
        collected(tmp_path, "tests/test_m.py::test_x[a]"),
        collected(tmp_path, "tests/test_m.py::test_y"),
        collected(tmp_path, "tests/test_m.py::test_x[A]"),
        collected(tmp_path, "tests/test_m.py::test_X[a]", fixtures=()),  # no dsh_replay
        collected(tmp_path, "tests/test_m.py::test_X[A]", "named"),  # names its scenario
        collected(tmp_path, "tests/test_m.py::test_x[a] ", "a", "b"),  # named, if broken
    ]
    found = case_collisions(tests, suite_state())
    assert found == [
        (
            "tests/test_m.py::test_x[a] and tests/test_m.py::test_x[A] derive scenario names "
            "that differ only in letter case (test_m.test_x[a], test_m.test_x[A]): on a "
            "case-insensitive file system (macOS, Windows) they would share one recording; "
            "give one of them a @pytest.mark.dsh_scenario name or another parametrize id",
            (0, 2),
        )
    ]


def test_two_modules_of_one_name_deriving_one_scenario_are_told_as_such(tmp_path: Path) -> None:
    # tests/test_b.py and tests/sub/test_b.py outside the rootdir (-c cfg/pytest.ini,
    # --import-mode=importlib): pytest gives them no path relative to it
    tests = [collected(tmp_path, "test_b.py::test_x"), collected(tmp_path, "test_b.py::test_x")]
    [(message, pair)] = case_collisions(tests, suite_state(tmp_path / "snaps"))  # one root
    assert pair == (0, 1)
    assert "derive the same scenario name (test_b.test_x): they would share one" in message
    assert "letter case" not in message


def test_a_third_case_twin_pairs_with_the_first(tmp_path: Path) -> None:
    tests = [collected(tmp_path, f"tests/test_m.py::test_{c}") for c in ("ab", "Ab", "AB")]
    assert [pair for _, pair in case_collisions(tests, suite_state())] == [(0, 1), (0, 2)]


def test_two_tests_recording_one_scenario_are_refused(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps", record="all")
    tests = [
        collected(tmp_path, "tests/test_m.py::test_a", "shared"),
        collected(tmp_path, "tests/test_m.py::test_b", "own"),
        collected(tmp_path, "tests/test_m.py::test_c", "shared"),
    ]
    assert recording_layout_problem(tests, state) == (
        "--dsh-record: tests/test_m.py::test_a and tests/test_m.py::test_c would both record "
        f"{tmp_path / 'snaps/shared'}; give one of them its own @pytest.mark.dsh_scenario name, "
        "or mark the one that only replays it record=False (docs/guide/writing-tests.md)",
        [0, 2],
    )


def test_nested_recordings_are_refused(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps", record="all")
    tests = [
        collected(tmp_path, "tests/test_m.py::test_inner", "agents/fork"),
        collected(tmp_path, "tests/test_m.py::test_outer", "agents"),
    ]
    outer, inner = tmp_path / "snaps/agents", tmp_path / "snaps/agents/fork"
    assert recording_layout_problem(tests, state) == (
        "--dsh-record: tests/test_m.py::test_outer and tests/test_m.py::test_inner record "
        f"nested scenarios {outer} and {inner}; recording replaces a whole directory, so "
        "give the scenarios sibling directories",
        [1, 0],
    )


def test_a_recording_inside_a_scenario_on_disk_is_refused(tmp_path: Path) -> None:
    outer = tmp_path / "snaps/agents"
    outer.mkdir(parents=True)
    (outer / "session.jsonl").write_text("", encoding="utf-8")
    tests = [collected(tmp_path, "tests/test_m.py::test_inner", "agents/fork")]
    found = recording_layout_problem(tests, suite_state(tmp_path / "snaps", record="all"))
    assert found is not None
    message, involved = found
    assert message.startswith("tests/test_m.py::test_inner: cannot record scenario ")
    assert involved == [0]


def test_only_the_tests_that_record_count(tmp_path: Path) -> None:
    existing = tmp_path / "snaps/shared"
    existing.mkdir(parents=True)
    tests = [
        collected(tmp_path, "tests/test_m.py::test_a", "shared"),
        collected(tmp_path, "tests/test_m.py::test_b", "shared", record=False),
        collected(tmp_path, "tests/test_m.py::test_c", "shared", fixtures=()),
    ]
    assert recording_layout_problem(tests, suite_state(tmp_path / "snaps", record="all")) is None
    both = [tests[0], collected(tmp_path, "tests/test_m.py::test_d", "shared")]
    # Under "missing" an existing scenario is not recorded, so two tests may share it.
    assert recording_layout_problem(both, suite_state(tmp_path / "snaps", record="missing")) is None


def test_a_broken_marker_of_a_test_that_could_record_is_an_error(tmp_path: Path) -> None:
    tests = [collected(tmp_path, "tests/test_m.py::test_a", "a", "b")]
    with pytest.raises(ScenarioMarkerError, match="takes one scenario name or path"):
        recording_layout_problem(tests, suite_state(record="all"))
