"""--dsh-record=new, run as users run it: recorded calls replay, new ones are appended.

Each test commits a recording first (``--dsh-record=missing`` against a live model whose
answers carry a tag), then changes the agent. The live model's tag changes between the
recording and the append, so the answers show which calls replayed and which went live.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

CONFTEST = """
import os

TAG = "TAG_VALUE"

class TaggedLive:
    def stream(self, request, **kwargs):
        content = request["messages"][-1]["content"]
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content)
        text = TAG + ": " + content
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return TaggedLive()
"""

AGENT = """
import pytest

QUESTIONS = QUESTIONS_VALUE
CHILDREN = CHILDREN_VALUE
ANSWERS = []

def ask(model, session_id, messages, text, parent=None):
    messages.append({"role": "user", "content": text})
    chunks = model.stream(
        {"messages": list(messages)}, session_id=session_id, parent_session_id=parent
    )
    answer = "".join(c["text"] for c in chunks if c["type"] == "text-delta")
    messages.append({"role": "assistant", "content": answer})
    return answer

@pytest.mark.dsh_scenario("agent")
def test_agent(dsh_replay):
    messages = []
    for question in QUESTIONS:
        ANSWERS.append(ask(dsh_replay.model, "main", messages, question))
    for child in CHILDREN:
        ANSWERS.append(ask(dsh_replay.model, child, [], "task " + child, parent="main"))
    print("ANSWERS", ANSWERS)
    if dsh_replay.mode == "replay":
        print("BOUND", sorted((k, b.file) for k, b in dsh_replay.model.bindings.items()))
    TAIL
