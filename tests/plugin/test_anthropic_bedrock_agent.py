"""``anthropic.AnthropicBedrock`` (sync and async) through the fixture, as users run it (pytester).

A user's agent on ``dsh_replay.client("anthropic-bedrock", async_=...)`` calls a tool
(``add``), then spawns a child conversation (``spawn``: a second agent on the same client),
then answers. The sync agent streams (``invoke-with-response-stream``), the async one asks
for whole answers (``invoke``). Its sessions are told apart by content alone, and by the
``x-dsh-*`` headers (``extra_headers``). It is recorded once from the
``pytest_dsh_replay_live_model`` hook and once through the recording proxy against the
package's scripted model on 127.0.0.1 (each request re-signed by botocore), then each
recording replays with no live model, no hook and no proxy, the test file unchanged.
"""

from __future__ import annotations

import pytest
from support.add_spawn_agent import CONFTEST, model
from support.proxy_recording import recorded_logs, recording_project

pytest.importorskip("anthropic", reason="AnthropicBedrock is the anthropic SDK's")
pytest.importorskip("boto3", reason="AnthropicBedrock signs with botocore")

MODEL = "anthropic.claude-x-v1:0"


USER_TEST = f"""
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
def test_agent(dsh_replay, identify, async_):
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
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, USER_TEST)


def _replays(project: pytest.Pytester) -> None:
    logs = recorded_logs(project)
    assert len(logs) == 8  # four scenarios, each a parent and a child
    assert all("Say hi." in text or "Done: 5" in text for text in logs.values())
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=4)


def test_an_anthropic_bedrock_agent_records_from_the_hook_and_replays(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record").assert_outcomes(passed=4)
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays(project)


def test_an_anthropic_bedrock_agent_records_through_the_proxy_and_replays(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLIVEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "live-secret-access-key-0123456789")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with model().serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # not used
        monkeypatch.setenv("DSH_RECORD_API_KEY", "live-bedrock-key-0123456789")
        monkeypatch.setenv("DSH_RECORD_BEDROCK_BASE_URL", server.base_url)
        project.runpytest("--dsh-record").assert_outcomes(passed=4)
        requests = list(server.requests)
    assert len(requests) == 16  # four runs of add, spawn, the child, the answer
    assert {r.path for r in requests} == {
        f"/model/{MODEL}/invoke-with-response-stream",
        f"/model/{MODEL}/invoke",
    }
    for request in requests:
        assert request.headers["authorization"].startswith(
            "AWS4-HMAC-SHA256 Credential=AKIDLIVEEXAMPLE/"
        )  # re-signed by botocore with the live credentials, not the client's dummies
    written = "".join(recorded_logs(project).values())
    assert "live-secret-access-key" not in written
    for name in ("DSH_RECORD_BEDROCK_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_BASE_URL"):
        monkeypatch.delenv(name)
    _replays(project)
