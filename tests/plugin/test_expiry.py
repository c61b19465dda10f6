"""Recordings older than their test allows: a warning, --dsh-strict-age, and a refresh.

A recording's age is its primary's header ``createdAt``, never the files' modification
time (a git checkout sets that): each test here gives the files the opposite mtime of
what their header says.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import orjson
import pytest
from support.inner_runs import ECHO_LIVE_CONFTEST
from support.scenarios import make_scenario

from pytest_dsh_replay import load_scenario

TESTS = """
import pytest

def ask(model, text):
    chunks = model.stream({"messages": [{"role": "user", "content": text}]}, session_id="main")
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")

@pytest.mark.dsh_scenario("old"MARK_OLD)
def test_old(dsh_replay):
    assert ask(dsh_replay.model, "q") == "live: q"

@pytest.mark.dsh_scenario("fresh"MARK_FRESH)
def test_fresh(dsh_replay):
    assert ask(dsh_replay.model, "q") == "live: q"
"""

DAY_S = 86_400
YEAR_AGO = time.time() - 365 * DAY_S


def recorded(directory: Path, *, days_ago: float, mtime: float) -> Path:
    """A recording of one call whose primary's header says it was made ``days_ago``."""
    make_scenario(directory, ask="q", primary=["live: q"])
    log = directory / "session.jsonl"
    first, rest = log.read_bytes().split(b"\n", 1)
    header = orjson.loads(first)
    header["createdAt"] = int((time.time() - days_ago * DAY_S) * 1000)
    log.write_bytes(orjson.dumps(header) + b"\n" + rest)
    os.utime(log, (mtime, mtime))
    return directory


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    recorded(pytester.path / "recordings" / "old", days_ago=41, mtime=time.time())
    recorded(pytester.path / "recordings" / "fresh", days_ago=2, mtime=YEAR_AGO)
    pytester.makeconftest(ECHO_LIVE_CONFTEST)
    return pytester


def _tests(project: pytest.Pytester, old: str = "", fresh: str = "") -> None:
    project.makepyfile(test_agent=TESTS.replace("MARK_OLD", old).replace("MARK_FRESH", fresh))


def _ini(project: pytest.Pytester, max_age: str | None) -> None:
    line = "" if max_age is None else f"dsh_max_age = {max_age}\n"
    project.makeini(f"[pytest]\ndsh_snapshot_dir = recordings\n{line}")


def test_an_expired_recording_replays_with_a_warning_naming_its_age_and_the_command(
    project: pytest.Pytester,
) -> None:
    _ini(project, "30d")
    _tests(project)
    result = project.runpytest("-W", "always::pytest_dsh_replay.RecordingExpiredWarning")
    result.assert_outcomes(passed=2, warnings=1)
    result.stdout.fnmatch_lines(
        [
            "*RecordingExpiredWarning: test_agent.py::test_old: recording "
            "*recordings/old is recorded 41 days ago, older than the 30 days allowed; "
            "re-record it: pytest --dsh-record=all test_agent.py::test_old",
            "*scenarios: 2 replayed, 0 recorded, 0 missing, 1 expired (older than their max "
            "age; replayed)*",
        ]
    )
    assert "test_fresh" not in result.stdout.str().split("warnings summary")[1].split("--")[0]


def test_strict_age_fails_only_the_expired_recording_s_test(project: pytest.Pytester) -> None:
    _ini(project, "30d")
    _tests(project)
    result = project.runpytest("--dsh-strict-age")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*test_agent.py::test_old: recording *recordings/old is recorded 41 days ago, older "
            "than the 30 days allowed; re-record it: pytest --dsh-record=all "
            "test_agent.py::test_old (--dsh-strict-age)*",
            "ERROR test_agent.py::test_old*",
        ]
    )


def test_the_marker_s_max_age_overrides_the_ini_s(project: pytest.Pytester) -> None:
    _ini(project, "30d")
    _tests(project, old=', max_age="60d"', fresh=', max_age="1d"')
    result = project.runpytest("--dsh-strict-age")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*test_fresh: recording *fresh is recorded 2 days ago*"])
    _ini(project, None)  # the marker alone sets it
    _tests(project, old=', max_age="12h"')
    result = project.runpytest("--dsh-strict-age")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*older than the 12 hours allowed*"])


def test_missing_records_an_expired_recording_again_and_leaves_the_others(
    project: pytest.Pytester,
) -> None:
    _ini(project, "30d")
    _tests(project)
    fresh = digest(project.path / "recordings" / "fresh")
    old = load_scenario(project.path / "recordings" / "old").scripts[0].created_at
    result = project.runpytest("--dsh-record=missing")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "*scenarios: 1 replayed, 1 recorded, 0 missing, 1 re-recorded because expired*",
            "recorded *recordings/old: 1 session, 1 model call",  # written, not "unchanged"
        ]
    )
    assert digest(project.path / "recordings" / "fresh") == fresh
    new = load_scenario(project.path / "recordings" / "old").scripts[0].created_at
    assert new > old + 40 * DAY_S * 1000
    again = project.runpytest("--dsh-strict-age")
    again.assert_outcomes(passed=2)


def test_a_bad_max_age_is_refused_with_the_value(project: pytest.Pytester) -> None:
    _ini(project, "30 days")
    _tests(project)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*the dsh_max_age ini key: max age '30 days' is not a duration*"])
    _ini(project, None)
    _tests(project, old=', max_age="soon"')
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*test_agent.py::test_old: @pytest.mark.dsh_scenario(max_age=...): max age 'soon'*"]
    )
