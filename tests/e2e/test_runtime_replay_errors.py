"""The dsh runtime meeting a replay error: the run ends at once, the test fails once (e2e).

A replay error is answered with a status the runtime does not retry
(docs/wires.md#replay-errors), so the runtime's call fails on its first attempt instead
of after five retries with backoff; each test counts the requests that got the error.
"""

from __future__ import annotations

import json
import shutil

import pytest
from support.paths import EXAMPLES, SUPPORT
from support.runtime_agent import runtime_missing

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing())),
]

INNER = """
import json
from pathlib import Path

import pytest
from support.runtime_agent import PRIMARY_ID, SCENARIOS, RuntimeDriver

PROMPTS = SCENARIOS["runtime-spawn"] + {extra!r}


@pytest.mark.dsh_scenario("runtime-spawn")
def test_runtime(dsh_replay, tmp_path):
    endpoint = dsh_replay._endpoint
    handle, failed = endpoint.handle, []

    def counting(method, path, headers, body, **kwargs):
        response = handle(method, path, headers, body, **kwargs)
        if response.status >= 400:
            failed.append(response.status)
        return response

    endpoint.handle = counting
    try:
        with RuntimeDriver(dsh_replay.base_url, tmp_path) as runtime:
            dsh_replay.use_sessions(runtime.root, PRIMARY_ID)
            runtime.run(PROMPTS)
    finally:
        Path({out!r}).write_text(json.dumps(failed))
"""


def run_inner(
    pytester: pytest.Pytester, extra: list[str], drop_child: bool, *args: str
) -> tuple[pytest.RunResult, list[int]]:
    shutil.copytree(SUPPORT, pytester.path / "support")
    scenario = pytester.path / "dsh_snapshots" / "runtime-spawn"
    shutil.copytree(EXAMPLES / "runtime-spawn", scenario)
    if drop_child:
        (scenario / "session.1.jsonl").unlink()
    out = pytester.path / "failed.json"
    pytester.makeini("[pytest]\npythonpath = .\n")
    pytester.makepyfile(test_inner=INNER.format(extra=extra, out=str(out)))
    result = pytester.runpytest("-p", "no:randomly", *args)
    return result, json.loads(out.read_text())


def test_an_extra_turn_fails_at_its_first_attempt(pytester: pytest.Pytester) -> None:
    result, failed = run_inner(pytester, ["EXTRA: one more turn"], drop_child=False)
    assert failed == [400]  # one attempt: the runtime did not retry
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*_ test_runtime _*", "ReplayExhaustedError: session 'sess-main' * asked for call #*"]
    )
    assert "ERROR at teardown" not in result.stdout.str()


def test_a_missing_child_fails_at_its_first_attempt(pytester: pytest.Pytester) -> None:
    result, failed = run_inner(pytester, [], drop_child=True)
    assert failed == [400]
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*_ test_runtime _*", "ReplayBindingError: session * (first user message 'SPAWN_TASK*"]
    )
    assert "ERROR at teardown" not in result.stdout.str()


def test_recording_with_the_live_server_down_fails_each_call_at_once(
    pytester: pytest.Pytester,
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    pytester._monkeypatch.setenv("DSH_RECORD_BASE_URL", url)
    pytester._monkeypatch.setenv("DSH_RECORD_ANTHROPIC_BASE_URL", url)
    pytester._monkeypatch.setenv("DSH_RECORD_API_KEY", "sk-test-0123456789abcdef")
    result, failed = run_inner(pytester, [], False, "--dsh-record=all")
    assert failed == [400, 400]  # one attempt per prompt: the runtime did not retry
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*_ test_runtime _*", f"RecordingError: recording * cannot reach the live model at {url}*"]
    )
    assert "ERROR at teardown" not in result.stdout.str()
