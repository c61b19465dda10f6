"""``pytest --dsh-html=DIR``: one page per replayed test, a drift side by side.

The tests record a two-call agent with a conftest live model, replay it with
``--dsh-html`` and read the pages the run wrote (docs/guide/picture.md).
"""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.browser import browser, dump_dom
from support.paths import EXAMPLES, SUPPORT

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
    assert "What is 6*7?" in recorded
    assert "What is 6*8?" not in recorded
    assert "What is 6*8?" in replayed
    assert "What is 6*7?" not in replayed
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


def test_an_empty_pages_directory_is_a_usage_error_not_the_current_one(
    pytester: pytest.Pytester,
) -> None:
    _recorded(pytester)
    before = sorted(p.name for p in pytester.path.iterdir())
    result = pytester.runpytest("--dsh-html=")  # an unset variable: --dsh-html=$PAGES
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dsh-html takes a directory, got an empty value*"])
    assert sorted(p.name for p in pytester.path.iterdir()) == before


MIXED_TEST = """
import pytest
from support.example_agent import ExampleAgent

@pytest.mark.dsh_scenario("mixed")
def test_mixed(dsh_replay):
    agent = ExampleAgent(dsh_replay.model, dsh_replay.sessions)
    agent.run("Remember: the codeword is SAFFRON.")
    agent.run('[[tool subagent {"prompt": "Reply ALPHA."}]]'
              '[[tool subagent_fork {"prompt": "Recall it."}]]')
"""


class _Rendered(HTMLParser):
    """What the browser test reads of the rendered DOM: the tree's nodes and the links."""

    def __init__(self) -> None:
        super().__init__()
        self.nodes: list[tuple[str, str]] = []  # (data-node, data-role)
        self.sections: list[str] = []  # each session section's id
        self.child_links: list[str] = []  # the hrefs of tool calls' links to children
        self.seeds: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if "data-node" in found:
            self.nodes.append((found["data-node"] or "", found.get("data-role") or ""))
        if tag == "section" and "data-session" in found:
            self.sections.append(found.get("id") or "")
        if tag == "a" and "data-child" in found:
            self.child_links.append(found.get("href") or "")
        if "data-seed-length" in found:
            self.seeds.append(found["data-seed-length"] or "")
        self.scripts += tag == "script"


def test_a_browser_renders_a_replayed_tests_page_with_one_node_per_session(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    browser()  # skips with the install hint where no Chromium is installed
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copytree(EXAMPLES / "mixed", pytester.path / "recordings" / "mixed")
    pytester.makepyfile(test_mixed=MIXED_TEST)
    pytester.runpytest("--dsh-html=pages").assert_outcomes(passed=1)
    (page,) = (pytester.path / "pages").iterdir()

    dom = _Rendered()
    dom.feed(dump_dom(page, tmp_path / "profile"))
    assert dom.nodes == [("0", "primary"), ("1", "spawn"), ("2", "fork")]
    assert dom.sections == ["session-0", "session-1", "session-2"]
    assert dom.child_links == ["#session-1", "#session-2"]  # call #2's two tool calls
    assert dom.seeds == ["14"]
    assert dom.scripts == 0
