"""ReplayModel: binding, cursors, entries, cancellation, pacing and errors.

See docs/scenarios.md#binding and docs/scenarios.md#entry-replay.

Scenarios here are built in memory; ``test_model_corpus.py`` replays the real corpus and
``test_model_lineage.py`` binds concurrent children from logs written to disk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import threading
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from support.chunks import text_call
from support.paths import EXAMPLES

from pytest_dsh_replay import (
    MemoryBackend,
    RecordingModel,
    SessionHeader,
    SessionStore,
    load_scenario,
    write_scenario,
)
from pytest_dsh_replay._errors import (
    DshReplayError,
    PlaceholderError,
    ReplayBindingError,
    ReplayCancelledError,
    ReplayConsumptionError,
    ReplayedModelError,
    ReplayExhaustedError,
    ScriptError,
)
from pytest_dsh_replay._replay.model import ReplayBinding, ReplayModel, last_user_text
from pytest_dsh_replay._scripts.entries import ChunksEntry, HangEntry, ReplayEntry, ThrowEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript

Chunk = dict[str, Any]
REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
PREFIX = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "partial"},
]


def reply(text: str) -> list[Chunk]:
    return text_call(text, usage={"inputTokens": 1, "outputTokens": 1})


def call(text: str) -> ChunksEntry:
    return ChunksEntry(reply(text))


def script(
    file: str,
    entries: Iterable[ReplayEntry],
    *,
    rid: str | None = None,
    created: int = 0,
    parent: str | None = None,
    first_user_text: str | None = None,
) -> SessionScript:
    return SessionScript(
        file=file,
        recorded_id=rid if rid is not None else file.replace(".jsonl", ""),
        created_at=created,
        seed_length=0,
        parent_session=parent,
        primary=file == "session.jsonl",
        entries=tuple(entries),
        first_user_text=first_user_text,
    )


def scenario(*scripts: SessionScript) -> Scenario:
    return Scenario(path=Path("mem-scenario"), scripts=tuple(scripts))


def two_sessions() -> Scenario:
    return scenario(
        script("session.jsonl", [call("p1"), call("p2"), call("p3")]),
        script("session.1.jsonl", [call("c1")], parent="session"),
    )


def texts(chunks: Iterable[Chunk]) -> list[str]:
    return [c["text"] for c in chunks if c["type"] == "text-delta"]


async def collect(stream: AsyncIterator[Chunk]) -> list[Chunk]:
    return [chunk async for chunk in stream]


# --- streaming and binding -------------------------------------------------------------


def test_stream_replays_the_recorded_chunks_in_order() -> None:
    model = ReplayModel(two_sessions())
    assert list(model.stream(REQUEST, session_id="a")) == reply("p1")
    assert list(model.stream(REQUEST, session_id="a")) == reply("p2")


def test_astream_yields_the_same_chunks() -> None:
    model = ReplayModel(two_sessions())
    assert asyncio.run(collect(model.astream(REQUEST, session_id="a"))) == reply("p1")
    assert asyncio.run(collect(model.astream(REQUEST, session_id="b"))) == reply("c1")


def test_first_call_order_binds_primary_then_children() -> None:
    model = ReplayModel(two_sessions())
    assert texts(model.stream(REQUEST, session_id="child-first")) == ["p1"]
    assert texts(model.stream(REQUEST, session_id="second")) == ["c1"]


def test_calls_without_session_id_are_one_anonymous_session() -> None:
    model = ReplayModel(two_sessions())
    assert texts(model.stream(REQUEST)) == ["p1"]
    assert texts(model.stream(REQUEST, session_id="x")) == ["c1"]
    assert texts(model.stream(REQUEST)) == ["p2"]
    assert list(model.bindings) == [None, "x"]


def test_interleaved_sessions_keep_independent_cursors() -> None:
    model = ReplayModel(two_sessions())
    assert texts(model.stream(REQUEST, session_id="p")) == ["p1"]
    assert texts(model.stream(REQUEST, session_id="c")) == ["c1"]
    assert texts(model.stream(REQUEST, session_id="p")) == ["p2"]
    assert texts(model.stream(REQUEST, session_id="p")) == ["p3"]
    model.assert_consumed()


def test_binding_and_cursor_move_when_called_not_when_read() -> None:
    model = ReplayModel(two_sessions())
    unread = model.stream(REQUEST, session_id="p")
    model.astream(REQUEST, session_id="c")  # never read either
    assert model.bindings == {
        "p": ReplayBinding(recorded_id="session", file="session.jsonl", cursor=1, length=3),
        "c": ReplayBinding(recorded_id="session.1", file="session.1.jsonl", cursor=1, length=1),
    }
    assert texts(model.stream(REQUEST, session_id="p")) == ["p2"]
    assert texts(unread) == ["p1"]


def test_extra_keyword_arguments_are_ignored() -> None:
    model = ReplayModel(two_sessions())
    assert texts(model.stream(REQUEST, session_id="p", turn=1, step=2, temperature=0)) == ["p1"]
    chunks = asyncio.run(collect(model.astream(REQUEST, session_id="p", turn=1, step=3)))
    assert texts(chunks) == ["p2"]


def test_every_chunk_is_a_fresh_object() -> None:
    scn = two_sessions()
    model = ReplayModel(scn)
    first = list(model.stream(REQUEST, session_id="p"))
    first[1]["text"] = "mutated"
    first[2]["block"]["text"] = "mutated"
    first.append({"type": "junk"})
    again = list(ReplayModel(scn).stream(REQUEST, session_id="p"))
    assert again == reply("p1")
    assert scn.primary.entries[0].chunks == reply("p1")
    # Two live sessions replaying the same entry never share objects either.
    scn2 = scenario(script("session.jsonl", [call("x")]), script("session.1.jsonl", [call("x")]))
    model2 = ReplayModel(scn2)
    a = list(model2.stream(REQUEST, session_id="a"))
    b = list(model2.stream(REQUEST, session_id="b"))
    assert a == b
    assert all(x is not y for x, y in zip(a, b, strict=True))


def test_the_model_loads_a_scenario_path(tmp_path: Path) -> None:
    from pytest_dsh_replay._format.jsonl import dump_session_log

    header = {"type": "session", "version": 0, "id": "s1", "createdAt": 1, "delegationDepth": 0}
    events = [
        {"type": "assistant/chunk", "seq": i, "time": 0, "data": {"turn": 1, "step": 1, "chunk": c}}
        for i, c in enumerate(reply("from disk"))
    ]
    (tmp_path / "session.jsonl").write_bytes(dump_session_log(header, events))
    model = ReplayModel(tmp_path)
    assert texts(model.stream(REQUEST)) == ["from disk"]
    assert model.scenario.path == tmp_path
    model.assert_consumed()


def test_request_must_be_a_mapping() -> None:
    model = ReplayModel(two_sessions())
    with pytest.raises(TypeError, match="must be a mapping"):
        model.stream([{"role": "user"}], session_id="a")  # type: ignore[arg-type]
    assert model.bindings == {}


# --- lineage binding (beyond the reference) ---------------------------------------------


def lineage_scenario() -> Scenario:
    return scenario(
        script("session.jsonl", [call("parent"), call("parent-2")], rid="P"),
        script(
            "session.1.jsonl",
            [call("alpha")],
            rid="A",
            created=1,
            parent="P",
            first_user_text="task alpha",
        ),
        script(
            "session.2.jsonl",
            [call("beta")],
            rid="B",
            created=2,
            parent="P",
            first_user_text="task beta",
        ),
        script("session.3.jsonl", [call("other")], rid="O", created=3, parent="elsewhere"),
    )


def ask(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": text}]}


def test_a_child_binds_to_the_recorded_child_with_its_first_user_text() -> None:
    model = ReplayModel(lineage_scenario())
    assert texts(model.stream(REQUEST, session_id="p")) == ["parent"]
    assert texts(model.stream(ask("task beta"), session_id="b", parent_session_id="p")) == ["beta"]
    assert texts(model.stream(ask("task alpha"), session_id="a", parent_session_id="p")) == [
        "alpha"
    ]


def test_an_extra_child_does_not_steal_a_recording() -> None:
    model = ReplayModel(lineage_scenario())
    list(model.stream(REQUEST, session_id="p"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(ask("unrelated"), session_id="x", parent_session_id="p"))
    message = str(info.value)
    assert message.startswith("session 'x' (first user message 'unrelated') made model call #1")
    assert "its first user message 'unrelated' matches no unbound recorded child" in message
    assert "session.1.jsonl: 'task alpha'; session.2.jsonl: 'task beta'" in message
    assert "x" not in model.bindings
    # The real children still bind to their own recordings.
    assert texts(model.stream(ask("task alpha"), session_id="a", parent_session_id="p")) == [
        "alpha"
    ]
    assert texts(model.stream(ask("task beta"), session_id="b", parent_session_id="p")) == ["beta"]


def test_a_child_without_any_user_message_is_refused_while_two_children_could_be_it() -> None:
    # Nothing tells the two recorded children apart: arrival order would give one the
    # other's answers on a run where they start the other way round.
    model = ReplayModel(lineage_scenario())
    list(model.stream(REQUEST, session_id="p"))
    empty: dict[str, Any] = {"messages": []}
    with pytest.raises(ReplayBindingError, match="ends without a user message") as refused:
        list(model.stream(empty, session_id="y", parent_session_id="p"))
    assert "session.1.jsonl: 'task alpha'" in str(refused.value)
    assert "session.2.jsonl: 'task beta'" in str(refused.value)
    # Once one child is bound, the one left under the named parent is the only candidate.
    first = {"messages": [{"role": "user", "content": "task alpha"}]}
    assert texts(model.stream(first, session_id="a", parent_session_id="p")) == ["alpha"]
    assert texts(model.stream(empty, session_id="z", parent_session_id="p")) == ["beta"]


def test_recorded_ids_in_a_first_message_match_any_live_id() -> None:
    text = 'task alpha. Your parent agent id is "P-rec". Report to "P-rec".'
    scripts = []
    for s in lineage_scenario().scripts:
        if s.recorded_id == "P":
            s = dataclasses.replace(s, recorded_id="P-rec")
        elif s.parent_session == "P":
            s = dataclasses.replace(s, parent_session="P-rec")
        if s.recorded_id == "A":
            s = dataclasses.replace(s, first_user_text=text)
        scripts.append(s)
    model = ReplayModel(dataclasses.replace(lineage_scenario(), scripts=tuple(scripts)))
    list(model.stream(REQUEST, session_id="live-parent"))
    same = 'task alpha. Your parent agent id is "live-parent". Report to "live-parent".'
    blocks = [
        {"role": "user", "content": [{"type": "text", "text": t} for t in (same, "runtime ctx")]}
    ]
    stream = model.stream({"messages": blocks}, session_id="a", parent_session_id="live-parent")
    assert texts(stream) == ["alpha"]
    # One value per id in a message: two different ids do not match.
    other = 'task alpha. Your parent agent id is "live-parent". Report to "someone".'
    with pytest.raises(ReplayBindingError, match="matches no unbound recorded child"):
        list(model.stream(ask(other), session_id="b2", parent_session_id="live-parent"))


def test_a_recorded_working_directory_in_a_first_message_matches_the_live_one() -> None:
    """The runtime's context message names its cwd: a replay runs somewhere else."""
    recorded = 'task alpha. Runtime context: cwd "/tmp/rec-1/work", shell bash.'
    tokenized = 'task beta. Runtime context: cwd "{{cwd}}", shell bash.'
    scripts = []
    for s in lineage_scenario().scripts:
        if s.recorded_id == "A":
            s = dataclasses.replace(
                s, first_user_text=recorded, header=SessionHeader(cwd="/tmp/rec-1/work")
            )
        elif s.recorded_id == "B":
            s = dataclasses.replace(s, first_user_text=tokenized)
        scripts.append(s)
    model = ReplayModel(dataclasses.replace(lineage_scenario(), scripts=tuple(scripts)))
    list(model.stream(REQUEST, session_id="p"))
    live_b = 'task beta. Runtime context: cwd "/home/ci/x y/work", shell bash.'
    assert texts(model.stream(ask(live_b), session_id="b", parent_session_id="p")) == ["beta"]
    # Only the path is a wildcard: other text must still be equal.
    other = 'task alpha. Runtime context: cwd "/srv/replay/work", shell zsh.'
    with pytest.raises(ReplayBindingError, match="matches no unbound recorded child"):
        list(model.stream(ask(other), session_id="c", parent_session_id="p"))
    live_a = 'task alpha. Runtime context: cwd "/srv/replay/work", shell bash.'
    assert texts(model.stream(ask(live_a), session_id="a", parent_session_id="p")) == ["alpha"]


