"""Corrupt logs are refused: single-byte flips over a scenario's three stored forms.

For each flip the scenario is loaded as the plugin loads it (``load_scenario``) and its
scripts derived. The outcome must be one of:

- a typed refusal: a ``DshReplayError`` whose message names the file;
- a load equal to the original's except inside string values.

"Equal except inside string values" compares what a load gives the code under test,
the derived scripts (every session's entries as ``to_json()`` gives them, and the first
user message's text that binds the session), as JSON trees: the same structure (the
same keys in every object, the same lengths of arrays, the same type at every place),
the same numbers, booleans and nulls; only the contents of strings (object keys
excluded) may differ. Anything else (another exception, a different structure, a
changed number, a hang) fails the test.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from support.flips import flipped_loads
from support.hang_guard import deadline

from pytest_dsh_replay import DshReplayError, load_scenario
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._format.jsonl import dump_session_log
from pytest_dsh_replay._format.zstd import compress_frame
from pytest_dsh_replay._store.backends.sqlite import SqliteBackend

FLIPS = 500
SEED = 26
PER_LOAD_S = 5  # a load that runs longer is a hang
TOTAL_S = 60.0  # generous: the three loops take a few seconds


def _chunk(seq: int, step: int, chunk: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant/chunk", "seq": seq, "time": 1_700_000_000_000 + seq,
            "data": {"turn": 1, "step": step, "chunk": chunk}}  # fmt: skip


def _events() -> list[dict[str, Any]]:
    """One turn of two calls: reasoning and text, then a tool call; every chunk type."""
    out: list[dict[str, Any]] = []

    def add(kind: str, data: Any) -> None:
        out.append({"type": kind, "seq": len(out), "time": 1_700_000_000_000 + len(out),
                    "data": data})  # fmt: skip

    def chunk(step: int, value: dict[str, Any]) -> None:
        out.append(_chunk(len(out), step, value))

    add("turn/start", {"turn": 1})
    add("step/start", {"turn": 1, "step": 1})
    add("user/message", {"content": [{"type": "text", "text": "list the files"}],
                         "source": {"kind": "user"}, "role": "user", "id": "m-1"})  # fmt: skip
    chunk(1, {"type": "block-start", "index": 0, "blockType": "reasoning"})
    for piece in ("The ", "user ", "wants ", "files"):
        chunk(1, {"type": "reasoning-delta", "index": 0, "text": piece})
    chunk(1, {"type": "block-end", "index": 0,
              "block": {"type": "reasoning", "text": "The user wants files"}})  # fmt: skip
    chunk(1, {"type": "block-start", "index": 1, "blockType": "text"})
    for piece in ("Sure", ", ", "listing."):
        chunk(1, {"type": "text-delta", "index": 1, "text": piece})
    chunk(1, {"type": "block-end", "index": 1, "block": {"type": "text", "text": "Sure, listing."}})
    chunk(1, {"type": "block-start", "index": 2, "blockType": "tool-call"})
    for piece in ('{"cmd"', ':"ls', ' -la"}'):
        chunk(1, {"type": "tool-call-delta", "index": 2, "id": "call-1", "name": "bash",
                  "argumentsDelta": piece})  # fmt: skip
    chunk(1, {"type": "block-end", "index": 2, "block": {"type": "tool-call", "id": "call-1",
              "name": "bash", "arguments": '{"cmd":"ls -la"}'}})  # fmt: skip
    chunk(1, {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 9}})
    chunk(1, {"type": "finish", "reason": {"kind": "tool-calls"}})
    add("tool/call", {"turn": 1, "step": 1, "callId": "call-1", "name": "bash",
                      "arguments": '{"cmd":"ls -la"}'})  # fmt: skip
    add("step/end", {"turn": 1, "step": 1})
    add("step/start", {"turn": 1, "step": 2})
    chunk(2, {"type": "block-start", "index": 0, "blockType": "text"})
    for piece in ("Two ", "files", "."):
        chunk(2, {"type": "text-delta", "index": 0, "text": piece})
    chunk(2, {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Two files."}})
    chunk(2, {"type": "usage", "usage": {"inputTokens": 30, "outputTokens": 3,
                                         "cacheReadTokens": 12}})  # fmt: skip
    chunk(2, {"type": "finish", "reason": {"kind": "stop"}})
    add("step/end", {"turn": 1, "step": 2})
    add("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    return out


HEADER = SessionHeader(id="flip-1", created_at=1_700_000_000_000, cwd="/work/project",
                       delegation_depth=0)  # fmt: skip


def _jsonl(d: Path) -> Path:
    path = d / "session.jsonl"
    path.write_bytes(dump_session_log(HEADER, _events()))  # packed rows, full envelopes
    return path


def _zstd(d: Path) -> Path:
    zstandard = pytest.importorskip("zstandard")
    path = d / "session.jsonl.zst"
    text = dump_session_log(HEADER, _events())
    header, _, body = text.partition(b"\n")
    # As the store writes one: the header alone in the first frame, then a frame a batch.
    path.write_bytes(compress_frame(zstandard, header + b"\n") + compress_frame(zstandard, body))
    return path


def _sqlite(d: Path) -> Path:
    path = d / "store.sqlite"
    events = _events()
    with SqliteBackend(path) as backend:
        backend.append(HEADER, events[:10], create=True)
        backend.append(HEADER, events[10:], create=False)
    return path


def _load(path: Path) -> Any:
    """What a load gives the code under test: every script's calls and binding text."""
    target = path if path.suffix == ".sqlite" else path.parent
    return [
        {"entries": [e.to_json() for e in s.entries], "first_user_text": s.first_user_text}
        for s in load_scenario(target).scripts
    ]


