"""Damaged SQLite stores: every byte flip loads or gives a typed error naming the file."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from support.hang_guard import deadline

from pytest_dsh_replay import DshReplayError, SessionLogError, load_scenario
from pytest_dsh_replay._store.backends.sqlite import SqliteBackend
from pytest_dsh_replay._store.store import SessionStore
from pytest_dsh_replay.cli import main


def build_store(path: Path) -> bytes:
    """A small store: a primary with two turns (packed deltas, a zstd-sized value), a child."""
    store = SessionStore(SqliteBackend(path))
    primary = store.create("primary", meta={"cwd": "/work"})
    for turn in (1, 2):
        primary.append("turn/start", {"turn": turn})
        primary.append(
            "user/message", {"content": [{"type": "text", "text": "héllo ✓"}]}, surfaceOp="append"
        )
        for i in range(6):
            chunk = {"type": "text-delta", "index": 0, "text": f"piece {i} ü"}
            primary.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk})
        finish = {"type": "finish", "reason": {"kind": "stop"}}
        primary.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": finish})
        primary.append("tool/result", {"big": "x" * 6000 + "é"}, surfaceOp="append")
        primary.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    child = store.create("child", meta={"parentSession": "primary", "agentPreset": "helper"})
    finish = {"type": "finish", "reason": {"kind": "stop"}}
    child.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": finish})
    store.close()
    return path.read_bytes()


def run_cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, err.getvalue()


def test_invalid_utf8_in_the_schema_text_is_a_typed_error(tmp_path: Path) -> None:
    data = bytearray(build_store(tmp_path / "good.sqlite"))
    at = data.index(b"CREATE TABLE events")
    data[at + 3] = 0xFF
    damaged = tmp_path / "damaged.sqlite"
    damaged.write_bytes(data)
    with pytest.raises(SessionLogError, match=r"damaged\.sqlite: damaged SQLite session store"):
        load_scenario(damaged)
    with (
        pytest.raises(SessionLogError, match=r"schema text is not valid UTF-8"),
        SqliteBackend(damaged, read_only=True) as store,
    ):
        list(store.logs())
    with pytest.raises(SessionLogError, match=r"damaged\.sqlite"):
        SqliteBackend(damaged)
    for command in ("check", "show", "scripts"):
        code, err = run_cli(command, str(damaged))
        assert code == 1, command
        assert str(damaged) in err
        assert "Traceback" not in err


def test_byte_flips_anywhere_load_or_fail_with_a_typed_error(tmp_path: Path) -> None:
    data = build_store(tmp_path / "good.sqlite")
    page_size = int.from_bytes(data[16:18], "big")
    rng = random.Random(20261201)
    target = tmp_path / "flipped.sqlite"
    outcomes: dict[str, int] = {}
    with deadline(60):  # a hang fails the test instead of the suite
        for n in range(300):
            damaged = bytearray(data)
            flips = rng.choice((1, 1, 2, 8))
            for _ in range(flips):
                # Every third case hits page 1, where the schema text lives.
                pos = rng.randrange(100, page_size) if n % 3 == 0 else rng.randrange(len(data))
                damaged[pos] ^= rng.randrange(1, 256)
            target.write_bytes(damaged)
            error: DshReplayError | None = None
            try:
                load_scenario(target)
            except DshReplayError as err:
                error = err
            if error is not None:
                assert str(target) in str(error), f"case {n}: {error}"
            outcome = "loads" if error is None else type(error).__name__
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
            if n % 10 == 0:  # the command line reports the same in one line
                code, err_text = run_cli("check", str(target))
                assert code in (0, 1)
                assert "Traceback" not in err_text
    assert outcomes.get("loads", 0) > 0
    assert sum(outcomes.values()) - outcomes.get("loads", 0) > 50, outcomes
