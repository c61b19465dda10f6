"""Recordings survive crashes, nested layouts, name collisions and unwritable places."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from support.inner_runs import ECHO_LIVE_CONFTEST as LIVE
from support.read_only import refuse_leftover_writes
from support.scenarios import make_scenario

ASK = """
def ask(model, text, session_id="main"):
    chunks = model.stream({"messages": [{"role": "user", "content": text}]}, session_id=session_id)
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(LIVE)
    pytester.makepyfile(agent=ASK)
    return pytester


def test_the_next_run_puts_back_a_recording_a_killed_write_moved_aside(
    project: pytest.Pytester,
) -> None:
    # What a kill between the two renames of the portable replacement leaves: the old
    # recording under a hidden name, a complete new one beside it, no scenario.
    root = project.path / "recordings"
    make_scenario(root / "kept", ask="q", primary=["live: q"])
    os.rename(root / "kept", root / ".kept.old-0123456789ab")
    make_scenario(root / ".kept.tmp-0123456789ab", primary=["half-written"])
    make_scenario(root / ".other.tmp-00000000000a", primary=["partial"])
    project.makeconftest("")
    project.makepyfile(
        test_replay="""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("kept")
        def test_kept(dsh_replay):
            assert ask(dsh_replay.model, "q") == "live: q"
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 replayed*2 leftovers of interrupted writes recovered*"])
    # Only the used scenario's own leftovers: another's stay until a run uses it
    # (`dsh-replay check` reports them meanwhile).
    assert sorted(p.name for p in root.iterdir()) == [".other.tmp-00000000000a", "kept"]


def test_a_replay_removes_the_lock_file_a_killed_recorder_left(project: pytest.Pytester) -> None:
    root = project.path / "recordings"
    make_scenario(root / "kept", ask="q", primary=["live: q"])
    (root / ".kept.lock").write_text("12345\ntest_x.py::test_kept\n")  # SIGTERM'd: no release
    (root / ".other.lock").write_text("1\n")  # another scenario's: not this run's business
    project.makeconftest("")
    project.makepyfile(test_replay=REPLAY_KEPT)
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 replayed*1 leftover of interrupted writes recovered*"])
    assert sorted(p.name for p in root.iterdir()) == [".other.lock", "kept"]


def test_a_replay_touches_no_leftover_like_entry_beside_its_scenario_but_its_own(
    project: pytest.Pytester,
) -> None:
    elsewhere = project.path / "elsewhere"
    make_scenario(elsewhere / "scen", ask="q", primary=["live: q"])
    (elsewhere / ".cache.tmp-00000000abcd").mkdir()
    (elsewhere / ".cache.tmp-00000000abcd" / "notes").write_text("important")
    (elsewhere / ".config.old-123456abcdef").write_text("backup")
    project.makeconftest("")
    project.makepyfile(
        test_replay=f"""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario({str(elsewhere / "scen")!r})
        def test_scen(dsh_replay):
            assert ask(dsh_replay.model, "q") == "live: q"
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    assert "interrupted writes" not in result.stdout.str()
    assert sorted(p.name for p in elsewhere.iterdir()) == [
        ".cache.tmp-00000000abcd",
        ".config.old-123456abcdef",
        "scen",
    ]
    assert (elsewhere / ".cache.tmp-00000000abcd" / "notes").read_text() == "important"


def test_a_leftover_that_cannot_be_removed_is_reported_as_such(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A read-only checkout: the summary once counted it "recovered or removed".
    root = project.path / "recordings"
    make_scenario(root / "kept", ask="q", primary=["live: q"])
    make_scenario(root / ".kept.tmp-0123456789ab", primary=["half-written"])
    project.makeconftest("")
    project.makepyfile(test_replay=REPLAY_KEPT)
    refuse_leftover_writes(monkeypatch)  # the run is in process: its writes fail too
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "scenarios: 1 replayed, 0 recorded, 0 missing, 0 unused, 1 leftover of interrupted "
            "writes could not be recovered or removed (below)",
            f"  {root}/.kept.tmp-0123456789ab: this leftover of an interrupted write of "
            f"{root}/kept could not be removed: Read-only file system; it is still there*",
        ]
    )
    assert "writes recovered or removed" not in result.stdout.str()
    assert (root / ".kept.tmp-0123456789ab").is_dir()


def test_a_scenario_nested_in_another_is_refused_before_any_live_call(
    project: pytest.Pytester,
) -> None:
    root = project.path / "recordings"
    make_scenario(root / "agents" / "fork", primary=["live: fork"])
    before = (root / "agents" / "fork" / "session.jsonl").read_bytes()
    project.makepyfile(
        test_nested="""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("agents")
        def test_outer(dsh_replay):
            ask(dsh_replay.model, "outer")
        """
    )
    result = project.runpytest("--dsh-record")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*test_nested.py::test_outer: cannot record scenario *agents: scenario *fork is inside*"]
    )
    assert (root / "agents" / "fork" / "session.jsonl").read_bytes() == before
    assert not (root / "agents" / "session.jsonl").exists()


