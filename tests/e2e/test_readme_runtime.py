"""The dsh runtime page's example, recorded through the proxy and replayed (e2e).

It is the ``{ .e2e }`` block of docs/guide/dsh-runtime.md titled ``"test_delegation.py"``.
"""

from __future__ import annotations

import json
import shutil
import sys

import pytest
from support.doc_examples import DOCS, titled
from support.inner_runs import scripted_proxy_conftest
from support.paths import SUPPORT

pytestmark = pytest.mark.e2e


def test_readme_runtime_example_records_through_the_proxy_then_replays(
    pytester: pytest.Pytester,
) -> None:
    # The dsh runtime itself, as users run it: recorded through the recording proxy in
    # front of the package's scripted model on loopback, written from the runtime's own
    # logs, then replayed with no server but the endpoint.
    from support.runtime_agent import runtime_missing

    missing = runtime_missing()
    if missing is not None:
        pytest.skip(missing)
    shutil.copytree(SUPPORT, pytester.path / "support")
    pytester.makepyfile(test_delegation=titled(DOCS / "guide/dsh-runtime.md", "test_delegation.py"))
    pytester.makeconftest(scripted_proxy_conftest("support.runtime_agent", "runtime_model"))
    pytester.makeini("[pytest]\npythonpath = .\n")
    recorded = pytester.runpytest_subprocess("--dsh-record", "--snapshot-update")
    recorded.assert_outcomes(passed=1)
    scenario = pytester.path / "dsh_snapshots" / "delegation"
    names = sorted(p.name for p in scenario.iterdir())
    assert names == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    headers = [json.loads((scenario / n).read_text().splitlines()[0]) for n in names]
    assert all(h["version"] == 4 for h in headers)
    assert sorted(h.get("isSeeded") for h in headers[:2]) == [False, True]  # spawn, fork
    pytester.makeconftest("")
    replayed = pytester.runpytest_subprocess()
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing*"])
    checked = pytester.run(
        sys.executable, "-m", "pytest_dsh_replay", "check", "--strict-form", "dsh_snapshots"
    )
    assert checked.ret == 0
