"""A small agent that speaks each provider's wire by hand, and the model that plans for it.

The identity tests drive many agent shapes (spawn and fork at any step, parallel children,
rewritten tool-call ids, grandchildren) through every wire the endpoint serves, so the
agent builds each wire's request body itself and posts it to the endpoint in process
(what an SDK would send; no HTTP client, so a run costs milliseconds).

A **task** is ``TASK <label>: <plan>``; the plan is a JSON list of steps, each step the tool
calls the model makes at that step: ``{"t": "add"}``, ``{"t": "spawn", "task": <task>}``
(a new conversation on that task) or ``{"t": "fork", "q": <question>}`` (the agent's
latest request plus ``ASK <question>``, asked while it waits for its tools). The
:func:`plan_model` answers a task's step ``k`` with its tool calls, ``done <label>`` after
the last step, and ``answer <question>`` to a question.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from pytest_dsh_replay import Answer, Rule, ScriptedModel, ScriptedRequest, ToolCall

TOOLS = ("add", "spawn", "fork")
_TASK = re.compile(r"^TASK (\S+): (.*)$", re.DOTALL)


@dataclass(frozen=True)
class Call:
    """A tool call the model made."""

    id: str
    name: str
    arguments: str


@dataclass
class Message:
    """One message of a conversation, whatever the wire: user, assistant or tool."""

    role: str
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    call: Call | None = None  # a tool result's call


def task(label: str, plan: list[list[dict[str, Any]]]) -> str:
    """The task text of a plan."""
    return f"TASK {label}: {json.dumps(plan, sort_keys=True)}"


def _answer(request: ScriptedRequest) -> Answer:
    users = [(i, text) for i, (role, text) in enumerate(request.messages) if role == "user"]
    if users and users[-1][1].startswith("ASK "):
        return Answer(text=f"answer {users[-1][1][4:]}")
    for i, text in reversed(users):
        found = _TASK.match(text)
        if found is None:
            continue
        label, plan = found.group(1), json.loads(found.group(2))
        step = sum(1 for role, _ in request.messages[i + 1 :] if role == "assistant")
        if step >= len(plan):
            return Answer(text=f"done {label}")
        calls = []
        for use in plan[step]:
            arguments = {k: v for k, v in use.items() if k != "t"}
            calls.append(ToolCall(use["t"], json.dumps(arguments, sort_keys=True)))
        return Answer(tool_calls=calls)
    return Answer(text="no task")


def plan_model() -> ScriptedModel:
    """The live model of the plans (see the module docstring)."""
    return ScriptedModel([Rule(_answer)])


# --- the wires --------------------------------------------------------------------------


class Dialect(Protocol):
    """How one wire asks and answers."""

    name: str
    path: str
    ids: bool  # the wire names tool calls by id

    def body(self, system: str, messages: list[Message]) -> dict[str, Any]: ...

    def answer(self, response: Mapping[str, Any]) -> tuple[str, list[Call]]: ...


def _schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


class Chat:
    name = "chat"
    path = "/v1/chat/completions"
    ids = True

    def body(self, system: str, messages: list[Message]) -> dict[str, Any]:
        out: list[dict[str, Any]] = [{"role": "system", "content": system}]
        for m in messages:
            if m.role == "user":
                out.append({"role": "user", "content": m.text})
            elif m.role == "assistant":
                message: dict[str, Any] = {"role": "assistant", "content": m.text or None}
                if m.calls:
                    message["tool_calls"] = [
                        {"id": c.id, "type": "function",
                         "function": {"name": c.name, "arguments": c.arguments}}
                        for c in m.calls
                    ]  # fmt: skip
                out.append(message)
            else:
                assert m.call is not None
                out.append({"role": "tool", "tool_call_id": m.call.id, "content": m.text})
        tools = [
            {"type": "function", "function": {"name": n, "parameters": _schema()}} for n in TOOLS
        ]
        return {"model": "m", "messages": out, "tools": tools}

    def answer(self, response: Mapping[str, Any]) -> tuple[str, list[Call]]:
        message = response["choices"][0]["message"]
        calls = [
            Call(c["id"], c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or ()
        ]
        return message.get("content") or "", calls


class Responses:
    name = "responses"
    path = "/v1/responses"
    ids = True

    def body(self, system: str, messages: list[Message]) -> dict[str, Any]:
        items: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "user":
                items.append({"type": "message", "role": "user", "content": m.text})
            elif m.role == "assistant":
                if m.text:
                    content = [{"type": "output_text", "text": m.text}]
                    items.append({"type": "message", "role": "assistant", "content": content})
                for c in m.calls:
                    items.append({"type": "function_call", "call_id": c.id, "name": c.name,
                                  "arguments": c.arguments})  # fmt: skip
            else:
                assert m.call is not None
                items.append({"type": "function_call_output", "call_id": m.call.id,
                              "output": m.text})  # fmt: skip
        tools = [{"type": "function", "name": n, "parameters": _schema()} for n in TOOLS]
        return {"model": "m", "instructions": system, "input": items, "tools": tools}

    def answer(self, response: Mapping[str, Any]) -> tuple[str, list[Call]]:
        text, calls = "", []
        for item in response["output"]:
            if item["type"] == "message":
                text += "".join(p.get("text", "") for p in item["content"])
            elif item["type"] == "function_call":
                calls.append(Call(item["call_id"], item["name"], item["arguments"]))
        return text, calls


class Messages:
    name = "anthropic"
    path = "/v1/messages"
    ids = True

    def body(self, system: str, messages: list[Message]) -> dict[str, Any]:
        out: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "user":
                out.append({"role": "user", "content": [{"type": "text", "text": m.text}]})
            elif m.role == "assistant":
                blocks: list[dict[str, Any]] = []
                if m.text:
                    blocks.append({"type": "text", "text": m.text})
                for c in m.calls:
                    blocks.append({"type": "tool_use", "id": c.id, "name": c.name,
                                   "input": json.loads(c.arguments or "{}")})  # fmt: skip
                out.append({"role": "assistant", "content": blocks})
            else:
                assert m.call is not None
                result = {"type": "tool_result", "tool_use_id": m.call.id, "content": m.text}
                if (
                    out
                    and out[-1]["role"] == "user"
                    and out[-1]["content"][0]["type"] == "tool_result"
                ):
                    out[-1]["content"].append(result)
                else:
                    out.append({"role": "user", "content": [result]})
        tools = [{"name": n, "input_schema": _schema()} for n in TOOLS]
        return {"model": "m", "max_tokens": 256, "system": system, "messages": out, "tools": tools}

    def answer(self, response: Mapping[str, Any]) -> tuple[str, list[Call]]:
        text, calls = "", []
        for block in response["content"]:
            if block["type"] == "text":
                text += block["text"]
            elif block["type"] == "tool_use":
                arguments = json.dumps(block["input"], sort_keys=True)
                calls.append(Call(block["id"], block["name"], arguments))
        return text, calls


class Gemini:
    name = "gemini"
    path = "/v1beta/models/m:generateContent"
    ids = False

    def body(self, system: str, messages: list[Message]) -> dict[str, Any]:
        contents: list[dict[str, Any]] = []
        for m in messages:
            if m.role == "user":
                contents.append({"role": "user", "parts": [{"text": m.text}]})
            elif m.role == "assistant":
                parts: list[dict[str, Any]] = [{"text": m.text}] if m.text else []
                for c in m.calls:
                    parts.append(
                        {"functionCall": {"name": c.name, "args": json.loads(c.arguments or "{}")}}
                    )
                contents.append({"role": "model", "parts": parts})
            else:
                assert m.call is not None
                part = {"functionResponse": {"name": m.call.name, "response": {"result": m.text}}}
                if (
                    contents
                    and contents[-1]["role"] == "user"
                    and "functionResponse" in contents[-1]["parts"][0]
                ):
                    contents[-1]["parts"].append(part)
                else:
                    contents.append({"role": "user", "parts": [part]})
        declarations = [{"name": n, "parameters": _schema()} for n in TOOLS]
        return {
            "systemInstruction": {"parts": [{"text": system}]},
            "contents": contents,
            "tools": [{"functionDeclarations": declarations}],
        }

    def answer(self, response: Mapping[str, Any]) -> tuple[str, list[Call]]:
        text, calls = "", []
        for n, part in enumerate(response["candidates"][0]["content"]["parts"]):
            if "text" in part:
                text += part["text"]
            elif "functionCall" in part:
                call = part["functionCall"]
                arguments = json.dumps(call.get("args") or {}, sort_keys=True)
                calls.append(Call(call.get("id") or f"g{n}", call["name"], arguments))
        return text, calls


DIALECTS: dict[str, Dialect] = {d.name: d for d in (Chat(), Responses(), Messages(), Gemini())}


# --- the agent --------------------------------------------------------------------------

Send = Callable[[str, dict[str, str], dict[str, Any]], Mapping[str, Any]]


def endpoint_sender(endpoint: Any) -> Send:
    """Post a body to an :class:`~pytest_dsh_replay._endpoint.endpoint.Endpoint` in process."""

    def send(path: str, headers: dict[str, str], body: dict[str, Any]) -> Mapping[str, Any]:
        response = endpoint.handle("POST", path, headers, orjson.dumps(body))
        raw = b"".join(response.body)
        if response.status != 200:
            raise AssertionError(f"{path} answered {response.status}: {raw.decode()}")
        return orjson.loads(raw)  # type: ignore[no-any-return]

    return send


class WireAgent:
    """An agent: one conversation, tools run by itself, children of its own class.

    Args:
        send: How requests reach the model.
        dialect: The wire it speaks.
        identify: Send ``x-dsh-session-id`` / ``x-dsh-parent-session-id``.
        rewrite: Give the model's tool calls ids of its own (as some frameworks do).
        parallel: Run an answer's tool calls at once, in threads.
        parent: The agent that started it.
    """

    def __init__(
        self,
        send: Send,
        dialect: Dialect,
        *,
        identify: bool = False,
        rewrite: bool = False,
        parallel: bool = False,
        parent: WireAgent | None = None,
    ):
        self.send = send
        self.dialect = dialect
        self.identify = identify
        self.rewrite = rewrite and dialect.ids
        self.parallel = parallel
        self.parent = parent
        self.session_id = str(uuid.uuid4())
        self.messages: list[Message] = []
        self.latest: list[Message] = []  # the messages of its latest request
        self.children: list[WireAgent] = []
        self.answers: list[str] = []
        self._lock = threading.Lock()
        self._ids = 0

    def _child(self, messages: list[Message]) -> WireAgent:
        child = WireAgent(
            self.send, self.dialect, identify=self.identify, rewrite=self.rewrite,
            parallel=self.parallel, parent=self,
        )  # fmt: skip
        child.messages = list(messages)
        with self._lock:
            self.children.append(child)
        return child

    def _headers(self) -> dict[str, str]:
        if not self.identify:
            return {}
        headers = {"x-dsh-session-id": self.session_id}
        if self.parent is not None:
            headers["x-dsh-parent-session-id"] = self.parent.session_id
        return headers

    def _own_ids(self, calls: list[Call]) -> list[Call]:
        if not self.rewrite:
            return calls
        out = []
        for call in calls:
            self._ids += 1
            out.append(Call(f"mine-{self._ids}", call.name, call.arguments))
        return out

    def _tool(self, call: Call) -> str:
        arguments = json.loads(call.arguments or "{}")
        if call.name == "add":
            return "5"
        if call.name == "spawn":
            return self._child([]).run(arguments["task"])
        return self._child(self.latest).run(f"ASK {arguments['q']}")

    def run(self, prompt: str) -> str:
        """One turn: until the model answers without tool calls; returns its text."""
        self.messages.append(Message("user", prompt))
        while True:
            self.latest = list(self.messages)
            body = self.dialect.body("You plan.", self.messages)
            text, calls = self.dialect.answer(self.send(self.dialect.path, self._headers(), body))
            calls = self._own_ids(calls)
            self.messages.append(Message("assistant", text, calls))
            if not calls:
                self.answers.append(text)
                return text
            results = [""] * len(calls)
            if self.parallel and len(calls) > 1:

                def work(i: int, call: Call, results: list[str] = results) -> None:
                    results[i] = self._tool(call)

                threads = [threading.Thread(target=work, args=(i, c)) for i, c in enumerate(calls)]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            else:
                results = [self._tool(call) for call in calls]
            for call, result in zip(calls, results, strict=True):
                self.messages.append(Message("tool", result, call=call))

    def tree(self) -> Any:
        """What every agent answered, and its children's trees (sorted: threads race)."""
        return [self.answers, sorted((child.tree() for child in self.children), key=repr)]
