"""A fork taken after a tool step records, then replays, on every SDK wire (issue 40, point 1).

The README's fork pattern: while the parent waits for its tools, a side question is asked
with the parent's latest request plus the question. Taken at the parent's second step
(after a tool step, in its first turn), it used to be recorded as a spawn whose first
message is the parent's task, while replay took the same request for a fork whose first
message is the question, and the binding failed on every run. Recording and replay now
decide its lineage by one rule and bind it by its opening (docs/scenarios.md#binding):
here it is a spawn (no completed turn to inherit) whose opening is the question.

Each SDK agent runs as users run it (pytester): recorded once with ``--dsh-record=all``
from a scripted live model, then replayed with no model, sessions told apart by content
alone and by the ``x-dsh-session-id`` headers.
"""

from __future__ import annotations

import pytest
from support.inner_runs import imported_before_inner_runs

_sdks = imported_before_inner_runs("anthropic", "google.genai")

CONFTEST = """
from pytest_dsh_replay import Answer, Rule, ScriptedModel, ToolCall

def answer(request):
    if request.prompt == "What should we wear?":
        return Answer(text="Comfortable shoes.")
    done = len(request.tool_results) and sum(1 for role, _ in request.messages if role == "tool")
    if not done:
        return Answer(tool_calls=[ToolCall("weather", "{}")])
    if done == 1:
        return Answer(tool_calls=[ToolCall("museums", "{}")])
    return Answer(text="Louvre, then a walk.")

def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel([Rule(answer)])
"""

AGENTS = '''
import uuid
import pytest

TASK = "Plan a day in Paris."
QUESTION = "What should we wear?"
NAMES = ("weather", "museums")


class Ids:
    """The x-dsh-* headers of the parent and of its side question (or none)."""

    def __init__(self, identify):
        self.parent = str(uuid.uuid4())
        self.child = str(uuid.uuid4())
        self.identify = identify

    def of_parent(self):
        return {"x-dsh-session-id": self.parent} if self.identify else {}

    def of_child(self):
        if not self.identify:
            return {}
        return {"x-dsh-session-id": self.child, "x-dsh-parent-session-id": self.parent}


def chat(client, ids):
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
             for n in NAMES]
    messages, side = [{"role": "user", "content": TASK}], None
    while True:
        message = client.chat.completions.create(
            model="m", messages=messages, tools=tools, extra_headers=ids.of_parent()
        ).choices[0].message
        latest = list(messages)
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return message.content, side
        if message.tool_calls[0].function.name == "museums":  # step 2: ask on the side
            side = client.chat.completions.create(
                model="m", messages=[*latest, {"role": "user", "content": QUESTION}],
                extra_headers=ids.of_child(),
            ).choices[0].message.content
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})


def responses(client, ids):
    tools = [{"type": "function", "name": n, "parameters": {"type": "object", "properties": {}}}
             for n in NAMES]
    items, side = [{"role": "user", "content": TASK}], None
    while True:
        response = client.responses.create(
            model="m", input=items, tools=tools, extra_headers=ids.of_parent()
        )
        calls = [item for item in response.output if item.type == "function_call"]
        latest = list(items)
        items += [item.model_dump(exclude_none=True) for item in response.output]
        if not calls:
            return response.output_text, side
        if calls[0].name == "museums":
            side = client.responses.create(
                model="m", input=[*latest, {"role": "user", "content": QUESTION}],
                extra_headers=ids.of_child(),
            ).output_text
        for call in calls:
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": "sunny"})


def anthropic(client, ids):
    tools = [{"name": n, "input_schema": {"type": "object"}} for n in NAMES]
    messages, side = [{"role": "user", "content": TASK}], None
    while True:
        message = client.messages.create(
            model="m", max_tokens=256, messages=messages, tools=tools,
            extra_headers=ids.of_parent(),
        )
        latest = list(messages)
        messages.append({"role": "assistant",
                         "content": [b.model_dump(exclude_none=True) for b in message.content]})
        uses = [block for block in message.content if block.type == "tool_use"]
        if not uses:
            return message.content[0].text, side
        if uses[0].name == "museums":
            side = client.messages.create(
                model="m", max_tokens=256,
                messages=[*latest, {"role": "user", "content": QUESTION}],
                extra_headers=ids.of_child(),
            ).content[0].text
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use.id, "content": "sunny"} for use in uses
        ]})


def gemini(client, ids):
    from google.genai import types

    declarations = [types.FunctionDeclaration(name=n, parameters_json_schema={"type": "object"})
                    for n in NAMES]

    def config(headers, tools=True):
        return types.GenerateContentConfig(
            tools=[types.Tool(function_declarations=declarations)] if tools else None,
            http_options=types.HttpOptions(headers=headers),
        )

    def user(text):
        return types.Content(role="user", parts=[types.Part.from_text(text=text)])

    contents, side = [user(TASK)], None
    while True:
        response = client.models.generate_content(
            model="m", contents=contents, config=config(ids.of_parent())
        )
        latest = list(contents)
        contents.append(response.candidates[0].content)
        calls = response.function_calls or []
        if not calls:
            return response.text, side
        if calls[0].name == "museums":
            side = client.models.generate_content(
                model="m", contents=[*latest, user(QUESTION)],
                config=config(ids.of_child(), tools=False),
            ).text
        contents.append(types.Content(role="user", parts=[
            types.Part.from_function_response(name=c.name, response={"result": "sunny"})
            for c in calls
        ]))


AGENTS = {"chat": chat, "responses": responses, "anthropic": anthropic, "gemini": gemini}
CLIENTS = {"chat": "openai_client", "responses": "openai_client",
           "anthropic": "anthropic_client", "gemini": "gemini_client"}


@pytest.mark.parametrize("identify", [False, True], ids=["content", "headers"])
@pytest.mark.parametrize("wire", sorted(AGENTS))
def test_a_side_question_after_a_tool_step(wire, identify, dsh_replay):
    client = getattr(dsh_replay, CLIENTS[wire])()
    answer, side = AGENTS[wire](client, Ids(identify))
    assert (answer, side) == ("Louvre, then a walk.", "Comfortable shoes.")
    if dsh_replay.mode == "replay":
        by_file = {b.file: b for b in dsh_replay.model.bindings.values()}
        assert sorted(by_file) == ["session.1.jsonl", "session.jsonl"]
        (child,) = dsh_replay.scenario.children
        assert (child.seed_length, child.opening_text) == (0, QUESTION)
'''


def test_a_fork_after_a_tool_step_records_then_replays_on_every_wire(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snapshots\n")
    pytester.makepyfile(test_agents=AGENTS)
    recorded = pytester.runpytest("--dsh-record=all", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=8)
    replayed = pytester.runpytest("-p", "no:cacheprovider")
    replayed.assert_outcomes(passed=8)
    replayed.stdout.fnmatch_lines(["*scenarios: 8 replayed, 0 recorded*"])
