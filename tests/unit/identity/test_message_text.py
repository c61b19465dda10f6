"""A message's text has one reader, the request view's; the layers above ask it."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dsh_replay._check import transcript
from pytest_dsh_replay._identity import announce
from pytest_dsh_replay._identity.answers import ServedAnswer, quotes_answer
from pytest_dsh_replay._wire import request
from pytest_dsh_replay._wire.request import content_texts, message_text

BLOCKS: list[Any] = [
    {"type": "text", "text": "Paris"},
    {"type": "reasoning", "text": "think"},
    {"type": "image", "url": "x"},
    "not a block",
    {"type": "text", "text": " is the capital"},
    {"type": "text", "text": 7},  # no string: no text
]


def test_the_request_reader_reads_strings_and_blocks_of_any_shape() -> None:
    assert content_texts("hi") == ["hi"]
    assert content_texts("hi", "reasoning") == []
    assert content_texts(BLOCKS) == ["Paris", " is the capital"]
    assert content_texts(BLOCKS, "reasoning") == ["think"]
    assert content_texts(BLOCKS, kind=None) == ["Paris", "think", " is the capital"]
    assert content_texts(None) == content_texts({"text": "x"}) == []
    assert message_text({"role": "user", "content": BLOCKS}) == "Paris is the capital"
    assert message_text({"content": BLOCKS}, "\n") == "Paris\n is the capital"
    assert message_text("no message") == ""


def test_the_layers_above_ask_the_request_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each reader of a message's text reads it through ``_wire/request.py``."""
    asked: list[object] = []
    real = request.content_texts

    def spy(content: object, kind: str | None = "text") -> list[str]:
        asked.append(content)
        return real(content, kind)

    monkeypatch.setattr(request, "content_texts", spy)
    monkeypatch.setattr(transcript, "content_texts", spy)
    message = {"role": "assistant", "content": BLOCKS}
    served = ServedAnswer("Paris is the capital", (), frozenset())
    assert quotes_answer(message, served)
    assert asked == [BLOCKS]
    assert transcript._lines(BLOCKS) == "Paris\n is the capital"
    assert transcript._block_text(BLOCKS, "reasoning") == "think"
    assert asked[1:] == [BLOCKS, BLOCKS]
    result = {"content": [{"type": "tool-result", "content": BLOCKS}]}
    assert announce._result_texts(result) == ["Paris", "think", " is the capital"]
    assert asked[3:] == [[result["content"][0]], BLOCKS]
