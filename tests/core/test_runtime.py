"""DshReplay without pytest: what the fixture does, usable from any runner."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from example_agent import ExampleAgent
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pytest_dsh_replay import LogMismatchError, ReplayConsumptionError
from pytest_dsh_replay._naming import resolve_scenario, scenario_name
from pytest_dsh_replay._runtime import DshReplay

EXAMPLES = Path(__file__).resolve().parents[2] / "example_snapshots"
PROMPT = '[[tool lookup {"key": "capital_of_france"}]][[tool add {"a": 2, "b": 3}]]'


def test_open_run_finish(tmp_path: Path) -> None:
    replay = DshReplay.open(EXAMPLES / "tool-call", workdir=tmp_path)
    assert ExampleAgent(replay.model, replay.sessions).run(PROMPT) == "tool results: Paris; 5"
    replay.finish()
    assert not any(tmp_path.iterdir())  # replaying writes nothing to disk


def test_finish_reports_unused_calls(tmp_path: Path) -> None:
    replay = DshReplay.open(EXAMPLES / "tool-call", workdir=tmp_path)
    with pytest.raises(ReplayConsumptionError, match=r"2 call\(s\)\) was never bound"):
        replay.finish()


def test_finish_reports_a_different_behaviour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import example_agent

    replay = DshReplay.open(EXAMPLES / "tool-call", workdir=tmp_path)
    monkeypatch.setitem(example_agent.FACTS, "capital_of_france", "Rome")
    ExampleAgent(replay.model, replay.sessions).run(PROMPT)
    with pytest.raises(LogMismatchError, match='recorded: "Paris"'):
        replay.finish()


def test_scenario_names_and_roots(tmp_path: Path) -> None:
    assert scenario_name("test_a::test_b[x]") == "test_a.test_b[x]"
    assert scenario_name("test_a::test_b[a/b]").startswith("test_a.test_b[a_b]-")
    assert resolve_scenario(tmp_path, "a/b") == tmp_path / "a" / "b"
    assert resolve_scenario(tmp_path, "/abs") == Path("/abs")


def test_scenario_names_are_injective() -> None:
    # "::" becomes "." in a derived name; a "." of the test's own must not collide.
    assert scenario_name("test_m::test_x[a::b]") != scenario_name("test_m::test_x[a.b]")
    assert scenario_name("test_m::test_x[0.5]").startswith("test_m.test_x[0.5]-")
    assert scenario_name("TestA::test_b") == "TestA.test_b"


_NAMES = st.lists(
    st.one_of(st.text(alphabet="ab_[]-/ é", min_size=1, max_size=3), st.sampled_from(["::", "."])),
    min_size=1,
    max_size=6,
).map("".join)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.lists(_NAMES, min_size=2, max_size=2, unique=True), st.booleans())
def test_distinct_test_names_never_share_a_scenario(names: list[str], swap: bool) -> None:
    first, second = names
    if swap:  # the pair most likely to collide: "::" and "." exchanged
        second = first.replace("::", ".") if "::" in first else first.replace(".", "::")
        assume(second != first)
    assert scenario_name(first) != scenario_name(second)


class ScriptedLive:
    """Streams ``text`` in pieces for every call, sync and async."""

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for piece in ("one ", "two ", "three"):
            yield {"type": "text-delta", "index": 0, "text": piece}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "one two three"}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

    async def astream(self, request: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.stream(request, **kwargs):
            yield chunk


REQUEST = {"messages": [{"role": "user", "content": "count"}]}


async def stops_early_async(model: Any) -> list[str]:
    seen = []
    async for chunk in model.astream(REQUEST, session_id="s"):
        seen.append(chunk["type"])
        if chunk["type"] == "text-delta":
            break  # no aclose(): the stream stays open until it is collected
    seen += [c["type"] async for c in model.astream(REQUEST, session_id="s")]
    return seen


def stops_early_sync(model: Any) -> list[str]:
    stream = model.stream(REQUEST, session_id="s")
    seen = [next(stream)["type"], next(stream)["type"]]
    seen += [c["type"] for c in model.stream(REQUEST, session_id="s")]  # `stream` still open
    return seen


@pytest.mark.parametrize(
    "agent", [lambda m: asyncio.run(stops_early_async(m)), stops_early_sync], ids=["async", "sync"]
)
def test_a_recording_with_an_early_exit_replays(
    tmp_path: Path, agent: Callable[[Any], list[str]]
) -> None:
    recording = DshReplay.record(tmp_path / "early", live=ScriptedLive(), workdir=tmp_path / "r")
    seen = agent(recording.model)
    recording.finish()
    replay = DshReplay.open(tmp_path / "early", workdir=tmp_path / "p")
    assert agent(replay.model) == seen
    replay.finish()  # every call consumed, the logs equal the recording's
    assert replay.scenario is not None
    first = replay.scenario.scripts[0].entries[0]
    assert first.chunks[-1]["reason"]["kind"] == "aborted"


def record_tree(target: Path, workdir: Path, question: str = "count") -> DshReplay:
    """Record a primary and a child with fresh random session ids."""
    recording = DshReplay.record(target, live=ScriptedLive(), workdir=workdir)
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())
    ask = {"messages": [{"role": "user", "content": question}]}
    list(recording.model.stream(ask, session_id=parent))
    list(recording.model.stream(REQUEST, session_id=child, parent_session_id=parent))
    recording.finish()
    return recording


def test_re_recording_unchanged_behaviour_leaves_the_files_untouched(tmp_path: Path) -> None:
    target = tmp_path / "stable"
    assert not record_tree(target, tmp_path / "1").unchanged

    def state() -> dict[str, tuple[bytes, int, int]]:
        return {
            p.name: (p.read_bytes(), p.stat().st_mtime_ns, p.stat().st_ino)
            for p in sorted(target.iterdir())
        }

    before = state()
    assert sorted(before) == ["session.1.jsonl", "session.jsonl"]
    again = record_tree(target, tmp_path / "2")
    assert again.unchanged
    assert state() == before  # same bytes (old ids and times), not even rewritten

    changed = record_tree(target, tmp_path / "3", question="count again")
    assert not changed.unchanged
    assert b"count again" in (target / "session.jsonl").read_bytes()

    # A file a write would remove (an override sidecar) makes it a plain re-record.
    (target / "replay.override.json").write_text("{}")
    assert not record_tree(target, tmp_path / "4", question="count again").unchanged
    assert not (target / "replay.override.json").exists()


def test_a_secret_the_code_sends_replays_against_its_redacted_recording(tmp_path: Path) -> None:
    secret = "sk-" + "x1y2" * 6
    ask = {"messages": [{"role": "user", "content": f"use {secret} please"}]}
    recording = DshReplay.record(tmp_path / "s", live=ScriptedLive(), workdir=tmp_path / "r")
    list(recording.model.stream(ask, session_id="main"))
    recording.finish()
    assert secret not in (tmp_path / "s" / "session.jsonl").read_text()
    replay = DshReplay.open(tmp_path / "s", workdir=tmp_path / "p")
    list(replay.model.stream(ask, session_id="main"))
    replay.finish()  # the secret and its [REDACTED] are the same message
    drifted = DshReplay.open(tmp_path / "s", workdir=tmp_path / "d")
    list(
        drifted.model.stream({"messages": [{"role": "user", "content": secret}]}, session_id="main")
    )
    with pytest.raises(LogMismatchError) as failure:
        drifted.finish()
    assert secret not in str(failure.value)
    assert '"[REDACTED]"' in str(failure.value)


class EchoLive:
    """Answers each call with the text of the request's last user message."""

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        text = request["messages"][-1]["content"]
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


