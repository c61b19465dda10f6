"""Vertex AI agents through the fixture, as users run them (pytester): record, then replay.

An agent on each Vertex client (``google-genai`` with ``vertexai=True`` and
``AnthropicVertex``, sync and async) calls a tool, then spawns a child agent (a new
conversation on a task of its own, streamed) through a second tool, and answers; the
child is told apart by content alone and by the ``x-dsh-session-id`` /
``x-dsh-parent-session-id`` headers. The same test module is recorded once from a
scripted live model given by the ``pytest_dsh_replay_live_model`` hook and once through
the recording proxy from the package's ``ScriptedServer`` speaking the Vertex wires (the
live base URLs naming a project and a location of their own), then each recording
replays with no live model, no hook and no proxy, the agent's code unchanged.
"""

from __future__ import annotations

import pytest
from support.inner_runs import imported_before_inner_runs
from support.proxy_recording import record_through_proxy, recorded_logs, recording_project
from support.vertex_agent import answer

from pytest_dsh_replay import Rule, ScriptedModel

_genai = imported_before_inner_runs(
    "google.genai", reason="the Vertex Gemini client is google-genai"
)
_anthropic = imported_before_inner_runs(
    "anthropic", reason="AnthropicVertex is in the anthropic SDK"
)

KEY = "live-vertex-token-0123456789"
LIVE_SCOPE = "/v1/projects/live-proj/locations/europe-west4"
BASE_URL_VARIABLES = ("DSH_RECORD_VERTEX_BASE_URL", "DSH_RECORD_ANTHROPIC_VERTEX_BASE_URL")

CONFTEST = """
from support.vertex_agent import answer

from pytest_dsh_replay import Rule, ScriptedModel

def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(answer)])
"""

AGENT = '''
import asyncio
import inspect
import json
import uuid

import pytest

TASK, QUESTION = "Plan a day in Paris.", "What should we wear?"
NAMES = ("weather", "spawn")


async def done(value):
    return await value if inspect.isawaitable(value) else value


async def each(stream):
    if hasattr(stream, "__aiter__"):
        return [piece async for piece in stream]
    return list(stream)


class Gemini:
    """google-genai on Vertex: one conversation."""

    def __init__(self, client):
        from google.genai import types

        self.client, self.types = client, types
        self.tools = [types.Tool(function_declarations=[
            types.FunctionDeclaration(name=n, parameters_json_schema={"type": "object"})
            for n in NAMES])]

    def start(self, text):
        return [self.types.Content(role="user", parts=[self.types.Part.from_text(text=text)])]

    def config(self, headers, tools):
        return self.types.GenerateContentConfig(
            tools=self.tools if tools else None,
            http_options=self.types.HttpOptions(headers=headers))

    async def step(self, contents, headers):
        response = await done(self.client.models.generate_content(
            model="gemini-x", contents=contents, config=self.config(headers, True)))
        contents.append(response.candidates[0].content)
        return response.text, [(c.name, c.args, c) for c in response.function_calls or ()]

    def results(self, contents, calls, outputs):
        contents.append(self.types.Content(role="user", parts=[
            self.types.Part.from_function_response(name=name, response={"result": out})
            for (name, _, _), out in zip(calls, outputs)]))

    async def streamed(self, contents, headers):
        pieces = await each(await done(self.client.models.generate_content_stream(
            model="gemini-x", contents=contents, config=self.config(headers, False))))
        return "".join(piece.text or "" for piece in pieces)


class Claude:
    """AnthropicVertex: one conversation."""

    def __init__(self, client):
        self.client = client
        self.tools = [{"name": n, "input_schema": {"type": "object"}} for n in NAMES]

    def start(self, text):
        return [{"role": "user", "content": text}]

    async def step(self, messages, headers):
        message = await done(self.client.messages.create(
            model="claude-x@001", max_tokens=256, messages=messages, tools=self.tools,
            extra_headers=headers))
        messages.append({"role": "assistant",
                         "content": [b.model_dump(exclude_none=True) for b in message.content]})
        text = "".join(b.text for b in message.content if b.type == "text")
        return text, [(b.name, b.input, b) for b in message.content if b.type == "tool_use"]

    def results(self, messages, calls, outputs):
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": out}
            for (_, _, call), out in zip(calls, outputs)]})

    async def streamed(self, messages, headers):
        events = await each(await done(self.client.messages.create(
            model="claude-x@001", max_tokens=256, messages=messages, stream=True,
            extra_headers=headers)))
        return "".join(e.delta.text for e in events
                       if e.type == "content_block_delta" and e.delta.type == "text_delta")


async def agent(chat, identify):
    """Weather, then a spawned child (its own conversation, streamed), then the plan."""
    me, child = str(uuid.uuid4()), str(uuid.uuid4())
    mine = {"x-dsh-session-id": me} if identify else {}
    theirs = {"x-dsh-session-id": child, "x-dsh-parent-session-id": me} if identify else {}
    conversation, said = chat.start(TASK), []
    while True:
        text, calls = await chat.step(conversation, mine)
        if not calls:
            return text, said
        outputs = []
        for name, args, _ in calls:
            if name == "spawn":
                said.append(await chat.streamed(chat.start(args["task"]), theirs))
                outputs.append(said[-1])
            else:
                outputs.append("sunny")
        chat.results(conversation, calls, outputs)


CHATS = {"vertex": Gemini, "anthropic-vertex": Claude}


@pytest.mark.parametrize("identify", [False, True], ids=["content", "headers"])
@pytest.mark.parametrize("async_", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("wire", sorted(CHATS))
def test_an_agent_spawns_a_child(wire, async_, identify, dsh_replay):
    chat = CHATS[wire](dsh_replay.client(wire, async_=async_))
    got = asyncio.run(agent(chat, identify))
    assert got == ("Louvre, then a walk.", ["Comfortable shoes."])
    if dsh_replay.mode == "replay":
        by_file = {b.file: b for b in dsh_replay.model.bindings.values()}
        assert sorted(by_file) == ["session.1.jsonl", "session.jsonl"]
        (spawned,) = dsh_replay.scenario.children
        assert (spawned.seed_length, spawned.opening_text) == (0, QUESTION)
'''

