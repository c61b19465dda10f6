"""`tool_call_marks`: a call's tool calls, without assembling an answer that has none.

Issue 45 (per-call cost): every served call asks which tool calls it answered with;
most answers are text, and the chunk assembler ran over every chunk of them to find
none. A call with no ``tool-call-delta`` chunk and no ended ``tool-call`` block now
gives ``()`` at once; any other call is assembled as before, with the same marks.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.chunks import STOP, add_call, text_call

from pytest_dsh_replay._format.reply import assemble_reply
from pytest_dsh_replay._identity import answers
from pytest_dsh_replay._identity.answers import ToolCallMark, tool_call_marks


def assembled_marks(chunks: list[dict[str, Any]]) -> tuple[ToolCallMark, ...]:
    """The marks as the assembler gives them (what `tool_call_marks` must equal)."""
    return tuple(
        ToolCallMark(
            str(block.get("id") or ""),
            str(block.get("name") or ""),
            str(block.get("arguments") or ""),
        )
        for block in assemble_reply(chunks).tool_calls
    )


def test_a_text_answer_is_not_assembled(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(chunks: object) -> None:
        raise AssertionError("a text answer was assembled to find its tool calls")

    monkeypatch.setattr(answers, "assemble_reply", refuse)
    chunks = text_call("It is 5.", usage={"inputTokens": 3, "outputTokens": 4})
    assert tool_call_marks(chunks) == ()
    assert tool_call_marks(iter(chunks)) == ()  # any iterable


def test_a_tool_call_answer_is_assembled() -> None:
    chunks = add_call("call_1")
    assert tool_call_marks(chunks) == (ToolCallMark("call_1", "add", '{"a": 2, "b": 3}'),)
    assert tool_call_marks(iter(chunks)) == tool_call_marks(chunks)


def test_an_ended_tool_call_block_alone_is_a_tool_call() -> None:
    block = {"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"}
    chunks = [{"type": "block-end", "index": 0, "block": block}, dict(STOP)]
    assert tool_call_marks(chunks) == (ToolCallMark("c", "n", "{}"),)


_INDEX = st.integers(min_value=0, max_value=2)
_TEXT = st.text(alphabet="ab{}", max_size=3)
_CHUNK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text-delta"), "index": _INDEX, "text": _TEXT}),
    st.fixed_dictionaries({"type": st.just("reasoning-delta"), "index": _INDEX, "text": _TEXT}),
    st.fixed_dictionaries(
        {"type": st.just("tool-call-delta"), "index": _INDEX, "argumentsDelta": _TEXT},
        optional={"id": st.sampled_from(["", "c1", "c2"]), "name": st.sampled_from(["", "f"])},
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("block-start"),
            "index": _INDEX,
            "blockType": st.sampled_from(["text", "tool-call"]),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.just("block-end"),
            "index": _INDEX,
            "block": st.one_of(
                st.fixed_dictionaries({"type": st.just("text"), "text": _TEXT}),
                st.fixed_dictionaries(
                    {"type": st.just("tool-call"), "id": _TEXT, "name": _TEXT, "arguments": _TEXT}
                ),
            ),
        }
    ),
    st.just({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 1}}),
    st.just(dict(STOP)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_CHUNK, max_size=12))
def test_the_marks_are_the_assembled_ones(chunks: list[dict[str, Any]]) -> None:
    assert tool_call_marks(chunks) == assembled_marks(chunks)


@pytest.mark.parametrize("wrap", [dict, MappingProxyType], ids=["dict", "other-mapping"])
def test_tool_calls_are_found_in_any_mapping(wrap: Any) -> None:
    # The chunks' types are read with dict.get mapped over them; a chunk that is another
    # mapping is read with its own get, with the same answer.
    block = {"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"}
    text_end = {"type": "block-end", "index": 0, "block": {"type": "text", "text": "a"}}
    tool_end = {"type": "block-end", "index": 1, "block": block}
    for chunks, found in (
        ([text_end, dict(STOP)], False),
        ([text_end, tool_end, dict(STOP)], True),  # the second block-end is looked into
        ([{"type": "tool-call-delta", "index": 0, "argumentsDelta": "{"}], True),
        ([{"text": "no type"}, dict(STOP)], False),
    ):
        assert answers._builds_tool_calls([wrap(chunk) for chunk in chunks]) is found
