"""SDK agents recorded through the endpoint's proxy in a subprocess, then replayed (e2e)."""

from __future__ import annotations

import shutil

import pytest
from support.paths import SUPPORT, TESTS

pytestmark = pytest.mark.e2e


def test_sdk_agents_record_through_the_proxy_then_replay_without_a_server(
    pytester: pytest.Pytester,
) -> None:
    # Recorded in a subprocess: in process, the SDKs' lazily imported modules would be
    # dropped from sys.modules after the inner run, and later tests would meet stale ones.
    # The replay's controller runs in process (its workers are processes of their own):
    # the test module is copied under another name so that it does not meet
    # tests/plugin/test_sdk_agents.py.
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copy(TESTS / "conftest.py", pytester.path / "conftest.py")
    shutil.copy(TESTS / "plugin" / "test_sdk_agents.py", pytester.path / "test_sdk_agents_copy.py")
    pytester.makeini(
        "[pytest]\ndsh_snapshot_dir = recordings\nasyncio_mode = strict\n"
        "asyncio_default_fixture_loop_scope = function\n"
    )
    pytester._monkeypatch.delenv("DSH_RECORD_BASE_URL", raising=False)
    recorded = pytester.runpytest_subprocess("--dsh-record", "--snapshot-update", "-k", "not async")
    recorded.assert_outcomes(passed=4)
    names = sorted(p.name for p in (pytester.path / "recordings").iterdir())
    assert names == [
        "sdk-anthropic-content",
        "sdk-anthropic-headers",
        "sdk-openai-content",
        "sdk-openai-headers",
    ]
    # Replayed with no server and no key, on two xdist workers.
    replayed = pytester.runpytest("-n", "2", "--snapshot-update")  # the async ones' too
    replayed.assert_outcomes(passed=8)
    replayed.stdout.fnmatch_lines(["*scenarios: 8 replayed, 0 recorded, 0 missing, 0 unused*"])