RUNS = 8  # two wires, sync and async, children by content and by headers


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return recording_project(pytester, AGENT)


def _replays(project: pytest.Pytester) -> None:
    replayed = project.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=RUNS)
    replayed.stdout.fnmatch_lines([f"*scenarios: {RUNS} replayed, 0 recorded*"])


def test_vertex_agents_record_from_the_hook_then_replay(project: pytest.Pytester) -> None:
    project.makeconftest(CONFTEST)
    project.runpytest("--dsh-record=all").assert_outcomes(passed=RUNS)
    logs = recorded_logs(project)
    assert len(logs) == 2 * RUNS  # a parent and its child each
    (project.path / "conftest.py").unlink()  # replay: no live model at all
    _replays(project)


def test_vertex_agents_record_through_the_proxy_then_replay(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    def base_urls(server: str) -> None:  # each wire's live URL names its project and location
        for variable in BASE_URL_VARIABLES:
            monkeypatch.setenv(variable, server + LIVE_SCOPE)

    model = ScriptedModel([Rule(answer)])
    requests = record_through_proxy(
        project, monkeypatch, model, "--dsh-record=all", key=KEY, passed=RUNS, before=base_urls
    )
    for variable in BASE_URL_VARIABLES:
        monkeypatch.delenv(variable)
    paths = sorted({r.path.split("/models/")[0] for r in requests})
    assert paths == [
        f"{LIVE_SCOPE}/publishers/anthropic",
        f"{LIVE_SCOPE}/publishers/google",
    ]
    assert {r.path.rsplit(":", 1)[1] for r in requests} == {
        "generateContent",
        "streamGenerateContent?alt=sse",
        "rawPredict",
        "streamRawPredict",
    }
    for request in requests:
        assert request.headers["authorization"] == f"Bearer {KEY}"
    claude = [r.body for r in requests if "/anthropic/" in r.path]
    assert all("model" not in body and body["anthropic_version"] for body in claude)
    written = "".join(recorded_logs(project).values())
    assert KEY not in written
    assert "Comfortable shoes." in written
    _replays(project)
