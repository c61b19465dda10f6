"""Control characters, line separators and surrogates on every path: record, replay,
transcript, check."""

from __future__ import annotations

import pytest

from pytest_dsh_replay.cli import main

# What the live model streams: CR LF, a lone CR, NUL, ESC, U+2028, an emoji whose
# surrogate pair is split across two deltas (as a UTF-16 server may send it), and a lone
# low surrogate.
CONFTEST = r"""
PIECES = [
    "line one\r\n",
    "line two\rover",
    " nul\x00 esc\x1b[31m",
    " sep\u2028x",
    " pair a\ud83d",
    "\ude00 b",
    " lone \udfff end",
]

class FakeLive:
    def stream(self, request, **kwargs):
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for piece in PIECES:
            yield {"type": "text-delta", "index": 0, "text": piece}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(PIECES)}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return FakeLive()
"""

TEST = r"""
import pytest

EXPECTED = [
    "line one\r\n",
    "line two\rover",
    " nul\x00 esc\x1b[31m",
    " sep\u2028x",
    " pair a",
    "\U0001F600 b",
    " lone \ufffd end",
]

@pytest.mark.dsh_scenario("controls")
def test_controls(dsh_replay, dsh_transcript):
    chunks = list(dsh_replay.model.stream(
        {"messages": [{"role": "user", "content": "go \ud800 on"}]}, session_id="main"
    ))
    assert [c["text"] for c in chunks if c["type"] == "text-delta"] == EXPECTED
    assert chunks[-2]["block"]["text"] == "".join(EXPECTED)
    assert dsh_replay.transcript() == dsh_transcript
"""


def test_every_path_keeps_control_characters_and_repairs_surrogates(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_controls=TEST)
    recorded = pytester.runpytest("--dsh-record", "--snapshot-update")
    recorded.assert_outcomes(passed=1)

    transcript = (
        pytester.path / "__snapshots__" / "test_controls" / "test_controls.md"
    ).read_text()
    assert (
        "> line one\u240d\n> line two\u240dover nul\u2400 esc\u241b[31m sep<U+2028>x" in transcript
    )
    assert "pair a\U0001f600 b lone \ufffd end" in transcript
    assert "go \ufffd on" in transcript  # the request's lone surrogate, repaired

    pytester.makeconftest("")  # replay: no live model
    for _ in range(2):  # without --snapshot-update, a transcript that differs fails
        pytester.runpytest().assert_outcomes(passed=1)

    capsys.readouterr()
    assert main(["check", "--strict-form", str(pytester.path / "recordings")]) == 0
    assert main(["show", str(pytester.path / "recordings" / "controls")]) == 0
    shown = capsys.readouterr().out
    assert "\x1b" not in shown  # a preview never sends ESC to the terminal
    assert "\u241b[31m" in shown
