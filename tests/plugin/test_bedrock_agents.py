"""Both Bedrock wires through the fixture, as users run them (pytester).

A user's agent calls a tool (``add``), then spawns a child conversation (``spawn``: a
second agent on the same client, a new conversation), then answers; it is written once
per wire, in one project:

- ``test_converse.py``: boto3's ``bedrock-runtime`` client from ``dsh_replay.client("bedrock")``
  streams with ``converse_stream``; our ``x-dsh-*`` headers are added to each signed
  request by a botocore ``before-sign`` handler.
- ``test_user.py``: ``anthropic.AnthropicBedrock`` from
  ``dsh_replay.client("anthropic-bedrock", async_=...)``: the sync agent streams
  (``invoke-with-response-stream``), the async one asks for whole answers (``invoke``);
  the headers go as ``extra_headers``.

Sessions are told apart by content alone, and by the headers. The project is recorded
once from the ``pytest_dsh_replay_live_model`` hook and once through the recording proxy
against the package's scripted model on 127.0.0.1 (each request re-signed by botocore),
then each recording replays with no live model, no hook and no proxy, the test files
unchanged.
"""

from __future__ import annotations

import pytest
from support.add_spawn_agent import CONFTEST, model
from support.inner_runs import imported_before_inner_runs
from support.proxy_recording import recorded_logs, recording_project

_anthropic = imported_before_inner_runs(
    "anthropic", reason="AnthropicBedrock is the anthropic SDK's"
)
_boto3 = imported_before_inner_runs("boto3", reason="the Bedrock wires' clients sign with botocore")

MODEL = "anthropic.claude-x-v1:0"
PASSED = 2 + 4  # Converse: by content, by headers; AnthropicBedrock: the same, sync and async
PATHS = {  # each wire's routes, as the proxy's live server saw them
    "converse": {"/model/anthropic.claude-x-v1%3A0/converse-stream"},
    "anthropic-bedrock": {
        f"/model/{MODEL}/invoke-with-response-stream",
        f"/model/{MODEL}/invoke",
    },
}

CONVERSE_TEST = """
import json
import uuid

import pytest

TOOLS = {"tools": [{"toolSpec": {"name": n, "inputSchema": {"json": {"type": "object"}}}}
                   for n in ("add", "spawn")]}


class Agent:
    def __init__(self, client, identify, parent=None):
        self.client, self.identify, self.parent = client, identify, parent
        self.session = str(uuid.uuid4())

    def headers(self):
        if not self.identify:
            return {}
        out = {"x-dsh-session-id": self.session}
        if self.parent is not None:
            out["x-dsh-parent-session-id"] = self.parent.session
        return out

    def ask(self, messages):
        CURRENT["headers"] = self.headers()
        events = self.client.converse_stream(
            modelId="anthropic.claude-x-v1:0", messages=messages,
            system=[{"text": "You plan."}], toolConfig=TOOLS)["stream"]
        text, uses, stop = "", {}, None
        for event in events:
            if "contentBlockStart" in event:
                start = event["contentBlockStart"]
                uses[start["contentBlockIndex"]] = dict(start["start"]["toolUse"], input="")
            elif "contentBlockDelta" in event:
                delta = event["contentBlockDelta"]
                if "toolUse" in delta["delta"]:
                    uses[delta["contentBlockIndex"]]["input"] += delta["delta"]["toolUse"]["input"]
                else:
                    text += delta["delta"].get("text", "")
            elif "messageStop" in event:
                stop = event["messageStop"]["stopReason"]
        return text, [dict(u, input=json.loads(u["input"] or "{}")) for u in uses.values()], stop

    def run(self, task):
        messages = [{"role": "user", "content": [{"text": task}]}]
        while True:
            text, uses, stop = self.ask(messages)
            content = ([{"text": text}] if text else []) + [{"toolUse": u} for u in uses]
            messages.append({"role": "assistant", "content": content})
            if stop != "tool_use":
                return text
            results = []
            for use in uses:
                if use["name"] == "add":
                    out = str(use["input"]["a"] + use["input"]["b"])
                else:
                    out = Agent(self.client, self.identify, self).run(use["input"]["task"])
                results.append({"toolResult": {"toolUseId": use["toolUseId"],
                                               "content": [{"text": out}]}})
            messages.append({"role": "user", "content": results})


CURRENT = {"headers": {}}


def add_headers(request, **kwargs):
    for name, value in CURRENT["headers"].items():
        request.headers[name] = value


@pytest.mark.parametrize("identify", [False, True], ids=["by-content", "by-headers"])
def test_converse_agent(dsh_replay, identify):
    client = dsh_replay.client("bedrock")
    client.meta.events.register("before-sign.bedrock-runtime", add_headers)
    assert Agent(client, identify).run("Add 2 and 3, then have a helper say hi.") == "Done: 5"
    if dsh_replay.mode == "replay":
        assert len(dsh_replay.model.bindings) == 2  # the parent and its child
"""