def test_lineage_skips_children_of_other_recorded_sessions() -> None:
    model = ReplayModel(lineage_scenario())
    list(model.stream(REQUEST, session_id="p"))
    # First-call order would give "x" session.1; lineage gives P's children only.
    list(model.stream(ask("task beta"), session_id="b", parent_session_id="p"))
    list(model.stream(ask("task alpha"), session_id="a", parent_session_id="p"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(ask("task alpha"), session_id="c", parent_session_id="p"))
    message = str(info.value)
    assert "session 'c' (first user message 'task alpha') made model call #1" in message
    assert (
        "no recorded session is left for it: its live parent session 'p' replays "
        "session.jsonl (recorded session 'P'), whose 2 recorded children, session.1.jsonl "
        "and session.2.jsonl, are all already bound (scenario " in message
    )
    assert "re-record with --dsh-record" in message
    assert "c" not in model.bindings
    # A session without a parent still takes the remaining script in first-call order.
    assert texts(model.stream(REQUEST, session_id="o")) == ["other"]


def test_a_child_with_every_candidate_bound_is_told_in_one_sentence() -> None:
    # A new-user trial deleted one of two child files: the second live child found its
    # parent's one remaining recorded child taken.
    model = ReplayModel(
        scenario(
            script("session.jsonl", [call("parent")], rid="main"),
            script("session.1.jsonl", [call("a")], rid="c1", created=1, parent="main"),
        )
    )
    list(model.stream(REQUEST, session_id="main"))
    assert texts(model.stream(ask("one"), session_id="c1", parent_session_id="main")) == ["a"]
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(ask("two"), session_id="c2", parent_session_id="main"))
    assert (
        "session 'c2' (first user message 'two') made model call #1, but no recorded session "
        "is left for it: its live parent session 'main' replays session.jsonl (recorded "
        "session 'main'), whose one recorded child, session.1.jsonl, is already bound "
        "(scenario " in str(info.value)
    )


