"""The ``ollama`` client through the fixture, as users run it (pytester): record, then replay.

A user's agent on ``dsh_replay.client("ollama")`` (sync, and ``async_=True``) calls a tool
(``add``), then a tool that spawns a child conversation (``research``: a second
conversation the parent starts, its answer the tool's result), then answers. Its
sessions are told apart by content alone, and by the ``x-dsh-session-id`` /
``x-dsh-parent-session-id`` headers (given to the client's constructor: ``ollama``'s
``chat`` takes no headers). It is recorded once from a scripted live model given by the
``pytest_dsh_replay_live_model`` hook (its chunks sent on the Ollama wire), and once
through the recording proxy from the package's scripted model served on 127.0.0.1
(``ScriptedServer`` speaking ``/api/chat``); each recording then replays with no live
model, no hook and no server, the agent's code unchanged.
"""

from __future__ import annotations

import json

import pytest
from support.inner_runs import imported_before_inner_runs

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall

_ollama = imported_before_inner_runs("ollama", reason="the ollama client is not installed")

TASK = "Add 2 and 3, then find a museum."
CHILD_TASK = "Find a museum."
ANSWER = "5, and the Louvre."


def answer(request: ScriptedRequest) -> Answer:
    """The model: ``add``, then ``research`` (the child), then the answer."""
    if request.messages and request.messages[0][1] == CHILD_TASK:
        return Answer(text="The Louvre.", usage={"inputTokens": 5, "outputTokens": 2})
    done = sum(1 for role, _ in request.messages if role == "tool")
    if done == 0:
        return Answer(reasoning="I add first.", tool_calls=[ToolCall("add", {"a": 2, "b": 3})])
    if done == 1:
        return Answer(tool_calls=[ToolCall("research", {"task": CHILD_TASK})])
    return Answer(text=ANSWER, usage={"inputTokens": 10, "outputTokens": 4})


PROVIDER = [Rule(answer)]

CONFTEST = f"""
from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall

CHILD_TASK = {CHILD_TASK!r}

def answer(request):
    if request.messages and request.messages[0][1] == CHILD_TASK:
        return Answer(text="The Louvre.")
    done = sum(1 for role, _ in request.messages if role == "tool")
    if done == 0:
        return Answer(tool_calls=[ToolCall("add", '{{"a": 2, "b": 3}}', id="call_add_1")])
    if done == 1:
        return Answer(tool_calls=[ToolCall("research", {{"task": CHILD_TASK}})])
    return Answer(text={ANSWER!r}, usage={{"inputTokens": 7, "outputTokens": 3}})

def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(answer)])
"""

