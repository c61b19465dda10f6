"""An agent on ``openai.AzureOpenAI`` records, then replays, as users run it (pytester).

The agent plans on chat completions (the deployments route), calls a tool, and spawns a
child agent, a new conversation that the same ``AzureOpenAI`` client runs on the
Responses API (``/openai/responses``): both Azure wires in one agent. Sessions are told
apart by content alone and by the ``x-dsh-session-id`` headers, with the sync and the
async client. It is recorded once from a scripted live model given by the
``pytest_dsh_replay_live_model`` hook, and once through the recording proxy from the
package's scripted model served on 127.0.0.1 (``DSH_RECORD_AZURE_BASE_URL``); each
recording then replays with no live model, no hook and no proxy, from the same test file
(no agent line changes between record and replay).
"""

from __future__ import annotations

import json

import pytest
from support.proxy_recording import recorded_logs, recording_project

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall

pytest.importorskip("openai", reason="the Azure agent runs on openai's AzureOpenAI")

CHILD_TASK = "Find one museum."


def _answer(request: ScriptedRequest) -> Answer:
    """The provider: the parent checks the weather, spawns a child, then answers."""
    users = [text for role, text in request.messages if role == "user"]
    if users and users[0] == CHILD_TASK:
        return Answer(text="The Louvre.")
    done = sum(1 for role, _ in request.messages if role == "tool")
    if done == 0:
        return Answer(tool_calls=[ToolCall("weather", "{}")])
    if done == 1:
        return Answer(tool_calls=[ToolCall("spawn", json.dumps({"task": CHILD_TASK}))])
    return Answer(text="Louvre, then a walk.", usage={"inputTokens": 9, "outputTokens": 4})


PROVIDER = [Rule(_answer)]

CONFTEST = f"""
import json

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall


def answer(request):
    users = [text for role, text in request.messages if role == "user"]
    if users and users[0] == {CHILD_TASK!r}:
        return Answer(text="The Louvre.")
    done = sum(1 for role, _ in request.messages if role == "tool")
    if done == 0:
        return Answer(tool_calls=[ToolCall("weather", "{{}}", id="call_weather")])
    if done == 1:
        return Answer(tool_calls=[ToolCall("spawn", json.dumps({{"task": {CHILD_TASK!r}}}))])
    return Answer(text="Louvre, then a walk.")


def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(answer)])
"""

