"""The README's first test works as printed: record it, then replay it keyless."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"

FAKE_LIVE = """
class Live:
    def stream(self, request, **kwargs):
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for piece in ["The capital ", "is Paris."]:
            yield {"type": "text-delta", "index": 0, "text": piece}
        yield {"type": "block-end", "index": 0,
               "block": {"type": "text", "text": "The capital is Paris."}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""


def first_test_code() -> str:
    section = README.read_text(encoding="utf-8").split("## Your first test", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "the README lost its first test"
    return match.group(1)


def test_readme_first_test_records_then_replays(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_capital=first_test_code())
    missing = pytester.runpytest()
    missing.assert_outcomes(errors=1)
    missing.stdout.fnmatch_lines(
        ["*record it: pytest --dsh-record=missing test_capital.py::test_capital"]
    )
    pytester.makeconftest(FAKE_LIVE)
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    assert (pytester.path / "dsh_snapshots" / "capital" / "session.jsonl").exists()
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=1)