"""


def _agent(
    project: pytest.Pytester,
    questions: list[str],
    children: tuple[str, ...] = (),
    tail: str = "",
) -> None:
    text = (
        AGENT.replace("QUESTIONS_VALUE", repr(questions))
        .replace("CHILDREN_VALUE", repr(list(children)))
        .replace("TAIL", tail)
    )
    project.makepyfile(test_agent=text)


def _live(project: pytest.Pytester, tag: str) -> None:
    project.makeconftest(CONFTEST.replace("TAG_VALUE", tag))


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def _digest(directory: Path) -> str:
    return hashlib.sha256(repr(_files(directory)).encode()).hexdigest()


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """A committed recording of an agent asking two questions (answers tagged v1)."""
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    _live(pytester, "v1")
    _agent(pytester, ["a", "b"], ("k1",))
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    return pytester


def test_an_agent_that_gains_a_call_is_appended_without_changing_a_recorded_byte(
    project: pytest.Pytester,
) -> None:
    scenario = project.path / "recordings" / "agent"
    before = _files(scenario)
    _live(project, "v2")
    _agent(project, ["a", "b", "c"], ("k1",))
    plain = project.runpytest()
    plain.assert_outcomes(failed=1)
    plain.stdout.fnmatch_lines(
        [
            "*ReplayExhaustedError: session 'main'* asked for call #3, but its recording "
            "(session.jsonl, recorded session 'main') has 2 call(s)*re-record: pytest "
            "--dsh-record=all test_agent.py::test_agent, or keep the recorded calls and append "
            "the new ones: pytest --dsh-record=new test_agent.py::test_agent*"
        ]
    )
    result = project.runpytest("--dsh-record=new", "-s")
    result.assert_outcomes(passed=1)
    # the recorded calls replayed (v1), only the new one went live (v2)
    assert "ANSWERS ['v1: a', 'v1: b', 'v2: c', 'v1: task k1']" in result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*0 replayed, 0 recorded, 0 missing, 1 appended to (--dsh-record=new)*",
            "appended to *recordings/agent: 1 new model call (1 file written, the "
            "recorded bytes kept)",
        ]
    )
    after = _files(scenario)
    assert after["session.jsonl"][0].startswith(before["session.jsonl"][0])
    assert len(after["session.jsonl"][0]) > len(before["session.jsonl"][0])
    assert after["session.1.jsonl"][0] == before["session.1.jsonl"][0]
    _live(project, "v3")
    again = project.runpytest("-s")
    again.assert_outcomes(passed=1)
    assert "ANSWERS ['v1: a', 'v1: b', 'v2: c', 'v1: task k1']" in again.stdout.str()


def test_a_new_spawned_child_gets_a_new_file_and_replays_to_it(project: pytest.Pytester) -> None:
    scenario = project.path / "recordings" / "agent"
    (scenario / "NOTES.md").write_text("appending keeps what else the directory holds")
    before = _files(scenario)
    _live(project, "v2")
    _agent(project, ["a", "b"], ("k1", "k2"))
    result = project.runpytest("--dsh-record=new", "-s")
    result.assert_outcomes(passed=1)
    assert "ANSWERS ['v1: a', 'v1: b', 'v1: task k1', 'v2: task k2']" in result.stdout.str()
    after = _files(scenario)
    assert sorted(after) == ["NOTES.md", "session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    for name, (data, mtime) in before.items():  # not even rewritten
        assert after[name] == (data, mtime)
    assert b'"id":"k2"' in after["session.2.jsonl"][0]
    assert b'"parentSession":"main"' in after["session.2.jsonl"][0]
    again = project.runpytest("-s")
    again.assert_outcomes(passed=1)
    out = again.stdout.str()
    assert "ANSWERS ['v1: a', 'v1: b', 'v1: task k1', 'v2: task k2']" in out
    bound = "[('k1', 'session.1.jsonl'), ('k2', 'session.2.jsonl'), ('main', 'session.jsonl')]"
    assert f"BOUND {bound}" in out


def test_a_drifted_recorded_call_fails_with_the_all_hint_and_nothing_is_written(
    project: pytest.Pytester,
) -> None:
    scenario = project.path / "recordings" / "agent"
    before = _digest(scenario)
    _live(project, "v2")
    _agent(project, ["a", "B", "c"], ("k1",))
    result = project.runpytest("--dsh-record=new")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "a recorded call of *recordings/agent/session.jsonl was not made as recorded "
            "(--dsh-record=new records only the calls past a recording and never changes a "
            "recorded one):",
            "session.jsonl: event #* (user/message, line *): event differs",
            '  recorded: "b"',
            '  replayed: "B"',
            "(if the new behaviour is right, re-record: pytest --dsh-record=all "
            "test_agent.py::test_agent)",
            "*1 not re-recorded (the test did not pass; old recording kept)*",
        ]
    )
    assert _digest(scenario) == before


def test_a_recorded_call_not_made_fails_as_replay_does(project: pytest.Pytester) -> None:
    scenario = project.path / "recordings" / "agent"
    before = _digest(scenario)
    _agent(project, ["a", "b"])  # the child k1 is gone
    result = project.runpytest("--dsh-record=new")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*recorded session 'k1' (session.1.jsonl, 1 call(s)) was never replayed*",
            "*re-record: pytest --dsh-record=all test_agent.py::test_agent)",
        ]
    )
    assert _digest(scenario) == before


@pytest.mark.parametrize("tail", ["assert False, 'the agent broke'", "raise KeyboardInterrupt"])
def test_a_failed_or_interrupted_test_leaves_the_recording_untouched(
    project: pytest.Pytester, tail: str
) -> None:
    scenario = project.path / "recordings" / "agent"
    before = _digest(scenario)
    _live(project, "v2")
    _agent(project, ["a", "b", "c"], ("k1", "k2"), tail=tail)
    # an interrupt ends the whole inner run: in its own process, not this one
    run = project.runpytest_subprocess if "Interrupt" in tail else project.runpytest
    result = run("--dsh-record=new")
    assert result.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED)
    assert _digest(scenario) == before
    # no half-written copy and no lock file is left
    assert [p.name for p in scenario.parent.iterdir() if p.name != "agent"] == []


def test_nothing_new_leaves_the_files_untouched(project: pytest.Pytester) -> None:
    scenario = project.path / "recordings" / "agent"
    before = _digest(scenario)
    _live(project, "v2")
    result = project.runpytest("--dsh-record=new")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["appended to *recordings/agent: nothing new (files kept as they were)"]
    )
    # a recording kept as it was is not counted as appended to
    assert "appended to (--dsh-record=new)" not in result.stdout.str()
    assert _digest(scenario) == before


def test_a_scenario_without_a_recording_is_recorded_as_missing_would(
    project: pytest.Pytester,
) -> None:
    _live(project, "v2")
    _agent(project, ["x"])
    project.makepyfile(
        test_other="""
        import pytest

        @pytest.mark.dsh_scenario("other")
        def test_other(dsh_replay):
            chunks = dsh_replay.model.stream({"messages": [{"role": "user", "content": "q"}]})
            assert [c["text"] for c in chunks if c["type"] == "text-delta"] == ["v2: q"]
        """
    )
    result = project.runpytest("--dsh-record=new", "test_other.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["recorded *recordings/other: 1 session, 1 model call"])


HTTP_AGENT = """
import pytest

