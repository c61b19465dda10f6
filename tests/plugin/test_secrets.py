"""Nothing secret reaches a file the plugin writes, nor the terminal of a failing test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

# Planted secrets, built from pieces so that no source file holds them whole.
STREAMED_KEY = "sk-proj-" + "Ab3" * 10  # a key shape from its 19th character on
ENV_KEY = "configured-" + "key-value-123"  # DSH_RECORD_API_KEY: no known shape
HEADER_KEY = "ghp_" + "h" * 36
CUSTOMER = "ACME " + "Corp"
PLANTED = {
    "streamed key": STREAMED_KEY,
    "streamed key tail": STREAMED_KEY[20:],
    "env key": ENV_KEY,
    "header key": HEADER_KEY,
    "customer": CUSTOMER,
}

CONFTEST = """
import os

KEY = "sk-proj-" + "Ab3" * 10

class FakeLive:
    def stream(self, request, **kwargs):
        env_key = os.environ["DSH_RECORD_API_KEY"]
        # The first text piece already looks like a key on its own; the rest of it
        # follows in the next piece. The env key is split across reasoning deltas.
        yield {"type": "block-start", "index": 0, "blockType": "reasoning"}
        yield {"type": "reasoning-delta", "index": 0, "text": "using " + env_key[:9]}
        yield {"type": "reasoning-delta", "index": 0, "text": env_key[9:] + " now"}
        yield {"type": "block-end", "index": 0,
               "block": {"type": "reasoning", "text": "using " + env_key + " now"}}
        yield {"type": "block-start", "index": 1, "blockType": "text"}
        yield {"type": "text-delta", "index": 1, "text": "here: " + KEY[:22]}
        yield {"type": "text-delta", "index": 1, "text": KEY[22:]}
        yield {"type": "text-delta", "index": 1, "text": " done"}
        yield {"type": "block-end", "index": 1,
               "block": {"type": "text", "text": "here: " + KEY + " done"}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return FakeLive()

def pytest_dsh_replay_redact(event):  # written before headers were redacted
    data = event.get("data")
    if isinstance(data, dict) and "customer" in data:
        data["customer"] = "<customer>"

class HeaderRedaction:
    def pytest_dsh_replay_redact(self, event, header):
        if header is not None and header.get("owner"):
            header["owner"] = "<customer>"

def pytest_configure(config):
    config.pluginmanager.register(HeaderRedaction())
"""

TESTS = """
import pytest
from pytest_dsh_replay.syrupy_ext import DshLogExtension

HEADER_KEY = "ghp_" + "h" * 36
KEY = "sk-proj-" + "Ab3" * 10
CUSTOMER = "ACME " + "Corp"

def run(dsh_replay):
    session = dsh_replay.sessions.create(
        "main", meta={"agentPreset": HEADER_KEY, "owner": CUSTOMER}
    )
    session.append("todo/write", {"customer": CUSTOMER, KEY: "a key as an object key"})
    chunks = dsh_replay.model.stream(
        {"messages": [{"role": "user", "content": "go"}]}, session_id="main"
    )
    return "".join(c.get("text", "") for c in chunks)

@pytest.mark.dsh_scenario("leaky")
def test_records(dsh_replay, dsh_transcript, snapshot):
    assert KEY in run(dsh_replay)  # the code under test gets what the model sent
    assert dsh_replay.transcript() == dsh_transcript
    assert dsh_replay == snapshot(extension_class=DshLogExtension)

@pytest.mark.dsh_scenario("other")
def test_fails_showing_the_fixture(dsh_replay):
    run(dsh_replay)
    assert dsh_replay.mode == "something else", dsh_replay
"""


def files_under(*roots: Path) -> list[Path]:
    # Without PYTHONDONTWRITEBYTECODE, pytest caches the inner test modules' bytecode,
    # where the compiler has folded the planted pieces back together: not our output.
    return [
        p
        for root in roots
        if root.exists()
        for p in root.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ]


def leaks(text: str) -> list[str]:
    return [name for name, secret in PLANTED.items() if secret in text]


def test_no_planted_secret_in_any_written_file_or_in_the_terminal(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_RECORD_API_KEY", ENV_KEY)
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_leaky=TESTS)
    result = pytester.runpytest("--dsh-record", "--snapshot-update", "-l", "-vv")
    result.assert_outcomes(passed=1, failed=1)
    terminal = result.stdout.str() + result.stderr.str()
    assert "DshReplay(" in terminal  # the failing test did show the fixture
    assert leaks(terminal) == []

    written = files_under(pytester.path, pytester.path.parent / "basetemp")
    names = {p.name for p in written}
    assert {"session.jsonl", "test_records.md", "test_records.jsonl"} <= names
    for path in written:
        assert leaks(path.read_bytes().decode("utf-8", "replace")) == [], path
    recording = (pytester.path / "recordings" / "leaky" / "session.jsonl").read_text()
    assert "[REDACTED]" in recording
    assert '"customer":"<customer>"' in recording  # the event-only hook ran
    assert '"owner":"<customer>"' in recording  # the header hook ran

    # Replaying the redacted recording serves the redacted text, with the boundaries
    # the live stream had: three text deltas, the key where it started.
    pytester.makepyfile(
        test_replayed="""
        import pytest

        # Only the chunks matter here: this run creates no session with the
        # recording's header fields, so the logs are not compared.
        @pytest.mark.dsh_scenario("leaky", compare_logs=False)
        def test_replay(dsh_replay):
            chunks = list(dsh_replay.model.stream(
                {"messages": [{"role": "user", "content": "go"}]}, session_id="main"
            ))
            texts = [c["text"] for c in chunks if c["type"] == "text-delta"]
            assert texts == ["here: [REDACTED]", "", " done"]
        """
    )
    replayed = pytester.runpytest("test_replayed.py", "-p", "no:randomly")
    replayed.assert_outcomes(passed=1)


CHILD_KEY = "sk-live-" + "Q7" * 12

CHILD_CONFTEST = """
class FakeLive:
    def stream(self, request, **kwargs):
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "ok"}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "ok"}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return FakeLive()
"""

CHILD_TESTS = """
import pytest

