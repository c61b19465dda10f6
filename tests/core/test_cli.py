"""The dsh-replay command (DESIGN 5)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_support import require_corpus, scenario

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


def test_check_accepts_the_whole_corpus_except_the_known_unreplayable_one() -> None:
    require_corpus()
    root = scenario("subagent-mixed").parent
    code, _, err = run("check", str(root))
    assert code == 1
    lines = err.splitlines()
    assert len(lines) == 2
    assert "plain-turn" in lines[0]
    assert lines[1] == "1 problem(s) in 121 scenario(s)"
