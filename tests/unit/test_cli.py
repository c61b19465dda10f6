"""The dsh-replay command (see docs/cli.md)."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.chunks import chunk_events
from support.corpus_support import require_corpus, scenario
from support.paths import EXAMPLES

from pytest_dsh_replay.cli import main


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_scripts_json_for_a_directory_is_scenario_to_json() -> None:
    require_corpus()
    d = scenario("subagent-fork-in-process")
    code, out, err = run("scripts", str(d), "--json")
    assert (code, err) == (0, "")
    expected = json.loads((d / "expected.json").read_text())
    assert json.loads(out) == {"scripts": expected["scripts"]}


def test_scripts_json_for_a_single_log_is_unsliced() -> None:
    require_corpus()
    d = scenario("subagent-fork-in-process")
    code, out, _ = run("scripts", str(d / "session.1.jsonl"), "--json")
    expected = json.loads((d / "expected-files.json").read_text())["session.1.jsonl"]
    assert code == 0
    assert json.loads(out) == {
        "header": expected["header"]["value"],
        "eventCount": expected["eventCount"],
        "entries": expected["script"]["entries"],
    }


@pytest.mark.parametrize(("name", "seed"), [("fork", 14), ("runtime-fork", 17)])
def test_scripts_json_of_a_single_fork_log_gives_its_seed_length(name: str, seed: int) -> None:
    # format 0 counts the seed in the header, format 4 at its session/end-seed marker
    code, out, _ = run("scripts", str(EXAMPLES / name / "session.1.jsonl"), "--json")
    assert code == 0
    assert json.loads(out)["header"]["seedLength"] == seed


def test_console_script_prints_the_same_json() -> None:
    require_corpus()
    d = scenario("subagent-mixed")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_dsh_replay", "scripts", str(d), "--json"],
        capture_output=True,
        check=True,
    )
    assert json.loads(proc.stdout) == {
        "scripts": json.loads((d / "expected.json").read_text())["scripts"]
    }


def test_show_and_plain_scripts_summarize(tmp_path: Path) -> None:
    require_corpus()
    code, out, _ = run("show", str(scenario("subagent-mixed")))
    assert code == 0
    assert "3 session(s), 6 model call(s)" in out
    assert "seedLength 36" in out
    assert 'call #1: chunks, 40 chunk(s), stop  "SAFFRON"' in out
    code, out, _ = run("scripts", str(scenario("subagent-mixed")))
    assert "tools: subagent_fork" in out


def test_invalid_input_exits_1_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "session.jsonl").write_text('{"type":"session"}\n{"type": broken}\n')
    code, out, err = run("scripts", str(tmp_path), "--json")
    assert (code, out) == (1, "")
    assert err.count("\n") == 1
    assert f"{tmp_path / 'session.jsonl'}:2: invalid JSON" in err
    assert "Traceback" not in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run()[0] == 2
    assert run("scripts")[0] == 2
    assert run("frobnicate", "x")[0] == 2


def test_check_reports_each_problem_and_passes_good_scenarios(tmp_path: Path) -> None:
    good = tmp_path / "root" / "good"
    good.mkdir(parents=True)
    (good / "session.jsonl").write_text('{"type":"session","id":"a"}\n')
    assert run("check", str(tmp_path / "root")) == (0, "ok: 1 scenario(s)\n", "")
    bad = tmp_path / "root" / "bad"
    bad.mkdir()
    (bad / "session.jsonl").write_text('{"type":"session"}\n')
    (bad / "session.2.jsonl").write_text('{"type":"session"}\n')
    code, _, err = run("check", str(tmp_path / "root"))
    assert code == 1
    assert "expected session.1.jsonl, found session.2.jsonl" in err
    assert err.endswith("1 problem(s) in 2 scenario(s)\n")


def test_check_accepts_the_harness_s_full_form_unless_asked_for_the_strict_form() -> None:
    require_corpus()
    root = scenario("subagent-mixed").parent
    code, _, err = run("check", str(root))
    assert code == 1  # only the scenario that cannot replay
    (line, total) = err.splitlines()
    assert "plain-turn" in line
    assert "replay.override.json" in line
    assert total == "1 problem(s) in 121 scenario(s)"
    code, _, err = run("check", "--strict-form", str(root))
    assert code == 1
    lines = err.splitlines()
    unreplayable = [line for line in lines if "replay.override.json" in line]
    uncommitted = [line for line in lines if "not in the committed form" in line]
    assert len(unreplayable) == 1
    assert "plain-turn" in unreplayable[0]
    # The reference repository itself still holds many logs with full envelopes.
    assert len(uncommitted) == 104
    assert all("dsh-replay fmt" in line for line in uncommitted)
    assert not [line for line in lines if "secret" in line]
    assert lines[-1] == "105 problem(s) in 121 scenario(s)"


@pytest.mark.parametrize(
    ("edit", "found"),
    [
        (lambda header: header.replace('"id"', '"idd"', 1), "none"),
        (lambda header: header.replace('"id":"', '"id":"","was":"', 1), "an empty string"),
        (lambda header: header.replace('"id":"', '"id":5,"was":"', 1), "a number"),
    ],
    ids=["missing", "empty", "a-number"],
)
def test_check_strict_form_refuses_a_header_without_an_id(
    tmp_path: Path, edit: Any, found: str
) -> None:
    copy = tmp_path / "retry"
    shutil.copytree(EXAMPLES / "retry", copy)
    log = copy / "session.jsonl"
    header, rest = log.read_text(encoding="utf-8").split("\n", 1)
    log.write_text(edit(header) + "\n" + rest, encoding="utf-8")
    # Loading accepts it (the harness's reader defaults a missing id to "":
    # docs/format.md#lenient-reading), so the plain check passes...
    assert run("check", str(copy)) == (0, "ok: 1 scenario(s)\n", "")
    # ... but every recording this plugin writes names its session.
    code, out, err = run("check", "--strict-form", str(copy))
    assert (code, out) == (1, "")
    (line, total) = err.splitlines()
    assert line.startswith(f"{log}:1: the header has no session id: ")
    assert f"expected a non-empty string for its id, found {found};" in line
    assert "re-record" in line
    assert total == "1 problem(s) in 1 scenario(s)"


def test_fmt_canonicalizes_without_changing_what_replays(tmp_path: Path) -> None:
    require_corpus()
    source = scenario("subagent-mixed")
    copy = tmp_path / "mixed"
    shutil.copytree(source, copy)
    before = run("scripts", str(copy), "--json")[1]
    assert run("fmt", "--check", str(copy))[0] == 1
    assert run("check", "--strict-form", str(copy))[0] == 1
    code, out, _ = run("fmt", str(copy))
    assert code == 0
    assert "3 of 3 log(s) were rewritten" in out
    assert run("fmt", "--check", str(copy)) == (0, "0 of 3 log(s) need rewriting\n", "")
    assert run("scripts", str(copy), "--json")[1] == before
    assert run("check", "--strict-form", str(copy)) == (0, "ok: 1 scenario(s)\n", "")
    assert (copy / "session.2.jsonl").stat().st_size < (source / "session.2.jsonl").stat().st_size


def test_fmt_and_check_leave_a_backup_beside_the_logs_alone(tmp_path: Path) -> None:
    require_corpus()
    copy = tmp_path / "mixed"
    shutil.copytree(scenario("subagent-mixed"), copy)  # logs not in the committed form
    backup = (copy / "session.jsonl").read_bytes()
    (copy / "session.jsonl.bak").write_bytes(backup)
    (copy / "session.1.jsonl.orig").write_bytes(backup[:-5])  # cut short: no log, no problem
    code, out, _ = run("fmt", str(copy))
    assert (code, "3 of 3 log(s) were rewritten" in out) == (0, True)
    assert "bak" not in out
    assert (copy / "session.jsonl.bak").read_bytes() == backup
    assert run("check", "--strict-form", str(copy)) == (0, "ok: 1 scenario(s)\n", "")


def test_check_reports_a_child_the_parent_names_and_the_scenario_lost(tmp_path: Path) -> None:
    copy = tmp_path / "mixed"
    shutil.copytree(EXAMPLES / "runtime-mixed", copy)
    assert run("check", str(copy)) == (0, "ok: 1 scenario(s)\n", "")
    lost = json.loads((copy / "session.2.jsonl").read_text().split("\n", 1)[0])["id"]
    (copy / "session.2.jsonl").unlink()
    code, _, err = run("check", str(copy))
    assert code == 1
    assert f"{copy / 'session.jsonl'}: names child session {lost!r}, of which the scenario " in err
    assert "the recording is incomplete; restore the missing file" in err


def test_a_crlf_checkout_of_a_committed_recording_is_in_the_committed_form(
    tmp_path: Path,
) -> None:
    copy = tmp_path / "mixed"
    shutil.copytree(EXAMPLES / "mixed", copy)
    for log in copy.glob("session*.jsonl"):  # what git's core.autocrlf checks out
        log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    before = {log.name: log.read_bytes() for log in copy.glob("session*.jsonl")}
    assert run("check", "--strict-form", str(copy)) == (0, "ok: 1 scenario(s)\n", "")
    assert run("fmt", "--check", str(copy)) == (0, "0 of 3 log(s) need rewriting\n", "")
    assert run("fmt", str(copy))[0] == 0
    assert {log.name: log.read_bytes() for log in copy.glob("session*.jsonl")} == before


def test_check_finds_secrets_with_file_line_and_path(tmp_path: Path) -> None:
    d = tmp_path / "leaky"
    d.mkdir()
    (d / "session.jsonl").write_text(
        '{"type":"session","id":"s"}\n'
        '{"type":"user/message","data":{"content":[{"type":"text",'
        '"text":"my key is sk-abcdefghijklmnopqrstuvwx"}]}}\n'
    )
    code, _, err = run("check", str(d))
    assert code == 1
    assert f"{d / 'session.jsonl'}:2: $.data.content[0].text looks like a secret" in err


def test_show_says_spawn_or_fork() -> None:
    code, out, _ = run("show", str(EXAMPLES / "mixed"))
    assert code == 0
    lines = [line for line in out.splitlines() if "child of" in line]
    assert len(lines) == 2
    assert lines[0].startswith("session.1.jsonl: ")
    assert ", spawn), 1 call(s)" in lines[0]
    assert ", fork, seedLength 14), 1 call(s)" in lines[1]


def test_show_puts_a_visible_separator_between_text_blocks(tmp_path: Path) -> None:
    chunks: list[dict[str, Any]] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "first"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "first"}},
        {"type": "block-start", "index": 1, "blockType": "text"},
        {"type": "text-delta", "index": 1, "text": "sec"},
        {"type": "text-delta", "index": 1, "text": "ond"},
        {"type": "block-end", "index": 1, "block": {"type": "text", "text": "second"}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    header = {"type": "session", "version": 0, "id": "s", "createdAt": 1}
    log = tmp_path / "session.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in [header, *chunk_events(chunks)]))
    code, out, err = run("show", str(log))
    assert (code, err) == (0, "")
    assert 'stop  "first ¦ second"' in out


def test_show_html_writes_one_self_contained_page(tmp_path: Path) -> None:
    out = tmp_path / "mixed.html"
    code, stdout, err = run("show", "--html", str(out), str(EXAMPLES / "mixed"))
    assert (code, err) == (0, "")
    assert stdout == f"wrote {out}: 3 session(s), 5 model call(s)\n"
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("data-node=") == 3
    assert "echo: Recall it." in page
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixed.html"]  # nothing else


def test_show_html_of_a_single_log_and_into_a_directory(tmp_path: Path) -> None:
    out = tmp_path / "one.html"
    code, stdout, _ = run("show", str(EXAMPLES / "mixed" / "session.2.jsonl"), "--html", str(out))
    assert code == 0
    assert "1 session(s), 1 model call(s)" in stdout
    code, stdout, err = run("show", "--html", str(tmp_path), str(EXAMPLES / "mixed"))
    assert (code, stdout) == (1, "")
    assert err == f"dsh-replay: {tmp_path}: is a directory; name the page's file (OUT.html)\n"


@pytest.mark.parametrize("out", ["session.1.jsonl", "session.jsonl", "page.html", "."])
def test_show_html_never_writes_into_the_scenario_it_draws(tmp_path: Path, out: str) -> None:
    scenario = tmp_path / "spawn"
    shutil.copytree(EXAMPLES / "spawn", scenario)
    before = {p.name: p.read_bytes() for p in scenario.iterdir()}
    code, stdout, err = run("show", "--html", str(scenario / out), str(scenario))
    assert (code, stdout) == (1, "")
    assert "is inside the scenario it draws" in err
    assert {p.name: p.read_bytes() for p in scenario.iterdir()} == before
    # a single log drawn on its own: the page may not replace it either
    log = scenario / "session.1.jsonl"
    assert run("show", "--html", str(log), str(log))[0] == 1
    assert log.read_bytes() == before["session.1.jsonl"]
    # ... nor a log or sidecar beside it (the page replaced session.jsonl)
    for beside in ("session.jsonl", "replay.override.json"):
        code, _, err = run("show", "--html", str(scenario / beside), str(log))
        assert code == 1
        assert "is a file of the scenario it draws (beside session.1.jsonl)" in err
    assert {p.name: p.read_bytes() for p in scenario.iterdir()} == before
    code, stdout, _ = run("show", "--html", str(scenario.parent / "page.html"), str(log))
    assert (code, stdout) == (
        0,
        f"wrote {scenario.parent / 'page.html'}: 1 session(s), 1 model call(s)\n",
    )


@pytest.mark.parametrize("kind", ["fifo", "symlink", "device"])
def test_show_html_refuses_an_out_that_is_no_regular_file(tmp_path: Path, kind: str) -> None:
    # The page was renamed over it: as root, --html /dev/null replaced the device node.
    out = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(out)
    elif kind == "symlink":
        (tmp_path / "target.html").write_text("kept")
        out.symlink_to(tmp_path / "target.html")
    else:
        if os.geteuid() != 0:
            pytest.skip("making a device node needs root")
        os.mknod(out, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    before = out.lstat()
    code, stdout, err = run("show", "--html", str(out), str(EXAMPLES / "spawn"))
    assert (code, stdout) == (1, "")
    assert err == (
        f"dsh-replay: {out}: is not a regular file (a symbolic link, a device or a FIFO), "
        "which a page written in its place would replace; name a file to write (OUT.html)\n"
    )
    after = out.lstat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_check_reads_a_runtime_session_directory_from_its_newest_generation(
    tmp_path: Path,
) -> None:
    # the runtime reads the highest generation, and so do show and load_scenario
    session = tmp_path / "root" / "--x--" / "sess-main"
    session.mkdir(parents=True)
    log = (EXAMPLES / "runtime-spawn" / "session.jsonl").read_text()
    (session / "session.v4.jsonl").write_text(log)
    (session / "session.v5.jsonl").write_text(log.replace('"version":4', '"version":5', 1))
    child_log = (EXAMPLES / "runtime-spawn" / "session.1.jsonl").read_text()
    child = session.parent / json.loads(child_log.split("\n", 1)[0])["id"]
    child.mkdir()  # the child the primary names: the recording is complete
    (child / "session.v4.jsonl").write_text(child_log)
    code, out, err = run("check", str(tmp_path / "root"))
    assert (code, err) == (0, "")
    assert out == "ok: 1 scenario(s)\n"


def test_check_finds_the_sqlite_stores_under_a_directory(tmp_path: Path) -> None:
    from pytest_dsh_replay import SessionStore, SqliteBackend

    (tmp_path / "stores").mkdir()
    with SessionStore(SqliteBackend(tmp_path / "stores" / "one.sqlite")) as store:
        main = store.create("main", meta={"cwd": "/w"})
        main.append("turn/start", {"turn": 1})
        main.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    (tmp_path / "stores" / "notes.txt").write_text("not a store\n")
    assert run("check", str(tmp_path)) == (0, "ok: 1 scenario(s)\n", "")
    (tmp_path / "stores" / "damaged.db").write_bytes(b"SQLite format 3\x00" + bytes(100))
    code, _, err = run("check", str(tmp_path))
    assert code == 1
    assert err.startswith(f"{tmp_path / 'stores' / 'damaged.db'}: ")
    assert err.endswith("1 problem(s) in 2 scenario(s)\n")


def test_show_and_scripts_previews_show_no_secret(tmp_path: Path) -> None:
    scenario = tmp_path / "spawn"
    shutil.copytree(EXAMPLES / "spawn", scenario)
    log = scenario / "session.1.jsonl"
    key = "AKIAIOSFODNN7EXAMPLE"  # an AWS access key id's shape
    log.write_text(log.read_text().replace('"echo: Name ', f'"{key} echo: Name '))
    for command in ("show", "scripts"):
        code, out, _ = run(command, str(scenario))
        assert code == 0
        assert key not in out
        assert "[REDACTED] echo: Name" in out


# --- the CLI in pipelines and over odd trees (helper-found) -------------------------------


def _broken_copy(tmp_path: Path) -> Path:
    root = tmp_path / "snaps"
    root.mkdir()
    for name in ("fork", "spawn"):
        shutil.copytree(EXAMPLES / name, root / name)
    (root / "spawn" / "session.jsonl").write_text("garbage\n")
    return root


def test_check_reports_every_problem_when_one_path_is_missing(tmp_path: Path) -> None:
    # A missing PATH after a broken one escaped as an OSError: only it was printed.
    root = _broken_copy(tmp_path)
    code, _, err = run("check", str(root / "spawn"), str(root / "typo"))
    assert code == 1
    lines = err.splitlines()
    assert lines[0].startswith(f"{root / 'spawn' / 'session.jsonl'}:1: invalid JSON")
    assert lines[1] == (
        f"{root / 'typo'}: no scenario here: expected a scenario directory, a session log or "
        "a SQLite store"
    )
    assert lines[2] == "2 problem(s) in 2 scenario(s)"


def test_check_and_fmt_name_a_directory_they_cannot_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The walk skipped it silently: check said ok and fmt --check passed.
    root = _broken_copy(tmp_path)
    hidden = root / "spawn"
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == hidden:
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, _, err = run("check", str(root))
    assert code == 1
    assert err.splitlines() == [
        f"{hidden}: cannot be read (Permission denied): the scenarios in it were not checked",
        "1 problem(s) in 1 scenario(s)",
    ]
    code, _, err = run("fmt", "--check", str(root))
    assert code == 1
    assert f"dsh-replay: {hidden}: cannot be read (Permission denied)" in err


def test_check_counts_a_target_named_twice_once(tmp_path: Path) -> None:
    root = _broken_copy(tmp_path)
    fork = root / "fork"
    assert run("check", str(fork), str(fork), str(fork / "session.jsonl")) == (
        0,
        "ok: 1 scenario(s)\n",
        "",
    )
    code, _, err = run("check", str(root), str(root / "spawn"))
    assert code == 1
    assert err.count("invalid JSON") == 1
    assert err.endswith("1 problem(s) in 2 scenario(s)\n")
    # a file there that is no log of the scenario is still checked on its own
    stray = fork / "stray.jsonl"
    stray.write_text('{"type":"turn/start"}\n')
    code, _, err = run("check", str(fork), str(stray))
    assert code == 1
    assert f"{stray}:1: the first line must be the session header" in err


class _ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_a_check_whose_output_pipe_closes_does_not_pass(tmp_path: Path) -> None:
    # `dsh-replay check ... | head -1` exited 0 with problems found.
    root = _broken_copy(tmp_path)
    assert main(["check", str(root)], stdout=_ClosedPipe(), stderr=_ClosedPipe()) == 1
    assert main(["fmt", "--check", str(root)], stdout=_ClosedPipe(), stderr=_ClosedPipe()) == 1
    assert main(["show", str(root / "fork")], stdout=_ClosedPipe(), stderr=_ClosedPipe()) == 0


def test_show_on_a_console_that_is_not_utf_8_gives_no_traceback(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    events = chunk_events(
        [
            {"type": "text-delta", "index": 0, "text": "caf\u00e9 \x1b[2J"},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]
    )
    log.write_bytes(
        b'{"type":"session","version":0,"id":"s","createdAt":1}\n'
        + b"".join(json.dumps(e).encode() + b"\n" for e in events)
    )
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest_dsh_replay", "show", str(log)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert "caf\\xe9" in result.stdout


def test_show_prints_no_escape_sequence_from_tool_names_or_ids(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    name = "add\x1b[2J\x1b]0;PWNED\x07"
    block = {"type": "tool-call", "id": "c1", "name": name, "arguments": "{}"}
    events = chunk_events(
        [
            {"type": "block-start", "index": 0, "blockType": "tool-call"},
            {"type": "block-end", "index": 0, "block": block},
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ]
    )
    header = {"type": "session", "version": 0, "id": "s\x1b[31m", "createdAt": 1}
    log.write_bytes(b"".join(json.dumps(v).encode() + b"\n" for v in [header, *events]))
    code, out, err = run("show", str(log))
    assert (code, err) == (0, "")
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "tools: add" in out


def test_a_zstd_log_named_jsonl_is_left_to_its_name_s_rules(tmp_path: Path) -> None:
    # --strict-form told to run fmt, and fmt then called the file invalid JSON.
    import zstandard

    scenario = tmp_path / "named"
    shutil.copytree(EXAMPLES / "spawn", scenario)
    for log in scenario.glob("session*.jsonl"):
        plain = log.read_bytes()
        log.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(plain))
    before = {p.name: p.read_bytes() for p in scenario.iterdir()}
    assert run("check", "--strict-form", str(scenario))[0] == 0
    code, _, err = run("fmt", str(scenario))
    assert code == 0
    assert f"dsh-replay: {scenario / 'session.jsonl'}: skipped, fmt rewrites plain" in err
    assert {p.name: p.read_bytes() for p in scenario.iterdir()} == before