KEY = "sk-live-" + "Q7" * 12

@pytest.mark.dsh_scenario("delegates")
def test_delegates(dsh_replay):
    model = dsh_replay.model
    def ask(session, text, parent=None):
        request = {"messages": [{"role": "user", "content": text}]}
        list(model.stream(request, session_id=session, parent_session_id=parent))
    ask("main", "plan")
    ask("other", "an unrelated task", parent="main")
    ask("kid", "fetch with " + KEY + " please", parent="main")
"""


def test_a_child_whose_task_held_a_key_is_recorded_redacted_and_replays(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CHILD_CONFTEST)
    pytester.makepyfile(test_delegates=CHILD_TESTS)
    recorded = pytester.runpytest("--dsh-record")
    recorded.assert_outcomes(passed=1)
    logs = [p.read_text() for p in (pytester.path / "dsh_snapshots" / "delegates").iterdir()]
    assert any("fetch with [REDACTED] please" in log for log in logs)
    assert not any(CHILD_KEY in log for log in logs)
    replayed = pytester.runpytest()
    replayed.assert_outcomes(passed=1)
    assert CHILD_KEY not in replayed.stdout.str() + replayed.stderr.str()


# --- distinct keys in every place a recording meets one --------------------------------

# Built from pieces, as above. Each one is planted in one place only.
LIVE_KEY = "live-" + "K3y" * 8  # DSH_RECORD_API_KEY, echoed by the upstream's error body
URL_PASSWORD = "urlpass-" + "P4ss" * 5  # DSH_RECORD_BASE_URL's user:password@
URL_QUERY_KEY = "query-" + "Qk3y" * 6  # DSH_RECORD_BASE_URL's ?key=
TASK_KEY = "sk-task-" + "T4sk" * 6  # in the child's task (its first user message)
TOOL_KEY = "ghp_" + "t00L" * 9  # in a tool result
AGENT_CUSTOMER = "Globex " + "Industries"  # in the child's task: the user's hook hides it
KEYS = {
    "live key": LIVE_KEY,
    "url password": URL_PASSWORD,
    "url query key": URL_QUERY_KEY,
    "task key": TASK_KEY,
    "tool key": TOOL_KEY,
    "customer": AGENT_CUSTOMER,
}

AGENT_CONFTEST = """
CUSTOMER = "Globex " + "Industries"


