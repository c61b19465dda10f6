"""Issue 40's runtime task: recorded from scratch, re-recorded unchanged, replayed (e2e).

The task of ``support.runtime_parallel`` (two spawned children of equal speed, each using
a tool, and a fork child, started at once) is recorded on both of the runtime's routes
with its transcripts, through the recording proxy in front of a scripted model on
loopback, then re-recorded twice. The children are created, and finish, in whichever
order the scheduler gives, and every run has its own temporary working directory; each
re-record must still report ``unchanged`` and leave every file (the logs and the
transcript snapshots) byte for byte, never rewritten. A plain run then replays the fresh
recordings, with the replayed-log check and the transcripts. The committed recordings of
the same task, ``example_snapshots/runtime-parallel`` and ``runtime-parallel-openai``,
replay in ``test_dsh_runtime.py``; how reliably they replay under load is
``benchmarks/flake.py``'s measure, not a test's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.inner_runs import InnerRun, runpytest_in_one_child, scripted_proxy_conftest
from support.paths import SUPPORT
from support.runtime_agent import runtime_missing

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing())),
]


TEST = """
import pytest
from support.runtime_agent import PRIMARY_ID, RuntimeDriver
from support.runtime_parallel import CHILDREN, HOLD, PROMPTS


@pytest.mark.parametrize("route", ["messages", "openai"])
def test_parallel_children(route, dsh_replay, dsh_transcript, tmp_path):
    with RuntimeDriver(dsh_replay.base_url, tmp_path, route=route) as runtime:
        dsh_replay.use_sessions(runtime.root, PRIMARY_ID)
        HOLD.watch(runtime.root)
        runtime.run(PROMPTS)
    assert len(runtime.children) == CHILDREN
    assert HOLD.spliced() == CHILDREN  # every notice reached the primary in one request
    assert dsh_replay.transcript() == dsh_transcript
"""


def files(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under ``root``: its bytes and its modification time."""
    return {
        str(p.relative_to(root)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_parallel_children_record_then_re_record_twice_unchanged_then_replay(
    pytester: pytest.Pytester,
) -> None:
    shutil.copytree(SUPPORT, pytester.path / "support")
    pytester.makeconftest(scripted_proxy_conftest("support.runtime_parallel", "parallel_model"))
    pytester.makepyfile(test_parallel=TEST)
    pytester.makeini("[pytest]\npythonpath = .\ndsh_snapshot_dir = recordings\n")
    record = ("--dsh-record=all", "--snapshot-update", "-p", "no:randomly")
    first = pytester.runpytest_subprocess(*record)
    first.assert_outcomes(passed=2)
    kept = {
        "recordings": files(pytester.path / "recordings"),
        "__snapshots__": files(pytester.path / "__snapshots__"),
    }
    assert len(kept["recordings"]) == 2 * (1 + 3)  # per route: the primary and 3 children
    assert len(kept["__snapshots__"]) == 2
    for route in ("messages", "openai"):
        children = sorted((pytester.path / "recordings").glob(f"*{route}*/session.*.jsonl"))
        headers = [json.loads(p.read_text().splitlines()[0]) for p in children]
        assert sorted(h["isSeeded"] for h in headers) == [False, False, True]  # 2 spawns, a fork
    # Both re-records and the replay in one subprocess (one interpreter start for three
    # runs): a rewrite by the first re-record would show in the files' times at the end.
    again = InnerRun(record)
    ran, result = runpytest_in_one_child(pytester, again, again, InnerRun())
    assert [r.outcomes.get("passed") for r in ran] == [2, 2, 2], result.stdout.str()
    assert [r.ret for r in ran] == [0, 0, 0], result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            f"*test_parallel_children?{route}?: 4 sessions, 9 model calls, unchanged*"
            for _ in range(2)
            for route in ("messages", "openai")
        ]
    )
    assert {name: files(pytester.path / name) for name in kept} == kept
    # the last run: no live model, the scripted one is unused
    result.stdout.fnmatch_lines(["*scenarios: 2 replayed, 0 recorded, 0 missing, 0 unused*"])
