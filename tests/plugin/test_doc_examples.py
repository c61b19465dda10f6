"""Every Python example of README.md and the site runs as printed, so none can rot.

A page's titled Python blocks are the files of one example project (``agent.py``,
``conftest.py``, ``test_*.py``; ``tests/support/doc_examples.py`` says how blocks are
marked). Each project is written into a pytester directory, recorded with
``--dsh-record=missing --snapshot-update`` (through the page's own ``conftest.py``, else the
scripted live model of the Getting started page) and replayed with plain ``pytest``.
Fragments must compile; a stack whose package is not installed here skips with its name.
"""

from __future__ import annotations

import importlib
import shlex
import sys
from pathlib import Path

import pytest
from support.doc_examples import (
    DOCS,
    Block,
    blocks,
    imported_modules,
    missing_modules,
    page_files,
    pages,
    python_blocks,
)
from support.inner_runs import InnerRun, runpytest_in_one_child
from support.paths import REPO, TESTS

GETTING_STARTED = DOCS / "getting-started.md"


def _id(page: Path) -> str:
    return str(page.relative_to(REPO))


def _all_python_blocks() -> list[Block]:
    return [block for page in pages() for block in python_blocks(page)]


def _runnable_pages() -> list[Path]:
    return [page for page in pages() if page_files(page)]


def test_every_python_block_says_what_it_is() -> None:
    unmarked = [
        b.where
        for b in _all_python_blocks()
        if not (b.title or "").endswith(".py") and not ({"fragment", "e2e"} & b.classes)
    ]
    assert unmarked == [], "give each a file title, or mark it { .fragment } or { .e2e }"
    for page in pages():
        names = [b.title for b in python_blocks(page) if b.is_file]
        assert len(names) == len(set(names)), f"{_id(page)} repeats a file name: {names}"


def test_the_pages_hold_examples_of_every_kind() -> None:
    blocks = _all_python_blocks()
    assert sum(b.is_file for b in blocks) >= 20
    assert any("fragment" in b.classes for b in blocks)
    assert any("e2e" in b.classes for b in blocks)


@pytest.mark.parametrize(
    "block",
    [b for b in _all_python_blocks() if not b.is_file],
    ids=lambda b: b.where,
)
def test_fragments_and_e2e_files_compile(block: Block) -> None:
    compile(block.code, block.where, "exec")


def test_every_e2e_file_is_run_by_an_e2e_test() -> None:
    e2e_sources = "\n".join(p.read_text(encoding="utf-8") for p in (TESTS / "e2e").glob("*.py"))
    for block in _all_python_blocks():
        if "e2e" in block.classes:
            assert block.title, block.where
            assert _id(block.page) in e2e_sources, block.where
            assert f'"{block.title}"' in e2e_sources, block.where


# Packages that keep no process-wide state a page's test leaves behind: a project that
# imports only these (and the standard library) runs in this process, which saves two
# interpreter starts and two imports of its framework per page. Not here: frameworks
# that keep global state (the Agents SDK's default client and loop) or that import parts
# of pydantic lazily (pydantic-ai, Strands): an in-process run drops what it imported
# first, and pydantic, which keeps referring to it, then fails in later tests.
_STATELESS = frozenset(
    {"anthropic", "boto3", "botocore", "google", "openai", "pytest", "pytest_dsh_replay"}
)


def _third_party(files: dict[str, str], local: set[str]) -> set[str]:
    imported = {m for code in files.values() for m in imported_modules(code)}
    return imported - local - set(sys.stdlib_module_names)


def _runs_in_process(files: dict[str, str], local: set[str]) -> bool:
    return _third_party(files, local) <= _STATELESS


def _write_project(pytester: pytest.Pytester, files: dict[str, str]) -> None:
    for name, code in files.items():
        target = pytester.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code, encoding="utf-8")


def _outcomes_ok(result: pytest.RunResult) -> None:
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert outcomes.get("passed", 0) >= 1, outcomes


@pytest.mark.parametrize("page", _runnable_pages(), ids=_id)
def test_page_examples_record_then_replay(pytester: pytest.Pytester, page: Path) -> None:
    files = page_files(page)
    local = {Path(name).stem for name in files}
    missing = sorted({m for code in files.values() for m in missing_modules(code)} - local)
    if missing:
        pytest.skip(f"{_id(page)} needs {', '.join(missing)}, not installed here")
    own_hook = "conftest.py" in files
    if not own_hook:
        files = {"conftest.py": page_files(GETTING_STARTED)["conftest.py"], **files}
    _write_project(pytester, files)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    replay = InnerRun(unlink=() if own_hook else ("conftest.py",))  # then no live model at all
    if not _runs_in_process(files, local):
        # Frameworks that keep global state (the Agents SDK's default client, ...) or import
        # lazily run in a subprocess, which one process cannot reset: one for both runs.
        ran, result = runpytest_in_one_child(
            pytester, InnerRun(("--dsh-record=missing", "--snapshot-update")), replay
        )
        for outcome in ran:
            assert outcome.ret == pytest.ExitCode.OK, result.stdout.str()
            assert outcome.outcomes.get("passed", 0) >= 1, outcome
        return
    # An in-process run drops the modules it imported when it ends; imported here first,
    # a framework is imported once per worker instead of once per run.
    for name in sorted(_third_party(files, local)):
        importlib.import_module(name)
    _outcomes_ok(pytester.runpytest_inprocess("--dsh-record=missing", "--snapshot-update"))
    for name in replay.unlink:
        (pytester.path / name).unlink()
    _outcomes_ok(pytester.runpytest_inprocess())


def _commands(page: Path, title: str) -> list[list[str]]:
    """The arguments of each ``pytest`` line of the page's ``sh`` block titled ``title``."""
    (block,) = [b for b in blocks(page) if b.language == "sh" and b.title == title]
    lines = block.code.splitlines()
    return [shlex.split(line)[1:] for line in lines if line.startswith("pytest")]


def test_getting_started_walks_from_an_agent_to_a_replayed_test(
    pytester: pytest.Pytester,
) -> None:
    # The page's files as printed; its commands as printed, in its order.
    files = page_files(GETTING_STARTED)
    assert sorted(files) == ["agent.py", "conftest.py", "test_agent.py"]
    _write_project(pytester, files)
    first = pytester.runpytest()  # before recording: both stop at set-up, with the command
    first.assert_outcomes(errors=2)
    first.stdout.fnmatch_lines(["*record it: pytest --dsh-record=missing test_agent.py::*"])
    (record,) = _commands(GETTING_STARTED, "Record")
    assert "--dsh-record=missing" in record
    pytester.runpytest(*record).assert_outcomes(passed=2)
    for written in (
        "dsh_snapshots/capital/session.jsonl",
        "dsh_snapshots/sum/session.jsonl",
        "__snapshots__/test_agent/test_sum.md",
    ):
        assert (pytester.path / written).is_file(), written
        assert f"`{written}`" in GETTING_STARTED.read_text(encoding="utf-8"), written
    transcript = (pytester.path / "__snapshots__/test_agent/test_sum.md").read_text()
    assert "add" in transcript
    assert "The sum is 5." in transcript
    (replay,) = _commands(GETTING_STARTED, "Replay")
    assert replay == []
    replayed = pytester.runpytest(*replay)
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["*scenarios: 2 replayed, 0 recorded, 0 missing*"])