ANTHROPIC_BEDROCK_TEST = f"""
import asyncio
import uuid

import pytest

MODEL = {MODEL!r}
TOOLS = [{{"name": n, "input_schema": {{"type": "object"}}}} for n in ("add", "spawn")]


class Agent:
    def __init__(self, client, identify, parent=None):
        self.client, self.identify, self.parent = client, identify, parent
        self.session = str(uuid.uuid4())

    def headers(self):
        if not self.identify:
            return {{}}
        out = {{"x-dsh-session-id": self.session}}
        if self.parent is not None:
            out["x-dsh-parent-session-id"] = self.parent.session
        return out

    def kwargs(self, messages):
        return dict(model=MODEL, max_tokens=256, system="You plan.", tools=TOOLS,
                    messages=messages, extra_headers=self.headers())

    def results(self, message, child):
        out = []
        for block in message.content:
            if block.type == "tool_use":
                if block.name == "add":
                    text = str(block.input["a"] + block.input["b"])
                else:
                    text = child(block.input["task"])
                out.append({{"type": "tool_result", "tool_use_id": block.id, "content": text}})
        return out

    def run(self, task):
        messages = [{{"role": "user", "content": task}}]
        while True:
            with self.client.messages.stream(**self.kwargs(messages)) as events:
                message = events.get_final_message()
            content = [b.model_dump(exclude_none=True) for b in message.content]
            messages.append({{"role": "assistant", "content": content}})
            if message.stop_reason != "tool_use":
                return "".join(b.text for b in message.content if b.type == "text")
            child = lambda task: Agent(self.client, self.identify, self).run(task)
            messages.append({{"role": "user", "content": self.results(message, child)}})

    async def arun(self, task):
        messages = [{{"role": "user", "content": task}}]
        while True:
            message = await self.client.messages.create(**self.kwargs(messages))
            content = [b.model_dump(exclude_none=True) for b in message.content]
            messages.append({{"role": "assistant", "content": content}})
            if message.stop_reason != "tool_use":
                return "".join(b.text for b in message.content if b.type == "text")
            spawned = {{}}
            for block in message.content:
                if block.type == "tool_use" and block.name == "spawn":
                    child = Agent(self.client, self.identify, self)
                    spawned[block.input["task"]] = await child.arun(block.input["task"])
            messages.append({{"role": "user", "content": self.results(message, spawned.get)}})


@pytest.mark.parametrize("async_", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("identify", [False, True], ids=["by-content", "by-headers"])
def test_anthropic_bedrock_agent(dsh_replay, identify, async_):
    client = dsh_replay.client("anthropic-bedrock", async_=async_)
    task = "Add 2 and 3, then have a helper say hi."
    if async_:
        answer = asyncio.run(Agent(client, identify).arun(task))
    else:
        answer = Agent(client, identify).run(task)
    assert answer == "Done: 5"
    if dsh_replay.mode == "replay":
        assert len(dsh_replay.model.bindings) == 2  # the parent and its child
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    project = recording_project(pytester, ANTHROPIC_BEDROCK_TEST)
    project.makepyfile(test_converse=CONVERSE_TEST)
    return project


def _replays(project: pytest.Pytester) -> None:
    logs = recorded_logs(project)
    assert len(logs) == 2 * PASSED  # a scenario per test, each a parent and a child
    assert all("Say hi." in text or "Done: 5" in text for text in logs.values())
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=PASSED)


def test_bedrock_agents_record_from_the_hook_and_replay(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record").assert_outcomes(passed=PASSED)
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays(project)


def test_bedrock_agents_record_through_the_proxy_and_replay(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLIVEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "live-secret-access-key-0123456789")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with model().serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # not used
        monkeypatch.setenv("DSH_RECORD_API_KEY", "live-bedrock-key-0123456789")
        monkeypatch.setenv("DSH_RECORD_BEDROCK_BASE_URL", server.base_url)
        project.runpytest("--dsh-record").assert_outcomes(passed=PASSED)
        requests = list(server.requests)
    # each run: add, spawn, the child, the answer
    for wire, runs in (("converse", 2), ("anthropic-bedrock", 4)):
        assert len([r for r in requests if r.path in PATHS[wire]]) == 4 * runs, wire
        assert {r.path for r in requests} >= PATHS[wire], wire
    assert len(requests) == 4 * PASSED
    for request in requests:
        assert request.headers["authorization"].startswith(
            "AWS4-HMAC-SHA256 Credential=AKIDLIVEEXAMPLE/"
        )  # re-signed by botocore with the live credentials, not the client's dummies
    written = "".join(recorded_logs(project).values())
    assert "live-secret-access-key" not in written
    for name in ("DSH_RECORD_BEDROCK_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_BASE_URL"):
        monkeypatch.delenv(name)
    _replays(project)