@pytest.mark.parametrize("workers", [[], ["-n", "1"]])  # one worker shows a worker's refusal
def test_two_selected_scenarios_nested_in_each_other_are_refused(
    project: pytest.Pytester, workers: list[str]
) -> None:
    if workers:
        pytest.importorskip("xdist")
    project.makepyfile(
        test_nested="""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("agents")
        def test_outer(dsh_replay):
            ask(dsh_replay.model, "outer")

        @pytest.mark.dsh_scenario("agents/fork")
        def test_inner(dsh_replay):
            ask(dsh_replay.model, "inner")
        """
    )
    result = project.runpytest("--dsh-record", *workers)
    message = "*test_outer and *test_inner record nested scenarios*agents*agents/fork*"
    if workers:  # a worker cannot stop the run: both tests fail at set-up instead
        result.assert_outcomes(errors=2)
        result.stdout.fnmatch_lines([message])
    else:
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])
    assert not (project.path / "recordings").exists()


def test_test_ids_that_differ_by_dots_or_case_never_share_a_recording(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_ids="""
        import pytest

        @pytest.mark.parametrize("x", ["a.b", "a::b", "ab", "AB"])
        def test_x(dsh_replay, x):
            pass
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=4)
    looked = [line.split("looked at: ")[1] for line in result.stdout.lines if "looked at: " in line]
    # [a.b] and [a::b] each their own (under CI the short summary repeats each message).
    assert len(set(looked)) == 2, looked
    result.stdout.fnmatch_lines(
        [
            "*test_ids.py::test_x?ab? and test_ids.py::test_x?AB? derive scenario names that "
            "differ only in letter case*"
        ]
    )


def test_an_unwritable_snapshot_dir_fails_at_set_up_before_the_live_call(
    pytester: pytest.Pytester,
) -> None:
    (pytester.path / "blocker").write_text("a file where the snapshot root should be")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = blocker/recordings\n")
    pytester.makeconftest(LIVE)
    pytester.makepyfile(agent=ASK)
    pytester.makepyfile(
        test_unwritable="""
        import pytest
        from agent import ask
        from conftest import FakeLive

        @pytest.mark.dsh_scenario("s")
        def test_s(dsh_replay):
            ask(dsh_replay.model, "q")

        def test_the_live_model_was_never_called():
            assert FakeLive.calls == 0
        """
    )
    result = pytester.runpytest("--dsh-record", "-p", "no:randomly")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*cannot record the dsh scenario for test_unwritable.py::test_s:",
            "*cannot record into */blocker/recordings/s: */blocker: Not a directory; nothing "
            "was recorded (the live model was not called) and the previous recording, if any, "
            "is kept",
        ]
    )
    assert "Traceback" not in result.stdout.str()


def test_a_write_failing_at_teardown_is_one_line_and_counted(pytester: pytest.Pytester) -> None:
    # A real write error: a file-size limit makes the recording's write fail (EFBIG),
    # as a full disk would (ENOSPC), after the test passed.
    pytest.importorskip("resource")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(
        LIVE.replace('"live: " + request', '"x" * 300_000 + request')
        + """
import resource, signal

def pytest_configure(config):
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, resource.RLIM_INFINITY))
"""
    )
    pytester.makepyfile(agent=ASK)
    old = make_scenario(pytester.path / "recordings" / "big", primary=["old"])
    before = (old / "session.jsonl").read_bytes()
    pytester.makepyfile(
        test_big="""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("big")
        def test_big(dsh_replay):
            ask(dsh_replay.model, "q")
        """
    )
    result = pytester.runpytest_subprocess("--dsh-record", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "the recording of test_big.py::test_big was not written: cannot write scenario "
            "*big: [[]Errno 27[]] File too large*; the previous recording is kept",
            "scenarios: 0 replayed, 0 recorded, 0 missing, *1 not written (the recording "
            "could not be saved; old recording kept)",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    assert (old / "session.jsonl").read_bytes() == before
    assert sorted(p.name for p in old.parent.iterdir()) == ["big"]


REPLAY_KEPT = """
import pytest
from agent import ask

@pytest.mark.dsh_scenario("kept")
def test_kept(dsh_replay):
    assert ask(dsh_replay.model, "q") == "live: q"
