"""A scenario's sessions must add up (issue 41): one tree, each session once, true seeds.

Each refusal names the files and what differs, from ``load_scenario`` and from
``dsh-replay check`` (docs/scenarios.md#structure). The example fork scenarios (format 0
from the recorder, format 4 from the dsh runtime) are copied into ``tmp_path`` and
broken there.
"""

from __future__ import annotations

import io
import shutil
import sqlite3
from pathlib import Path

import orjson
import pytest
from support.hang_guard import deadline
from support.paths import EXAMPLES

from pytest_dsh_replay import (
    ScenarioError,
    SessionLogError,
    SessionStore,
    SqliteBackend,
    load_scenario,
)
from pytest_dsh_replay._scripts.scenario import SessionScript
from pytest_dsh_replay._scripts.structure import Prefix, check_seeds, log_prefix
from pytest_dsh_replay.cli import main


def copy_example(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLES / name, target)
    return target


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def set_header(path: Path, **fields: object) -> None:
    lines = lines_of(path)
    header = orjson.loads(lines[0])
    for key, value in fields.items():
        if value is None:
            header.pop(key, None)
        else:
            header[key] = value
    path.write_bytes(orjson.dumps(header) + b"\n" + b"".join(lines[1:]))


def header_id(path: Path) -> str:
    return str(orjson.loads(lines_of(path)[0])["id"])


def check(path: Path) -> tuple[int, list[str]]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", str(path)], stdout=out, stderr=err)
    assert "Traceback" not in err.getvalue()
    return code, err.getvalue().splitlines()


def refused(path: Path, error: type[Exception], match: str) -> Exception:
    with deadline(30), pytest.raises(error, match=match) as info:
        load_scenario(path)
    code, problems = check(path)
    assert code == 1
    assert problems[0] == str(info.value)
    return info.value


# --- the tree ---------------------------------------------------------------------------


def test_the_example_fork_scenarios_load(tmp_path: Path) -> None:
    for name in ("fork", "runtime-fork", "mixed", "runtime-mixed"):
        scenario = load_scenario(copy_example(tmp_path, name))
        assert any(s.seed_length for s in scenario.children), name


def test_the_same_child_log_twice_is_refused(tmp_path: Path) -> None:
    d = copy_example(tmp_path, "fork")
    shutil.copyfile(d / "session.1.jsonl", d / "session.2.jsonl")
    refused(d, ScenarioError, r"session\.1\.jsonl and session\.2\.jsonl are the same session")


def test_a_child_that_is_its_own_parent_is_refused(tmp_path: Path) -> None:
    d = copy_example(tmp_path, "fork")
    set_header(d / "session.1.jsonl", parentSession=header_id(d / "session.1.jsonl"))
    refused(d, ScenarioError, r"child session session\.1\.jsonl names itself as its parentSession")


@pytest.mark.parametrize("parent", ["itself", "its child"])
def test_a_primary_whose_parent_is_in_the_scenario_is_refused(tmp_path: Path, parent: str) -> None:
    d = copy_example(tmp_path, "fork")
    named = d / ("session.jsonl" if parent == "itself" else "session.1.jsonl")
    set_header(d / "session.jsonl", parentSession=header_id(named))
    refused(d, ScenarioError, r"the primary session\.jsonl names parentSession .* the root")


def test_children_whose_parents_form_a_cycle_are_refused(tmp_path: Path) -> None:
    d = copy_example(tmp_path, "multi-spawn")
    first, second = d / "session.1.jsonl", d / "session.2.jsonl"
    set_header(first, parentSession=header_id(second))
    set_header(second, parentSession=header_id(first))
    refused(d, ScenarioError, r"parents form a cycle that never reaches the primary: session\.")


def test_a_fork_child_whose_parent_is_not_in_the_scenario_is_refused(tmp_path: Path) -> None:
    d = copy_example(tmp_path, "fork")
    set_header(d / "session.1.jsonl", parentSession="somebody-else")
    refused(d, ScenarioError, r"session\.1\.jsonl is a fork child of 'somebody-else', which")


