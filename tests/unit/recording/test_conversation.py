"""Requests of the three shapes read as the dsh events of their conversation."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.corpus_support import CORPUS, require_corpus

from pytest_dsh_replay._format.reply import assemble_reply
from pytest_dsh_replay._identity.surface import surface_item
from pytest_dsh_replay._wire.request import read_request

SAMPLES = CORPUS.parent / "runtime-samples"


def sample_body(name: str) -> dict[str, Any]:
    require_corpus(SAMPLES)
    body: dict[str, Any] = json.loads((SAMPLES / name).read_text())["request"]["body"]
    return body


def kinds(request: dict[str, Any]) -> list[tuple[str, str]]:
    """(event type, the text of the item's text blocks) per item."""
    out = []
    for item in read_request(request).items:
        content = item.message["content"]
        if item.kind == "tool/result":
            content = content[0]["content"]
        out.append((item.kind, "|".join(b["text"] for b in content if b["type"] == "text")))
    return out


def test_the_runtime_s_anthropic_messages_body() -> None:
    body = sample_body("pair1-t5-main-turn2-tool-use.json")
    view = read_request(body)
    assert view.header is not None
    assert view.header["config"] == {
        "provider": "unknown",
        "model": "deepseek-flash",
        "reasoningEffort": "high",
        "maxTokens": 256000,
    }
    assert view.header["system"].startswith("You are an AI agent powered by DeepSeek Harness.")
    tools = view.header["tools"]
    assert [t["name"] for t in tools] == [t["name"] for t in body["tools"]]
    assert tools[0]["parameters"] == body["tools"][0]["input_schema"]
    assert "input_schema" not in tools[0]
    got = kinds(body)
    assert [k for k, _ in got] == ["user/message", "assistant/message", "user/message"]
    assert got[0][1].startswith("WARMUP: remember the codeword MARMALADE.|Current runtime")
    assert got[1][1] == "OK remembered"
    assert got[2][1] == "MAIN_TASK: delegate to a spawn and a fork child."


def test_the_runtime_s_openai_chat_completions_body() -> None:
    body = sample_body("pair3-t7-openai-tool-calls.json")
    view = read_request(body)
    assert view.header is not None
    assert view.header["config"] == {
        "provider": "unknown",
        "model": "fake-model",
        "maxTokens": 32768,
    }
    assert view.header["system"] == body["messages"][0]["content"]
    assert view.header["tools"][0] == {
        "name": "bash",
        "description": body["tools"][0]["function"]["description"],
        "parameters": body["tools"][0]["function"]["parameters"],
    }
    assert [k for k, _ in kinds(body)] == [
        "user/message",
        "user/message",
        "assistant/message",
        "user/message",
    ]


TOOL_CALL = {"type": "tool-call", "id": "call-1", "name": "add", "arguments": '{"a":2,"b":3}'}


def test_tool_rounds_in_every_shape_read_the_same() -> None:
    openai = {
        "messages": [
            {"role": "user", "content": "add 2 and 3"},
            {
                "role": "assistant",
                "content": None,
                "reasoning_content": "easy",
                "tool_calls": [
                    {
                        "id": "call-1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call-1", "content": "5"},
        ]
    }
    anthropic = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "add 2 and 3"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "easy", "signature": "x"},
                    {"type": "tool_use", "id": "call-1", "name": "add", "input": {"a": 2, "b": 3}},
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call-1", "content": "5"}],
            },
        ]
    }
    dsh = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "add 2 and 3"}]},
            {"role": "assistant", "content": [TOOL_CALL]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "call-1",
                        "content": [{"type": "text", "text": "5"}],
                        "isError": False,
                    }
                ],
            },
        ]
    }
    views = [read_request(r) for r in (openai, anthropic, dsh)]
    keys = [[item.key for item in view.items] for view in views]
    assert keys[0] == keys[1] == keys[2]
    for view in views:
        assert view.header is None  # nothing but messages
        assert [i.kind for i in view.items] == ["user/message", "assistant/message", "tool/result"]
        (result,) = view.items[2].message["content"]
        assert result == {
            "type": "tool-result",
            "toolCallId": "call-1",
            "content": [{"type": "text", "text": "5"}],
            "isError": False,
        }
        assert view.items[2].message["source"] == {"kind": "tool", "callId": "call-1"}
    # The reasoning the client sent back is kept in the logged message.
    assert views[1].items[1].message["content"][0] == {"type": "reasoning", "text": "easy"}