def _hide(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                value[key] = item.replace(CUSTOMER, "<customer>")
            else:
                _hide(item)
    elif isinstance(value, list):
        for k, item in enumerate(value):
            if isinstance(item, str):
                value[k] = item.replace(CUSTOMER, "<customer>")
            else:
                _hide(item)


def pytest_dsh_replay_redact(event, header):
    _hide(event if event is not None else header)
"""

AGENT_TESTS = """
import os

import openai
import pytest

TASK_KEY = "sk-task-" + "T4sk" * 6
TOOL_KEY = "ghp_" + "t00L" * 9
CUSTOMER = "Globex " + "Industries"


def ask(client, messages):
    try:
        return client.chat.completions.create(model="m", messages=messages).choices[0].message
    except openai.APIStatusError as error:
        if error.status_code == 401:  # the upstream's answer to "again"
            raise
        # What the endpoint said, without the SDK's frames (whose arguments hold the
        # live request, the test's own data, which pytest would print).
        pytest.fail(f"the endpoint answered {error.status_code}: {error.message}", pytrace=False)


@pytest.mark.dsh_scenario("agent")
def test_agent(dsh_replay, dsh_transcript):
    client = dsh_replay.openai_client(max_retries=0)
    plan = [{"role": "user", "content": "plan the work"}]
    call = ask(client, plan).tool_calls[0]
    plan.append({"role": "assistant", "content": None, "tool_calls": [{
        "id": call.id, "type": "function",
        "function": {"name": call.function.name, "arguments": call.function.arguments},
    }]})
    plan.append({"role": "tool", "tool_call_id": call.id, "content": "token " + TOOL_KEY})
    assert ask(client, plan).content == "planned"
    # A new conversation: the endpoint's content routing finds it, and it binds to the
    # recorded child by its first user message.
    task = "fetch the report for " + CUSTOMER + " with " + TASK_KEY
    if os.environ.get("DRIFT"):
        task += " today"
    child = [{"role": "user", "content": task}]
    assert ask(client, child).content == "fetched"
    child += [{"role": "assistant", "content": "fetched"}, {"role": "user", "content": "again"}]
    with pytest.raises(openai.AuthenticationError) as caught:
        ask(client, child)
    print("the upstream said:", caught.value.message)
    assert dsh_replay.transcript() == dsh_transcript
"""


def agent_provider() -> Any:
    """The live provider: a tool call, its answer, a text, and a 401 echoing the key."""
    from pytest_dsh_replay import Answer, ProviderFailure, Rule, ScriptedModel, ToolCall

    echo = f"Incorrect API key provided: {LIVE_KEY}."  # the provider echoes the key it was sent
    return ScriptedModel(
        [
            Rule(Answer(text="planned"), when=lambda r: bool(r.tool_results) and not r.prompt),
            Rule(
                Answer(tool_calls=[ToolCall("lookup")]), when=lambda r: r.prompt == "plan the work"
            ),
            Rule(ProviderFailure(401, echo), when=lambda r: r.prompt == "again"),
        ],
        default=Answer(text="fetched"),
    )


def key_leaks(text: str) -> list[str]:
    return [name for name, key in KEYS.items() if key in text or key[-12:] in text]


def scan(pytester: pytest.Pytester, *runs: pytest.RunResult) -> None:
    for run in runs:
        terminal = run.stdout.str() + run.stderr.str()
        assert key_leaks(terminal) == [], terminal
    written = files_under(pytester.path, pytester.path.parent / "basetemp")
    for path in written:
        assert key_leaks(path.read_bytes().decode("utf-8", "replace")) == [], path


def test_no_planted_key_in_a_file_or_the_terminal_and_the_recording_replays(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(AGENT_CONFTEST)
    pytester.makepyfile(test_agent=AGENT_TESTS)
    monkeypatch.setenv("DSH_RECORD_API_KEY", LIVE_KEY)
    monkeypatch.setenv("DSH_RECORD_MODEL", "m")
    with agent_provider().serve() as server:
        monkeypatch.setenv(
            "DSH_RECORD_BASE_URL",
            f"http://user:{URL_PASSWORD}@127.0.0.1:{server.port}/v1?key={URL_QUERY_KEY}",
        )
        recorded = pytester.runpytest("--dsh-record", "--snapshot-update", "-rA", "-vv")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(["*the upstream said: *[[]REDACTED[]]*"])
    # The proxy sent the key it holds and joined its path before the base URL's query.
    assert [r.path for r in server.requests] == [f"/v1/chat/completions?key={URL_QUERY_KEY}"] * 4
    recording = "".join(p.read_text() for p in (pytester.path / "recordings" / "agent").iterdir())
    assert "fetch the report for <customer> with [REDACTED]" in recording
    assert "token [REDACTED]" in recording

    # Offline, no key: the recording replays (the child binds through the redaction)...
    for name in ("DSH_RECORD_API_KEY", "DSH_RECORD_BASE_URL", "DSH_RECORD_MODEL"):
        monkeypatch.delenv(name)
    replayed = pytester.runpytest("-rA", "-vv")
    replayed.assert_outcomes(passed=1)
    # ... and a changed task fails, quoting the live task redacted.
    monkeypatch.setenv("DRIFT", "1")
    drifted = pytester.runpytest("-rA", "-vv")
    drifted.assert_outcomes(failed=1)  # the replay error counts once
    drifted.stdout.fnmatch_lines(
        ["*ReplayBindingError*'fetch the report for <customer> with [[]REDACTED[]] today'*"]
    )
    monkeypatch.delenv("DRIFT")

    # Recording with the live server gone: the 400 and the failure name the URL bare.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("DSH_RECORD_API_KEY", LIVE_KEY)
    monkeypatch.setenv(
        "DSH_RECORD_BASE_URL", f"http://user:{URL_PASSWORD}@127.0.0.1:{port}/v1?key={URL_QUERY_KEY}"
    )
    unreachable = pytester.runpytest("--dsh-record", "-rA", "-vv")
    unreachable.assert_outcomes(failed=1)
    unreachable.stdout.fnmatch_lines(
        [f"*cannot reach the live model at http://[[]REDACTED[]]@127.0.0.1:{port}/v1/chat*"]
    )
    scan(pytester, recorded, replayed, drifted, unreachable)
