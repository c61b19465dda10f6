"""The identity rules recording and replay share (docs/scenarios.md#binding)."""

from __future__ import annotations

from typing import Any

from pytest_dsh_replay._endpoint.routing import Router
from pytest_dsh_replay._identity.announce import announces, announcing, argument_texts
from pytest_dsh_replay._identity.answers import (
    ServedAnswer,
    ToolCallMark,
    is_served_answer,
    served_answer,
)
from pytest_dsh_replay._identity.lineage import completed_turns_end, fork_seed_length
from pytest_dsh_replay._scripts.builder import ScriptBuilder
from pytest_dsh_replay._wire.request import RequestView, opening_prefixes, opening_run

# --- announcement -----------------------------------------------------------------------


def test_a_tool_call_announces_a_child_whose_opening_is_one_of_its_arguments() -> None:
    call = ToolCallMark("c1", "subagent", '{"description": "x", "prompt": "Say  ALPHA.\\n"}')
    assert announces(call, ["Say ALPHA."])
    # Up to a block boundary: the dsh runtime adds the parent's id as a second block.
    assert announces(call, opening_prefixes([_user("Say ALPHA.", 'Parent is "p".')]))
    assert not announces(call, ["Say BETA."])


def test_only_equality_announces_a_parent_task_holding_the_childs_does_not() -> None:
    # A request that repeats its parent's task holds every task the parent hands out.
    call = ToolCallMark("c1", "spawn", '{"task": "TASK child: []"}')
    assert not announces(call, ['TASK parent: [[{"task": "TASK child: []"}]]'])


def test_arguments_are_searched_at_any_depth_and_text_that_is_no_json_counts_whole() -> None:
    assert argument_texts('{"a": [{"b": "deep"}], "n": 1}') == ["deep"]
    assert argument_texts("not json") == ["not json"]
    assert argument_texts("{}") == []


def test_each_child_links_to_the_earliest_tool_call_not_linked_before() -> None:
    twice = ToolCallMark("a", "subagent", '{"prompt": "go"}')
    calls = [(twice,), (ToolCallMark("b", "add", "{}"), twice)]
    first = announcing(calls, ["go"])
    assert first is not None
    assert first.key == (1, 0)
    second = announcing(calls, ["go"], {first.key})
    assert second is not None
    assert second.key == (2, 1)
    assert announcing(calls, ["go"], {first.key, second.key}) is None


# --- answers ------------------------------------------------------------------------------


def _assistant(call_id: str, arguments: str, text: str | None = None) -> dict[str, Any]:
    function = {"name": "lookup", "arguments": arguments}
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"id": call_id, "function": function}],
    }


SERVED = ServedAnswer(
    "", (ToolCallMark("call_1", "lookup", '{"q": 1, "r": [2]}'),), frozenset({"call_1"})
)


def test_a_re_sent_answer_is_the_served_one_by_its_ids() -> None:
    assert is_served_answer(_assistant("call_1", "{}"), SERVED)


def test_a_re_sent_answer_with_ids_of_the_clients_own_is_the_served_one_by_its_calls() -> None:
    assert is_served_answer(_assistant("mine", '{"r": [2], "q": 1}'), SERVED)  # JSON-equal
    assert not is_served_answer(_assistant("mine", '{"q": 2}'), SERVED)  # other arguments
    assert not is_served_answer(_assistant("mine", '{"q": 1, "r": [2]}', "hi"), SERVED)


def test_an_answer_is_read_from_its_chunks() -> None:
    chunks: list[dict[str, Any]] = [
        {"type": "text-delta", "index": 0, "text": "ok"},
        {"type": "tool-call-delta", "index": 1, "id": "t1", "name": "add", "argumentsDelta": "{"},
        {"type": "tool-call-delta", "index": 1, "id": "t1", "argumentsDelta": "}"},
        {"type": "finish", "reason": {"kind": "tool-calls"}},
    ]
    assert served_answer(chunks) == ServedAnswer(
        "ok", (ToolCallMark("t1", "add", "{}"),), frozenset({"t1"})
    )


# --- lineage ------------------------------------------------------------------------------


