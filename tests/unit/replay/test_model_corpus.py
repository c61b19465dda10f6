"""ReplayModel over every real recording of the conformance corpus.

A well-behaved caller (one live session per recorded session, every call read to the
end) must receive exactly the reference's scripts (``expected.json``), through
``stream`` and ``astream``, with sessions run one after another and with their calls
interleaved, and must leave nothing unconsumed.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus, scenario

from pytest_dsh_replay import load_scenario
from pytest_dsh_replay._errors import ReplayCancelledError, ReplayedModelError
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.scenario import load_session_script

GOAL = "goal-0c0ffee0-1234"
PLACEHOLDER = "{{fromRequest:goal-[0-9a-f-]+}}"
HANG_PREFIX = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "partial"},
]


def _loadable() -> list[Path]:
    out = []
    for path in corpus_scenarios():
        if json.loads((path / "expected.json").read_text("utf-8"))["ok"]:
            out.append(path)
    return out


LOADABLE = _loadable()


def expected_scripts(path: Path) -> list[dict[str, Any]]:
    """The reference's scripts, with the corpus's one placeholder resolved to GOAL."""
    text = (path / "expected.json").read_text("utf-8")
    text = text.replace(PLACEHOLDER, GOAL)
    assert "{{fromRequest:" not in text, "a new placeholder pattern in the corpus"
    scripts: list[dict[str, Any]] = json.loads(text)["scripts"]
    return scripts


def request(user_text: str | None) -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"work on {GOAL}"}]
    if user_text is not None:
        messages.append({"role": "user", "content": [{"type": "text", "text": user_text}]})
    return {"messages": messages}


async def drain(stream: AsyncIterator[dict[str, Any]], into: list[dict[str, Any]]) -> None:
    async for chunk in stream:
        into.append(chunk)


class Caller:
    """Replays one call the way a well-behaved caller reads it, and checks it."""

    def __init__(self, model: ReplayModel, workdir: Path):
        self.model = model
        self.workdir = workdir

    def check_sync(
        self, entry: dict[str, Any], req: dict[str, Any], sid: str, parent: str | None
    ) -> None:
        if entry["kind"] == "hang":
            cancel = threading.Event()
            stream = self.model.stream(req, session_id=sid, parent_session_id=parent, cancel=cancel)
            assert [next(stream), next(stream)] == HANG_PREFIX
            cancel.set()
            with pytest.raises(ReplayCancelledError):
                next(stream)
            self.check_ready(entry)
            return
        got: list[dict[str, Any]] = []
        stream = self.model.stream(req, session_id=sid, parent_session_id=parent, turn=1, step=1)
        if entry["kind"] == "throw":
            with pytest.raises(ReplayedModelError) as info:
                got.extend(stream)  # keeps the prefix streamed before the error
            assert (info.value.message, info.value.code) == (entry["message"], entry["code"])
        else:
            got = list(stream)
        assert got == entry["chunks"]

    async def check_async(
        self, entry: dict[str, Any], req: dict[str, Any], sid: str, parent: str | None
    ) -> None:
        stream = self.model.astream(req, session_id=sid, parent_session_id=parent)
        got: list[dict[str, Any]] = []
        if entry["kind"] == "hang":
            async for chunk in stream:
                got.append(chunk)
                if len(got) == 2:
                    break
            assert got == HANG_PREFIX
            self.model.cancel(sid)
            with pytest.raises(ReplayCancelledError):
                await stream.__anext__()
            self.check_ready(entry)
            return
        if entry["kind"] == "throw":
            with pytest.raises(ReplayedModelError) as info:
                await drain(stream, got)
            assert (info.value.message, info.value.code) == (entry["message"], entry["code"])
        else:
            got = [chunk async for chunk in stream]
        assert got == entry["chunks"]

    def check_ready(self, entry: dict[str, Any]) -> None:
        if "readyFile" in entry:
            ready = self.workdir / entry["readyFile"]
            assert ready.is_file()
            ready.unlink()


def sequential(scripts: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(session, call) pairs: every call of session 0, then of session 1, ..."""
    return [(i, k) for i, s in enumerate(scripts) for k in range(len(s["entries"]))]


