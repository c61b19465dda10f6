"""Content routing: a request continues a session only with the answer served for it.

A fork child made while its parent waits for its tools (``[*messages[:-1], question]``)
repeats the parent's latest request and adds its own user message; it must be a fork
child of that parent, never the parent's next call, and the parent's real next call
(with its answer and the tool results) must still continue the parent.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dsh_replay._endpoint.routing import Route, Router
from pytest_dsh_replay._identity.answers import ServedAnswer, ToolCallMark

SYSTEM = {"role": "system", "content": "You are a planner."}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def calling(call_id: str) -> dict[str, Any]:
    """The assistant message an OpenAI agent re-sends for an answer that called a tool."""
    function = {"name": "subagent_fork", "arguments": "{}"}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "function": function}],
    }


def route(router: Router, messages: list[dict[str, Any]]) -> Route:
    return router.route({}, {"model": "m", "messages": messages})


def asked_for_tools(
    router: Router, session: str, call_id: str, name: str = "subagent_fork", arguments: str = "{}"
) -> None:
    call = ToolCallMark(call_id, name, arguments)
    router.answered(
        session, wants_tools=True, served=ServedAnswer("", (call,), frozenset({call_id}))
    )


@pytest.mark.parametrize("turns", [0, 1], ids=["first-turn", "after-a-completed-turn"])
def test_a_fork_made_while_the_parent_waits_is_a_fork_child_of_it(turns: int) -> None:
    router = Router()
    earlier = [user("Remember SAFFRON."), {"role": "assistant", "content": "OK"}] * turns
    parent_request = [SYSTEM, *earlier, user("Delegate.")]
    parent = route(router, parent_request)
    assert parent.new
    asked_for_tools(router, parent.session_id, "call_1")
    # The tool forks: the parent's messages without its pending answer, and a question.
    fork = route(router, [*parent_request, user("Recall the codeword.")])
    assert fork.new
    assert fork.parent_session_id == parent.session_id
    assert fork.seed_length is None  # whether it is a fork is the recorder's (its lineage)
    router.answered(fork.session_id, served=ServedAnswer("SAFFRON"))
    # The parent's own next call, with its answer and the tool result, is the parent.
    result = {"role": "tool", "tool_call_id": "call_1", "content": "SAFFRON"}
    after = route(router, [*parent_request, calling("call_1"), result])
    assert (after.session_id, after.new) == (parent.session_id, False)


def test_the_answer_served_continues_the_session_text_or_tool_calls() -> None:
    router = Router()
    first = [SYSTEM, user("hi")]
    session = route(router, first).session_id
    router.answered(session, served=ServedAnswer("hello"))
    second = [*first, {"role": "assistant", "content": "hello"}, user("again")]
    assert route(router, second).session_id == session
    asked_for_tools(router, session, "call_7")
    anthropic_form = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_7", "name": "t", "input": {}}],
    }
    third = [*second, anthropic_form, user("result")]
    assert route(router, third).session_id == session


def test_an_answer_naming_other_tool_calls_is_not_the_served_one() -> None:
    router = Router()
    first = [SYSTEM, user("go")]
    session = route(router, first).session_id
    asked_for_tools(router, session, "call_1", name="lookup", arguments='{"q": "a"}')
    other = route(router, [*first, calling("call_99"), user("result")])
    assert other.new
    assert other.parent_session_id == session


def test_an_answer_whose_tool_call_ids_the_client_rewrote_still_continues_the_session() -> None:
    # Some frameworks give tool calls ids of their own: the same tools with the same
    # arguments and the same text are the answer served, and the request is its
    # session's next call, not a new conversation.
    router = Router()
    first = [SYSTEM, user("go")]
    session = route(router, first).session_id
    asked_for_tools(router, session, "call_1", arguments='{"b": 1, "a": [2]}')
    rewritten = calling("mine_0")
    rewritten["tool_calls"][0]["function"]["arguments"] = '{"a": [2], "b": 1}'
    result = {"role": "tool", "tool_call_id": "mine_0", "content": "done"}
    after = route(router, [*first, rewritten, result])
    assert (after.session_id, after.new) == (session, False)


def test_after_a_failed_call_a_changed_request_still_continues_the_session() -> None:
    router = Router()
    first = [SYSTEM, user("go")]
    session = route(router, first).session_id
    router.answered(session, failed=True)
    assert route(router, [*first, user("go, please")]).session_id == session


def test_a_fork_of_a_fork_is_a_child_of_the_one_it_repeats() -> None:
    router = Router()
    primary_request = [SYSTEM, user("plan")]
    primary = route(router, primary_request).session_id
    router.answered(primary, served=ServedAnswer("planned"))
    child_request = [*primary_request, {"role": "assistant", "content": "planned"}, user("dig")]
    child = route(router, child_request)
    # It continues the primary with its answer: the primary's own next call.
    assert child.session_id == primary
    asked_for_tools(router, primary, "call_2")
    grandchild = route(router, [*child_request, user("deeper")])
    assert grandchild.new
    assert grandchild.parent_session_id == primary