QUESTIONS = QUESTIONS_VALUE

@pytest.mark.dsh_scenario("http")
def test_http(dsh_replay):
    client = dsh_replay.openai_client()
    messages, answers = [], []
    for question in QUESTIONS:
        messages.append({"role": "user", "content": question})
        reply = client.chat.completions.create(model="m", messages=list(messages))
        answers.append(reply.choices[0].message.content)
        messages.append({"role": "assistant", "content": answers[-1]})
    print("ANSWERS", answers)
"""


def test_the_openai_client_over_http_appends_its_new_call(pytester: pytest.Pytester) -> None:
    pytest.importorskip("openai")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    _live(pytester, "v1")
    pytester.makepyfile(test_http=HTTP_AGENT.replace("QUESTIONS_VALUE", "['a', 'b']"))
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    log = pytester.path / "recordings" / "http" / "session.jsonl"
    before = log.read_bytes()
    _live(pytester, "v2")
    pytester.makepyfile(test_http=HTTP_AGENT.replace("QUESTIONS_VALUE", "['a', 'b', 'c']"))
    result = pytester.runpytest("--dsh-record=new", "-s")
    result.assert_outcomes(passed=1)
    assert "ANSWERS ['v1: a', 'v1: b', 'v2: c']" in result.stdout.str()
    after = log.read_bytes()
    assert after.startswith(before)
    assert after != before
    pytester.makeconftest("")  # no live model: a plain run replays
    pytester.runpytest().assert_outcomes(passed=1)


def test_xdist_workers_append(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    _live(pytester, "v1")
    test = """
        import pytest

        CASES = [pytest.param(n, marks=pytest.mark.dsh_scenario(f"p{n}")) for n in range(4)]

        @pytest.mark.parametrize("n", CASES)
        def test_par(dsh_replay, n):
            for k in range(CALLS):
                list(dsh_replay.model.stream(
                    {"messages": [{"role": "user", "content": f"q{n}-{k}"}]}, session_id="s"
                ))
        """
    pytester.makepyfile(test_par=test.replace("CALLS", "1"))
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=4)
    before = {
        n: (pytester.path / "recordings" / f"p{n}" / "session.jsonl").read_bytes() for n in range(4)
    }
    pytester.makepyfile(test_par=test.replace("CALLS", "2"))
    result = pytester.runpytest("-n", "1", "--dsh-record=new")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*4 appended to (--dsh-record=new)*"])
    for n in range(4):
        after = (pytester.path / "recordings" / f"p{n}" / "session.jsonl").read_bytes()
        assert after.startswith(before[n])
        assert after != before[n]
    pytester.makeconftest("")
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=4)
