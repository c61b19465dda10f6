"""Where a transcript links a child, the settled notices it shows, and a fork's copy once.

Sessions are built here as the dsh runtime and the recorder log them: a parent whose
tool calls start children (announced by ``started subagent <id>`` results and
``subagent/catalog`` events, or by arguments that are the child's task), children
whose task is not the tool call's arguments word for word, their settled notices
reaching the parent in one request, and a fork child whose request repeats its
parent's open turn before its own question.
"""

from __future__ import annotations

import json
from typing import Any

from pytest_dsh_replay._check.transcript import render_transcript
from pytest_dsh_replay._format.events import SessionHeader

PARENT = "5d0c3c4e-0a8e-4b55-9c39-3f1f6f4d2a01"
ALPHA = "7a1e4c7d-2b0f-4c59-8a0e-0c6b1b3f9e11"
BETA = "2b9d1f3a-6c4e-4d7a-9f10-8e2c5a7b3d22"


class Log:
    def __init__(self, header: SessionHeader, events: list[dict[str, Any]]):
        self.header = header
        self.events = events


def header(sid: str, **fields: Any) -> SessionHeader:
    return SessionHeader.from_json({"type": "session", "id": sid, "createdAt": 1, **fields})


def event(kind: str, **data: Any) -> dict[str, Any]:
    return {"type": kind, "data": data}


def user(text: str, **extra: Any) -> dict[str, Any]:
    return event("user/message", content=[{"type": "text", "text": text}], role="user", **extra)


def assistant(text: str = "", calls: tuple[tuple[str, str, str], ...] = ()) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool-call", "id": cid, "name": name, "arguments": args}
        for cid, name, args in calls
    ]
    return event("assistant/message", message={"role": "assistant", "content": content})


def result(call_id: str, text: str) -> dict[str, Any]:
    message = {"role": "tool", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}
    return event("tool/result", message=message)


def notice(child: str) -> dict[str, Any]:
    source = {"kind": "subagent-settled", "form": "notice", "senderSessionId": child}
    return user(f"Background subagent {child} finished.\nIts closing message: OK", source=source)


CALLS = (
    ("call_a", "subagent", json.dumps({"prompt": "Research the cafes."})),
    ("call_b", "subagent", json.dumps({"prompt": "Research the museums."})),
)


def parent(*middle: dict[str, Any], notices: tuple[str, ...] = (ALPHA, BETA)) -> Log:
    """A parent that starts two children by tool calls, then hears they finished."""
    events = [
        event("turn/start", turn=1),
        user("Plan a day in Paris."),
        assistant(calls=CALLS),
        *(event("tool/call", callId=c, name=n, arguments=a) for c, n, a in CALLS),
        *middle,
        assistant("DELEGATED"),
        *(notice(child) for child in notices),
        assistant("NOTED"),
        event("turn/end", turn=1, reason={"kind": "completed"}),
    ]
    return Log(header(PARENT), events)


def child(sid: str, task: str, **fields: Any) -> Log:
    """A spawned child whose task is worded otherwise than the tool call's arguments."""
    events = [event("turn/start", turn=1), user(task), assistant("OK")]
    return Log(header(sid, parentSession=PARENT, **fields), events)


CHILDREN = [child(ALPHA, "You research cafes."), child(BETA, "You research museums.")]


def linked_after(transcript: str, call: str) -> str | None:
    """The child linked right after the tool call whose arguments hold ``call``."""
    lines = transcript.split("\n")
    for n, line in enumerate(lines):
        if line.startswith("**Tool call**") and call in line:
            following = lines[n + 2] if n + 2 < len(lines) else ""
            return following.removeprefix("-> child session ") if "->" in following else None
    raise AssertionError(f"no tool call with {call!r}")


def test_the_runtimes_announcement_links_each_child_after_its_tool_call() -> None:
    # The results say which call started which child, in any order of arrival.
    logs = [
        parent(
            result("call_b", f"started subagent {BETA}"),
            result("call_a", f"started subagent {ALPHA}"),
        ),
        *CHILDREN,
    ]
    text = render_transcript(logs)
    assert linked_after(text, "cafes") == "{{id-2}}"
    assert linked_after(text, "museums") == "{{id-3}}"
    assert text.count("-> child session") == 2
    assert "# Session {{id-2}} (child of {{id-1}}, spawn)" in text


