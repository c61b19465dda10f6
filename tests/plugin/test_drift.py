"""Replay notices when the agent asks something else, also when it writes no sessions.

The agents below never touch ``dsh_replay.sessions``: they send OpenAI chat-completions
and Anthropic Messages bodies (what arrives over HTTP) to ``dsh_replay.model``. The
recorder logs each call's conversation, so a replay that changes the system prompt, a
user prompt or a tool result fails with the JSON path, both values and the command
that re-records.
"""

from __future__ import annotations

import pytest

CONFTEST = """
class Live:
    '''Asks for the calc tool when the last message is the user's question, else answers.'''

    def stream(self, request, **kwargs):
        last = request["messages"][-1]
        content = last["content"]
        asked = last["role"] == "user" and not (
            isinstance(content, list) and content[0].get("type") == "tool_result"
        )
        if asked:
            call = {"type": "tool-call", "id": "call-1", "name": "calc", "arguments": "{}"}
            yield {"type": "block-start", "index": 0, "blockType": "tool-call"}
            yield {"type": "tool-call-delta", "index": 0, "id": "call-1", "name": "calc",
                   "argumentsDelta": "{}"}
            yield {"type": "block-end", "index": 0, "block": call}
            yield {"type": "finish", "reason": {"kind": "tool-calls"}}
            return
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "the answer"}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "the answer"}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""

AGENTS = """
import os

def settings():
    drift = os.environ.get("DRIFT", "")
    return (
        "Be creative." if drift == "system" else "Be exact.",
        "What is 6*8?" if drift == "prompt" else "What is 6*7?",
        "41" if drift == "result" else "42",
    )

def text(chunks):
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")

def first_call(chunks):
    return next(c["block"] for c in chunks if c["type"] == "block-end")

def openai_agent(model):
    system, question, result = settings()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    call = first_call(model.stream({"model": "m", "messages": messages}, session_id="main"))
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call["id"],
         "type": "function", "function": {"name": call["name"], "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call["id"], "content": result},
    ]
    return text(model.stream({"model": "m", "messages": messages}, session_id="main"))

def anthropic_agent(model):
    system, question, result = settings()
    body = {"model": "m", "max_tokens": 64, "system": system,
            "messages": [{"role": "user", "content": [{"type": "text", "text": question}]}]}
    call = first_call(model.stream(body, session_id="main"))
    body["messages"] += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": call["id"],
         "name": call["name"], "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"],
         "content": result}]},
    ]
    return text(model.stream(body, session_id="main"))
"""

TESTS = """
from drift_agents import anthropic_agent, openai_agent

def test_openai(dsh_replay):
    assert openai_agent(dsh_replay.model) == "the answer"

def test_anthropic(dsh_replay):
    assert anthropic_agent(dsh_replay.model) == "the answer"
"""


def test_prompt_system_and_tool_result_drift_fail_the_replay(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(drift_agents=AGENTS, test_agents=TESTS)
    pytester.runpytest("--dsh-record").assert_outcomes(passed=2)
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=2)

    expected = {
        "prompt": ("*at $.data.content[[]0[]].text", "What is 6*7?", "What is 6*8?"),
        "system": ("*at $.data.header.system", "Be exact.", "Be creative."),
        "result": ("*at $.data.message.content[[]0[]].content[[]0[]].text", "42", "41"),
    }
    for drift, (path, recorded, replayed) in expected.items():
        monkeypatch.setenv("DRIFT", drift)
        result = pytester.runpytest("-p", "no:randomly")
        result.assert_outcomes(failed=2)
        for test in ("test_openai", "test_anthropic"):
            result.stdout.fnmatch_lines(
                [
                    "*the replayed session log differs from the recording*session.jsonl:",
                    path,
                    f'*recorded: "{recorded}"',
                    f'*replayed: "{replayed}"',
                    f"*re-record: pytest --dsh-record=all test_agents.py::{test})",
                ]
            )
        # Its own recording: no hint to turn the check off.
        assert "compare_logs=False" not in result.stdout.str()
    # A recording in another form (the harness's full form) was made elsewhere: the hint.
    primary = pytester.path / "recordings" / "test_agents.test_openai" / "session.jsonl"
    header, *lines = primary.read_bytes().splitlines()
    full = [header] + [b'{"seq":%d,"time":0,' % i + line[1:] for i, line in enumerate(lines)]
    primary.write_bytes(b"\n".join(full) + b"\n")
    result = pytester.runpytest("-p", "no:randomly", "-k", "openai")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*not written by pytest-dsh-replay*compare_logs=False*"])


def test_a_recorded_header_without_an_id_is_named_not_taken_for_a_behaviour_change(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(drift_agents=AGENTS, test_agents=TESTS)
    pytester.runpytest("--dsh-record", "-k", "openai").assert_outcomes(passed=1, deselected=1)
    primary = pytester.path / "recordings" / "test_agents.test_openai" / "session.jsonl"
    header, rest = primary.read_bytes().split(b"\n", 1)
    primary.write_bytes(header.replace(b'"id"', b'"idd"', 1) + b"\n" + rest)  # hand-edited
    result = pytester.runpytest("-p", "no:randomly", "-k", "openai")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(
        [
            "*the replayed session log differs from the recording*session.jsonl:",
            "session.jsonl: header: header differs",
            "*at $.id",
            '*recorded: ""',
            "(the recording's header has no session id (session.jsonl): the log was "
            "damaged or edited by hand, not changed by the code under test; re-record it: "
            "pytest --dsh-record=all test_agents.py::test_openai)",
        ]
    )
    assert "if the new behaviour is right" not in result.stdout.str()
