"""A small agent loop that calls the model the way the dsh harness does.

Per turn it streams from the model with its session id, assembles the chunks into
content blocks, runs tool calls (``subagent`` starts a spawn child, ``subagent_fork`` a
fork child that inherits the conversation so far; each child runs one turn), feeds the
tool results back and continues until the model finishes with ``stop``. A finish with
``CONTEXT_WINDOW_EXCEEDED`` triggers a compaction call and a retry; other error finishes
are retried. It knows nothing about recordings: pointed at a ``ReplayModel`` it replays.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

MAX_ATTEMPTS = 3


def assemble(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Blocks in index order (from ``block-end``) and the finish reason."""
    blocks: dict[int, dict[str, Any]] = {}
    reason: dict[str, Any] = {"kind": "missing"}
    for chunk in chunks:
        if chunk["type"] == "block-end":
            blocks[chunk["index"]] = chunk["block"]
        elif chunk["type"] == "finish":
            reason = chunk["reason"]
    return [blocks[i] for i in sorted(blocks)], reason


def text_of(blocks: list[dict[str, Any]]) -> str:
    return "".join(b["text"] for b in blocks if b["type"] == "text")


class Agent:
    """Runs turns of one session (and its children) against ``model``."""

    def __init__(self, model: Any, *, session_id: str | None = None, parent: str | None = None):
        self.model = model
        self.session_id = session_id or str(uuid.uuid4())
        self.parent = parent
        self.messages: list[dict[str, Any]] = []
        self.children: list[Agent] = []
        self.turn_texts: list[str] = []
        self._pending: list[dict[str, Any]] = []
        self.compactions = 0
        self.failed_calls = 0
        self._turn_start = 0

    def call(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(
            self.model.stream(
                {"messages": messages},
                session_id=self.session_id,
                parent_session_id=self.parent,
            )
        )

    async def acall(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        stream = self.model.astream(
            {"messages": messages}, session_id=self.session_id, parent_session_id=self.parent
        )
        return [chunk async for chunk in stream]

    def turn(self, prompt: str) -> str:
        """Run one turn to its ``stop``, synchronously."""
        steps = self._steps(prompt)
        chunks = None
        while True:
            try:
                request = steps.send(chunks)
            except StopIteration as done:
                return str(done.value)
            chunks = self.call(request) if request is not None else self.run_children()

    async def aturn(self, prompt: str) -> str:
        """Run one turn to its ``stop`` through ``astream``."""
        steps = self._steps(prompt)
        chunks = None
        while True:
            try:
                request = steps.send(chunks)
            except StopIteration as done:
                return str(done.value)
            chunks = (
                await self.acall(request) if request is not None else await self.arun_children()
            )

    def _steps(self, prompt: str) -> Any:
        """The turn as a generator: yields each request, receives its chunks."""
        self._turn_start = len(self.messages)
        self.messages.append({"role": "user", "content": prompt})
        attempts = 0
        while True:
            blocks, reason = assemble((yield self.messages))
            if reason["kind"] in ("error", "aborted"):
                attempts += 1
                self.failed_calls += 1
                assert attempts < MAX_ATTEMPTS, f"gave up after {attempts} failed calls"
                if reason["failure"]["code"] == "CONTEXT_WINDOW_EXCEEDED":
                    summary, _ = assemble(
                        (yield [{"role": "user", "content": "Summarize."}, *self.messages])
                    )
                    self.compactions += 1
                    self.messages = [{"role": "user", "content": text_of(summary)}]
                continue
            attempts = 0
            self.messages.append({"role": "assistant", "content": blocks})
            calls = [b for b in blocks if b["type"] == "tool-call"]
            if reason["kind"] == "stop" or not calls:
                self.turn_texts.append(text_of(blocks))
                return text_of(blocks)
            self._pending = calls
            results = yield None  # the driver runs the tool calls (children may stream)
            for call, result in zip(calls, results, strict=True):
                self.messages.append(
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool-result",
                                "toolCallId": call["id"],
                                "content": [{"type": "text", "text": result}],
                            }
                        ],
                    }
                )

    def _child(self, call: dict[str, Any]) -> tuple[Agent | None, dict[str, Any]]:
        args = json.loads(call["arguments"] or "{}")
        if call["name"] not in ("subagent", "subagent_fork"):
            return None, args
        child = Agent(self.model, parent=self.session_id)
        if call["name"] == "subagent_fork":
            child.messages = list(self.messages[: self._turn_start])  # completed turns only
        self.children.append(child)
        return child, args

    def run_children(self) -> list[str]:
        results = []
        for call in self._pending:
            child, args = self._child(call)
            results.append(child.turn(args["prompt"]) if child else f"ran {call['name']}")
        return results

    async def arun_children(self) -> list[str]:
        results = []
        for call in self._pending:
            child, args = self._child(call)
            results.append(await child.aturn(args["prompt"]) if child else f"ran {call['name']}")
        return results