USER_TEST = f'''
import asyncio
import uuid

import pytest

CHILD_TASK = {CHILD_TASK!r}
TOOLS = [{{"type": "function", "function": {{"name": n, "parameters": {{"type": "object"}}}}}}
         for n in ("weather", "spawn")]


class Ids:
    def __init__(self, identify):
        self.identify, self.parent, self.child = identify, str(uuid.uuid4()), str(uuid.uuid4())

    def of_parent(self):
        return {{"x-dsh-session-id": self.parent}} if self.identify else {{}}

    def of_child(self):
        if not self.identify:
            return {{}}
        return {{"x-dsh-session-id": self.child, "x-dsh-parent-session-id": self.parent}}


def child(client, ids):
    """The spawned agent: its own conversation, on the Responses API of the same client."""
    return client.responses.create(
        model="gpt-4o-prod", input=[{{"role": "user", "content": CHILD_TASK}}],
        extra_headers=ids.of_child(),
    ).output_text


def parent(client, ids):
    messages = [{{"role": "system", "content": "You plan."}},
                {{"role": "user", "content": "Plan a day in Paris."}}]
    while True:
        stream = client.chat.completions.create(
            model="gpt-4o-prod", messages=messages, tools=TOOLS, stream=True,
            extra_headers=ids.of_parent(),
        )
        text, calls = "", {{}}
        for chunk in stream:
            if not chunk.choices:  # Azure's prompt-filter chunk
                continue
            delta = chunk.choices[0].delta
            text += delta.content or ""
            for call in delta.tool_calls or ():
                got = calls.setdefault(call.index, {{"id": call.id, "name": "", "arguments": ""}})
                got["name"] += call.function.name or ""
                got["arguments"] += call.function.arguments or ""
        if not calls:
            return text
        messages.append({{"role": "assistant", "content": text or None, "tool_calls": [
            {{"id": c["id"], "type": "function",
              "function": {{"name": c["name"], "arguments": c["arguments"]}}}}
            for c in calls.values()]}})
        for c in calls.values():
            result = child(client, ids) if c["name"] == "spawn" else "sunny"
            messages.append({{"role": "tool", "tool_call_id": c["id"], "content": result}})


async def achild(client, ids):
    response = await client.responses.create(
        model="gpt-4o-prod", input=[{{"role": "user", "content": CHILD_TASK}}],
        extra_headers=ids.of_child(),
    )
    return response.output_text


async def aparent(client, ids):
    messages = [{{"role": "system", "content": "You plan."}},
                {{"role": "user", "content": "Plan a day in Paris."}}]
    while True:
        reply = await client.chat.completions.create(
            model="gpt-4o-prod", messages=messages, tools=TOOLS, extra_headers=ids.of_parent(),
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            result = await achild(client, ids) if call.function.name == "spawn" else "sunny"
            messages.append({{"role": "tool", "tool_call_id": call.id, "content": result}})


@pytest.mark.parametrize("identify", [False, True], ids=["content", "headers"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_agent(asynchronous, identify, dsh_replay):
    ids = Ids(identify)
    if asynchronous:
        answer = asyncio.run(aparent(dsh_replay.client("azure", async_=True), ids))
    else:
        answer = parent(dsh_replay.client("azure"), ids)
    assert answer == "Louvre, then a walk."
    if dsh_replay.mode == "replay":
        by_file = {{b.file: b for b in dsh_replay.model.bindings.values()}}
        assert sorted(by_file) == ["session.1.jsonl", "session.jsonl"]
        (spawned,) = dsh_replay.scenario.children
        assert (spawned.seed_length, spawned.opening_text) == (0, CHILD_TASK)
'''

KEY = "live-azure-key-0123456789abcdef"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, USER_TEST)


def _replays(project: pytest.Pytester) -> None:
    replayed = project.runpytest("-p", "no:cacheprovider", "-p", "no:randomly")
    replayed.assert_outcomes(passed=4)
    replayed.stdout.fnmatch_lines(["*scenarios: 4 replayed, 0 recorded*"])


def test_the_azure_agent_records_from_the_hook_then_replays(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record", "-p", "no:cacheprovider").assert_outcomes(passed=4)
    logs = recorded_logs(project)
    assert len(logs) == 8  # a parent and its spawned child per test
    children = [text for path, text in logs.items() if path.endswith("session.1.jsonl")]
    assert all(CHILD_TASK in text for text in children)
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays(project)


def test_the_azure_agent_records_through_the_proxy_then_replays(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModel(PROVIDER).serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # not used
        monkeypatch.setenv("DSH_RECORD_API_KEY", KEY)
        monkeypatch.setenv("DSH_RECORD_AZURE_BASE_URL", server.base_url)
        project.runpytest("--dsh-record", "-p", "no:cacheprovider").assert_outcomes(passed=4)
        requests = list(server.requests)
    paths = {request.path for request in requests}
    assert paths == {
        "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
        "/openai/responses?api-version=2024-10-21",
    }
    assert len(requests) == 16  # per test: three parent calls and the child's
    assert {request.headers["api-key"] for request in requests} == {KEY}
    logs = recorded_logs(project)
    assert len(logs) == 8
    assert not any(KEY in text for text in logs.values())
    assert all("Louvre, then a walk." in t for p, t in logs.items() if p.endswith("session.jsonl"))
    for name in ("DSH_RECORD_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_AZURE_BASE_URL"):
        monkeypatch.delenv(name)
    _replays(project)
