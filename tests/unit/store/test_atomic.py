"""Whole-directory replacement: never a missing or mixed recording, even after kill -9."""

from __future__ import annotations

import io
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from support.read_only import refuse_leftover_writes

from pytest_dsh_replay import load_scenario, write_scenario
from pytest_dsh_replay._errors import RecordingError
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._store import atomic as _atomic
from pytest_dsh_replay.cli import main

needs_exchange = pytest.mark.skipif(
    not _atomic.exchange_supported(), reason="renameat2(RENAME_EXCHANGE) is not available here"
)


@pytest.fixture(params=["exchange", "portable"])
def swap_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test over both replacement paths: the one-step exchange and two renames."""
    if request.param == "exchange" and not _atomic.exchange_supported():
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    monkeypatch.setattr(_atomic, "USE_EXCHANGE", request.param == "exchange")
    return str(request.param)


class Log:
    def __init__(self, header: SessionHeader, events: list[dict[str, object]]):
        self.header = header
        self.events = events


def call_events(text: str) -> list[dict[str, object]]:
    chunks = [
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    return [
        {"type": "assistant/chunk", "seq": i, "time": 0, "data": {"turn": 1, "step": 1, "chunk": c}}
        for i, c in enumerate(chunks)
    ]


def logs(*texts: str) -> list[Log]:
    """A primary answering texts[0] and one child per further text."""
    out = []
    for n, text in enumerate(texts):
        header = SessionHeader(id=f"s{n}", created_at=n, parent_session=None if n == 0 else "s0")
        out.append(Log(header, call_events(text)))
    return out


def contents(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def hidden(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_replacing_keeps_no_stale_file_and_no_leftover(tmp_path: Path, swap_mode: str) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("old", "child a", "child b"))
    (target / "replay.override.json").write_text("[]")
    write_scenario(target, logs("new"))
    assert sorted(contents(target)) == ["session.jsonl"]
    assert b"new" in (target / "session.jsonl").read_bytes()
    assert hidden(tmp_path) == []


def test_a_failing_fill_leaves_the_target_as_it_was(tmp_path: Path, swap_mode: str) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("old"))
    before = contents(target)

    def fill(staging: Path) -> None:
        (staging / "session.jsonl").write_text("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        _atomic.replace_path(target, fill)
    assert contents(target) == before
    assert hidden(tmp_path) == []


def test_a_write_error_is_a_recording_error_naming_the_scenario(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(RecordingError, match=r"cannot write scenario .*file/scenario"):
        write_scenario(blocker / "scenario", logs("x"))


def test_recovery_after_a_crash_between_the_two_renames(tmp_path: Path) -> None:
    # The portable path's crash window: the old recording moved aside, the new one
    # complete but not yet in place. The next run finds the old recording.
    target = tmp_path / "scenario"
    write_scenario(target, logs("old", "child"))
    before = contents(target)
    token = "0123456789ab"
    write_scenario(tmp_path / f".scenario.tmp-{token}", logs("new"))
    os.rename(target, tmp_path / f".scenario.old-{token}")
    found = _atomic.recover(target)
    assert [left.kind for left in found.restored] == ["old"]
    assert [left.kind for left in found.removed] == ["tmp"]
    assert found.stuck == ()
    assert contents(target) == before
    assert hidden(tmp_path) == []


def test_recovery_deletes_leftovers_when_the_target_exists(tmp_path: Path) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("new"))
    before = contents(target)
    for name in (".scenario.tmp-00000000000a", ".scenario.old-00000000000b"):
        write_scenario(tmp_path / name, logs("stale"))
    (tmp_path / ".unrelated").write_text("kept")
    assert len(_atomic.recover_directory(tmp_path).removed) == 2
    assert contents(target) == before
    assert hidden(tmp_path) == [".unrelated"]


def test_a_first_write_interrupted_leaves_no_recording(tmp_path: Path) -> None:
    (tmp_path / ".scenario.tmp-0123456789ab").mkdir()
    (tmp_path / ".scenario.tmp-0123456789ab" / "session.jsonl").write_text("partial")
    _atomic.recover(tmp_path / "scenario")
    assert list(tmp_path.iterdir()) == []


def test_recovery_waits_for_a_live_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fcntl = pytest.importorskip("fcntl")
    target = tmp_path / "scenario"
    writing, release, blocked = threading.Event(), threading.Event(), threading.Event()
    flock = fcntl.flock

    def signalled(fd: int, operation: int) -> None:
        """``flock``, which says when a lock it asks for is held by another."""
        try:
            flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            blocked.set()
            flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", signalled)

    def fill(staging: Path) -> None:
        (staging / "session.jsonl").write_bytes(b"x")
        writing.set()
        release.wait(10)

    writer = threading.Thread(target=_atomic.replace_path, args=(target, fill))
    writer.start()
    assert writing.wait(10)
    recovery = threading.Thread(target=_atomic.recover, args=(target,))
    recovery.start()
    assert blocked.wait(10), "recovery must wait for the writer's lock"
    assert recovery.is_alive(), "recovery must not touch a writer's files"
    release.set()
    writer.join(10)
    recovery.join(10)
    assert (target / "session.jsonl").read_bytes() == b"x"
    assert hidden(tmp_path) == []


@needs_exchange
def test_the_target_never_disappears_while_it_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("v0"))
    stop = threading.Event()
    missing: list[int] = []

    def watch() -> None:
        while not stop.is_set():
            if not (target / "session.jsonl").exists():
                missing.append(1)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for n in range(40):
            write_scenario(target, logs(f"v{n}", "child") if n % 2 else logs(f"v{n}"))
    finally:
        stop.set()
        watcher.join()
    assert missing == []


def test_write_file_atomic_keeps_the_file_mode(tmp_path: Path, swap_mode: str) -> None:
    path = tmp_path / "session.jsonl"
    path.write_bytes(b"old\n")
    path.chmod(0o640)
    _atomic.write_file_atomic(path, b"new\n")
    assert path.read_bytes() == b"new\n"
    assert path.stat().st_mode & 0o777 == 0o640
    assert hidden(tmp_path) == []


def test_a_scenario_inside_another_is_never_replaced_away(tmp_path: Path) -> None:
    outer, inner = tmp_path / "agents", tmp_path / "agents" / "fork"
    write_scenario(outer, logs("outer"))
    with pytest.raises(RecordingError, match=r"scenario .*agents is around it"):
        write_scenario(inner, logs("inner"))
    assert not inner.exists()
    outer2, inner2 = tmp_path / "team", tmp_path / "team" / "fork"
    write_scenario(inner2, logs("inner"))
    before = contents(inner2)
    with pytest.raises(RecordingError, match=r"scenario .*team/fork is inside it"):
        write_scenario(outer2, logs("outer"))
    assert contents(inner2) == before
    assert not (outer2 / "session.jsonl").exists()


# --- kill -9 at random points of a slow recording ---------------------------------------

# A single-threaded helper process that forks one writer per kill (forking is cheap and
# safe here, unlike in the threaded test process). Each writer rewrites the scenario in
# a loop, alternating two versions, until it is killed.
SPAWNER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from pytest_dsh_replay._store import atomic as _atomic
    from pytest_dsh_replay._format.events import SessionHeader
    from pytest_dsh_replay._scripts.scenario import write_scenario

    class Log:
        def __init__(self, header, events):
            self.header, self.events = header, events

    def version(tag, children):
        out = []
        for n in range(children + 1):
            header = SessionHeader(id=f"{tag}{n}", created_at=n,
                                   parent_session=None if n == 0 else f"{tag}0")
            chunk = {"type": "text-delta", "index": 0, "text": tag * 4000}
            events = [{"type": "assistant/chunk", "seq": i, "time": 0,
                       "data": {"turn": 1, "step": 1, "chunk": chunk}} for i in range(20)]
            events.append({"type": "assistant/chunk", "seq": 20, "time": 0,
                           "data": {"turn": 1, "step": 1,
                                    "chunk": {"type": "finish", "reason": {"kind": "stop"}}}})
            out.append(Log(header, events))
        return out

    _atomic.USE_EXCHANGE = sys.argv[1] == "exchange"
    target = Path(sys.argv[2])
    versions = [version("A", 2), version("B", 5)]
    write_scenario(target, versions[0])
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, arg = line.strip().partition(" ")
        if command == "go":
            pid = os.fork()
            if pid == 0:
                try:
                    n = 1
                    while True:
                        write_scenario(target, versions[n % 2])
                        n += 1
                finally:
                    os._exit(1)
            print(pid, flush=True)
        elif command == "reap":
            os.waitpid(int(arg), 0)
            print("reaped", flush=True)
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("mode", ["exchange", "portable"])
def test_kill_9_at_random_points_leaves_the_old_or_the_new_recording(
    tmp_path: Path, mode: str
) -> None:
    if mode == "exchange" and not _atomic.exchange_supported():
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    target = tmp_path / "scenario"
    spawner = subprocess.Popen(
        [sys.executable, "-c", SPAWNER, mode, str(target)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert spawner.stdin is not None
    assert spawner.stdout is not None

    def ask(command: str) -> str:
        assert spawner.stdin is not None
        assert spawner.stdout is not None
        spawner.stdin.write(command + "\n")
        spawner.stdin.flush()
        return spawner.stdout.readline().strip()

    rng = random.Random(f"kill-9-{mode}")
    seen: dict[str, int] = {}
    interrupted = 0
    try:
        assert spawner.stdout.readline().strip() == "ready"
        versions: dict[str, dict[str, bytes] | None] = {"A": None, "B": None}
        for _ in range(50):
            pid = int(ask("go"))
            event = threading.Event()
            event.wait(rng.uniform(0.0, 0.03))
            os.kill(pid, signal.SIGKILL)
            assert ask(f"reap {pid}") == "reaped"
            if mode == "exchange":  # never a moment without the recording
                assert (target / "session.jsonl").is_file()
            interrupted += bool(hidden(tmp_path))
            _atomic.recover(target)
            assert hidden(tmp_path) == []
            files = contents(target)
            tag = files["session.jsonl"][:200].decode().split('"id":"')[1][0]
            expected = versions[tag] if versions[tag] is not None else files
            versions[tag] = expected
            assert files == expected, "a mix of two recordings"
            assert len(files) == (3 if tag == "A" else 6)
            assert len(load_scenario(target).scripts) == len(files)
            seen[tag] = seen.get(tag, 0) + 1
    finally:
        spawner.kill()
        spawner.communicate()
    assert interrupted > 0, "no kill landed inside a write"
    print(f"{mode}: {seen}, {interrupted} of 50 kills left leftovers")


# --- what the command line says about leftovers -------------------------------------------


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_check_reports_leftovers_of_interrupted_writes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write_scenario(root / "kept", logs("ok"))
    assert run_cli("check", str(root))[0] == 0
    write_scenario(root / ".kept.tmp-0123456789ab", logs("partial"))
    write_scenario(root / ".lost.old-0123456789ab", logs("previous"))
    code, _, err = run_cli("check", str(root))
    assert code == 1
    assert f"{root}/.kept.tmp-0123456789ab: leftover of an interrupted write of {root}/kept" in err
    assert f"{root}/.lost.old-0123456789ab: the previous recording of {root}/lost" in err
    assert "lost itself is missing" in err
    # Checking the scenario directory itself also looks beside it.
    code, _, err = run_cli("check", str(root / "kept"))
    assert code == 1
    assert ".kept.tmp-0123456789ab" in err
    assert ".lost.old" not in err
    # A leftover of dsh-replay fmt inside a scenario directory.
    _atomic.recover_directory(root)
    (root / "kept" / ".session.jsonl.tmp-00000000000f").write_text("partial")
    code, _, err = run_cli("check", str(root))
    assert code == 1
    assert "session.jsonl.tmp-00000000000f: leftover" in err


def test_fmt_reports_an_os_error_in_one_line(tmp_path: Path) -> None:
    d = tmp_path / "scenario"
    write_scenario(d, logs("x"))
    (d / "session.1.jsonl").mkdir()  # not a readable log file
    code, _out, err = run_cli("fmt", str(d))
    assert code == 1
    assert err == f"dsh-replay: {d / 'session.1.jsonl'}: Is a directory\n"
    assert "Traceback" not in err


def test_fmt_rewrites_through_the_atomic_writer(tmp_path: Path) -> None:
    d = tmp_path / "scenario"
    write_scenario(d, logs("x"))
    log = d / "session.jsonl"
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(lines[0] + b"\n\n" + b"\n".join(lines[1:]))  # a blank line: not canonical
    code, out, _ = run_cli("fmt", str(d))
    assert (code, out.splitlines()[0]) == (0, f"rewrote {log}")
    assert run_cli("fmt", "--check", str(d))[0] == 0
    assert hidden(d) == []


def test_replay_without_the_plugin_puts_back_a_recording_moved_aside(tmp_path: Path) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("old"))
    os.rename(target, tmp_path / ".scenario.old-0123456789ab")
    replay = DshReplay.open(target, workdir=tmp_path / "work")
    assert replay.scenario is not None
    assert len(replay.scenario.scripts) == 1
    assert hidden(tmp_path) == []


# --- leftovers of a killed dsh-replay fmt, and of a swap killed between its renames ---------


def test_every_temporary_name_is_one_recovery_recognizes(tmp_path: Path) -> None:
    target = tmp_path / "session.jsonl"
    for kind in ("tmp", "old"):
        name = _atomic.hidden_sibling(target, kind).name
        match = _atomic.LEFTOVER.fullmatch(name)
        assert match is not None
        assert (match["name"], match["kind"]) == ("session.jsonl", kind)
    assert _atomic.hidden_sibling(target, "tmp", "0123456789ab").name == (
        ".session.jsonl.tmp-0123456789ab"
    )


def test_the_jsonl_store_writes_its_temporary_file_under_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_dsh_replay._store.backends.jsonl import JsonlBackend

    opened: list[str] = []
    real_open = open

    def spy(file: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        if "x" in mode:
            opened.append(Path(str(file)).name)
        return real_open(file, mode, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", spy)
    store = JsonlBackend(tmp_path / "store")
    store.append(SessionHeader(id="s", created_at=0), [], create=True)
    assert opened
    assert all(_atomic.LEFTOVER.fullmatch(name) for name in opened), opened


def test_fmt_removes_what_a_killed_fmt_left_and_check_reports_it_until_then(
    tmp_path: Path,
) -> None:
    d = tmp_path / "root" / "kept"
    write_scenario(d, logs("ok"))
    leftover = d / ".session.jsonl.tmp-0123456789ab"
    leftover.write_text('{"type":"session","id":"s0"')  # a write killed half-way
    (d / ".session.jsonl.tmp-not-ours").write_text("kept: not our name")
    for _ in range(2):  # check changes nothing: it reports the same thing twice
        code, _, err = run_cli("check", str(tmp_path / "root"))
        assert code == 1
        assert f"{leftover}: leftover of an interrupted write of {d / 'session.jsonl'}" in err
    code, _, err = run_cli("fmt", "--check", str(d))
    assert code == 1
    assert f"{leftover}: leftover" in err
    assert leftover.exists()
    code, out, _ = run_cli("fmt", str(d))  # the log is canonical: only the leftover goes
    assert code == 0
    assert f"removed {leftover}" in out
    assert hidden(d) == [".session.jsonl.tmp-not-ours"]
    assert run_cli("check", str(tmp_path / "root"))[0] == 0


def crashed_between_the_renames(root: Path) -> dict[str, bytes]:
    """A portable swap of ``root/kept`` killed after its first rename; the old files."""
    write_scenario(root / "kept", logs("old", "child"))
    before = contents(root / "kept")
    write_scenario(root / ".kept.tmp-0123456789ab", logs("new"))
    os.rename(root / "kept", root / ".kept.old-0123456789ab")
    return before


def leftovers_of_three_kinds(root: Path) -> tuple[dict[str, bytes], list[Path]]:
    """A swap killed mid-way (``kept`` moved aside), a half-written file, a stale copy."""
    before = crashed_between_the_renames(root)
    (root / ".notes.txt.tmp-00000000000c").write_text("half")
    return before, sorted(p for p in root.iterdir() if p.name.startswith("."))


@pytest.fixture
def read_only_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, dict[str, bytes]]:
    """``leftovers_of_three_kinds`` under ``tmp_path/recordings``, on a read-only file system.

    Returns the root and the moved-aside recording's files.
    """
    root = tmp_path / "recordings"
    before, _ = leftovers_of_three_kinds(root)
    refuse_leftover_writes(monkeypatch)
    return root, before


def hidden_paths(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.name.startswith("."))


def test_leftovers_that_cannot_be_recovered_are_reported_with_the_os_error(
    read_only_root: tuple[Path, dict[str, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, before = read_only_root
    leftovers = hidden_paths(root)
    recovery = _atomic.recover_directory(root)
    assert (recovery.done, recovery.restored, recovery.removed) == (0, (), ())
    assert {(s.leftover.path.name, s.action) for s in recovery.stuck} == {
        (".kept.old-0123456789ab", "put back"),
        (".kept.tmp-0123456789ab", "removed"),
        (".notes.txt.tmp-00000000000c", "removed"),
    }
    stuck = {s.leftover.path.name: s.describe() for s in recovery.stuck}
    assert stuck[".kept.old-0123456789ab"] == (
        f"{root}/.kept.old-0123456789ab: this leftover of an interrupted write of {root}/kept "
        "could not be put back: Read-only file system; it is still there (make its directory "
        "writable and run dsh-replay fmt, or pytest, again)"
    )
    assert hidden_paths(root) == leftovers
    monkeypatch.undo()
    assert _atomic.recover_directory(root).done == 3  # writable again: all recovered
    assert contents(root / "kept") == before


def test_a_previous_recording_that_cannot_be_put_back_is_never_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "recordings"
    before = crashed_between_the_renames(root)
    refuse_leftover_writes(monkeypatch, delete=False)  # it could be deleted, not renamed
    recovery = _atomic.recover(root / "kept")
    assert [(s.leftover.kind, s.action) for s in recovery.stuck] == [("old", "put back")]
    assert [left.kind for left in recovery.removed] == ["tmp"]
    assert contents(root / ".kept.old-0123456789ab") == before  # the only copy, kept


def test_fmt_on_a_read_only_file_system_says_what_stays_and_exits_1(
    read_only_root: tuple[Path, dict[str, bytes]],
) -> None:
    root, _ = read_only_root
    leftovers = hidden_paths(root)
    code, out, err = run_cli("fmt", str(root))
    assert code == 1
    assert "put back" not in out
    assert "removed" not in out
    for leftover in leftovers:
        assert f"dsh-replay: {leftover}: this leftover of an interrupted write" in err
    assert err.count(": Read-only file system; it is still there") == 3
    assert err.endswith("3 leftover(s) of interrupted writes could not be recovered or removed\n")
    assert hidden_paths(root) == leftovers


@pytest.mark.skipif(
    hasattr(os, "geteuid") and os.geteuid() == 0,
    reason="root may write into a read-only directory (the monkeypatched tests above fail "
    "the writes as a read-only file system does)",
)
def test_fmt_in_a_read_only_directory_says_what_stays_and_exits_1(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    leftovers_of_three_kinds(root)
    root.chmod(0o555)
    try:
        code, _, err = run_cli("fmt", str(root))
    finally:
        root.chmod(0o755)
    assert code == 1
    assert err.count("; it is still there") == 3


@pytest.mark.parametrize("where", ["root", "scenario"])
def test_check_after_a_crash_mid_swap_names_the_leftovers_not_a_missing_log(
    tmp_path: Path, where: str
) -> None:
    root = tmp_path / "recordings"
    crashed_between_the_renames(root)
    code, _, err = run_cli("check", str(root if where == "root" else root / "kept"))
    assert code == 1
    assert "missing session.jsonl" not in err
    assert "does not exist" not in err
    assert f"{root}/.kept.old-0123456789ab: the previous recording of {root}/kept" in err
    assert f"{root}/.kept.tmp-0123456789ab: leftover of an interrupted write" in err
    assert err.endswith("2 problem(s) in 0 scenario(s)\n")


def test_check_never_takes_a_swap_leftover_for_a_scenario(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    crashed_between_the_renames(root)
    code, _, err = run_cli("check", str(root / ".kept.old-0123456789ab"))
    assert code == 1
    assert "2 problem(s) in 0 scenario(s)" in err


def test_fmt_after_a_crash_mid_swap_puts_the_old_recording_back(tmp_path: Path) -> None:
    root = tmp_path / "recordings"
    before = crashed_between_the_renames(root)
    code, out, _ = run_cli("fmt", str(root))
    assert code == 0
    assert f"put back {root / 'kept'} from .kept.old-0123456789ab" in out
    assert contents(root / "kept") == before
    assert hidden(root) == []
    assert run_cli("check", str(root)) == (0, "ok: 1 scenario(s)\n", "")


# --- the pre-check tries the swap's own operations -----------------------------------------


def refuse_to_move(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """Make ``os.rename`` (and ``os.replace``) refuse ``directory`` as ``chattr +i`` does."""
    import errno

    for name in ("rename", "replace"):
        real = getattr(os, name)

        def refusing(src: object, dst: object, *a: object, _real: object = real) -> None:
            if Path(str(src)) == directory or Path(str(dst)) == directory:
                raise PermissionError(errno.EPERM, "Operation not permitted", str(src))
            _real(src, dst, *a)  # type: ignore[operator]

        monkeypatch.setattr(os, name, refusing)


def test_check_writable_moves_the_target_aside_and_back(tmp_path: Path) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("old"))
    before = contents(target)
    _atomic.check_writable(target)
    assert contents(target) == before
    assert hidden(tmp_path) == []


def test_recording_an_immovable_scenario_is_refused_before_the_live_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("old"))
    before = contents(target)
    refuse_to_move(monkeypatch, target)
    with pytest.raises(OSError, match="Operation not permitted") as raised:
        _atomic.check_writable(target)
    assert raised.value.filename == str(target)

    class Live:
        calls = 0

        def stream(self, request: object, **kwargs: object) -> object:
            Live.calls += 1
            raise AssertionError("the live model was called")

    with pytest.raises(RecordingError) as refused:
        DshReplay.record(target, live=Live(), workdir=tmp_path / "work")
    assert str(refused.value).startswith(
        f"cannot record into {target}: {target}: Operation not permitted; nothing was recorded"
    )
    assert Live.calls == 0
    assert contents(target) == before
    assert hidden(tmp_path) == []


def test_recording_an_immutable_scenario_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "scenario"
    write_scenario(target, logs("old"))
    try:
        subprocess.run(["chattr", "+i", str(target)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"chattr +i does not work here: {err}")
    try:
        with pytest.raises(RecordingError, match=f"cannot record into {target}: {target}: "):
            DshReplay.record(target, live=object(), workdir=tmp_path / "work")
    finally:
        subprocess.run(["chattr", "-i", str(target)], check=False, capture_output=True)
