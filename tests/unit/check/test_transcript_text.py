"""A transcript shows control characters as pictures without confusing them with text."""

from __future__ import annotations

from typing import Any

from pytest_dsh_replay._check.transcript import render_transcript
from pytest_dsh_replay._format.events import SessionHeader


class Log:
    def __init__(self, header: SessionHeader, events: list[dict[str, Any]]):
        self.header = header
        self.events = events


def said(text: str) -> Log:
    header = SessionHeader.from_json({"type": "session", "id": "p", "createdAt": 1})
    events = [{"type": "user/message", "seq": 0, "time": 0, "data": {"content": text}}]
    return Log(header, events)


def test_a_literal_control_picture_and_a_control_give_two_transcripts() -> None:
    real, literal = render_transcript([said("a\rb")]), render_transcript([said("a\u240db")])
    assert real != literal
    assert "a\u240db" in real
    assert "a<U+240D>b" in literal
    escaped = render_transcript([said("x<U+2028>")])
    assert escaped != render_transcript([said("x\u2028")])
    assert "x<U+003C>U+2028>" in escaped
