"""Byte flips over a SQLite store with a primary, a fork child and a spawn child (issue 41).

A flipped store must either be refused with a ``DshReplayError`` naming the store, or
load with the structure of the original: the same sessions, parents, seed lengths,
event counts and number of calls. Anything else is a *silent structural change*: a
store that loads as a scenario it never was (a child gone, a log shorter, a child under
another parent). The test suite runs a few hundred seeded flips;
``python3 benchmarks/fuzz.py --sqlite-flips N`` runs the same engine for longer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_dsh_replay import DshReplayError, SessionStore, SqliteBackend, load_scenario
from support.flips import flipped_loads

SEED = 41
CHILD_IDS = ("fork-child", "spawn-child")

Structure = list[tuple[str, str | None, int, int, int]]


def _turn(session: Any, turn: int, text: str, deltas: int) -> None:
    session.append("turn/start", {"turn": turn})
    content = [{"type": "text", "text": text}]
    session.append("user/message", {"content": content}, surfaceOp="append")
    for i in range(deltas):
        chunk = {"type": "text-delta", "index": 0, "text": f"piece {i} ü"}
        session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk})
    finish = {"type": "finish", "reason": {"kind": "stop"}}
    session.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": finish})
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def build_store(path: Path) -> bytes:
    """A store of three sessions: a primary of two turns, a fork child, a spawn child."""
    store = SessionStore(SqliteBackend(path))
    primary = store.create("primary", meta={"cwd": "/work"})
    _turn(primary, 1, "first task", 4)
    _turn(primary, 2, "second task", 4)
    fork = store.fork("primary", child_session_id=CHILD_IDS[0])
    _turn(fork, 3, "fork task", 1)
    spawn = store.create(CHILD_IDS[1], meta={"parentSession": "primary"})
    _turn(spawn, 1, "spawn task", 1)
    store.close()
    return path.read_bytes()


def structure(path: Path) -> Structure:
    """What a load gives, structurally: per session its id, parent, seed, events, calls."""
    return sorted(
        (s.recorded_id, s.parent_session, s.seed_length, s.event_count, len(s.entries))
        for s in load_scenario(path).scripts
    )


def flip_loop(
    path: Path,
    flips: int,
    seed: int = SEED,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Flip one byte of the store at ``path`` per case, ``flips`` times; count outcomes.

    Returns:
        How many cases ended in each outcome: ``"same"`` (loaded, structure unchanged)
        or the refusal's type name.

    Raises:
        AssertionError: A case loaded with another structure, or was refused with an
            error that does not name the store; the message names the case, the byte
            and the flip, so the same ``seed`` reproduces it.
    """
    expected = structure(path)
    outcomes: dict[str, int] = {}
    for n, (where, found) in enumerate(flipped_loads(path, flips, random.Random(seed), structure)):
        if isinstance(found, DshReplayError):
            named = str(path) in str(found)
            assert named, f"{where}: the error does not name the store: {found}"
            outcome = type(found).__name__
        else:
            assert found == expected, f"{where}: a silent structural change: {found}"
            outcome = "same"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if progress is not None:
            progress(n + 1)
    return outcomes
