"""README's and the guide's examples work as printed, and the statements around them hold.

The examples are read by their file titles (``tests/support/doc_examples.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.doc_examples import DOCS, pages, titled
from support.paths import PYPROJECT, README
from support.scenarios import make_scenario

GUIDE = DOCS / "guide"
WRITING_TESTS = GUIDE / "writing-tests.md"
NO_KEY = GUIDE / "recording-without-a-key.md"


def in_process_test() -> str:
    """The guide's first in-process test (``dsh_replay.model``, no SDK)."""
    return titled(WRITING_TESTS, "test_capital.py")


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


@pytest.mark.parametrize("page", [README, WRITING_TESTS], ids=["README", "writing-tests"])
def test_first_test_records_then_replays(pytester: pytest.Pytester, page: Path) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(test_capital=titled(page, "test_capital.py"))
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


def test_readme_says_when_dsh_record_model_is_required(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first test's request names no model: the built-in adapter needs
    # DSH_RECORD_MODEL, and the Recording section says so with the message it fails with.
    pytest.importorskip("openai")
    recording = " ".join((GUIDE / "recording.md").read_text(encoding="utf-8").split())
    assert "`DSH_RECORD_MODEL` names the model to record with, and is required exactly" in (
        recording
    )
    quoted = re.search(r"fails the test with `(the request names no model:[^`]*)`", recording)
    assert quoted, "the Recording section lost the message a request without a model gets"
    code = in_process_test()
    assert '"model"' not in code
    assert "'model'" not in code
    pytester.makepyfile(test_capital=code)
    monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # never reached
    monkeypatch.setenv("DSH_RECORD_API_KEY", "sk-local-0000000000000000")
    monkeypatch.delenv("DSH_RECORD_MODEL", raising=False)
    result = pytester.runpytest("--dsh-record=missing")
    result.assert_outcomes(failed=1)
    assert quoted.group(1) in " ".join(result.stdout.str().split())


RECALLING_LIVE = """
class Live:
    def stream(self, request, **kwargs):
        said = [m["content"] for m in request["messages"] if m["role"] == "user"]
        reply = "Noted." if len(said) == 1 else f"It was {said[0].split()[-1].rstrip('.')}."
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": reply}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": reply}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""


def test_readme_fork_example_records_a_fork_child_then_replays(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_fork=titled(GUIDE / "forks-and-spawns.md", "test_fork.py"))
    pytester.makeconftest(RECALLING_LIVE)
    pytester.runpytest("--dsh-record").assert_outcomes(passed=1)
    scenario = pytester.path / "dsh_snapshots" / "fork-recall"
    assert sorted(p.name for p in scenario.iterdir()) == ["session.1.jsonl", "session.jsonl"]
    child_header = json.loads((scenario / "session.1.jsonl").read_text().splitlines()[0])
    assert child_header["parentSession"] == "main"
    assert child_header["seedLength"] > 0
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=1)


def test_readme_joins_the_record_mode_with_equals_when_anything_follows(
    pytester: pytest.Pytester,
) -> None:
    # argparse's optional value takes the next argument: `--dsh-record tests/x.py` is
    # refused, so every command of README and the site that goes on after the flag writes
    # `=all`/`=missing`, but for the refused example the Recording page and
    # Troubleshooting show.
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages())
    bare = re.findall(r"--dsh-record[ \t]+([^\s#`|]+)", text)
    assert bare == ["tests/test_x.py", "tests/test_x.py"], bare
    recording = (GUIDE / "recording.md").read_text(encoding="utf-8")
    assert "says to write `--dsh-record=all tests/test_x.py`" in " ".join(recording.split())
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    refused = pytester.runpytest("--dsh-record", "tests/test_x.py")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*write --dsh-record=all tests/test_x.py*"])


def test_readme_runtime_section_says_how_to_record_offline_and_keep_web_tools_off() -> None:
    # What the runtime section states about this project's own runtime tests holds: the
    # files it points at exist, the scripted model calls no tool but the two delegation
    # tools, and the recorded runtime scenarios hold no web call (the tools are only
    # offered: in the request header's tool list and the system prompt).
    from support.runtime_agent import _DELEGATIONS

    section = " ".join((GUIDE / "dsh-runtime.md").read_text(encoding="utf-8").split())
    assert "**Recording without a live model.**" in section
    assert "**The runtime's network tools.**" in section
    for name in (
        "tests/support/scripted.py",
        "tests/support/runtime_agent.py",
        "tests/conftest.py",
    ):
        assert f"`{name}`" in section, name
        assert (README.parent / name).is_file(), name
    assert "`web_fetch` and `web_search`" in section
    assert {c.name for calls in _DELEGATIONS.values() for c in calls} == {
        "subagent",
        "subagent_fork",
    }
    logs = sorted((README.parent / "example_snapshots").glob("runtime-*/session*.jsonl"))
    assert logs
    offered = {"request/header", "system/message"}
    for log in logs:
        for line in log.read_text(encoding="utf-8").splitlines():
            if "web_fetch" in line or "web_search" in line:
                assert json.loads(line)["type"] in offered, f"{log}: {line[:200]}"


@pytest.mark.parametrize(
    ("page", "title", "scenario", "needs"),
    [
        ("openai-responses.md", "test_responses.py", "capital-responses", "openai"),
        ("google-genai.md", "test_gemini.py", "capital-gemini", "google.genai"),
    ],
)
def test_guide_wire_examples_record_then_replay(
    pytester: pytest.Pytester, page: str, title: str, scenario: str, needs: str
) -> None:
    pytest.importorskip(needs)
    pytester.makepyfile(test_capital=titled(GUIDE / page, title))
    pytester.makeconftest(FAKE_LIVE)
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    assert (pytester.path / "dsh_snapshots" / scenario / "session.jsonl").exists()
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=1)


def _readme_section(heading: str) -> str:
    return README.read_text(encoding="utf-8").split(heading + "\n", 1)[1].split("\n## ", 1)[0]


def test_readme_says_how_to_install_until_the_package_is_published() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    install = _readme_section("## Install")
    assert "not published on PyPI yet" in install
    commands = re.search(r"```sh\n(.*?)```", install, re.S)
    assert commands, "the Install section lost its commands"
    lines = commands.group(1).splitlines()
    assert any(
        line.startswith("python3 -m pip install /path/to/pytest-dsh-replay ") for line in lines
    )
    assert any("pytest-dsh-replay[record] @ git+" in line for line in lines)
    # Nothing tells a user to install the unpublished name from PyPI.
    text = README.read_text(encoding="utf-8")
    assert "finds nothing" in install
    assert text.count("pip install pytest-dsh-replay") == 1
    # Every extra the table names exists, and the async one brings an async test plugin.
    extras = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"][
        "optional-dependencies"
    ]
    named = re.findall(r"^\| `([a-z0-9-]+)` \|", install, re.M)
    assert sorted(named) == sorted(extras)
    assert any(req.startswith("pytest-asyncio>=") for req in extras["async"])
    self_extras = [r for r in extras["test"] if r.startswith("pytest-dsh-replay[")]
    assert len(self_extras) == 1
    assert "async" in self_extras[0]
    assert "pytest-asyncio" in install
    assert "anyio" in install


ASYNC_TEST = """
import pytest

@pytest.mark.dsh_scenario("hello")
@pytest.mark.asyncio
async def test_async(dsh_replay):
    chunks = [c async for c in dsh_replay.model.astream({"messages": []}, session_id="s")]
    assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "hi"
"""


def test_readme_is_right_that_async_tests_need_an_async_plugin(pytester: pytest.Pytester) -> None:
    pytest.importorskip("pytest_asyncio")
    make_scenario(pytester.path / "recordings" / "hello", primary=["hi"])
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(test_async=ASYNC_TEST)
    without = pytester.runpytest("-p", "no:asyncio", "-p", "no:anyio", "-W", "ignore")
    assert without.ret != 0 or "skipped" in without.stdout.str()
    without.stdout.fnmatch_lines(["*async def functions are not natively supported*"])
    pytester.runpytest("-p", "asyncio").assert_outcomes(passed=1)


def test_scripted_model_records_the_first_test_then_replays(
    pytester: pytest.Pytester,
) -> None:
    # The page's conftest as printed records the in-process first test, no key.
    pytester.makepyfile(test_capital=in_process_test())
    pytester.makeconftest(titled(NO_KEY, "conftest.py"))
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    recorded = (pytester.path / "dsh_snapshots" / "capital" / "session.jsonl").read_text()
    assert "The capital is Paris." in recorded
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=1)


def test_scripted_model_rules_answer_as_the_page_says() -> None:
    namespace: dict[str, Any] = {}
    exec(titled(NO_KEY, "conftest.py"), namespace)  # the conftest as printed
    model = namespace["MODEL"]

    def reply(*messages: dict[str, Any]) -> list[dict[str, Any]]:
        return list(model.stream({"messages": list(messages)}))

    flaky = {"role": "user", "content": "[[flaky]] hi"}
    assert reply(flaky)[-1]["reason"]["failure"]["status"] == 429
    assert reply(flaky)[-1]["reason"] == {"kind": "stop"}
    (call,) = [c for c in reply({"role": "user", "content": "add 2 and 3"}) if "block" in c]
    assert call["block"]["arguments"] == '{"a":2,"b":3}'
    answered = reply(
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": [{**call["block"]}]},
        {"role": "tool", "tool_call_id": call["block"]["id"], "content": "5"},
    )
    assert "".join(c.get("text", "") for c in answered) == "The sum is 5."


def test_scripted_server_example_runs_an_agent_process(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    pytester.makepyfile(test_agent=titled(NO_KEY, "test_retry.py"))
    pytester.runpytest_subprocess().assert_outcomes(passed=1)