def test_a_user_message_s_tool_results_come_first_then_its_text() -> None:
    request = {
        "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and also"},
                    {"type": "tool_result", "tool_use_id": "a", "content": [], "is_error": True},
                    {"type": "tool_result", "tool_use_id": "b", "content": "ok"},
                ],
            }
        ],
    }
    view = read_request(request)
    assert view.header == {
        "config": {"provider": "unknown", "model": "unknown"},
        "system": "one\n\ntwo",
    }
    assert [(i.kind, i.call_id) for i in view.items] == [
        ("tool/result", "a"),
        ("tool/result", "b"),
        ("user/message", None),
    ]
    assert view.items[0].message["content"][0]["isError"] is True


def test_system_and_developer_messages_join_the_system_prompt() -> None:
    request = {
        "model": "m",
        "temperature": 0.5,
        "stop": ["\n"],
        "reasoning_effort": "low",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "developer", "content": [{"type": "text", "text": "later rule"}]},
        ],
    }
    view = read_request(request)
    assert view.header == {
        "config": {
            "provider": "unknown",
            "model": "m",
            "reasoningEffort": "low",
            "temperature": 0.5,
            "stop": ["\n"],
        },
        "system": "be brief\n\nlater rule",
    }
    assert [i.kind for i in view.items] == ["user/message"]


def test_values_that_are_not_json_are_logged_as_strings() -> None:
    request = {"messages": [{"role": "user", "content": [{"type": "odd", "value": {1, 2}}]}]}
    (item,) = read_request(request).items
    assert item.message["content"] == [{"type": "odd", "value": str({1, 2})}]
    assert read_request({"messages": "not a list"}).items == []


def test_logged_events_read_back_as_the_request_s_items() -> None:
    request = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "r"}]},
        ]
    }
    view = read_request(request)
    events: list[Any] = [
        {"type": "user/message", "data": {**view.items[0].message, "id": "u"}},
        {"type": "assistant/message", "data": {"message": {**view.items[1].message, "id": "a"}}},
        {"type": "tool/result", "data": {"message": {**view.items[2].message, "id": "t"}}},
        {"type": "turn/end", "data": {"turn": 1}},
    ]
    back = [surface_item(e) for e in events]
    assert [i.key if i else None for i in back] == [i.key for i in view.items] + [None]


@pytest.mark.parametrize(
    ("chunks", "content", "kind"),
    [
        (
            [
                {"type": "block-start", "index": 0, "blockType": "reasoning"},
                {"type": "reasoning-delta", "index": 0, "text": "hm"},
                {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "hm"}},
                {"type": "block-start", "index": 1, "blockType": "tool-call"},
                {
                    "type": "tool-call-delta",
                    "index": 1,
                    "id": "c",
                    "name": "f",
                    "argumentsDelta": "{",
                },
                {"type": "tool-call-delta", "index": 1, "id": "c", "argumentsDelta": "}"},
                {"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}},
                {"type": "finish", "reason": {"kind": "tool-calls"}, "replayState": {"r": 1}},
            ],
            [
                {"type": "reasoning", "text": "hm"},
                {"type": "tool-call", "id": "c", "name": "f", "arguments": "{}"},
            ],
            "tool-calls",
        ),
        (
            [
                {"type": "block-start", "index": 0, "blockType": "text"},
                {"type": "text-delta", "index": 0, "text": "par"},
                {"type": "text-delta", "index": 0, "text": "tial"},
            ],
            [{"type": "text", "text": "partial"}],
            None,
        ),
    ],
)
def test_replies_assemble_from_block_ends_and_unfinished_deltas(
    chunks: list[Any], content: list[Any], kind: str | None
) -> None:
    reply = assemble_reply(chunks)
    assert reply.content == content
    assert reply.finish_kind == kind
    if kind is not None:
        assert reply.usage == {"inputTokens": 1, "outputTokens": 2}
        assert reply.replay_state == {"r": 1}
        assert reply.tool_calls == content[1:]


def test_an_echoed_assistant_turn_matches_the_logged_one() -> None:
    """Clients drop reasoning and re-serialize arguments: still the same message."""
    logged = assemble_reply(
        [
            {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "r"}},
            {"type": "block-end", "index": 1, "block": {"type": "text", "text": "t"}},
            {"type": "block-end", "index": 2, "block": TOOL_CALL},
            {"type": "finish", "reason": {"kind": "tool-calls"}},
        ]
    )
    event = {
        "type": "assistant/message",
        "data": {"message": {"role": "assistant", "content": logged.content}},
    }
    echoed = {
        "role": "assistant",
        "content": "t",
        "tool_calls": [{"id": "call-1", "function": {"name": "add", "arguments": '{"b":3,"a":2}'}}],
    }
    back = surface_item(event)
    assert back is not None
    assert back.key == read_request({"messages": [echoed]}).items[0].key
