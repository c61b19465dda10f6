"""Every example scenario round-trips: recorded through the built-in adapter, replayed.

The project's examples, their agent, the scripted loopback server and this repo's
conftest run in a scratch project: ``--dsh-record --snapshot-update`` records every
scenario and transcript from scratch, then a plain run replays them keyless, sync and
async, with the replayed-log check and the transcripts.
"""

from __future__ import annotations

import shutil
import sys

import pytest
from support.paths import SUPPORT, TESTS

pytestmark = pytest.mark.e2e


def test_every_example_records_then_replays(pytester: pytest.Pytester) -> None:
    # The test module is copied under another name, so that the in-process replay does not
    # meet tests/plugin/test_examples.py (its transcripts follow the module's name). Recording
    # stays in a subprocess: in process, the live SDK's lazily imported modules would be
    # dropped from sys.modules after the inner run, and later tests would meet stale ones.
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(TESTS / "plugin" / "test_examples.py", pytester.path / "test_examples_copy.py")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\nasyncio_mode = strict\n")
    pytester._monkeypatch.delenv("DSH_RECORD_BASE_URL", raising=False)

    recorded = pytester.runpytest_subprocess(
        "--dsh-record", "--snapshot-update", "-p", "no:randomly"
    )
    recorded.assert_outcomes(passed=13)
    recorded.stdout.fnmatch_lines(["*scenarios: 7 replayed, 6 recorded, 0 missing*"])
    names = sorted(p.name for p in (pytester.path / "recordings").iterdir())
    assert names == ["fork", "mixed", "multi-spawn", "retry", "spawn", "tool-call"]
    transcripts = pytester.path / "__snapshots__" / "test_examples_copy"
    assert len(list(transcripts.glob("*.md"))) == 6

    replayed = pytester.runpytest()
    replayed.assert_outcomes(passed=13)
    replayed.stdout.fnmatch_lines(["*scenarios: 13 replayed, 0 recorded, 0 missing, 0 unused*"])
    # The project's command through this interpreter: a venv need not be activated.
    checked = pytester.run(
        sys.executable, "-m", "pytest_dsh_replay", "check", "--strict-form", "recordings"
    )
    assert checked.ret == 0