@pytest.mark.parametrize("parent", [None, 5], ids=["no-parent", "not-a-string"])
def test_a_fork_child_whose_header_names_no_parent_says_so(tmp_path: Path, parent: object) -> None:
    # It said "is a fork child of None".
    d = copy_example(tmp_path, "fork")
    child = d / "session.1.jsonl"
    set_header(child, parentSession=parent)  # None: the key removed
    err = refused(d, ScenarioError, r"has a fork seed \(seedLength\) but its header names no")
    assert "None" not in str(err)


def test_a_spawn_child_whose_parent_was_not_recorded_loads(tmp_path: Path) -> None:
    # The harness's record suite pins such a session (the corpus's rec-pin); the
    # recorder keeps a session whose parent never called the model: both replay.
    d = copy_example(tmp_path, "spawn")
    set_header(d / "session.1.jsonl", parentSession="never-recorded")
    scenario = load_scenario(d)
    assert scenario.children[0].parent_session == "never-recorded"
    assert check(d) == (0, [])


def test_a_primary_whose_parent_is_outside_loads_alone(tmp_path: Path) -> None:
    # A single child log is a scenario of one session: its parent is elsewhere.
    d = copy_example(tmp_path, "fork")
    assert load_scenario(d / "session.1.jsonl").primary.parent_session is not None


# --- fork seeds --------------------------------------------------------------------------


def _seed_user_line(path: Path) -> int:
    """The index (in ``lines_of``) of the first user/message of a log."""
    return next(i for i, raw in enumerate(lines_of(path)) if b'"type":"user/message"' in raw)


@pytest.mark.parametrize("example", ["fork", "runtime-fork"])
def test_a_fork_seed_that_differs_from_its_parent_is_refused(tmp_path: Path, example: str) -> None:
    d = copy_example(tmp_path, example)
    child = d / "session.1.jsonl"
    lines = lines_of(child)
    at = _seed_user_line(child)
    lines[at] = lines[at].replace(b"MARMALADE", b"MARMELADE")
    assert b"MARMELADE" in lines[at]
    child.write_bytes(b"".join(lines))
    err = refused(
        d,
        SessionLogError,
        r"the fork seed differs from its parent's log: event \d+ of its \d+-event seed is a "
        r"'user/message' event whose data differ in 'content' \(parent session\.jsonl\)",
    )
    assert (err.path, err.line) == (str(child), at + 1)  # type: ignore[attr-defined]


@pytest.mark.parametrize("example", ["fork", "runtime-fork"])
def test_a_seed_rewritten_with_other_envelopes_still_loads(tmp_path: Path, example: str) -> None:
    # Not byte for byte the parent's lines (keys reordered, times moved): the events
    # are compared by type and data.
    d = copy_example(tmp_path, example)
    child = d / "session.1.jsonl"
    seed = load_scenario(d).children[0].seed_length
    lines = lines_of(child)
    for i in range(1, seed + 1):
        record = orjson.loads(lines[i])
        if "time" in record:
            record["time"] += 5
        lines[i] = orjson.dumps(dict(reversed(record.items()))) + b"\n"
    child.write_bytes(b"".join(lines))
    assert load_scenario(d).children[0].seed_length == seed


def _two_fork_children(tmp_path: Path) -> Path:
    """The fork example with a second fork child; both seeds re-enveloped (not byte copies)."""
    d = copy_example(tmp_path, "fork")
    second = d / "session.2.jsonl"
    shutil.copy(d / "session.1.jsonl", second)
    set_header(second, id="fork-two")
    seed = load_scenario(d).children[0].seed_length
    for child in (d / "session.1.jsonl", second):
        lines = lines_of(child)
        for i in range(1, seed + 1):
            lines[i] = orjson.dumps(dict(reversed(orjson.loads(lines[i]).items()))) + b"\n"
        child.write_bytes(b"".join(lines))
    return d


def test_a_parent_is_read_once_for_all_its_fork_children(tmp_path: Path) -> None:
    scenario = load_scenario(_two_fork_children(tmp_path))
    assert [s.seed_length > 0 for s in scenario.children] == [True, True]
    reads: list[str] = []

    def counted(script: SessionScript, n: int) -> Prefix:
        reads.append(script.file)
        return log_prefix(script, n)

    check_seeds(scenario.scripts, counted)
    assert sorted(reads) == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]