def interleaved(scripts: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """Round robin: call 1 of every session in script order, then call 2, ..."""
    longest = max(len(s["entries"]) for s in scripts)
    return [(i, k) for k in range(longest) for i, s in enumerate(scripts) if k < len(s["entries"])]


def plan(
    path: Path, order: str, lineage: bool
) -> list[tuple[dict[str, Any], dict[str, Any], str, str | None]]:
    scripts = expected_scripts(path)
    loaded = load_scenario(path).scripts
    live = [f"live-{i}" for i in range(len(scripts))]
    by_recorded = {s.recorded_id: i for i, s in enumerate(loaded)}
    steps = []
    for i, k in (interleaved if order == "interleaved" else sequential)(scripts):
        parent: str | None = None
        user_text: str | None = None
        if lineage:
            recorded_parent = loaded[i].parent_session
            if recorded_parent in by_recorded:
                parent = live[by_recorded[recorded_parent]]
            user_text = loaded[i].first_user_text
        steps.append((scripts[i]["entries"][k], request(user_text), live[i], parent))
    return steps


ORDERS = [
    pytest.param("sequential", False, id="sequential"),
    pytest.param("interleaved", False, id="interleaved"),
    pytest.param("interleaved", True, id="interleaved-lineage"),
]


@pytest.mark.parametrize(("order", "lineage"), ORDERS)
@pytest.mark.parametrize("path", corpus_params(LOADABLE))
def test_stream_replays_the_reference_scripts(
    path: Path | None, order: str, lineage: bool, tmp_path: Path
) -> None:
    require_corpus()
    assert path is not None
    model = ReplayModel(load_scenario(path), workdir=tmp_path)
    caller = Caller(model, tmp_path)
    for entry, req, sid, parent in plan(path, order, lineage):
        caller.check_sync(entry, req, sid, parent)
    model.assert_consumed()


@pytest.mark.parametrize(("order", "lineage"), ORDERS)
@pytest.mark.parametrize("path", corpus_params(LOADABLE))
def test_astream_replays_the_reference_scripts(
    path: Path | None, order: str, lineage: bool, tmp_path: Path
) -> None:
    require_corpus()
    assert path is not None
    model = ReplayModel(load_scenario(path), workdir=tmp_path)
    caller = Caller(model, tmp_path)

    async def run() -> None:
        for entry, req, sid, parent in plan(path, order, lineage):
            await caller.check_async(entry, req, sid, parent)

    asyncio.run(run())
    model.assert_consumed()


def test_the_corpus_exercises_every_entry_kind() -> None:
    require_corpus()
    kinds = {
        entry["kind"] for path in LOADABLE for s in expected_scripts(path) for entry in s["entries"]
    }
    assert kinds == {"chunks", "throw", "hang"}
    assert len(LOADABLE) == 120


# --- fork children (see docs/format.md#child-scripts) ----------------------------------------


def _text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        c.get("text", "") for c in chunks if c["type"] in ("text-delta", "reasoning-delta")
    )


@pytest.mark.parametrize("name", ["subagent-fork-in-process", "subagent-mixed"])
def test_a_fork_child_receives_its_own_chunks_not_its_parents(name: str, tmp_path: Path) -> None:
    require_corpus()
    path = scenario(name)
    scripts = expected_scripts(path)
    fork = next(i for i, s in enumerate(scripts) if s["seedLength"] > 0)
    own = scripts[fork]["entries"][0]["chunks"]
    # The child's log starts with the parent's calls it inherited (its seed).
    inherited = load_session_script(path / scripts[fork]["file"], primary=True).entries
    assert inherited[0].to_json() == scripts[0]["entries"][0]
    assert _text(own) != _text(inherited[0].chunks)

    model = ReplayModel(load_scenario(path), workdir=tmp_path)
    replayed: dict[int, list[list[dict[str, Any]]]] = {}
    for i, _ in interleaved(scripts):
        replayed.setdefault(i, []).append(list(model.stream(request(None), session_id=str(i))))
    assert replayed[fork][0] == own
    assert replayed[fork][0] != replayed[0][0]
    assert len(replayed[fork]) == len(scripts[fork]["entries"])
    model.assert_consumed()
