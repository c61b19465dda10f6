"""A recording of format 5 (the harness's newest log format) replays as users run it.

The dsh runtime's real format 4 primary (``../shared/runtime-samples/``), re-headed as
format 5 by an automation (``"origin": "automation"``), is a project's recording: its
test replays every call as the format 4 log scripts it. A format 6 recording beside it
stops its test at set-up with the file, the line and the upgrade hint.
"""

from __future__ import annotations

import orjson
import pytest
from support.corpus_support import SAMPLES, require_corpus

from pytest_dsh_replay._scripts.scenario import load_session_script

PRIMARY = SAMPLES / "t5-primary.session.v4.jsonl"

TEST = """
import pytest

REQUEST = {"messages": [{"role": "user", "content": "go"}]}


@pytest.mark.dsh_scenario("automation-v5", compare_logs=False)
def test_replays_format_5(dsh_replay):
    calls = [list(dsh_replay.model.stream(REQUEST, session_id="sess-main")) for _ in range(CALLS)]
    texts = ["".join(c.get("text", "") for c in chunks if c["type"] == "text-delta")
             for chunks in calls]
    assert texts == EXPECTED


@pytest.mark.dsh_scenario("automation-v6")
def test_refuses_format_6(dsh_replay):
    pass
"""


def _re_headed(version: int) -> bytes:
    first, rest = PRIMARY.read_bytes().split(b"\n", 1)
    header = orjson.loads(first)
    depth = header.pop("delegationDepth")
    header = {**header, "version": version, "origin": "automation", "delegationDepth": depth}
    return orjson.dumps(header) + b"\n" + rest


def test_a_format_5_recording_replays_and_a_format_6_one_asks_for_an_upgrade(
    pytester: pytest.Pytester,
) -> None:
    require_corpus(SAMPLES)
    entries = load_session_script(PRIMARY, primary=True).entries
    expected = [
        "".join(c.get("text", "") for c in e.chunks if c["type"] == "text-delta") for e in entries
    ]
    for version in (5, 6):
        scenario = pytester.path / "dsh_snapshots" / f"automation-v{version}"
        scenario.mkdir(parents=True)
        (scenario / f"session.v{version}.jsonl").write_bytes(_re_headed(version))
    pytester.makepyfile(
        test_format=TEST.replace("CALLS", str(len(entries))).replace("EXPECTED", repr(expected))
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*automation-v6/session.v6.jsonl:1:*format v6 is not one this build reads (v0 to v5)*"
            "upgrade pytest-dsh-replay*"
        ]
    )