def test_a_catalog_before_a_result_that_names_no_child_announces_it() -> None:
    middle = [
        event("subagent/catalog", childId=ALPHA),
        result("call_a", "started"),
        event("subagent/catalog", childId=BETA),
        result("call_b", "started"),
    ]
    from pytest_dsh_replay._check.transcript import announced_children

    assert announced_children(parent(*middle).events) == {ALPHA: "call_a", BETA: "call_b"}
    text = render_transcript([parent(*middle), *CHILDREN])
    assert (linked_after(text, "cafes"), linked_after(text, "museums")) == ("{{id-2}}", "{{id-3}}")


def test_a_tool_call_whose_argument_is_a_childs_task_links_it_after_that_call() -> None:
    # Nothing in the parent says which child each call started; each call's argument is
    # its child's task (docs/scenarios.md#announcement), the second child's first.
    tasked = [child(BETA, "Research the museums."), child(ALPHA, "Research the cafes.")]
    text = render_transcript([parent(result("call_a", "ok"), result("call_b", "ok")), *tasked])
    assert linked_after(text, "cafes") == "{{id-3}}"
    assert linked_after(text, "museums") == "{{id-2}}"


def test_a_child_with_no_link_is_linked_at_the_end_of_its_parent() -> None:
    text = render_transcript([parent(result("call_a", "ok"), result("call_b", "ok")), *CHILDREN])
    assert linked_after(text, "cafes") is None
    first_child = text.index("# Session {{id-2}}")
    assert (
        text[:first_child]
        .rstrip()
        .endswith("-> child session {{id-2}}\n\n-> child session {{id-3}}")
    )


def test_notices_one_request_carries_show_in_the_order_their_children_were_started() -> None:
    middle = [
        result("call_a", f"started subagent {ALPHA}"),
        result("call_b", f"started subagent {BETA}"),
    ]
    texts = {
        render_transcript([parent(*middle, notices=order), *CHILDREN])
        for order in ((ALPHA, BETA), (BETA, ALPHA))
    }
    assert len(texts) == 1
    (text,) = texts
    assert text.index("Background subagent {{id-2}}") < text.index("Background subagent {{id-3}}")


def test_a_fork_childs_copy_of_its_parents_open_turn_is_shown_once() -> None:
    # The parent waits for its tool; the fork child is seeded with the parent's completed
    # turn and its request repeats the open turn's messages before its own question.
    done = [
        event("turn/start", turn=1),
        user("Remember: the codeword is SAFFRON."),
        assistant("Noted."),
        event("turn/end", turn=1, reason={"kind": "completed"}),
    ]
    open_turn = [
        event("turn/start", turn=2),
        user("Plan a day in Paris."),
        assistant(calls=(("call_w", "weather", "{}"),)),
        event("tool/call", callId="call_w", name="weather", arguments="{}"),
        result("call_w", "sunny"),
    ]
    main = Log(header(PARENT), [*done, *open_turn, assistant("Go to the park.")])
    copy = [
        user("Plan a day in Paris."),
        assistant(calls=(("call_w", "weather", "{}"),)),
        result("call_w", "sunny"),
    ]
    own = [event("turn/start", turn=2), *copy, user("What should we wear?"), assistant("A hat.")]
    fork = Log(header(ALPHA, parentSession=PARENT, seedLength=len(done)), [*done, *own])
    text = render_transcript([main, fork])
    child_part = text[text.index("# Session {{id-2}}") :]
    assert "*4 events inherited from the parent.*" in child_part
    assert "*3 more message(s) of {{id-1}} repeated here (shown in its session).*" in child_part
    assert child_part.count("**User**") == 1
    assert "What should we wear?" in child_part
    assert "Plan a day in Paris." not in child_part
    assert "sunny" not in child_part
    # A fork whose own first message differs from its parent's next shows every message.
    other = Log(fork.header, [*done, event("turn/start", turn=2), user("Hi."), assistant("Hello.")])
    assert "repeated here" not in render_transcript([main, other])