def delegate(model: Any) -> None:
    """A parent starts a child under a fresh id, and the model names that id back."""
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())
    list(model.stream({"messages": [{"role": "user", "content": "go"}]}, session_id=parent))
    ask = {"messages": [{"role": "user", "content": "sub task"}]}
    list(model.stream(ask, session_id=child, parent_session_id=parent))
    note = {"role": "user", "content": f"started subagent {child}"}
    list(model.stream({"messages": [{"role": "user", "content": "go"}, note]}, session_id=parent))


def test_an_answer_that_names_a_live_child_id_replays_clean(tmp_path: Path) -> None:
    """The replayed answer repeats the recorded child id; it counts as the live child's."""
    recording = DshReplay.record(tmp_path / "echo", live=EchoLive(), workdir=tmp_path / "r")
    delegate(recording.model)
    recording.finish()
    replay = DshReplay.open(tmp_path / "echo", workdir=tmp_path / "p")
    delegate(replay.model)
    replay.finish()  # the logs compare equal: ids normalized through the bindings


class _NamesTheChild:
    """A live model whose answer to "report <id>" names that id (as a parent would)."""

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        last = str(request["messages"][-1]["content"])
        text = f"Child {last.split()[-1]} finished." if last.startswith("report") else "ok"
        yield {"type": "text-delta", "index": 0, "text": text}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": text}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


def _delegate(model: Any) -> str:
    """A parent that starts a child, then asks the model about it; returns the last answer."""
    parent, child = str(uuid.uuid4()), str(uuid.uuid4())

    def ask(session: str, messages: list[dict[str, Any]], **kw: Any) -> str:
        chunks = model.stream({"messages": messages}, session_id=session, **kw)
        return "".join(c.get("text", "") for c in chunks if c["type"] == "text-delta")

    start = [{"role": "user", "content": "start"}]
    ask(parent, start)
    ask(child, [{"role": "user", "content": "the task"}], parent_session_id=parent)
    report = [*start, {"role": "assistant", "content": "ok"}]
    return ask(parent, [*report, {"role": "user", "content": f"report {child}"}])


def test_a_replayed_answer_naming_a_child_shows_the_live_child_in_snapshots(
    tmp_path: Path,
) -> None:
    path = tmp_path / "scenario"
    recording = DshReplay.record(path, live=_NamesTheChild(), workdir=tmp_path / "r")
    _delegate(recording.model)
    recorded = recording.transcript(), recording.events_snapshot()
    recording.finish()

    replay = DshReplay.open(path, workdir=tmp_path / "p")
    answer = _delegate(replay.model)  # the recorded answer names the recorded child id
    assert answer.startswith("Child ")
    assert answer.split()[1] in replay.bound_ids()
    assert (replay.transcript(), replay.events_snapshot()) == recorded
    assert "{{id-2}} finished" in recorded[0]  # the child's own placeholder
    replay.finish()  # the log check counts it as the live child too
