"""``pytest --dsh-html=DIR``: one page per replayed test, a drift side by side.

The tests record a two-call agent with a conftest live model, replay it with
``--dsh-html`` and read the pages the run wrote (docs/guide/picture.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CONFTEST = """
class Live:
    '''Asks for the calc tool first, then answers with text that looks like markup.'''

    def stream(self, request, **kwargs):
        if request["messages"][-1]["role"] == "user":
            call = {"type": "tool-call", "id": "call-1", "name": "calc", "arguments": "{}"}
            yield {"type": "block-start", "index": 0, "blockType": "tool-call"}
            yield {"type": "tool-call-delta", "index": 0, "id": "call-1", "name": "calc",
                   "argumentsDelta": "{}"}
            yield {"type": "block-end", "index": 0, "block": call}
            yield {"type": "finish", "reason": {"kind": "tool-calls"}}
            return
        text = "<script>alert(1)</script> the answer"
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        yield {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 7}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""

TESTS = """
import os

def ask(model):
    question = "What is 6*8?" if os.environ.get("DRIFT") else "What is 6*7?"
    messages = [{"role": "user", "content": question}]
    chunks = list(model.stream({"model": "m", "messages": messages}, session_id="main"))
    call = next(c["block"] for c in chunks if c["type"] == "block-end")
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call["id"],
         "type": "function", "function": {"name": call["name"], "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": "42"},
    ]
    chunks = model.stream({"model": "m", "messages": messages}, session_id="main")
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")

def test_agent(dsh_replay):
    assert ask(dsh_replay.model).endswith("the answer")
"""


def _recorded(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=TESTS)
    pytester.runpytest("--dsh-record").assert_outcomes(passed=1)
    pytester.makeconftest("")


def _page(directory: Path) -> str:
    (page,) = directory.iterdir()
    assert page.name.startswith("test_agent.py_test_agent-")
    assert page.suffix == ".html"
    return page.read_text(encoding="utf-8")


def test_a_passing_replay_gets_a_page_of_its_recording(pytester: pytest.Pytester) -> None:
    _recorded(pytester)
    pytester.runpytest("--dsh-html=pages").assert_outcomes(passed=1)

    page = _page(pytester.path / "pages")
    assert "<code>test_agent.py::test_agent</code>" in page
    assert '<span class="status">passed</span>' in page
    assert page.count("data-node=") == 1  # one session
    assert page.count('<article class="call"') == 2
    assert "&lt;script&gt;alert(1)&lt;/script&gt; the answer" in page
    assert "<script>" not in page
    assert "What is 6*7?" in page  # the first call's request
    assert "inputTokens 12" in page
    assert "no times recorded" in page  # a recording in the committed form
    assert "data-drift" not in page
    assert not list(pytester.path.rglob("*.tmp-*"))  # written atomically, nothing left


def test_a_drifted_replay_gets_the_difference_side_by_side(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recorded(pytester)
    monkeypatch.setenv("DRIFT", "1")
    result = pytester.runpytest("--dsh-html", "out/pages")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the replayed session log differs from the recording*"])

    page = _page(pytester.path / "out" / "pages")
    assert "the replayed log differs from the recording" in page
    drift = page.split('<section class="drift" id="drift" data-drift>', 1)[1]
    drift = drift.split("</section>", 1)[0]
    differing = re.findall(r"<tr class=differs>(.*?)</tr>", drift, re.S)
    assert len(differing) == 1
    recorded, replayed = re.findall(r"<pre>(.*?)</pre>", differing[0], re.S)
    assert "What is 6*7?" in recorded and "What is 6*8?" not in recorded
    assert "What is 6*8?" in replayed and "What is 6*7?" not in replayed
    assert "$.data.content[0].text" in drift  # the check's own words


def test_without_the_option_no_page_is_written(pytester: pytest.Pytester) -> None:
    _recorded(pytester)
    before = sorted(p for p in pytester.path.rglob("*") if "__pycache__" not in p.parts)
    pytester.runpytest().assert_outcomes(passed=1)
    after = sorted(p for p in pytester.path.rglob("*") if "__pycache__" not in p.parts)
    assert after == before


def test_a_pages_directory_that_cannot_be_made_is_a_usage_error(
    pytester: pytest.Pytester,
) -> None:
    _recorded(pytester)
    (pytester.path / "taken").write_text("a file\n", encoding="utf-8")
    result = pytester.runpytest("--dsh-html=taken")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dsh-html=*taken: not a directory*"])