"""


@pytest.mark.parametrize("mode", ["replay", "record"])
def test_the_next_run_cleans_what_a_killed_fmt_left_in_a_scenario(
    project: pytest.Pytester, mode: str
) -> None:
    # A dsh-replay fmt killed mid-write leaves its temporary file inside the scenario.
    scenario = make_scenario(project.path / "recordings" / "kept", ask="q", primary=["live: q"])
    (scenario / ".session.jsonl.tmp-0123456789ab").write_text('{"type":"session"')
    if mode == "replay":
        # (recording refuses a directory holding it: test_record.py's
        # test_recording_into_a_directory_of_other_files_is_refused_and_deletes_nothing)
        (scenario / ".session.jsonl.tmp-notours").write_text("not our name: kept")
        project.makeconftest("")
    project.makepyfile(test_replay=REPLAY_KEPT)
    result = project.runpytest(*(["--dsh-record"] if mode == "record" else []))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*1 leftover of interrupted writes recovered or removed*"])
    names = sorted(p.name for p in scenario.iterdir() if p.name.startswith("."))
    assert names == ([".session.jsonl.tmp-notours"] if mode == "replay" else [])


def test_an_immutable_scenario_is_refused_at_set_up_before_the_live_call(
    project: pytest.Pytester,
) -> None:
    scenario = make_scenario(project.path / "recordings" / "kept", ask="q", primary=["old"])
    before = (scenario / "session.jsonl").read_bytes()
    try:
        subprocess.run(["chattr", "+i", str(scenario)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"chattr +i does not work here: {err}")
    project.makepyfile(
        test_immutable="""
        import pytest
        from agent import ask
        from conftest import FakeLive

        @pytest.mark.dsh_scenario("kept")
        def test_kept(dsh_replay):
            ask(dsh_replay.model, "q")

        def test_the_live_model_was_never_called():
            assert FakeLive.calls == 0
        """
    )
    try:
        result = project.runpytest("--dsh-record", "-p", "no:randomly")
    finally:
        subprocess.run(["chattr", "-i", str(scenario)], check=False, capture_output=True)
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*cannot record the dsh scenario for test_immutable.py::test_kept:",
            "*cannot record into */recordings/kept: */recordings/kept: Operation not permitted; "
            "nothing was recorded (the live model was not called)*",
        ]
    )
    assert (scenario / "session.jsonl").read_bytes() == before


SCRIPTED_LIVE = """
from pytest_dsh_replay import Answer, ScriptedModel

MODEL = ScriptedModel(default=Answer(text="live"))
ASKED = []

def pytest_dsh_replay_live_model(config, scenario_path):
    ASKED.append(scenario_path)
    return MODEL
"""


def tree(directory: Path) -> dict[str, bytes | None]:
    """Every entry under ``directory``: a file's bytes, ``None`` for a directory or link."""
    return {
        str(p.relative_to(directory)): None if p.is_dir() or p.is_symlink() else p.read_bytes()
        for p in sorted(directory.rglob("*"))
    }


@pytest.mark.parametrize("mode", ["record", "replay"])
def test_a_name_that_is_not_strictly_inside_the_snapshot_root_is_refused_at_set_up(
    pytester: pytest.Pytester, mode: str
) -> None:
    # Recording "." once replaced the snapshot root itself, deleting README.md and notes/.
    root = pytester.path / "recordings"
    make_scenario(root / "kept", ask="q", primary=["live"])
    (root / "README.md").write_text("what these recordings are\n")
    (root / "notes").mkdir()
    (root / "notes" / "x.txt").write_text("a note\n")
    outside = pytester.path / "outside"
    make_scenario(outside / "s", ask="q", primary=["live"])
    (root / "out").symlink_to(outside)
    before_root, before_outside = tree(root), tree(outside)
    names = [".", "./", "a/..", "../x", "", "out/s", str(root), str(outside / "s")]
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(SCRIPTED_LIVE)
    pytester.makepyfile(agent=ASK)
    pytester.makepyfile(
        test_names=f"""
        import pytest
        from agent import ask
        from conftest import ASKED, MODEL

        NAMES = {names!r}

        @pytest.mark.parametrize(
            "name",
            [pytest.param(n, marks=pytest.mark.dsh_scenario(n), id=f"n{{k}}") for k, n in
             enumerate(NAMES)],
        )
        def test_refused(dsh_replay, name):
            ask(dsh_replay.model, "q")

        def test_the_live_model_was_never_asked():
            assert ASKED == [] and MODEL.calls == []
        """
    )
    args = ["-p", "no:randomly", "-p", "no:cacheprovider"]
    result = pytester.runpytest(*args, *(["--dsh-record=all"] if mode == "record" else []))
    rule = "a scenario must be a directory strictly inside the snapshot root*"
    root_itself = f"names the snapshot root itself: {rule}"
    leaves = f"leaves the snapshot root (it resolves to *): {rule}"
    refused = [
        f"name '.' {root_itself}",
        f"name './' {root_itself}",
        f"name 'a/..' {root_itself}",
        f"name '../x' {leaves}",
        f"name '' is empty: {rule}",
        f"name 'out/s' {leaves}",
    ]
    if mode == "replay":  # an absolute path is replayed wherever it is (the root holds none)
        result.assert_outcomes(errors=7, passed=2)
        result.stdout.fnmatch_lines(
            ["*the dsh scenario for test_names.py::test_refused?n6? does not load*"]
        )
    else:
        result.assert_outcomes(errors=8, passed=1)
        refused.append(f"path '{root}' is not inside the snapshot root: {rule}")
        refused.append(f"path '{outside / 's'}' is not inside the snapshot root: {rule}")
    result.stdout.fnmatch_lines(
        [
            f"test_names.py::test_refused?n{k}?: {root}: scenario {text}"
            for k, text in enumerate(refused)
        ]
    )
    assert tree(root) == before_root
    assert tree(outside) == before_outside
