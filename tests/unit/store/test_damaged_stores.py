"""Damaged SQLite stores: every byte flip loads or gives a typed error naming the file."""

from __future__ import annotations

import io
import random
from pathlib import Path

import pytest
from support import store_flips
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


# --- damage that drops or moves a child (issue 41) -------------------------------------


def _occurrences(data: bytes, text: bytes) -> list[int]:
    found, at = [], data.find(text)
    while at >= 0:
        found.append(at)
        at = data.find(text, at + 1)
    return found


@pytest.mark.parametrize("child", store_flips.CHILD_IDS)
def test_a_flip_in_any_copy_of_a_childs_id_is_refused_naming_the_store(
    tmp_path: Path, child: str
) -> None:
    # The id is in the sessions table and its index, and in every event row and the
    # events index; a flip in the sessions index or table hid the child (quick_check
    # compares no index with its table), and the scenario loaded without it.
    path = tmp_path / "store.sqlite"
    data = store_flips.build_store(path)
    expected = store_flips.structure(path)
    places = _occurrences(data, child.encode())
    assert len(places) >= 4
    refused = []
    for at in places:
        damaged = bytearray(data)
        damaged[at + 2] ^= 0x01  # "fork-child" -> "fosk-child": still a valid string
        path.write_bytes(damaged)
        message = None
        with deadline(30):
            try:
                found = store_flips.structure(path)
            except DshReplayError as err:
                message = str(err)
        if message is not None:
            assert str(path) in message, (at, message)
            refused.append(at)
        else:
            assert found == expected, f"byte {at}: loaded as {found}"
    # The copies in the sessions table and its index (the first two), which hid the
    # child, are refused; of the others (event rows, the events index) every one is
    # refused or reads the same.
    assert refused[:2] == places[:2]
    damaged = bytearray(data)
    damaged[places[0] + 2] ^= 0x01  # the sessions table's copy: the child was dropped
    path.write_bytes(damaged)
    code, problems = run_cli("check", str(path))
    assert code == 1
    assert problems.splitlines()[0].startswith(f"{path}: corrupt SQLite store: its sessions")
    assert "Traceback" not in problems


def test_a_damaged_sessions_index_entry_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    data = bytearray(store_flips.build_store(path))
    index_copy = _occurrences(bytes(data), b"fork-child")[1]  # the table's, then the index's
    data[index_copy] ^= 0x20
    path.write_bytes(data)
    with pytest.raises(SessionLogError, match="sessions table is damaged|a damaged index") as info:
        load_scenario(path)
    assert info.value.path == str(path)


def test_a_child_whose_parent_the_store_does_not_hold_is_refused(tmp_path: Path) -> None:
    import sqlite3

    from pytest_dsh_replay import ScenarioError

    path = tmp_path / "store.sqlite"
    store_flips.build_store(path)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE sessions SET parent_session = 'pri,ary' WHERE id = 'spawn-child'")
    conn.close()
    with pytest.raises(ScenarioError, match=r"spawn-child names parentSession 'pri,ary'"):
        load_scenario(path)


def test_a_damaged_last_row_is_no_torn_tail_in_a_scenario_store(tmp_path: Path) -> None:
    # A store writes each batch in one transaction: rows that do not read after the last
    # turn/end are damage, which a scenario load refuses (the store's own load repairs).
    import sqlite3

    path = tmp_path / "store.sqlite"
    store_flips.build_store(path)
    with sqlite3.connect(path) as conn:
        (seq,) = conn.execute("SELECT max(seq) FROM events WHERE session_id = 'primary'").fetchone()
        conn.execute(
            "UPDATE events SET data = '{' WHERE session_id = 'primary' AND seq = ?", (seq,)
        )
    conn.close()
    with pytest.raises(SessionLogError, match=f"rows of session primary from seq {seq} on"):
        load_scenario(path)
    with SqliteBackend(path, read_only=True) as backend:
        assert len(backend.records("primary")) == seq  # the store's reader skips it


def test_seeded_byte_flips_make_no_silent_structural_change(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    store_flips.build_store(path)
    with deadline(120):
        outcomes = store_flips.flip_loop(path, 300)
    assert sum(outcomes.values()) == 300
    assert outcomes.get("same", 0) < 300
