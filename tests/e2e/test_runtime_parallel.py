"""Issue 40's runtime task, recorded from scratch and replayed, once per route (e2e).

The dsh runtime's primary starts two spawned workers of equal speed at once; each
calls a tool (``glob``) and reports, so their notices reach the primary a few
milliseconds apart; the primary then forks a reviewer. The test module
``tests/e2e/test_dsh_runtime.py`` runs in a scratch project with this repo's conftest:
``--dsh-record --snapshot-update`` records the task through the recording proxy in front
of the scripted model on loopback (the documented command, into the project's own
``dsh_snapshot_dir``), then a plain run replays it with the replayed-log check and the
transcript. The committed recordings of the same task, ``example_snapshots/runtime-parallel``
and ``runtime-parallel-openai``, replay in ``test_dsh_runtime.py`` itself; how reliably
they replay under load is ``benchmarks/flake.py``'s measure, not a test's.
"""

from __future__ import annotations

import json
import shutil

import pytest
from support.paths import SUPPORT, TESTS
from support.runtime_agent import runtime_missing

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing())),
]


@pytest.mark.parametrize("scenario", ["runtime-parallel", "runtime-parallel-openai"])
def test_the_parallel_task_records_then_replays(pytester: pytest.Pytester, scenario: str) -> None:
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(TESTS / "e2e" / "test_dsh_runtime.py", pytester.path / "test_runtime_copy.py")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\npythonpath = .\n")
    pytester._monkeypatch.delenv("DSH_RECORD_BASE_URL", raising=False)
    node = f"test_runtime_copy.py::test_runtime_example[{scenario}]"

    recorded = pytester.runpytest_subprocess(node, "--dsh-record", "--snapshot-update")
    recorded.assert_outcomes(passed=1)
    directory = pytester.path / "recordings" / scenario
    logs = sorted(directory.iterdir())
    assert [p.name for p in logs] == [
        "session.1.jsonl",
        "session.2.jsonl",
        "session.3.jsonl",
        "session.jsonl",
    ]
    headers = [json.loads(p.read_text().splitlines()[0]) for p in logs[:3]]
    assert sorted(h["isSeeded"] for h in headers) == [False, False, True]  # 2 spawns, 1 fork

    replayed = pytester.runpytest(node)  # in process: the runtime is the subprocess
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing*"])
