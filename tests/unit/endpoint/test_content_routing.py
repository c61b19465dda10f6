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


def asked_for_tools(router: Router, session: str, call_id: str) -> None:
    router.answered(session, wants_tools=True, served=("", call_id))


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
    assert fork.fork
    assert fork.parent_session_id == parent.session_id
    assert fork.seed_length == len(parent_request)  # it repeats the parent's request
    router.answered(fork.session_id, served=("SAFFRON",))
    # The parent's own next call, with its answer and the tool result, is the parent.
    result = {"role": "tool", "tool_call_id": "call_1", "content": "SAFFRON"}
    after = route(router, [*parent_request, calling("call_1"), result])
    assert (after.session_id, after.new) == (parent.session_id, False)


def test_the_answer_served_continues_the_session_text_or_tool_calls() -> None:
    router = Router()
    first = [SYSTEM, user("hi")]
    session = route(router, first).session_id
    router.answered(session, served=("hello",))
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
    asked_for_tools(router, session, "call_1")
    other = route(router, [*first, calling("call_99"), user("result")])
    assert other.new
    assert other.parent_session_id == session


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
    router.answered(primary, served=("planned",))
    child_request = [*primary_request, {"role": "assistant", "content": "planned"}, user("dig")]
    child = route(router, child_request)
    # It continues the primary with its answer: the primary's own next call.
    assert child.session_id == primary
    asked_for_tools(router, primary, "call_2")
    grandchild = route(router, [*child_request, user("deeper")])
    assert grandchild.fork
    assert grandchild.parent_session_id == primary
