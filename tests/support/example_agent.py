"""A small but real agent, the code under test of the project's own example scenarios.

It talks to a streaming model (``dsh_replay.model``) and persists every session in a
session store (``dsh_replay.sessions``) the way the dsh harness does: ``turn/start``,
``step/start``, the user message, the model's chunks (logged by the model wrapper),
``assistant/message``, ``tool/call`` and ``tool/result``, ``step/end``, ``turn/end``.

Tools: ``lookup`` (a fixed table), ``add``, ``subagent`` (a spawn child: a new session
with ``parentSession`` that runs one turn) and ``subagent_fork`` (a fork child: a session
seeded with the parent's completed-turn prefix). A call that finishes with an error is
retried under the same turn and step. Everything the agent does is deterministic given
the model's replies, so a replay writes the same logs as the recording.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pytest_dsh_replay import completed_turn_prefix

SYSTEM = "You are a careful assistant. Use tools when they help; answer briefly."
TOOLS = [
    {
        "name": "lookup",
        "description": "Look a key up in the project's fact table.",
        "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}},
    },
    {
        "name": "add",
        "description": "Add two integers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        },
    },
    {
        "name": "subagent",
        "description": "Delegate a task to a fresh subagent; returns its answer.",
        "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    },
    {
        "name": "subagent_fork",
        "description": "Delegate to a subagent that remembers this conversation.",
        "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    },
]
FACTS = {"capital_of_france": "Paris", "answer": "42", "codeword": "MARMALADE"}
MAX_ATTEMPTS = 3


def _message(role: str, content: list[dict[str, Any]], source: dict[str, Any]) -> dict[str, Any]:
    return {"content": content, "source": source, "role": role, "id": str(uuid.uuid4())}


def _assemble(chunks: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    blocks: dict[int, dict[str, Any]] = {}
    reason: dict[str, Any] = {"kind": "missing"}
    for chunk in chunks:
        if chunk["type"] == "block-end":
            blocks[chunk["index"]] = chunk["block"]
        elif chunk["type"] == "finish":
            reason = chunk["reason"]
    return [blocks[i] for i in sorted(blocks)], reason


class ExampleAgent:
    """One agent session (and, through its tools, its children)."""

    def __init__(self, model: Any, sessions: Any, session: Any | None = None, *, depth: int = 0):
        self.model = model
        self.sessions = sessions
        self.session = session if session is not None else sessions.create()
        self.depth = depth
        self.turn_number = max(
            (e["data"]["turn"] for e in self.session.events if e["type"] == "turn/end"),
            default=0,
        )
        self.children: list[ExampleAgent] = []

    # --- the conversation as the model sees it -------------------------------------------

    def messages(self) -> list[dict[str, Any]]:
        out = []
        for event in self.session.events:
            if event["type"] == "user/message":
                out.append({"role": "user", "content": event["data"]["content"]})
            elif event["type"] in ("assistant/message", "tool/result"):
                message = event["data"]["message"]
                out.append({"role": message["role"], "content": message["content"]})
        return out

    def request(self) -> dict[str, Any]:
        return {"system": SYSTEM, "tools": TOOLS, "messages": self.messages()}

    # --- turns ---------------------------------------------------------------------------

    def run(self, prompt: str) -> str:
        """Run one turn to its final answer (sync)."""
        steps = self._turn(prompt)
        reply: list[Any] | None = None
        while True:
            try:
                kind, payload = steps.send(reply)
            except StopIteration as done:
                return str(done.value)
            if kind == "call":
                reply = list(self.model.stream(self.request(), **payload))
            else:
                reply = [self._child(payload[0]).run(payload[1])]

    async def arun(self, prompt: str) -> str:
        """Run one turn to its final answer through ``astream``."""
        steps = self._turn(prompt)
        reply: list[Any] | None = None
        while True:
            try:
                kind, payload = steps.send(reply)
            except StopIteration as done:
                return str(done.value)
            if kind == "call":
                reply = [c async for c in self.model.astream(self.request(), **payload)]
            else:
                reply = [await self._child(payload[0]).arun(payload[1])]

    def _turn(self, prompt: str) -> Any:
        self.turn_number += 1
        turn = self.turn_number
        s = self.session
        s.append("turn/start", {"turn": turn})
        step = 0
        while True:
            step += 1
            s.append("step/start", {"turn": turn, "step": step})
            if step == 1:
                s.append(
                    "user/message",
                    _message("user", [{"type": "text", "text": prompt}], {"kind": "user"}),
                    surfaceOp="append",
                )
            for attempt in range(1, MAX_ATTEMPTS + 1):
                first = len(s.events)
                kwargs = {"session_id": s.id, "turn": turn, "step": step}
                if s.header.parent_session is not None:
                    kwargs["parent_session_id"] = s.header.parent_session
                chunks = yield "call", kwargs
                blocks, reason = _assemble(chunks)
                if reason["kind"] != "error" or attempt == MAX_ATTEMPTS:
                    break
                s.append(
                    "llm/retry",
                    {"turn": turn, "step": step, "retry": attempt, "failure": reason["failure"]},
                )
            chunk_seqs = [e["seq"] for e in s.events[first:] if e["type"] == "assistant/chunk"]
            s.append(
                "assistant/message",
                {
                    "turn": turn,
                    "step": step,
                    "message": _message(
                        "assistant",
                        blocks,
                        {"kind": "model", "provider": "example", "model": "scripted"},
                    ),
                },
                sourceEventSeqs=chunk_seqs,
                surfaceOp="append",
            )
            calls = [b for b in blocks if b["type"] == "tool-call"]
            if reason["kind"] != "tool-calls" or not calls:
                s.append("step/end", {"turn": turn, "step": step})
                kind = "completed" if reason["kind"] == "stop" else "error"
                end: dict[str, Any] = {"kind": kind}
                if kind == "error":
                    end["error"] = reason["failure"]
                s.append("turn/end", {"turn": turn, "reason": end})
                return "".join(b["text"] for b in blocks if b["type"] == "text")
            for call in calls:
                call_event = s.append(
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "callId": call["id"],
                        "name": call["name"],
                        "arguments": call["arguments"],
                    },
                )
                args = json.loads(call["arguments"] or "{}")
                if call["name"] in ("subagent", "subagent_fork"):
                    (result,) = yield "child", (call["name"], args.get("prompt", ""))
                else:
                    result = self._tool(call["name"], args)
                s.append(
                    "tool/result",
                    {
                        "turn": turn,
                        "step": step,
                        "message": _message(
                            "user",
                            [
                                {
                                    "type": "tool-result",
                                    "toolCallId": call["id"],
                                    "content": [{"type": "text", "text": result}],
                                    "isError": False,
                                }
                            ],
                            {"kind": "tool", "callId": call["id"]},
                        ),
                    },
                    sourceEventSeqs=[call_event["seq"]],
                    surfaceOp="append",
                )
            s.append("step/end", {"turn": turn, "step": step})

    # --- tools ---------------------------------------------------------------------------

    @staticmethod
    def _tool(name: str, args: dict[str, Any]) -> str:
        if name == "lookup":
            return FACTS.get(str(args.get("key")), "unknown key")
        if name == "add":
            return str(int(args["a"]) + int(args["b"]))
        return f"unknown tool {name}"

    def _child(self, name: str) -> ExampleAgent:
        meta: dict[str, Any] = {
            "parentSession": self.session.id,
            "origin": "subagent",
            "delegationDepth": self.depth + 1,
        }
        seed = completed_turn_prefix(self.session) if name == "subagent_fork" else None
        if seed is not None:
            meta["seedLength"] = len(seed)
        session = self.sessions.create(seed=seed, meta=meta)
        child = ExampleAgent(self.model, self.sessions, session, depth=self.depth + 1)
        self.children.append(child)
        return child
