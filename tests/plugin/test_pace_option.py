"""``--dsh-pace`` and the marker's ``pace=`` as users run them (docs/scenarios.md#pacing).

The recording's call has known gaps (700 ms in all). The inner run's conftest stands in
for the serving loop's wait (the model's default wait, ``ReplayCall._wait_cancelled``)
and keeps what each test asked it to wait, so nothing here sleeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

HEADER = {"type": "session", "version": 0, "id": "main", "createdAt": 1_700_000_000_000}
START = {"type": "block-start", "index": 0, "blockType": "text"}
EVENTS: list[dict[str, Any]] = [
    {"type": "turn/start", "seq": 0, "time": 1000, "data": {"turn": 1}},
    {"type": "step/start", "seq": 1, "time": 1000, "data": {"turn": 1, "step": 1}},
    {"type": "user/message", "seq": 2, "time": 1001,
     "data": {"role": "user", "content": [{"type": "text", "text": "hi"}]}},
    {"type": "assistant/chunk", "seq": 3, "time": 1200,
     "data": {"turn": 1, "step": 1, "chunk": START}},
    {"type": "text-chunks", "seq0": 4, "time0": 1250,
     "data": {"turn": 1, "step": 1, "index": 0, "dt": [100, 50], "texts": ["Hel", "lo", "!"]}},
    {"type": "assistant/chunk", "seq": 7, "time": 1400,
     "data": {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0,
                                             "block": {"type": "text", "text": "Hello!"}}}},
    {"type": "assistant/chunk", "seq": 8, "time": 1700,
     "data": {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}}},
]  # fmt: skip
GAPS_MS = [200, 50, 100, 50, 300]  # the block-end's gap is 0: no wait

CONFTEST = """
import json
import pytest
from pytest_dsh_replay._replay.call import ReplayCall

@pytest.fixture(autouse=True)
def requested_waits(monkeypatch, request):
    waits = []

    def wait(self, timeout):
        waits.append(timeout)
        return False  # not cancelled: the call goes on at once

    monkeypatch.setattr(ReplayCall, "_wait_cancelled", wait)
    yield waits
    print("WAITS", request.node.name, json.dumps(waits))
"""

TESTS = """
import pytest

def ask(model):
    chunks = model.stream({"messages": [{"role": "user", "content": "hi"}]}, session_id="m")
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")

@pytest.mark.dsh_scenario("timed")
def test_run_pace(dsh_replay):
    assert ask(dsh_replay.model) == "Hello!"

@pytest.mark.dsh_scenario("timed", pace=0.5)
def test_marker_pace(dsh_replay):
    assert ask(dsh_replay.model) == "Hello!"

@pytest.mark.dsh_scenario("timed")
def test_over_http(dsh_replay):
    client = dsh_replay.openai_client()
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Hello!"
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    scenario = pytester.path / "recordings" / "timed"
    scenario.mkdir(parents=True)
    lines = [orjson.dumps(e) + b"\n" for e in [HEADER, *EVENTS]]
    (scenario / "session.jsonl").write_bytes(b"".join(lines))
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\ndsh_compare_logs = false\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=TESTS)
    return pytester


def _waits(result: pytest.RunResult) -> dict[str, list[float]]:
    """Each test's requested waits, as its fixture printed them (after its progress dot)."""
    found = {}
    for line in result.outlines:
        if "WAITS " in line:
            name, waits = line.split("WAITS ", 1)[1].split(" ", 1)
            found[name] = orjson.loads(waits)
    return found


def _scaled(factor: float) -> list[float]:
    return [gap * factor / 1000 for gap in GAPS_MS]


def test_dsh_pace_scales_the_recorded_gaps_and_the_marker_wins(project: pytest.Pytester) -> None:
    result = project.runpytest("-s", "--dsh-pace=2")
    result.assert_outcomes(passed=3)
    waits = _waits(result)
    assert waits["test_run_pace"] == _scaled(2)  # 1.4 s of waits in all
    assert waits["test_over_http"] == _scaled(2)
    assert waits["test_marker_pace"] == _scaled(0.5)


def test_without_a_pace_nothing_waits_but_a_marked_test(project: pytest.Pytester) -> None:
    result = project.runpytest("-s")
    result.assert_outcomes(passed=3)
    waits = _waits(result)
    assert waits["test_run_pace"] == []
    assert waits["test_over_http"] == []
    assert waits["test_marker_pace"] == _scaled(0.5)


@pytest.mark.parametrize("value", ["-1", "fast", "nan", "inf", ""])
def test_a_bad_dsh_pace_is_a_usage_error(project: pytest.Pytester, value: str) -> None:
    result = project.runpytest(f"--dsh-pace={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*--dsh-pace={value}: the pace must be a finite number >= 0 (the factor recorded*"]
    )


@pytest.mark.parametrize("value", ["'fast'", "-2", "True", "float('nan')"])
def test_a_bad_marker_pace_fails_that_test_at_set_up_naming_the_value(
    project: pytest.Pytester, value: str
) -> None:
    project.makepyfile(
        test_agent=f"""
import pytest

@pytest.mark.dsh_scenario("timed", pace={value})
def test_bad(dsh_replay):
    pass

@pytest.mark.dsh_scenario("timed")
def test_good(dsh_replay):
    dsh_replay.model.stream({{"messages": []}}, session_id="m")
"""
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    shown = repr(eval(value))
    result.stdout.fnmatch_lines(
        [f"*test_agent.py::test_bad: @pytest.mark.dsh_scenario(pace={shown}): the pace must be*"]
    )


def test_the_recording_here_has_the_gaps_the_tests_expect(tmp_path: Path) -> None:
    from pytest_dsh_replay import ChunksEntry, load_scenario

    (tmp_path / "session.jsonl").write_bytes(
        b"".join(orjson.dumps(e) + b"\n" for e in [HEADER, *EVENTS])
    )
    ((entry,),) = [s.entries for s in load_scenario(tmp_path).scripts]
    assert isinstance(entry, ChunksEntry)
    assert entry.gaps_ms == [200, 50, 100, 50, 0, 300]
