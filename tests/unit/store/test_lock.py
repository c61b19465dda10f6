"""One recording of a scenario at a time: the lock, its holder, a dead holder taken over."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pytest_dsh_replay._errors import RecordingError
from pytest_dsh_replay._store.lock import hold_recording, lock_path, remove_stale_lock, stale_lock

pytest.importorskip("fcntl", reason="the recording lock is an flock (POSIX only)")

# Holds the lock on argv[1] until its stdin closes; says "held" once it does.
HOLDER = textwrap.dedent(
    """
    import sys
    from pytest_dsh_replay._store.lock import hold_recording

    lock = hold_recording(sys.argv[1], owner="tests/test_a.py::test_holder")
    print("held", flush=True)
    sys.stdin.read()
    lock.release()
    """
)


def holder(target: Path) -> subprocess.Popen[str]:
    """Another process holding the lock on ``target`` (it waits on its stdin)."""
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "held\n"  # a signal, not a timer
    return process


def test_a_second_recorder_is_refused_naming_the_scenario_and_the_holder(
    tmp_path: Path,
) -> None:
    target = tmp_path / "recordings" / "shared"
    other = holder(target)
    try:
        with pytest.raises(RecordingError) as refused:
            hold_recording(target, owner="me")
        assert str(refused.value).startswith(
            f"cannot record {target}: another process (pid {other.pid}: "
            "tests/test_a.py::test_holder) is recording it right now"
        )
    finally:
        other.communicate("")  # let go: it releases and ends
    assert other.returncode == 0
    assert not lock_path(target).exists()  # its release removed the lock file


def test_the_lock_of_a_dead_process_is_taken_over(tmp_path: Path) -> None:
    target = tmp_path / "recordings" / "shared"
    other = holder(target)
    other.kill()  # kill -9: no release, the lock file stays behind
    other.communicate()
    assert lock_path(target).read_text().startswith(f"{other.pid}\n")
    lock = hold_recording(target, owner="me")  # the kernel released its flock
    assert lock_path(target).read_text() == f"{os.getpid()}\nme\n"
    lock.release()
    lock.release()  # twice: nothing more happens
    assert not lock_path(target).exists()


def test_a_stale_lock_is_told_apart_from_a_held_one_and_removed(tmp_path: Path) -> None:
    from pytest_dsh_replay.cli import main

    target = tmp_path / "recordings" / "shared"
    other = holder(target)
    try:
        assert not stale_lock(lock_path(target))
        assert not remove_stale_lock(target)  # held: never robbed
        assert lock_path(target).exists()
    finally:
        other.kill()  # SIGTERM or kill -9 alike: no release
        other.communicate()
    assert stale_lock(lock_path(target))
    err = io.StringIO()
    assert main(["check", str(tmp_path / "recordings")], stderr=err) == 1
    assert f"{lock_path(target)}: the lock file of a recording a killed run left" in err.getvalue()
    assert remove_stale_lock(target)
    assert not lock_path(target).exists()
    assert not remove_stale_lock(target)  # nothing left to remove


def test_release_removes_the_parents_it_created_unless_something_was_written(
    tmp_path: Path,
) -> None:
    target = tmp_path / "recordings" / "agents" / "fork"
    hold_recording(target, owner="me").release()
    assert list(tmp_path.iterdir()) == []  # nothing recorded: nothing left
    lock = hold_recording(target, owner="me")
    target.mkdir()  # a recording was written meanwhile
    lock.release()
    assert [p.name for p in (tmp_path / "recordings" / "agents").iterdir()] == ["fork"]


def test_a_place_where_the_lock_cannot_be_created_is_an_os_error(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where a directory should be")
    with pytest.raises(NotADirectoryError):
        hold_recording(tmp_path / "blocker" / "recordings" / "s", owner="me")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker"]
