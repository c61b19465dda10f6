"""A parent that re-sends its answers with tool-call ids of its own gets its own calls.

Issue 40, point 2.

The dsh harness's own recording of a parent that spawns two children one at a time
(``subagent-multi``: ALPHA, then BETA, then ``PARENT_DONE``) is replayed by content over
the chat-completions wire. Some frameworks give tool calls ids of their own; the parent's
next request then names other ids than the ones served. It must still be the parent's
next call (docs/wires.md#calling-session), never a new conversation served another
session's recording; and a request no session can be told from fails with the
candidates named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.corpus_support import scenario

from pytest_dsh_replay import ReplayBindingError
from pytest_dsh_replay._fixture.dsh_replay import DshReplay

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "subagent", "parameters": {"type": "object"}}}
]


def parent(dsh: DshReplay, *, ids: str | None = None, text: str | None = None) -> list[str]:
    """The parent's loop; ``ids`` renames tool calls, ``text`` rewrites its answers' text."""
    client = dsh.openai_client(max_retries=0)
    messages: list[Any] = [{"role": "user", "content": "Use the subagent tool TWICE"}]
    said = []
    for turn in range(3):
        message = client.chat.completions.create(model="m", messages=messages, tools=TOOLS)
        answer = message.choices[0].message.model_dump(exclude_none=True)
        said.append(answer.get("content") or "")
        if not answer.get("tool_calls"):
            break
        for n, call in enumerate(answer["tool_calls"]):
            if ids is not None:
                call["id"] = f"{ids}-{turn}-{n}"
        if text is not None:
            answer["content"] = text
        messages.append(answer)
        for call in answer["tool_calls"]:
            task = json.loads(call["function"]["arguments"])["prompt"]
            child = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": task}]
            )
            said.append(child.choices[0].message.content or "")
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": said[-1]})
    return said


@pytest.mark.parametrize("ids", [None, "mine"], ids=["served-ids", "own-ids"])
def test_a_parent_with_tool_call_ids_of_its_own_gets_its_own_calls(
    ids: str | None, tmp_path: Path
) -> None:
    dsh = DshReplay.open(scenario("subagent-multi"), workdir=tmp_path, compare_logs=False)
    said = parent(dsh, ids=ids)
    dsh.close()
    dsh.finish()
    assert said == ["", "ALPHA", "", "BETA", "PARENT_DONE"]
    files = {b.file: b.cursor for b in dsh.model.bindings.values()}
    assert files == {"session.jsonl": 3, "session.1.jsonl": 1, "session.2.jsonl": 1}


def test_a_parent_whose_answer_no_session_was_served_is_refused_never_served_a_child(
    tmp_path: Path,
) -> None:
    # Its ids and its text both rewritten: nothing shows the request continues the parent.
    dsh = DshReplay.open(scenario("subagent-multi"), workdir=tmp_path, compare_logs=False)
    with pytest.raises(Exception, match="ReplayBindingError"):
        parent(dsh, ids="mine", text="rewritten")
    with pytest.raises(ReplayBindingError) as refused:
        dsh.close()
    message = str(refused.value)
    assert "ends without a user message" in message
    assert "session.2.jsonl: 'Reply with exactly the word BETA" in message  # the candidate
    assert "session.2.jsonl" not in {b.file for b in dsh.model.bindings.values()}