USER_TEST = f'''
import asyncio
import uuid

import pytest

TASK = {TASK!r}
TOOLS = [
    {{"type": "function", "function": {{"name": name, "description": name,
      "parameters": {{"type": "object", "properties": {{}}}}}}}}
    for name in ("add", "research")
]


def headers(identify):
    """The parent's and the child's x-dsh-* headers (or none)."""
    if not identify:
        return {{}}, {{}}
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())
    return ({{"x-dsh-session-id": parent}},
            {{"x-dsh-session-id": child, "x-dsh-parent-session-id": parent}})


def add(a, b):
    return str(a + b)


def agent(dsh_replay, identify):
    """The sync agent: a streamed chat loop; research runs a child conversation."""
    mine, theirs = headers(identify)
    client = dsh_replay.client("ollama", headers=mine)

    def research(task):
        child = dsh_replay.client("ollama", headers=theirs)
        reply = child.chat(model="llama3.2", messages=[{{"role": "user", "content": task}}])
        return reply.message.content

    messages = [{{"role": "user", "content": TASK}}]
    while True:
        text, calls = "", []
        for part in client.chat(model="llama3.2", messages=messages, tools=TOOLS, stream=True):
            text += part.message.content or ""
            calls += part.message.tool_calls or []
        messages.append({{"role": "assistant", "content": text, "tool_calls": calls}})
        if not calls:
            return text
        for call in calls:
            run = add if call.function.name == "add" else research
            result = run(**call.function.arguments)
            messages.append({{"role": "tool", "tool_name": call.function.name,
                             "content": result}})


async def async_agent(dsh_replay, identify):
    """The async agent: the same loop on ollama.AsyncClient."""
    mine, theirs = headers(identify)
    client = dsh_replay.client("ollama", async_=True, headers=mine)

    async def research(task):
        child = dsh_replay.client("ollama", async_=True, headers=theirs)
        reply = await child.chat(model="llama3.2",
                                 messages=[{{"role": "user", "content": task}}])
        return reply.message.content

    messages = [{{"role": "user", "content": TASK}}]
    while True:
        text, calls = "", []
        async for part in await client.chat(model="llama3.2", messages=messages, tools=TOOLS,
                                            stream=True):
            text += part.message.content or ""
            calls += part.message.tool_calls or []
        messages.append({{"role": "assistant", "content": text, "tool_calls": calls}})
        if not calls:
            return text
        for call in calls:
            if call.function.name == "add":
                result = add(**call.function.arguments)
            else:
                result = await research(**call.function.arguments)
            messages.append({{"role": "tool", "tool_name": call.function.name,
                             "content": result}})


@pytest.mark.parametrize("identify", [False, True], ids=["content", "headers"])
@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_agent(flavour, identify, dsh_replay):
    if flavour == "sync":
        said = agent(dsh_replay, identify)
    else:
        said = asyncio.run(async_agent(dsh_replay, identify))
    assert said == {ANSWER!r}
    if dsh_replay.mode == "replay":
        by_file = sorted(b.file for b in dsh_replay.model.bindings.values())
        assert by_file == ["session.1.jsonl", "session.jsonl"]
        (child,) = dsh_replay.scenario.children
        assert child.opening_text == "Find a museum."
'''


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(test_user=USER_TEST)
    return pytester


def _logs(project: pytest.Pytester) -> dict[str, list[dict[str, object]]]:
    base = project.path / "recordings"
    return {
        str(path.relative_to(base)): [
            json.loads(line) for line in path.read_text("utf-8").splitlines() if line
        ]
        for path in sorted(base.rglob("*.jsonl"))
    }


def test_an_ollama_agent_records_from_the_live_model_hook_and_replays(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record", "-p", "no:randomly").assert_outcomes(passed=4)
    logs = _logs(project)
    assert len(logs) == 8  # four scenarios, a parent and a child each
    parents = [events for name, events in logs.items() if name.endswith("/session.jsonl")]
    for events in parents:
        results = [e for e in events if e.get("type") == "tool/result"]
        assert len(results) == 2  # add's and research's, each found its call
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    replayed = project.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=4)
    replayed.stdout.fnmatch_lines(["*scenarios: 4 replayed, 0 recorded*"])


def test_an_ollama_agent_records_through_the_proxy_and_replays_without_the_server(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModel(PROVIDER).serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # not used
        monkeypatch.setenv("DSH_RECORD_API_KEY", "live-ollama-key-0123456789")
        monkeypatch.setenv("DSH_RECORD_OLLAMA_BASE_URL", server.base_url)
        project.runpytest("--dsh-record", "-p", "no:randomly").assert_outcomes(passed=4)
        requests = list(server.requests)
    assert len(requests) == 16  # per scenario: three parent calls and the child's
    assert {r.path for r in requests} == {"/api/chat"}
    assert sum(r.body["stream"] is False for r in requests) == 4  # the children's
    tool_messages = [m for r in requests for m in r.body["messages"] if m["role"] == "tool"]
    assert {m["tool_name"] for m in tool_messages} == {"add", "research"}
    written = "".join((project.path / "recordings" / name).read_text() for name in _logs(project))
    assert "live-ollama-key-0123456789" not in written
    assert ANSWER in written
    assert "I add first." in written
    assert '"inputTokens":10' in written.replace(" ", "")
    for name in ("DSH_RECORD_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_OLLAMA_BASE_URL"):
        monkeypatch.delenv(name)
    replayed = project.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=4)
    replayed.stdout.fnmatch_lines(["*scenarios: 4 replayed, 0 recorded*"])
