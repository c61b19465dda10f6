"""Agents written only against the ``openai`` and ``anthropic`` SDKs: the code under test.

Nothing here knows about recordings: each agent is given an SDK client, exactly as it
would be in production, and streams with tool calls. Tools: ``add`` (two integers),
``subagent`` (a spawn child: a fresh conversation, run in a thread, or as a concurrent
task by the async agents) and ``subagent_fork`` (a fork child: it starts from the
parent's completed turns). Children are agents of the same class.

``identify=True`` adds the ``x-dsh-session-id`` / ``x-dsh-parent-session-id`` headers
to every request (any client can, through ``extra_headers``); without them the endpoint
tells sessions apart by content alone.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from typing import Any

MODEL = "scripted"
SCHEMAS = {
    "add": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    "subagent": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    "subagent_fork": {"type": "object", "properties": {"prompt": {"type": "string"}}},
}
OPENAI_TOOLS = [
    {"type": "function", "function": {"name": name, "parameters": schema}}
    for name, schema in SCHEMAS.items()
]
ANTHROPIC_TOOLS = [{"name": name, "input_schema": schema} for name, schema in SCHEMAS.items()]

# The two turns the SDK agent tests run, and what the agent answers to each.
TURNS = [
    "Remember: the codeword is SAFFRON.",
    "".join(
        f"[[tool {name} {json.dumps(arguments)}]]"
        for name, arguments in (
            ("subagent", {"prompt": "Reply ALPHA."}),
            ("subagent_fork", {"prompt": "Recall the codeword."}),
            ("add", {"a": 2, "b": 3}),
        )
    ),
]
ANSWERS = [
    "echo: Remember: the codeword is SAFFRON.",
    "tool results: echo: Reply ALPHA.; echo: Recall the codeword.; 5",
]


class _Agent:
    """What both SDK agents share: identity, children, tools."""

    def __init__(self, client: Any, *, identify: bool, parent: _Agent | None = None):
        self.client = client
        self.identify = identify
        self.session_id = str(uuid.uuid4())
        self.parent = parent
        self.messages: list[dict[str, Any]] = []
        self.completed = 0  # messages of completed turns (a fork copies these)
        self.children: list[_Agent] = []
        self.answers: list[str] = []

    def headers(self) -> dict[str, str]:
        if not self.identify:
            return {}
        headers = {"x-dsh-session-id": self.session_id}
        if self.parent is not None:
            headers["x-dsh-parent-session-id"] = self.parent.session_id
        return headers

    def child(self, name: str) -> _Agent:
        child = type(self)(self.client, identify=self.identify, parent=self)
        if name == "subagent_fork":
            child.messages = list(self.messages[: self.completed])
            child.completed = len(child.messages)
        self.children.append(child)
        return child

    @staticmethod
    def add(arguments: dict[str, Any]) -> str:
        return str(int(arguments["a"]) + int(arguments["b"]))


class OpenAIAgent(_Agent):
    """A chat-completions agent (``openai.OpenAI`` or ``openai.AsyncOpenAI``)."""

    def _request(self) -> dict[str, Any]:
        return {
            "model": MODEL,
            "messages": self.messages,
            "tools": OPENAI_TOOLS,
            "stream": True,
            "stream_options": {"include_usage": True},
            "extra_headers": self.headers(),
        }

    @staticmethod
    def _collect(text: list[str], calls: dict[int, dict[str, Any]], chunk: Any) -> None:
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                text.append(delta.content)
            for call in delta.tool_calls or ():
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] = call.id or entry["id"]
                if call.function is not None:
                    entry["name"] = call.function.name or entry["name"]
                    entry["arguments"] += call.function.arguments or ""

    def _answered(self, text: list[str], calls: dict[int, dict[str, Any]]) -> list[Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
        if calls:
            message["tool_calls"] = [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in (calls[k] for k in sorted(calls))
            ]  # fmt: skip
        self.messages.append(message)
        return [calls[k] for k in sorted(calls)]

    def _results(self, calls: list[Any], results: list[str]) -> None:
        for call, result in zip(calls, results, strict=True):
            self.messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})

    def _end_turn(self, text: list[str]) -> str:
        self.completed = len(self.messages)
        self.answers.append("".join(text))
        return "".join(text)

    def run(self, prompt: str) -> str:
        """One turn: stream until the model stops calling tools (children in threads)."""
        self.messages.append({"role": "user", "content": prompt})
        while True:
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            for chunk in self.client.chat.completions.create(**self._request()):
                self._collect(text, calls, chunk)
            todo = self._answered(text, calls)
            if not todo:
                return self._end_turn(text)
            results: list[str] = [""] * len(todo)
            threads = []
            for i, call in enumerate(todo):
                arguments = json.loads(call["arguments"] or "{}")
                if call["name"] == "add":
                    results[i] = self.add(arguments)
                    continue
                child = self.child(call["name"])

                def work(
                    i: int = i,
                    child: _Agent = child,
                    prompt: str = arguments["prompt"],
                    results: list[str] = results,
                ) -> None:
                    results[i] = child.run(prompt)  # type: ignore[attr-defined]

                if call["name"] == "subagent":  # a spawn child runs in its own thread
                    threads.append(threading.Thread(target=work))
                    threads[-1].start()
                else:
                    work()
            for thread in threads:
                thread.join()
            self._results(todo, results)

    async def arun(self, prompt: str) -> str:
        """The async form of :meth:`run` (children as concurrent tasks)."""
        self.messages.append({"role": "user", "content": prompt})
        while True:
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            async for chunk in await self.client.chat.completions.create(**self._request()):
                self._collect(text, calls, chunk)
            todo = self._answered(text, calls)
            if not todo:
                return self._end_turn(text)
            jobs = []
            for call in todo:
                arguments = json.loads(call["arguments"] or "{}")
                if call["name"] == "add":
                    jobs.append(asyncio.sleep(0, self.add(arguments)))
                else:
                    jobs.append(self.child(call["name"]).arun(arguments["prompt"]))  # type: ignore[attr-defined]
            self._results(todo, list(await asyncio.gather(*jobs)))


class AnthropicAgent(_Agent):
    """A Messages agent (``anthropic.Anthropic`` or ``anthropic.AsyncAnthropic``)."""

    def _request(self) -> dict[str, Any]:
        return {
            "model": MODEL,
            "max_tokens": 1024,
            "messages": self.messages,
            "tools": ANTHROPIC_TOOLS,
            "extra_headers": self.headers(),
        }

    def _answered(self, message: Any) -> list[Any]:
        content = [block.model_dump(exclude_none=True) for block in message.content]
        for block in content:
            block.pop("citations", None)
        self.messages.append({"role": "assistant", "content": content})
        return [block for block in message.content if block.type == "tool_use"]

    def _results(self, calls: list[Any], results: list[str]) -> None:
        self.messages.append(
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": call.id, "content": result}
                for call, result in zip(calls, results, strict=True)
            ]}
        )  # fmt: skip

    def _end_turn(self, message: Any) -> str:
        self.completed = len(self.messages)
        text = "".join(block.text for block in message.content if block.type == "text")
        self.answers.append(text)
        return text

    def run(self, prompt: str) -> str:
        """One turn: stream until the model stops calling tools (children in threads)."""
        self.messages.append({"role": "user", "content": prompt})
        while True:
            with self.client.messages.stream(**self._request()) as stream:
                message = stream.get_final_message()
            todo = self._answered(message)
            if not todo:
                return self._end_turn(message)
            results: list[str] = [""] * len(todo)
            threads = []
            for i, call in enumerate(todo):
                if call.name == "add":
                    results[i] = self.add(call.input)
                    continue
                child = self.child(call.name)

                def work(
                    i: int = i,
                    child: _Agent = child,
                    prompt: str = call.input["prompt"],
                    results: list[str] = results,
                ) -> None:
                    results[i] = child.run(prompt)  # type: ignore[attr-defined]

                if call.name == "subagent":
                    threads.append(threading.Thread(target=work))
                    threads[-1].start()
                else:
                    work()
            for thread in threads:
                thread.join()
            self._results(todo, results)

    async def arun(self, prompt: str) -> str:
        """The async form of :meth:`run` (children as concurrent tasks)."""
        self.messages.append({"role": "user", "content": prompt})
        while True:
            async with self.client.messages.stream(**self._request()) as stream:
                message = await stream.get_final_message()
            todo = self._answered(message)
            if not todo:
                return self._end_turn(message)
            jobs = []
            for call in todo:
                if call.name == "add":
                    jobs.append(asyncio.sleep(0, self.add(call.input)))
                else:
                    jobs.append(self.child(call.name).arun(call.input["prompt"]))  # type: ignore[attr-defined]
            self._results(todo, list(await asyncio.gather(*jobs)))