def _same_but_strings(a: Any, b: Any, where: str = "$") -> str | None:
    """Where ``a`` and ``b`` differ other than inside a string value; ``None`` if nowhere."""
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} became {type(b).__name__}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys {list(a)} became {list(b)}"
        for key in a:
            found = _same_but_strings(a[key], b[key], f"{where}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where}: {len(a)} items became {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _same_but_strings(x, y, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(a, str) or a == b:
        return None
    return f"{where}: {a!r} became {b!r}"


def _guarded_load(path: Path) -> Any:
    with deadline(PER_LOAD_S):
        return _load(path)


def _flip_loop(path: Path, rng: random.Random) -> dict[str, int]:
    original = _load(path)
    outcomes: dict[str, int] = {}
    started = time.monotonic()
    for where, loaded in flipped_loads(path, FLIPS, rng, _guarded_load):
        if isinstance(loaded, DshReplayError):
            refused = str(loaded)
            assert path.name in refused, f"{where}: the error does not name the file: {refused}"
            outcome = type(loaded).__name__
        else:
            changed = _same_but_strings(original, loaded)
            assert changed is None, f"{where}: loaded as something else: {changed}"
            outcome = "loaded"
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        assert time.monotonic() - started < TOTAL_S, f"{where}: the loop runs too long"
    return outcomes


@pytest.mark.parametrize(
    "form",
    [_jsonl, _zstd, _sqlite],
    ids=["jsonl", "zstd", "sqlite"],
)
def test_every_flip_is_refused_naming_the_file_or_loads_the_same(tmp_path: Path, form: Any) -> None:
    path = form(tmp_path)
    assert _load(path)[0]["entries"], "the scenario has calls"
    outcomes = _flip_loop(path, random.Random(SEED))
    assert sum(outcomes.values()) == FLIPS
    assert outcomes.get("loaded", 0) < FLIPS  # the flips reach what is checked


def test_the_comparison_tells_structure_from_string_contents() -> None:
    assert _same_but_strings({"a": ["x", 1, None]}, {"a": ["y", 1, None]}) is None
    assert _same_but_strings({"a": 1}, {"a": 2}) == "$.a: 1 became 2"
    assert _same_but_strings({"a": 1}, {"b": 1}) is not None
    assert _same_but_strings({"a": True}, {"a": "true"}) is not None
    assert _same_but_strings(["x"], ["x", "y"]) is not None
    assert _same_but_strings({"a": None}, {"a": False}) is not None


def test_a_flipped_sqlite_store_does_not_escape_as_a_sqlite_error(tmp_path: Path) -> None:
    # The loop above covers this; this names the rule: sqlite3 errors are wrapped.
    path = _sqlite(tmp_path)
    data = bytearray(path.read_bytes())
    data[100:4096] = bytes(len(data[100:4096]))  # the first page's b-tree, zeroed
    path.write_bytes(data)
    with pytest.raises(DshReplayError) as caught:
        _load(path)
    assert not isinstance(caught.value, sqlite3.Error)
    assert path.name in str(caught.value)