def _user(*texts: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


def _event(kind: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "data": data}


def _parent_log(turns_done: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for turn in range(1, turns_done + 2):
        events.append(_event("turn/start", {"turn": turn}))
        events.append(
            _event(
                "user/message", {"role": "user", "content": [{"type": "text", "text": f"q{turn}"}]}
            )
        )
        events.append(
            _event(
                "assistant/message",
                {
                    "turn": turn,
                    "step": 1,
                    "message": {
                        "role": "assistant",
                        "content": [{"type": "text", "text": f"a{turn}"}],
                    },
                },
            )
        )
        if turn <= turns_done:
            events.append(_event("turn/end", {"turn": turn, "reason": {"kind": "completed"}}))
    return events


def _items(*messages: dict[str, Any]) -> list[Any]:
    return RequestView.of({"messages": list(messages)}).conversation.items


def test_a_child_whose_request_starts_with_the_completed_turns_is_a_fork_of_them() -> None:
    log = _parent_log(1)
    assert completed_turns_end(log) == 4
    items = _items(_user("q1"), {"role": "assistant", "content": "a1"}, _user("side?"))
    assert fork_seed_length(log, items) == 4


def test_a_child_of_a_parent_in_its_first_turn_is_a_spawn_whatever_it_repeats() -> None:
    log = _parent_log(0)
    items = _items(_user("q1"), {"role": "assistant", "content": "a1"}, _user("side?"))
    assert fork_seed_length(log, items) == 0


def test_a_child_that_does_not_start_with_the_completed_turns_is_a_spawn() -> None:
    assert fork_seed_length(_parent_log(1), _items(_user("a task of its own"))) == 0


# --- the opening ----------------------------------------------------------------------------


def _opening(events: list[dict[str, Any]]) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    builder = ScriptBuilder(version=0)
    for event in events:
        builder.event(event)
    builder.finish()
    return builder.opening_blocks, builder.opening_run


def _call(turn: int) -> list[dict[str, Any]]:
    return [
        _event(
            "assistant/chunk",
            {"turn": turn, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
        ),
        _event(
            "assistant/chunk",
            {"turn": turn, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
        ),
    ]


def test_the_opening_is_the_first_message_of_the_run_the_first_call_followed() -> None:
    task = _event("user/message", _user("Plan a day."))
    tool = _event(
        "assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant", "content": []}}
    )
    result = _event(
        "tool/result", {"turn": 1, "step": 1, "message": {"role": "tool", "content": []}}
    )
    question = _event("user/message", _user("What should we wear?", "(context)"))
    assert _opening([task, tool, result, question, *_call(1)]) == (
        ("What should we wear?", "(context)"),
        ("What should we wear?(context)",),
    )
    assert _opening([task, question, *_call(1)]) == (
        ("Plan a day.",),
        ("Plan a day.", "What should we wear?(context)"),
    )
    assert _opening([task, tool, result, *_call(1)]) == ((), ())  # after a tool result


def test_the_live_request_opens_as_its_log_would() -> None:
    messages = [
        _user("Plan a day."),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "1", "function": {"name": "w", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "1", "content": "sunny"},
        _user("What should we wear?", "(context)"),
    ]
    assert opening_prefixes(messages) == ["What should we wear?", "What should we wear?(context)"]
    assert opening_run(messages) == ["What should we wear?(context)"]
    assert opening_prefixes(messages[:3]) == []


# --- a new conversation's parent ------------------------------------------------------------


def test_a_new_conversation_is_the_child_of_the_session_whose_tool_call_announced_it() -> None:
    # Two researchers wait for their tools at once; each scout names its own task.
    router = Router()
    scouts = {}
    for topic in ("cafes", "museums"):
        session = router.route({}, {"messages": [_user(f"Find {topic}.")]}).session_id
        call = ToolCallMark(f"c-{topic}", "scout", f'{{"input": "List {topic}."}}')
        router.answered(
            session, wants_tools=True, served=ServedAnswer("", (call,), frozenset({call.id}))
        )
        scouts[topic] = session
    for topic in ("museums", "cafes"):
        route = router.route({}, {"messages": [_user(f"List {topic}.")]})
        assert route.new
        assert route.parent_session_id == scouts[topic]
    assert router.guessed == []
