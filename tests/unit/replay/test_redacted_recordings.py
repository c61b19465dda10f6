"""A recording holds ``[REDACTED]`` where the live session had a secret: replay still binds.

The live first user message is compared with the recorded one through the recording's
redaction, and what replay errors quote of live text goes through it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.chunks import chunk_events, text_call, user_event

from pytest_dsh_replay import (
    PlaceholderError,
    Redactor,
    ReplayBindingError,
    ReplayExhaustedError,
    load_scenario,
)
from pytest_dsh_replay._endpoint.routing import Router
from pytest_dsh_replay._format.jsonl import dump_session_log
from pytest_dsh_replay._format.redact import TextRedaction
from pytest_dsh_replay._identity.answers import ServedAnswer
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._replay.placeholders import resolve_placeholders
from pytest_dsh_replay._scripts.scenario import Scenario

PARENT = "aaaaaaaa-0000-4000-8000-000000000000"
# Built from pieces: no source file holds a key whole.
PATTERN_KEY = "sk-live-" + "Q7" * 12  # the built-in key shape
LITERAL_KEY = "plain" + "-secret-" + "4711"  # no known shape: only a configured literal


def write_log(path: Path, header: dict[str, Any], prompt: str, answer: str) -> None:
    events = [user_event(prompt, 0), *chunk_events(text_call(answer), turn=1, first_seq=1)]
    path.write_bytes(dump_session_log(header, events))


@pytest.fixture
def scenario(tmp_path: Path) -> Scenario:
    """A parent with two spawn children whose tasks were recorded redacted."""
    base = {"type": "session", "version": 0}
    write_log(tmp_path / "session.jsonl", {**base, "id": PARENT}, "plan", "spawning")
    for n, task in enumerate(["use [REDACTED] to fetch", "then [REDACTED] again"], start=1):
        header = {**base, "id": f"child-{n}-0000", "parentSession": PARENT, "origin": "subagent"}
        write_log(tmp_path / f"session.{n}.jsonl", header, task, f"answer {n}")
    return load_scenario(tmp_path)


def ask(model: ReplayModel, session: str, text: str, parent: str | None = "main") -> str:
    request = {"messages": [{"role": "user", "content": text}]}
    chunks = model.stream(request, session_id=session, parent_session_id=parent)
    return "".join(c.get("text", "") for c in chunks if c["type"] == "text-delta")


def test_a_child_whose_task_held_a_key_binds_to_its_redacted_recording(scenario: Scenario) -> None:
    model = ReplayModel(scenario)
    assert ask(model, "main", "plan", parent=None) == "spawning"
    # The second child asks first: only the redacted comparison tells the two apart.
    assert ask(model, "b", f"then {PATTERN_KEY} again") == "answer 2"
    assert ask(model, "a", f"use {PATTERN_KEY} to fetch") == "answer 1"
    assert model.bindings["a"].file == "session.1.jsonl"


def test_a_configured_literal_secret_binds_through_the_run_redactor(scenario: Scenario) -> None:
    text = f"use {LITERAL_KEY} to fetch"
    plain = ReplayModel(scenario)
    ask(plain, "main", "plan", parent=None)
    with pytest.raises(ReplayBindingError):
        ask(plain, "a", text)  # the built-in rules do not know this value

    model = ReplayModel(scenario, redactor=Redactor(literals=[LITERAL_KEY]))
    ask(model, "main", "plan", parent=None)
    assert ask(model, "a", text) == "answer 1"


def test_a_binding_error_quotes_the_live_message_redacted(scenario: Scenario) -> None:
    model = ReplayModel(scenario)
    ask(model, "main", "plan", parent=None)
    with pytest.raises(ReplayBindingError) as caught:
        ask(model, "x", f"something else with {PATTERN_KEY}")
    message = str(caught.value)
    assert "something else with [REDACTED]" in message
    assert PATTERN_KEY not in message
    assert PATTERN_KEY[8:20] not in message


def test_an_exhausted_error_quotes_the_live_message_redacted(scenario: Scenario) -> None:
    model = ReplayModel(scenario)
    ask(model, "main", "plan", parent=None)
    ask(model, "a", f"use {PATTERN_KEY} to fetch")
    with pytest.raises(ReplayExhaustedError) as caught:
        ask(model, "a", f"use {PATTERN_KEY} to fetch")
    assert "'use [REDACTED] to fetch'" in str(caught.value)
    assert PATTERN_KEY not in str(caught.value)


def test_the_router_quotes_first_messages_redacted() -> None:
    router = Router(Redactor().redact_text)
    for session, answer in (("s1", "done"), ("s2", "finished")):
        router.route(
            {"x-dsh-session-id": session},
            {"messages": [{"role": "user", "content": f"go {PATTERN_KEY}"}]},
        )
        router.answered(session, served=ServedAnswer(answer))
    follow_up = [
        {"role": "user", "content": f"go {PATTERN_KEY}"},
        {"role": "assistant", "content": "ok"},  # quotes neither answer
        {"role": "user", "content": "and now?"},
    ]
    with pytest.raises(ReplayBindingError) as caught:  # continues both alike
        router.route({}, {"messages": follow_up})
    assert "[REDACTED]" in str(caught.value)
    assert PATTERN_KEY not in str(caught.value)


# --- the user's redact hook is part of the recording's redaction ------------------------

CUSTOMER = "Initech " + "Holdings"


def hide_customer(event: dict[str, Any]) -> None:
    """A user's ``pytest_dsh_replay_redact``: the customer's name never goes into a log."""
    data = event.get("data")
    for block in data.get("content", []) if isinstance(data, dict) else []:
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            block["text"] = block["text"].replace(CUSTOMER, "<customer>")


@pytest.fixture
def hooked(tmp_path: Path) -> Scenario:
    """A child recorded through a hook that hid the customer, and the built-in rules."""
    base = {"type": "session", "version": 0}
    write_log(tmp_path / "session.jsonl", {**base, "id": PARENT}, "plan", "spawning")
    header = {**base, "id": "child-1-0000", "parentSession": PARENT, "origin": "subagent"}
    task = "report for <customer> with [REDACTED]"
    write_log(tmp_path / "session.1.jsonl", header, task, "{{fromRequest:for (\\w+)}} done")
    return load_scenario(tmp_path)


def test_a_child_binds_through_the_users_redact_hook(hooked: Scenario) -> None:
    task = f"report for {CUSTOMER} with {PATTERN_KEY}"
    without = ReplayModel(hooked)
    ask(without, "main", "plan", parent=None)
    with pytest.raises(ReplayBindingError) as caught:
        ask(without, "a", task)  # the built-in rules alone leave the name
    assert PATTERN_KEY not in str(caught.value)

    model = ReplayModel(hooked, redact_hook=hide_customer)
    ask(model, "main", "plan", parent=None)
    # The answer's placeholder reads the live request: the name, as the code sent it.
    assert ask(model, "a", task) == f"{CUSTOMER.split()[0]} done"
    with pytest.raises(ReplayExhaustedError) as exhausted:
        ask(model, "a", task)
    assert "'report for <customer> with [REDACTED]'" in str(exhausted.value)
    assert CUSTOMER not in str(exhausted.value)


def test_text_redaction_runs_the_rules_then_the_hook() -> None:
    redact = TextRedaction(Redactor(literals=[LITERAL_KEY]), hide_customer)
    assert redact(f"{CUSTOMER} {LITERAL_KEY} {PATTERN_KEY}") == "<customer> [REDACTED] [REDACTED]"

    def drops_content(event: dict[str, Any]) -> None:
        event["data"] = {}

    assert TextRedaction(None, drops_content)("anything") == "[REDACTED]"  # nothing to show


# --- content routing over HTTP ----------------------------------------------------------


def test_a_new_conversation_found_by_content_binds_to_its_redacted_recording(
    scenario: Scenario,
) -> None:
    from pytest_dsh_replay._endpoint.endpoint import Endpoint
    from pytest_dsh_replay._endpoint.transport import sync_transport
    from pytest_dsh_replay._wire.base import httpx_module

    endpoint = Endpoint.replaying(ReplayModel(scenario))
    http = httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")

    def post(text: str) -> str:
        body = {"model": "m", "messages": [{"role": "user", "content": text}]}
        answer = http.post("/v1/chat/completions", json=body)  # no session headers
        assert answer.status_code == 200, answer.text
        return str(answer.json()["choices"][0]["message"]["content"])

    assert post("plan") == "spawning"
    assert post(f"then {PATTERN_KEY} again") == "answer 2"  # routed by content, bound by task
    assert post(f"use {PATTERN_KEY} to fetch") == "answer 1"
    endpoint.close()


# --- placeholders -----------------------------------------------------------------------


def test_a_placeholder_written_against_the_redacted_text_resolves() -> None:
    messages = [{"role": "user", "content": f"token {PATTERN_KEY} for T-42"}]
    pattern = "{{fromRequest:\\[REDACTED\\] for ([\\w-]+)}}"
    with pytest.raises(PlaceholderError):
        resolve_placeholders(pattern, messages)
    assert resolve_placeholders(pattern, messages, redact=Redactor().redact_text) == "T-42"
    # The live text comes first: a pattern that matches it gets the live value.
    live = "{{fromRequest:token (\\S+) for}}"
    assert resolve_placeholders(live, messages, redact=Redactor().redact_text) == PATTERN_KEY


def test_a_replayed_placeholder_resolves_against_the_redacted_request(tmp_path: Path) -> None:
    base = {"type": "session", "version": 0}
    answer = "ticket {{fromRequest:with \\[REDACTED\\] for ([\\w-]+)}}"
    write_log(tmp_path / "session.jsonl", {**base, "id": PARENT}, "fetch", answer)
    model = ReplayModel(load_scenario(tmp_path))
    assert ask(model, "main", f"fetch with {PATTERN_KEY} for T-42", parent=None) == "ticket T-42"