def test_a_child_of_an_unknown_parent_is_told_the_scenarios_children_are_bound() -> None:
    model = ReplayModel(lineage_scenario())
    list(model.stream(REQUEST, session_id="p"))
    for n, text in enumerate(["task alpha", "task beta", "anything"]):
        list(model.stream(ask(text), session_id=f"k{n}", parent_session_id="?"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(ask("more"), session_id="k3", parent_session_id="?"))
    assert (
        "left for it: the scenario's 3 recorded children, session.1.jsonl, session.2.jsonl "
        "and session.3.jsonl, are all already bound (scenario " in str(info.value)
    )


def test_a_child_that_matches_no_candidate_is_told_which_parent_it_searched() -> None:
    model = ReplayModel(lineage_scenario())
    list(model.stream(REQUEST, session_id="p"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(ask("unrelated"), session_id="x", parent_session_id="p"))
    assert (
        "its first user message 'unrelated' matches no unbound recorded child under "
        "session.jsonl (recorded session 'P'), which its live parent session 'p' replays "
        "(unbound: session.1.jsonl: 'task alpha'; session.2.jsonl: 'task beta')" in str(info.value)
    )


def test_an_unknown_live_parent_falls_back_to_first_call_order() -> None:
    model = ReplayModel(lineage_scenario())
    assert texts(model.stream(ask("task beta"), session_id="b", parent_session_id="?")) == [
        "parent"
    ]


def test_last_user_text_reads_dsh_and_openai_shapes() -> None:
    assert last_user_text([{"role": "user", "content": "a"}, {"role": "assistant"}]) == "a"
    blocks = [
        {"type": "text", "text": "x"},
        {"type": "image", "attachment": {}},
        {"type": "text", "text": "y"},
    ]
    assert last_user_text([{"role": "user", "content": blocks}]) == "xy"
    assert last_user_text([{"role": "assistant", "content": "no"}]) is None
    assert last_user_text("not a list") is None
    assert last_user_text(None) is None


# --- errors ------------------------------------------------------------------------------


def test_an_unrecorded_session_fails_every_call_and_is_never_stored() -> None:
    model = ReplayModel(two_sessions())
    list(model.stream(REQUEST, session_id="p"))
    list(model.stream(REQUEST, session_id="c"))
    list(model.stream(REQUEST, session_id="p"))
    list(model.stream(REQUEST, session_id="p"))
    stream = model.stream(REQUEST, session_id="extra")  # the call itself does not raise
    with pytest.raises(ReplayBindingError) as info:
        next(stream)
    message = str(info.value)
    assert message.startswith("session 'extra' (first user message ")
    assert "made model call #1, but no recorded session is" in message
    assert "the scenario recorded 2 session(s) and every one is already bound" in message
    assert "session.jsonl -> 'p', session.1.jsonl -> 'c'" in message
    assert "mem-scenario" in message
    assert message.endswith("re-record with --dsh-record")
    assert "extra" not in model.bindings
    with pytest.raises(ReplayBindingError, match="made model call #2"):
        asyncio.run(collect(model.astream(REQUEST, session_id="extra")))
    model.assert_consumed()  # unrecorded sessions are not consumption problems


def test_replay_errors_end_with_the_re_record_command_they_are_given() -> None:
    asked: list[int] = []

    def command() -> str:
        asked.append(1)
        return "pytest --dsh-record=all 't.py::test_x[a b]'"

    model = ReplayModel(two_sessions(), rerecord=command)
    assert not asked  # made only for an error that quotes it
    for _ in range(3):
        list(model.stream(REQUEST, session_id="X"))
    with pytest.raises(ReplayExhaustedError) as exhausted:
        list(model.stream(REQUEST, session_id="X"))
    list(model.stream(REQUEST, session_id="c"))
    with pytest.raises(ReplayBindingError) as unbound:
        list(model.stream(REQUEST, session_id="extra"))
    for err in (exhausted.value, unbound.value):
        assert str(err).endswith("; re-record: pytest --dsh-record=all 't.py::test_x[a b]'")
    assert asked == [1]


def test_more_calls_or_sessions_than_recorded_name_the_append_command_too() -> None:
    asked: list[str] = []

    def command(mode: str) -> Callable[[], str]:
        def make() -> str:
            asked.append(mode)
            return f"pytest --dsh-record={mode} t.py::test_x"

        return make

    model = ReplayModel(two_sessions(), rerecord=command("all"), append=command("new"))
    for _ in range(3):
        list(model.stream(REQUEST, session_id="X"))
    with pytest.raises(ReplayExhaustedError) as exhausted:
        list(model.stream(REQUEST, session_id="X"))
    list(model.stream(REQUEST, session_id="c"))
    with pytest.raises(ReplayBindingError) as unbound:
        list(model.stream(REQUEST, session_id="extra"))
    for err in (exhausted.value, unbound.value):
        assert str(err).endswith(
            "; re-record: pytest --dsh-record=all t.py::test_x, or keep the recorded calls "
            "and append the new ones: pytest --dsh-record=new t.py::test_x"
        )
    assert sorted(asked) == ["all", "new"]  # each made once, for the first error quoting it


def test_no_append_command_to_give_leaves_the_append_half_out() -> None:
    # (a replay-only test whose recording test is not in the run: nothing to append with)
    rerecord = "run the test that records it with --dsh-record=all (not in this run; ...)"
    model = ReplayModel(two_sessions(), rerecord=rerecord, append=lambda: "")
    for _ in range(3):
        list(model.stream(REQUEST, session_id="X"))
    with pytest.raises(ReplayExhaustedError) as exhausted:
        list(model.stream(REQUEST, session_id="X"))
    assert str(exhausted.value).endswith(f"; re-record: {rerecord}")
    assert "append the new ones" not in str(exhausted.value)


def test_a_child_whose_file_is_missing_is_named_with_the_file_to_restore(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "runtime-spawn"
    shutil.copytree(EXAMPLES / "runtime-spawn", scenario)
    child_id = json.loads((scenario / "session.1.jsonl").read_text().split("\n", 1)[0])["id"]
    (scenario / "session.1.jsonl").unlink()  # the parent's log still names the child
    model = ReplayModel(load_scenario(scenario))
    list(model.stream(REQUEST, session_id="main"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(REQUEST, session_id="kid", parent_session_id="main"))
    message = str(info.value)
    assert (
        f"The recording is incomplete: session.jsonl names child session {child_id!r} "
        "(its log would be session.1.jsonl), but the scenario has no log of it; restore the "
        "missing file (from version control) or re-record the scenario"
    ) in message
    assert "started more sessions than were recorded" not in message


def test_a_lost_child_file_is_named_even_while_another_child_is_unbound(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "runtime-mixed"
    shutil.copytree(EXAMPLES / "runtime-mixed", scenario)
    lost = json.loads((scenario / "session.1.jsonl").read_text().split("\n", 1)[0])["id"]
    (scenario / "session.2.jsonl").replace(scenario / "session.1.jsonl")  # the other stays
    model = ReplayModel(load_scenario(scenario))
    list(model.stream(REQUEST, session_id="main"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(REQUEST, session_id="kid", parent_session_id="main"))
    message = str(info.value)
    assert "matches no unbound recorded child" in message
    assert f"The recording is incomplete: session.jsonl names child session {lost!r}" in message
    assert "its task changed" not in message


def test_binding_errors_quote_text_blocks_visibly_apart(tmp_path: Path) -> None:
    store = SessionStore(MemoryBackend())
    answers = {"p": [text_call("parent")], "c": [text_call("child")]}
    recorder = RecordingModel(FakeLive(answers), store)

    def blocks(*texts: str) -> dict[str, Any]:
        content = [{"type": "text", "text": t} for t in texts]
        return {"messages": [{"role": "user", "content": content}]}

    list(recorder.stream(blocks("go"), session_id="p"))
    list(recorder.stream(blocks("Task:", "alpha"), session_id="c", parent_session_id="p"))
    recorder.close_open_calls()
    write_scenario(tmp_path / "s", store.sessions())
    loaded = load_scenario(tmp_path / "s")
    assert loaded.scripts[1].first_user_text == "Task:alpha"  # compared as on the wire
    assert loaded.scripts[1].first_user_shown == "Task: ¦ alpha"
    model = ReplayModel(loaded)
    list(model.stream(blocks("go"), session_id="p"))
    with pytest.raises(ReplayBindingError) as info:
        list(model.stream(blocks("Task:", "beta"), session_id="x", parent_session_id="p"))
    message = str(info.value)
    assert message.startswith("session 'x' (first user message 'Task: ¦ beta')")
    assert "(unbound: session.1.jsonl: 'Task: ¦ alpha')" in message


class FakeLive:
    def __init__(self, answers: dict[str, list[list[dict[str, Any]]]]):
        self.answers = answers

    def stream(self, request: Any, *, session_id: str, **kwargs: Any) -> Iterable[Any]:
        return iter(self.answers[session_id].pop(0))


def test_errors_quote_the_first_message_as_it_was_when_the_session_bound() -> None:
    # The first message is read from the first request only when an error names it; an
    # agent that keeps adding to the same messages list must not change what it quotes.
    model = ReplayModel(two_sessions())
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    for _ in range(3):
        list(model.stream({"messages": messages}, session_id="X"))
        messages.append({"role": "assistant", "content": "ok"})
        messages.append({"role": "user", "content": "and then?"})
    with pytest.raises(ReplayExhaustedError, match="session 'X' \\(first user message 'hi'\\)"):
        list(model.stream({"messages": messages}, session_id="X"))


def test_a_call_past_the_end_is_exhausted_and_never_wraps_around() -> None:
    model = ReplayModel(two_sessions())
    for _ in range(3):
        list(model.stream(REQUEST, session_id="X"))
    with pytest.raises(ReplayExhaustedError) as info:
        list(model.stream(REQUEST, session_id="X"))
    err = info.value
    assert str(err) == (
        "session 'X' (first user message 'hi') asked for call #4, but its recording "
        "(session.jsonl, recorded session "
        "'session') has 3 call(s); the code under test made more model calls than were "
        "recorded; re-record with --dsh-record"
    )
    assert (err.session_id, err.recorded_id, err.file, err.call_number, err.recorded) == (
        "X",
        "session",
        "session.jsonl",
        4,
        3,
    )
    with pytest.raises(ReplayExhaustedError, match="call #5"):
        asyncio.run(collect(model.astream(REQUEST, session_id="X")))
    assert model.bindings["X"].cursor == 5
    assert model.bindings["X"].remaining == 0


def test_the_anonymous_session_is_named_in_errors() -> None:
    model = ReplayModel(scenario(script("session.jsonl", [])))
    with pytest.raises(ReplayExhaustedError, match=r"^the anonymous session \(calls without "):
        list(model.stream(REQUEST))


def test_replay_errors_are_dsh_replay_errors() -> None:
    for cls in (
        ReplayBindingError,
        ReplayExhaustedError,
        ReplayedModelError,
        ReplayCancelledError,
        ReplayConsumptionError,
    ):
        assert issubclass(cls, DshReplayError)


# --- entries: throw, hang ---------------------------------------------------------------


def throw_scenario() -> Scenario:
    prefix = reply("half")[:2]
    return scenario(
        script(
            "session.jsonl",
            [ThrowEntry(prefix, "simulated provider error (HTTP 401)", "AUTH"), call("after")],
        )
    )


def test_a_throw_entry_streams_its_prefix_then_raises() -> None:
    model = ReplayModel(throw_scenario())
    got: list[Chunk] = []
    with pytest.raises(ReplayedModelError) as info:
        got.extend(model.stream(REQUEST))  # keeps what came before the error
    assert got == reply("half")[:2]
    assert (info.value.message, info.value.code) == ("simulated provider error (HTTP 401)", "AUTH")
    assert texts(model.stream(REQUEST)) == ["after"]


def test_a_throw_entry_through_astream() -> None:
    model = ReplayModel(throw_scenario())
    got: list[Chunk] = []

    async def run() -> None:
        async for chunk in model.astream(REQUEST):
            got.append(chunk)

    with pytest.raises(ReplayedModelError, match=r"HTTP 401\) \(code AUTH\)"):
        asyncio.run(run())
    assert got == reply("half")[:2]


def hang_scenario(ready: str | None = ".ready") -> Scenario:
    return scenario(script("session.jsonl", [HangEntry(ready_file=ready), call("next")]))


def test_hang_yields_the_prefix_writes_the_ready_file_on_the_third_read(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(), workdir=tmp_path)
    cancel = threading.Event()
    stream = model.stream(REQUEST, session_id="s", cancel=cancel)
    assert next(stream) == PREFIX[0]
    assert next(stream) == PREFIX[1]
    assert not (tmp_path / ".ready").exists()
    cancel.set()
    with pytest.raises(ReplayCancelledError) as info:
        next(stream)
    assert (tmp_path / ".ready").read_bytes() == b""
    assert str(info.value) == (
        "session 's', call #1 (recorded session 'session', session.jsonl) was cancelled "
        "while its recorded stream hung"
    )
    assert texts(model.stream(REQUEST, session_id="s")) == ["next"]


def test_hang_blocks_until_model_cancel_from_another_thread(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(), workdir=tmp_path)
    got: list[Chunk] = []
    errors: list[BaseException] = []
    two = threading.Event()

    def consume() -> None:
        try:
            for chunk in model.stream(REQUEST, session_id="s"):
                got.append(chunk)
                if len(got) == 2:
                    two.set()
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=consume)
    thread.start()
    assert two.wait(10)
    model.cancel("s")
    thread.join(10)
    assert not thread.is_alive()
    assert got == PREFIX
    assert len(errors) == 1
    assert isinstance(errors[0], ReplayCancelledError)


def test_hang_with_a_caller_event_also_ends_on_model_cancel(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(None), workdir=tmp_path)
    stream = model.stream(REQUEST, session_id="s", cancel=threading.Event())
    assert list(zip(range(2), stream, strict=False))
    done = threading.Event()
    outcome: list[BaseException] = []

    def third() -> None:
        try:
            next(stream)
        except BaseException as err:
            outcome.append(err)
        done.set()

    thread = threading.Thread(target=third)
    thread.start()
    model.cancel("s")
    assert done.wait(10)
    thread.join(10)
    assert isinstance(outcome[0], ReplayCancelledError)


def test_astream_hang_ends_with_task_cancellation(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(), workdir=tmp_path)
    got: list[Chunk] = []

    async def consume() -> None:
        async for chunk in model.astream(REQUEST, session_id="s"):
            got.append(chunk)

    async def main() -> None:
        task = asyncio.create_task(consume())
        while not (tmp_path / ".ready").exists():
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert got == PREFIX


def test_astream_hang_ends_with_model_cancel(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(), workdir=tmp_path)

    async def main() -> list[Chunk]:
        got: list[Chunk] = []

        async def consume() -> None:
            async for chunk in model.astream(REQUEST, session_id="s"):
                got.append(chunk)

        task = asyncio.create_task(consume())
        while not (tmp_path / ".ready").exists():
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        model.cancel("s")
        with pytest.raises(ReplayCancelledError, match="while its recorded stream hung"):
            await task
        return got

    assert asyncio.run(main()) == PREFIX


def test_astream_hang_ends_with_an_asyncio_event(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(), workdir=tmp_path)

    async def main() -> None:
        cancel = asyncio.Event()
        task = asyncio.create_task(collect(model.astream(REQUEST, session_id="s", cancel=cancel)))
        while not (tmp_path / ".ready").exists():
            await asyncio.sleep(0)
        cancel.set()
        with pytest.raises(ReplayCancelledError):
            await task

    asyncio.run(main())


def test_model_cancel_from_another_thread_wakes_astream(tmp_path: Path) -> None:
    model = ReplayModel(hang_scenario(), workdir=tmp_path)

    async def main() -> None:
        task = asyncio.create_task(collect(model.astream(REQUEST, session_id="s")))
        while not (tmp_path / ".ready").exists():
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        thread = threading.Thread(target=model.cancel, args=("s",))
        thread.start()
        with pytest.raises(ReplayCancelledError):
            await task
        thread.join()

    asyncio.run(main())


def test_cancel_types_are_checked_before_binding() -> None:
    model = ReplayModel(two_sessions())
    with pytest.raises(TypeError, match="threading.Event"):
        model.stream(REQUEST, cancel=asyncio.Event())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="asyncio.Event"):
        model.astream(REQUEST, cancel=threading.Event())  # type: ignore[arg-type]
    assert model.bindings == {}


def test_cancel_stops_a_chunk_stream_between_chunks_and_spares_later_calls() -> None:
    model = ReplayModel(two_sessions())
    stream = model.stream(REQUEST, session_id="p")
    assert next(stream)["type"] == "block-start"
    model.cancel("p")
    with pytest.raises(ReplayCancelledError, match=r"session 'p', call #1 .* was cancelled$"):
        next(stream)
    assert texts(model.stream(REQUEST, session_id="p")) == ["p2"]
    model.cancel("never-bound")  # ignored


def test_a_set_event_cancels_before_the_first_chunk() -> None:
    model = ReplayModel(two_sessions())
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ReplayCancelledError):
        next(model.stream(REQUEST, cancel=cancel))


def test_ready_file_relative_to_workdir_and_never_outside(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    nested = ReplayModel(hang_scenario("sub/dir/.ready"), workdir=work)
    stream = nested.stream(REQUEST, cancel=_set_event())
    with pytest.raises(ReplayCancelledError):
        list(stream)
    assert (work / "sub" / "dir" / ".ready").is_file()

    for bad in ("../escape", str(tmp_path / "abs-outside")):
        model = ReplayModel(hang_scenario(bad), workdir=work)
        stream = model.stream(REQUEST, cancel=_set_event())
        with pytest.raises(ScriptError, match="outside the working directory"):
            list(stream)
    assert not (tmp_path / "escape").exists()
    assert not (tmp_path / "abs-outside").exists()

    inside = ReplayModel(hang_scenario(str(work / "abs-inside")), workdir=work)
    with pytest.raises(ReplayCancelledError):
        list(inside.stream(REQUEST, cancel=_set_event()))
    assert (work / "abs-inside").is_file()


def test_ready_file_defaults_to_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    model = ReplayModel(hang_scenario())
    with pytest.raises(ReplayCancelledError):
        list(model.stream(REQUEST, cancel=_set_event()))
    assert (tmp_path / ".ready").is_file()


def _set_event() -> threading.Event:
    event = threading.Event()
    event.set()
    return event


# --- placeholders --------------------------------------------------------------------------


def placeholder_scenario() -> Scenario:
    chunks = reply("goal {{fromRequest:goal-[0-9a-f-]+}}")
    return scenario(
        script(
            "session.jsonl",
            [
                ChunksEntry(chunks),
                ThrowEntry([], "no {{fromRequest:goal-([0-9a-f]+)}}", "E_{{fromRequest:(AUTH)}}"),
                HangEntry(ready_file=".ready-{{fromRequest:goal-([0-9a-f]+)}}"),
                ChunksEntry(reply("{{fromRequest:run-\\d+}}")),
            ],
        )
    )


def test_placeholders_resolve_in_chunks_throw_fields_and_ready_file(tmp_path: Path) -> None:
    model = ReplayModel(placeholder_scenario(), workdir=tmp_path)
    request = {"messages": [{"role": "user", "content": "use goal-1a2b then goal-ff AUTH"}]}
    chunks = list(model.stream(request))
    assert texts(chunks) == ["goal goal-ff"]
    assert chunks[2]["block"]["text"] == "goal goal-ff"
    with pytest.raises(ReplayedModelError) as info:
        list(model.stream(request))
    assert (info.value.message, info.value.code) == ("no ff", "E_AUTH")
    with pytest.raises(ReplayCancelledError):
        list(model.stream(request, cancel=_set_event()))
    assert (tmp_path / ".ready-ff").is_file()
    with pytest.raises(PlaceholderError) as err:
        list(model.stream(request))
    assert str(err.value) == (
        "session.jsonl: the anonymous session (calls without session_id), call #4 (recorded "
        "session 'session', session.jsonl): fromRequest pattern \"run-\\\\d+\" matched nothing "
        "in the request (36 characters of message text searched); the live request does not "
        "carry the value this recorded entry expects"
    )


def test_a_placeholder_error_names_the_sidecar_that_holds_it(tmp_path: Path) -> None:
    from support.scenarios import make_scenario

    directory = make_scenario(tmp_path / "s", primary=["recorded"])
    chunks = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": "{{fromRequest:nomatch-[0-9]+}}"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    sidecar = directory / "replay.override.json"
    sidecar.write_text(
        json.dumps({"patches": [{"at": 0, "entry": {"kind": "chunks", "chunks": chunks}}]})
    )
    model = ReplayModel(load_scenario(directory))
    with pytest.raises(PlaceholderError) as err:
        list(model.stream({"messages": [{"role": "user", "content": "no id here"}]}))
    assert err.value.path == str(sidecar)
    assert str(err.value).startswith(f"{sidecar}: ")


@pytest.mark.parametrize("field", ["message", "code"])
def test_a_throw_field_that_resolves_to_nothing_is_a_script_error(field: str) -> None:
    # a literal empty message or code is refused when the sidecar loads; a resolved one
    # would throw an error with nothing to say
    fields = {"message": "failed", "code": "E_AUTH", field: "{{fromRequest:x=([a-z]*)}}"}
    model = ReplayModel(
        scenario(script("session.jsonl", [ThrowEntry([], fields["message"], fields["code"])]))
    )
    with pytest.raises(ScriptError, match=f"the throw entry's {field} .* resolves to an empty"):
        list(model.stream({"messages": [{"role": "user", "content": "x="}]}))


def test_placeholder_errors_surface_through_astream_too() -> None:
    model = ReplayModel(placeholder_scenario())
    with pytest.raises(PlaceholderError, match="call #1 .*matched nothing"):
        asyncio.run(collect(model.astream({"messages": []})))


# --- pacing --------------------------------------------------------------------------------


def test_pace_ms_must_be_a_non_negative_integer() -> None:
    for bad in (-1, 1.5, True, "5", None):
        with pytest.raises(ValueError, match="pace_ms must be a non-negative integer"):
            ReplayModel(two_sessions(), pace_ms=bad)  # type: ignore[arg-type]
    assert ReplayModel(two_sessions(), pace_ms=25).pace_ms == 25


def test_pacing_waits_before_every_chunk_through_the_injected_sleep() -> None:
    waits: list[float] = []
    model = ReplayModel(two_sessions(), pace_ms=25, sleep=waits.append)
    assert list(model.stream(REQUEST)) == reply("p1")
    assert waits == [0.025] * 5


def test_async_pacing_uses_the_injected_asleep() -> None:
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    model = ReplayModel(two_sessions(), pace_ms=10, asleep=asleep)
    assert asyncio.run(collect(model.astream(REQUEST))) == reply("p1")
    assert waits == [0.01] * 5


def test_hang_prefix_is_never_paced(tmp_path: Path) -> None:
    waits: list[float] = []
    model = ReplayModel(hang_scenario(None), pace_ms=5, sleep=waits.append, workdir=tmp_path)
    with pytest.raises(ReplayCancelledError):
        list(model.stream(REQUEST, cancel=_set_event()))
    assert waits == []


def test_cancel_during_a_pacing_wait() -> None:
    model: ReplayModel

    def sleep(seconds: float) -> None:
        model.cancel("p")

    model = ReplayModel(two_sessions(), pace_ms=1, sleep=sleep)
    with pytest.raises(ReplayCancelledError, match="was cancelled while pacing"):
        list(model.stream(REQUEST, session_id="p"))


def test_async_cancel_during_a_pacing_wait() -> None:
    model: ReplayModel

    async def asleep(seconds: float) -> None:
        model.cancel("p")

    model = ReplayModel(two_sessions(), pace_ms=1, asleep=asleep)
    with pytest.raises(ReplayCancelledError, match="while pacing"):
        asyncio.run(collect(model.astream(REQUEST, session_id="p")))


def test_default_clock_pacing_is_interruptible() -> None:
    # A 10-minute pace: only an immediate wake-up lets this test finish.
    model = ReplayModel(two_sessions(), pace_ms=600_000)
    stream = model.stream(REQUEST, session_id="p")
    timer = threading.Timer(0.01, model.cancel, args=("p",))
    timer.start()
    with pytest.raises(ReplayCancelledError, match="was cancelled"):
        next(stream)
    timer.join()

    amodel = ReplayModel(two_sessions(), pace_ms=600_000)

    async def main() -> None:
        task = asyncio.create_task(collect(amodel.astream(REQUEST, session_id="p")))
        await asyncio.sleep(0)
        amodel.cancel("p")
        with pytest.raises(ReplayCancelledError, match="while pacing"):
            await task

    asyncio.run(main())


# --- consumption and diagnostics --------------------------------------------------------


def test_assert_consumed_passes_when_every_call_was_made() -> None:
    model = ReplayModel(two_sessions())
    for _ in range(3):
        list(model.stream(REQUEST, session_id="p"))
    list(model.stream(REQUEST, session_id="c"))
    model.assert_consumed()


def test_assert_consumed_lists_unused_calls_and_unbound_scripts() -> None:
    scn = scenario(
        script("session.jsonl", [call("p1"), call("p2")], rid="P"),
        script("session.1.jsonl", [call("c1")], rid="C1"),
        script("session.2.jsonl", [], rid="EMPTY"),
    )
    model = ReplayModel(scn)
    list(model.stream(REQUEST, session_id="live-p"))
    with pytest.raises(ReplayConsumptionError) as info:
        model.assert_consumed()
    assert info.value.problems == [
        "session 'live-p' (first user message 'hi') made 1 of the 2 call(s) recorded in "
        "session.jsonl (recorded session 'P')",
        "recorded session 'C1' (session.1.jsonl, 1 call(s)) was never replayed: no session "
        "of the code under test started as it did",
    ]
    assert str(info.value) == (
        "scenario mem-scenario was not fully consumed: "
        + "; ".join(info.value.problems)
        + ". The code under test made fewer model calls than were recorded; re-record with "
        "--dsh-record if that is intended"
    )
    assert isinstance(info.value, AssertionError)


def test_a_never_bound_script_without_calls_is_fine() -> None:
    model = ReplayModel(scenario(script("session.jsonl", [])))
    model.assert_consumed()


def test_bindings_are_frozen_snapshots() -> None:
    model = ReplayModel(two_sessions())
    list(model.stream(REQUEST, session_id="p"))
    snapshot = model.bindings
    binding = snapshot["p"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        binding.cursor = 9  # type: ignore[misc]
    list(model.stream(REQUEST, session_id="p"))
    assert snapshot["p"].cursor == 1
    assert model.bindings["p"] == ReplayBinding("session", "session.jsonl", 2, 3)
    assert model.bindings["p"].remaining == 1
    assert "1 bound" in repr(model)


# --- concurrency -------------------------------------------------------------------------


def test_concurrent_threads_bind_every_script_exactly_once() -> None:
    scripts = [script("session.jsonl", [call("s0")])] + [
        script(f"session.{i}.jsonl", [call(f"s{i}")], created=i) for i in range(1, 16)
    ]
    model = ReplayModel(scenario(*scripts))
    barrier = threading.Barrier(16)
    results: dict[int, list[str]] = {}

    def run(n: int) -> None:
        barrier.wait()
        results[n] = texts(model.stream(REQUEST, session_id=f"t{n}"))

    threads = [threading.Thread(target=run, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(text for got in results.values() for text in got) == sorted(
        f"s{i}" for i in range(16)
    )
    assert {b.file for b in model.bindings.values()} == {s.file for s in scripts}
    model.assert_consumed()


def test_concurrent_asyncio_tasks_bind_every_script_exactly_once() -> None:
    scripts = [script("session.jsonl", [call("s0"), call("s0b")])] + [
        script(f"session.{i}.jsonl", [call(f"s{i}"), call(f"s{i}b")], created=i)
        for i in range(1, 8)
    ]
    model = ReplayModel(scenario(*scripts))

    async def session(n: int) -> list[str]:
        out: list[str] = []
        for _ in range(2):
            async for chunk in model.astream(REQUEST, session_id=f"t{n}"):
                if chunk["type"] == "text-delta":
                    out.append(chunk["text"])
                await asyncio.sleep(0)
        return out

    async def main() -> list[list[str]]:
        return list(await asyncio.gather(*(session(n) for n in range(8))))

    for got in asyncio.run(main()):
        assert got[1] == got[0] + "b"
    model.assert_consumed()


def test_a_binding_error_shows_where_long_first_messages_differ() -> None:
    """Two long messages alike at the start show their difference, not the same prefix."""
    start = "You are a subagent. Double-check the answer carefully and report back. " * 2
    scripts = []
    for s in lineage_scenario().scripts:
        if s.recorded_id == "A":
            s = dataclasses.replace(s, first_user_text=start + "Context: /tmp/rec/work.")
        scripts.append(s)
    model = ReplayModel(dataclasses.replace(lineage_scenario(), scripts=tuple(scripts)))
    list(model.stream(REQUEST, session_id="p"))
    with pytest.raises(ReplayBindingError) as info:
        list(
            model.stream(
                ask(start + "Context: /srv/new/job."), session_id="a", parent_session_id="p"
            )
        )
    message = str(info.value)
    assert "back. Context: /srv/new/job.' matches no unbound recorded child" in message
    assert "session.1.jsonl: '...ort back. Context: /tmp/rec/work.'" in message
    assert "started more sessions than were recorded" not in message
    assert "differs from every unbound recorded child's" in message


@pytest.mark.parametrize("first", ["worker-0", "worker-1"])
def test_children_alike_bind_to_the_recording_of_their_own_id(tmp_path: Path, first: str) -> None:
    # Two children with the same task, named by the code (x-dsh-session-id, session_id):
    # whichever called first took the first recording, and worker-1 got worker-0's answer.
    store = SessionStore(MemoryBackend())
    answers = {
        "main": [text_call("go on")],
        "worker-0": [text_call("archive 0")],
        "worker-1": [text_call("archive 1")],
    }
    recorder = RecordingModel(FakeLive(answers), store)
    list(recorder.stream(ask("plan"), session_id="main"))
    for worker in ("worker-0", "worker-1"):
        list(recorder.stream(ask("Research Rome"), session_id=worker, parent_session_id="main"))
    recorder.close_open_calls()
    write_scenario(tmp_path / "s", store.sessions())
    model = ReplayModel(load_scenario(tmp_path / "s"))
    list(model.stream(ask("plan"), session_id="main"))
    others = {"worker-0": "worker-1", "worker-1": "worker-0"}
    for worker in (first, others[first]):
        got = texts(model.stream(ask("Research Rome"), session_id=worker, parent_session_id="main"))
        assert got == [f"archive {worker[-1]}"]
