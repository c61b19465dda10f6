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
    kept = ("recordings", "__snapshots__")
    # The recording, both re-records and the replay in one subprocess (one interpreter
    # start for four runs); what the first run wrote is copied as it was then, so a
    # rewrite by a re-record would show in the files' times at the end.
    again = InnerRun(record)
    ran, result = runpytest_in_one_child(
        pytester, InnerRun(record, keep=kept), again, again, InnerRun()
    )
    assert [r.outcomes.get("passed") for r in ran] == [2, 2, 2, 2], result.stdout.str()
    assert [r.ret for r in ran] == [0, 0, 0, 0], result.stdout.str()
    first = {name: files(pytester.path / f"{name}.after-0") for name in kept}
    assert len(first["recordings"]) == 2 * (1 + 3)  # per route: the primary and 3 children
    assert len(first["__snapshots__"]) == 2
    for route in ("messages", "openai"):
        children = sorted((pytester.path / "recordings.after-0").glob(f"*{route}*/session.*.jsonl"))
        headers = [json.loads(p.read_text().splitlines()[0]) for p in children]
        assert sorted(h["isSeeded"] for h in headers) == [False, False, True]  # 2 spawns, a fork
    result.stdout.fnmatch_lines(
        [
            f"*test_parallel_children?{route}?: 4 sessions, 9 model calls, unchanged*"
            for _ in range(2)
            for route in ("messages", "openai")
        ]
    )
    assert {name: files(pytester.path / name) for name in kept} == first
    # the last run: no live model, the scripted one is unused
    result.stdout.fnmatch_lines(["*scenarios: 2 replayed, 0 recorded, 0 missing, 0 unused*"])
