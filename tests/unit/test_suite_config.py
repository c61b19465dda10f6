"""This project's own pytest configuration reports what it should."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from support.paths import PYPROJECT, README, REPO, SUPPORT, TESTS


def test_a_failing_property_test_is_reported_as_a_failure(pytester: pytest.Pytester) -> None:
    tomllib = pytest.importorskip("tomllib")
    options = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["pytest"]
    ini = options["ini_options"]
    scope = ini["asyncio_default_fixture_loop_scope"]  # unset, pytest-asyncio warns
    pytester.makeini(
        "[pytest]\n"
        f"asyncio_default_fixture_loop_scope = {scope}\n"
        "filterwarnings =\n" + "".join(f"    {f}\n" for f in ini["filterwarnings"])
    )
    pytester.makepyfile(
        test_property="""
        from hypothesis import given, settings, strategies as st

        @settings(database=None, derandomize=True)
        @given(st.integers())
        def test_small(n):
            assert n < 5
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:benchmark"
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert 5 < 5*"])  # the shrunk failing example


def test_the_corpus_guard_fails_an_xdist_run_whose_test_leaves_a_file_there(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # README's test command runs on xdist workers: each runs the session-scoped guard of
    # tests/conftest.py around the tests it runs, so a file one of them leaves in the
    # corpus fails the run, whichever worker ran that test (one worker shows it).
    corpus = pytester.path / "corpus"
    (corpus / "dsh-harness").mkdir(parents=True)
    monkeypatch.setenv("DSH_CORPUS_DIR", str(corpus))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)  # the inner run is a user's run
    monkeypatch.setenv(
        "PYTEST_ADDOPTS", "-p no:benchmark -p no:hypothesispytest -p no:recording -p no:anyio"
    )
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    pytester.makeini("[pytest]\npythonpath = .\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_leaves="""
        import os

        import pytest

        @pytest.mark.parametrize("n", range(6))
        def test_one(n):
            if n == 5:  # a ready file written where the corpus is read
                open(os.path.join(os.environ["DSH_CORPUS_DIR"], "ready"), "w").close()
        """
    )
    result = pytester.runpytest("-n", "1", "-p", "no:randomly", "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] == 6
    assert outcomes.get("errors", outcomes.get("error")) == 1  # the worker's guard
    result.stdout.fnmatch_lines(
        ["*the tests changed the shared corpus under*", "*new: corpus/ready*"]
    )


def test_ci_runs_the_quick_start_commands_of_the_readme() -> None:
    quick_start = README.read_text(encoding="utf-8").split("## Quick start\n", 1)[1]
    block = re.search(r"```sh\n(.*?)```", quick_start, re.S)
    assert block, "the quick start lost its commands"
    commands = block.group(1).splitlines()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for number, command in enumerate(commands, start=1):
        comment = next(n for n, line in enumerate(ci) if f"Quick start, command {number} " in line)
        assert ci[comment + 1] == command


@pytest.mark.parametrize(
    ("off", "named"), [("dsh_replay", "pytest-dsh-replay itself"), ("asyncio", "pytest-asyncio")]
)
def test_an_environment_without_the_test_extras_is_told_what_to_install(
    off: str, named: str
) -> None:
    # without the package's plugin pytest met an unknown hook, without pytest-asyncio an
    # unknown ini option: both INTERNALERRORs at collection, before any test
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--co", "-q", "-p", f"no:{off}", "tests/unit/test_cli.py"],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")},  # a user's
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert f"missing: {named}. Install them" in done.stderr
    assert done.stderr.rstrip().endswith("python3 -m pip install -e '.[test]'")
