"""boto3 ``bedrock-runtime`` ``converse_stream`` through the fixture, as users run it (pytester).

A user's agent on ``dsh_replay.client("bedrock")`` calls a tool (``add``), then spawns a
child conversation (``spawn``: a second agent on the same client, a new conversation),
then answers. Its sessions are told apart by content alone, and by the ``x-dsh-*``
headers (added to each signed request by a botocore ``before-sign`` handler). It is
recorded once from the ``pytest_dsh_replay_live_model`` hook and once through the
recording proxy against the package's scripted model on 127.0.0.1 (the request re-signed
by botocore), then each recording replays with no live model, no hook and no proxy, the
test file unchanged.
"""

from __future__ import annotations

import pytest
from support.add_spawn_agent import CONFTEST, model
from support.proxy_recording import recorded_logs, recording_project

pytest.importorskip("boto3", reason="the Bedrock wire's client is boto3")


USER_TEST = """
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
def test_agent(dsh_replay, identify):
    client = dsh_replay.client("bedrock")
    client.meta.events.register("before-sign.bedrock-runtime", add_headers)
    assert Agent(client, identify).run("Add 2 and 3, then have a helper say hi.") == "Done: 5"
    if dsh_replay.mode == "replay":
        assert len(dsh_replay.model.bindings) == 2  # the parent and its child
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, USER_TEST)


def _replays(project: pytest.Pytester) -> None:
    logs = recorded_logs(project)
    assert len(logs) == 4  # two scenarios, each a parent and a child
    assert all("Say hi." in text or "Done: 5" in text for text in logs.values())
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


def test_a_bedrock_agent_records_from_the_hook_and_replays(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record").assert_outcomes(passed=2)
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays(project)


def test_a_bedrock_agent_records_through_the_proxy_and_replays(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDLIVEEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "live-secret-access-key-0123456789")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    with model().serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")  # not used
        monkeypatch.setenv("DSH_RECORD_API_KEY", "live-bedrock-key-0123456789")
        monkeypatch.setenv("DSH_RECORD_BEDROCK_BASE_URL", server.base_url)
        project.runpytest("--dsh-record").assert_outcomes(passed=2)
        requests = list(server.requests)
    assert len(requests) == 8  # two runs of add, spawn, the child, the answer
    assert {r.path for r in requests} == {"/model/anthropic.claude-x-v1%3A0/converse-stream"}
    for request in requests:
        assert request.headers["authorization"].startswith(
            "AWS4-HMAC-SHA256 Credential=AKIDLIVEEXAMPLE/"
        )  # re-signed by botocore with the live credentials, not the client's dummies
    written = "".join(recorded_logs(project).values())
    assert "live-secret-access-key" not in written
    for name in ("DSH_RECORD_BEDROCK_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_BASE_URL"):
        monkeypatch.delenv(name)
    _replays(project)
