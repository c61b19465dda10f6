"""The real dsh runtime through the plugin, as users run it: recorded, then replayed.

The runtime tests, their driver, the scripted loopback server and this repo's conftest
run in a scratch project: ``--dsh-record --snapshot-update`` records the mixed scenario
(a spawn and a fork child at once) and its transcript from the runtime's own logs, then
a plain run replays it with no server but the plugin's endpoint, and the recording
passes ``dsh-replay check --strict-form``.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from runtime_agent import runtime_missing

TESTS = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing())),
]


def test_the_runtime_records_then_replays(pytester: pytest.Pytester) -> None:
    for name in ("runtime_agent.py", "openai_server.py", "test_dsh_runtime.py", "conftest.py"):
        shutil.copy(TESTS / name, pytester.path / name)
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\nasyncio_mode = strict\n")
    pytester._monkeypatch.delenv("DSH_RECORD_BASE_URL", raising=False)
    select = ("-k", "test_runtime_example and mixed", "-p", "no:randomly")

    recorded = pytester.runpytest_subprocess("--dsh-record", "--snapshot-update", *select)
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["*recorded */recordings/runtime-mixed: 3 sessions*"])
    scenario = pytester.path / "recordings" / "runtime-mixed"
    assert sorted(p.name for p in scenario.iterdir()) == [
        "session.1.jsonl",
        "session.2.jsonl",
        "session.jsonl",
    ]
    assert all(b'"version":4' in p.read_bytes()[:100] for p in scenario.iterdir())

    replayed = pytester.runpytest_subprocess(*select)
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing*"])
    checked = pytester.run(
        sys.executable, "-m", "pytest_dsh_replay", "check", "--strict-form", "recordings"
    )
    assert checked.ret == 0
