"""The dsh runtime page's example, recorded through the proxy and replayed (e2e).

It is the ``{ .e2e }`` block of docs/guide/dsh-runtime.md titled ``"test_delegation.py"``.
"""

from __future__ import annotations

import io
import json
import shutil

import pytest
from support.doc_examples import DOCS, titled
from support.inner_runs import (
    InnerOutcome,
    InnerRun,
    runpytest_in_one_child,
    scripted_proxy_conftest,
)
from support.paths import SUPPORT

from pytest_dsh_replay.cli import main

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
    # Recorded, then replayed with the conftest gone (no live model), in one subprocess.
    record = InnerRun(("--dsh-record", "--snapshot-update"))
    (recorded, replayed), result = runpytest_in_one_child(
        pytester, record, InnerRun(unlink=("conftest.py",))
    )
    assert recorded == InnerOutcome(0, {"passed": 1}), result.stdout.str()
    scenario = pytester.path / "dsh_snapshots" / "delegation"
    names = sorted(p.name for p in scenario.iterdir())
    assert names == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    headers = [json.loads((scenario / n).read_text().splitlines()[0]) for n in names]
    assert all(h["version"] == 4 for h in headers)
    assert sorted(h.get("isSeeded") for h in headers[:2]) == [False, True]  # spawn, fork
    assert replayed == InnerOutcome(0, {"passed": 1}), result.stdout.str()
    result.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing*"])
    checked = io.StringIO()
    status = main(["check", "--strict-form", str(pytester.path / "dsh_snapshots")], stdout=checked)
    assert status == 0, checked.getvalue()