def test_the_fork_child_whose_seed_differs_is_named_beside_one_that_agrees(
    tmp_path: Path,
) -> None:
    d = _two_fork_children(tmp_path)
    second = d / "session.2.jsonl"
    lines = lines_of(second)
    at = _seed_user_line(second)
    lines[at] = lines[at].replace(b"MARMALADE", b"MARMELADE")
    second.write_bytes(b"".join(lines))
    err = refused(d, SessionLogError, r"event \d+ of its \d+-event seed is a 'user/message'")
    assert (err.path, err.line) == (str(second), at + 1)  # type: ignore[attr-defined]


def test_a_seed_longer_than_its_parents_log_is_refused(tmp_path: Path) -> None:
    d = copy_example(tmp_path, "fork")
    parent = d / "session.jsonl"
    seed = load_scenario(d).children[0].seed_length
    parent.write_bytes(b"".join(lines_of(parent)[:4]))  # the header and three records
    assert seed > 3
    refused(d, SessionLogError, r"is past the end of the parent's \d+ events")


def test_the_runtime_sessions_root_checks_seeds_and_ends_a_parent_cycle(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    primary = load_scenario(EXAMPLES / "runtime-fork").primary
    child = load_scenario(EXAMPLES / "runtime-fork").children[0]
    for script in (primary, child):
        assert script.path is not None
        directory = root / "--work--" / script.recorded_id
        directory.mkdir(parents=True)
        shutil.copyfile(script.path, directory / "session.v4.jsonl")
    assert len(load_scenario(root, primary.recorded_id).scripts) == 2
    main_log = root / "--work--" / primary.recorded_id / "session.v4.jsonl"
    set_header(main_log, parentSession=child.recorded_id)  # below its own child
    with deadline(30), pytest.raises(ScenarioError, match="its sessions form a cycle"):
        load_scenario(root, primary.recorded_id)


# --- SQLite stores ------------------------------------------------------------------------


def _store(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    store = SessionStore(SqliteBackend(path))
    primary = store.create("primary")
    for turn in (1, 2):
        primary.append("turn/start", {"turn": turn})
        text = [{"type": "text", "text": f"task {turn}"}]
        primary.append("user/message", {"content": text}, surfaceOp="append")
        finish = {"type": "finish", "reason": {"kind": "stop"}}
        primary.append("assistant/chunk", {"turn": turn, "step": 1, "chunk": finish})
        primary.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
    store.fork("primary", child_session_id="fork")
    store.close()
    return path


def _update(path: Path, sql: str) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute(sql)
    conn.close()


def test_a_store_fork_seed_that_differs_from_its_parent_is_refused(tmp_path: Path) -> None:
    path = _store(tmp_path)
    assert load_scenario(path).children[0].seed_length == 8
    _update(
        path,
        "UPDATE events SET data = replace(data, 'task 1', 'task 9') "
        "WHERE session_id = 'fork' AND type = 'user/message'",
    )
    err = refused(path, SessionLogError, r"event 1 of its 8-event seed is a 'user/message'")
    assert err.path == f"{path}#fork"  # type: ignore[attr-defined]


def test_a_store_child_that_is_its_own_parent_is_refused(tmp_path: Path) -> None:
    path = _store(tmp_path)
    _update(path, "UPDATE sessions SET parent_session = 'fork' WHERE id = 'fork'")
    refused(path, ScenarioError, r"child session store\.sqlite#fork names itself")


# A seedLength that does not stand where the seed's session/end-seed does (helper-found:
# these loaded, and the child replayed part of its parent's log as its own calls).
@pytest.mark.parametrize(
    ("seed_length", "line", "at"),
    [
        (1, 3, "the event at seq 1 is 'step/start'"),
        (6, 7, "seq 6 is inside a packed chunk row holding seqs 5 to 7"),
        (13, 13, "the event at seq 13 is 'turn/end'"),
    ],
    ids=["in-the-first-turn", "inside-a-packed-row", "one-short"],
)
def test_a_seed_length_the_end_seed_does_not_follow_is_refused(
    tmp_path: Path, seed_length: int, line: int, at: str
) -> None:
    d = copy_example(tmp_path, "fork")
    child = d / "session.1.jsonl"
    assert load_scenario(d).children[0].seed_length == 14
    set_header(child, seedLength=seed_length)
    err = refused(
        d,
        SessionLogError,
        rf"the header's seedLength {seed_length} does not fit this log: {at}, and a fork "
        r"child's seed is followed by a session/end-seed event at seq seedLength",
    )
    assert (err.path, err.line) == (str(child), line)  # type: ignore[attr-defined]


def test_a_seed_length_one_past_the_end_seed_is_refused_by_the_parent_s_log(
    tmp_path: Path,
) -> None:
    d = copy_example(tmp_path, "fork")
    set_header(d / "session.1.jsonl", seedLength=15)  # the seed would end with the marker
    refused(d, SessionLogError, r"event 14 of its 15-event seed is a 'session/end-seed'")


def test_a_fork_child_whose_log_ends_at_an_unclosed_seed_is_refused(tmp_path: Path) -> None:
    d = copy_example(tmp_path, "fork")
    child = d / "session.1.jsonl"
    lines = lines_of(child)
    child.write_bytes(b"".join(lines[:13]))  # the header and the 14 events of the seed
    refused(d, SessionLogError, r"seedLength 14 does not fit this log: the log ends there")


def test_a_seed_that_ends_with_its_own_marker_needs_no_second_one(tmp_path: Path) -> None:
    # A store fork of a log whose last event is a session/end-seed adds none.
    path = tmp_path / "store.sqlite"
    store = SessionStore(SqliteBackend(path))
    store.fork(store.create("primary"), child_session_id="a")  # a: [end-seed]
    store.fork("a", child_session_id="b")  # b's seed is a's log, which ends in one
    b = store.get("b")
    assert b is not None
    events = [e["type"] for e in b.events]
    store.close()
    assert events == ["session/end-seed"]
    assert [c.seed_length for c in load_scenario(path).children] == [0, 1]


@pytest.mark.parametrize(
    ("seed_length", "at"),
    [(3, "the event at seq 3 is 'turn/end'"), (5, "the event at seq 5 is 'user/message'")],
)
def test_a_store_seed_length_the_end_seed_does_not_follow_is_refused(
    tmp_path: Path, seed_length: int, at: str
) -> None:
    path = _store(tmp_path)
    _update(path, f"UPDATE sessions SET seed_length = {seed_length} WHERE id = 'fork'")
    err = refused(
        path,
        SessionLogError,
        rf"the sessions row's seed_length {seed_length} does not fit this log: {at}",
    )
    assert err.path == f"{path}#fork"  # type: ignore[attr-defined]


def test_a_fork_child_s_seed_digest_covers_its_seed_s_lines_only(tmp_path: Path) -> None:
    # Where the seed ends among the lines was noted late (after the next event replay
    # reads), so the digest covered lines past the marker and never matched its parent's.
    d = copy_example(tmp_path, "fork")
    child = d / "session.1.jsonl"
    script = load_scenario(d).children[0]
    assert script.seed_digest is not None  # the 14 events of the seed are 12 lines
    assert script.seed_digest[0] == len(b"".join(lines_of(child)[1:13]))


@pytest.mark.parametrize(
    ("cut", "held"),
    [
        (True, "an event of type 'turn/start'"),
        (False, "an object without a string type"),
    ],
    ids=["header-line-lost", "header-without-type"],
)
def test_a_log_whose_first_line_is_no_session_header_is_refused(
    tmp_path: Path, cut: bool, held: str
) -> None:
    # The first event was read as the header: the child then replayed its whole seed.
    d = copy_example(tmp_path, "fork")
    child = d / "session.1.jsonl"
    if cut:
        child.write_bytes(b"".join(lines_of(child)[1:]))
    else:
        set_header(child, type=None)
    err = refused(
        d,
        SessionLogError,
        r'the first line must be the session header \(\{"type":"session","id":\.\.\.\}\), '
        rf"but it is {held}: the log lost its header line, or the file is not a session log",
    )
    assert (err.path, err.line) == (str(child), 1)  # type: ignore[attr-defined]


def test_a_damaged_sessions_row_is_named_as_a_row_not_a_first_line(tmp_path: Path) -> None:
    # It said "stored corrupt session log: first line is not a session header": a store
    # has no lines.
    path = _store(tmp_path)
    _update(path, "UPDATE sessions SET seed_length = -1 WHERE id = 'fork'")
    err = refused(
        path,
        SessionLogError,
        r"session 'fork': its row in the sessions table is damaged \(seedLength must be a "
        r"non-negative safe integer, got -1\)",
    )
    assert "first line" not in str(err)
