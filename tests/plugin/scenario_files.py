"""Small scenario directories for plugin tests, written with the project's own writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_dsh_replay._events import SessionHeader
from pytest_dsh_replay._scenario import write_scenario


class Log:
    def __init__(self, header: SessionHeader, events: list[dict[str, Any]]):
        self.header = header
        self.events = events


def call_events(turn: int, text: str, start: int) -> list[dict[str, Any]]:
    chunks = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": text},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    return [
        {
            "type": "assistant/chunk",
            "seq": start + i,
            "time": 0,
            "data": {"turn": turn, "step": 1, "chunk": c},
        }
        for i, c in enumerate(chunks)
    ]


def make_scenario(directory: Path, **sessions: list[str]) -> Path:
    """Write a scenario: ``primary=[texts]`` plus children ``child1=[...]``, each text a call."""
    logs = []
    for n, (name, texts) in enumerate(sessions.items()):
        sid = "p" if name == "primary" else name
        header = SessionHeader(
            id=sid, created_at=n, parent_session=None if name == "primary" else "p"
        )
        events: list[dict[str, Any]] = []
        for turn, text in enumerate(texts, start=1):
            events.extend(call_events(turn, text, len(events)))
        logs.append(Log(header, events))
    write_scenario(directory, logs)
    return directory
