"""Small scenario directories for plugin tests, recorded by the project's own recorder.

A scripted model answers each call with the next text of its session, and the recorder
logs the calls as recording does, so the scenarios are what ``--dsh-record`` would write
for an agent that sends the same requests (by default ``{"messages": []}``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_dsh_replay import (
    MemoryBackend,
    RecordingModel,
    ReplayEntry,
    Scenario,
    SessionScript,
    SessionStore,
    write_scenario,
)
from support.chunks import text_call


class _Scripted:
    def __init__(self, sessions: dict[str, list[str]]):
        self.texts = {sid: list(texts) for sid, texts in sessions.items()}

    def stream(self, request: Any, *, session_id: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield from text_call(self.texts[session_id].pop(0))


def make_scenario(directory: Path, *, ask: str | None = None, **sessions: list[str]) -> Path:
    """Record a scenario: ``primary=[texts]`` plus children ``child1=[...]``, a call per text.

    ``ask`` is the primary's user message in every call (default: no message). The
    primary's id is ``p``, a child's its keyword; children are created in keyword order.
    """
    clock = itertools.count(1)
    store = SessionStore(MemoryBackend(), clock=lambda: next(clock))
    ids = {name: "p" if name == "primary" else name for name in sessions}
    model = RecordingModel(_Scripted({ids[n]: texts for n, texts in sessions.items()}), store)
    for name, texts in sessions.items():
        messages = [{"role": "user", "content": ask}] if ask and name == "primary" else []
        parent = None if name == "primary" else "p"
        if parent is not None and store.get(parent) is None:
            store.create(parent)
        for _ in texts:
            list(
                model.stream({"messages": messages}, session_id=ids[name], parent_session_id=parent)
            )
    model.close_open_calls()
    write_scenario(directory, store.sessions())
    return directory


def one_session(
    *entries: ReplayEntry,
    path: Path = Path("mem-scenario"),
    recorded_id: str = "session",
    first: str | None = None,
) -> Scenario:
    """An in-memory scenario of one primary session whose script is ``entries``.

    ``first`` is the recorded session's first user message (what binds it by content).
    """
    script = SessionScript(
        file="session.jsonl",
        recorded_id=recorded_id,
        created_at=0,
        seed_length=0,
        parent_session=None,
        primary=True,
        entries=entries,
        first_user_text=first,
    )
    return Scenario(path=path, scripts=(script,))
