"""When a run is complete enough to report unused scenarios: the policy, without pytester."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from support.collected import suite_state

from pytest_dsh_replay._plugin.suite import RunScope, find_unused, is_complete_run


def scope(rootpath: Path, **changes: Any) -> RunScope:
    """A whole run started at the rootdir, as pytest chose its paths; ``changes`` applied."""
    whole = RunScope(
        collect_only=False,
        stopped=False,
        failed=0,
        maxfail=0,
        args=None,
        rootpath=rootpath,
        testpaths=("tests",),
        invocation_dir=rootpath,
    )
    return dataclasses.replace(whole, **changes)


def test_a_run_that_selected_every_test_is_complete(tmp_path: Path) -> None:
    assert is_complete_run(scope(tmp_path), suite_state())
    assert is_complete_run(scope(tmp_path, failed=3), suite_state())  # failures alone: still
    assert is_complete_run(scope(tmp_path, failed=1, maxfail=2), suite_state())


@pytest.mark.parametrize(
    "changes",
    [
        {"collect_only": True},
        {"stopped": True},
        {"failed": 2, "maxfail": 2},
    ],
    ids=["collect-only", "stopped early", "maxfail reached"],
)
def test_a_run_that_ran_less_than_everything_is_not(
    tmp_path: Path, changes: dict[str, Any]
) -> None:
    assert not is_complete_run(scope(tmp_path, **changes), suite_state())


def test_a_narrowed_run_is_not_complete(tmp_path: Path) -> None:
    state = suite_state()
    state.subset = True  # -k, -m or a deselection
    assert not is_complete_run(scope(tmp_path), state)


@pytest.mark.parametrize(
    ("args", "here", "complete"),
    [
        ((".",), "", True),
        (("tests",), "", True),
        (("tests", "."), "", True),
        ((".",), "tests", True),  # started inside a testpath
        (("tests/test_a.py",), "", False),
        (("tests/test_a.py::test_x",), "", False),
        (("tests::x",), "", False),  # "::" always names less than a path
        (("other",), "", False),
    ],
)
def test_paths_on_the_command_line_must_be_the_rootdir_or_its_testpaths(
    tmp_path: Path, args: tuple[str, ...], here: str, complete: bool
) -> None:
    (tmp_path / "tests").mkdir()
    run = scope(tmp_path, args=args, invocation_dir=tmp_path / here)
    assert is_complete_run(run, suite_state()) is complete


def make_scenario(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "session.jsonl").write_text("", encoding="utf-8")
    return path


def test_a_complete_run_notes_the_scenarios_no_test_used(tmp_path: Path) -> None:
    root = tmp_path / "snaps"
    used, unused = make_scenario(root / "a"), make_scenario(root / "group" / "b")
    state = suite_state(root)
    state.used.add(str(used))
    assert find_unused(state, scope(tmp_path)) is False  # reported, not failing the run
    assert state.unused == [unused.resolve()]
    state.fail_unused = True
    assert find_unused(state, scope(tmp_path)) is True


def test_an_incomplete_run_or_one_without_dsh_replay_notes_nothing(tmp_path: Path) -> None:
    make_scenario(tmp_path / "snaps" / "a")
    state = suite_state(tmp_path / "snaps")
    state.fail_unused = True
    assert find_unused(state, scope(tmp_path, stopped=True)) is False
    assert state.unused is None
    untouched = suite_state()  # no dsh_snapshot_dir and no test used a scenario
    untouched.fail_unused = True
    assert find_unused(untouched, scope(tmp_path)) is False
    assert untouched.unused is None
