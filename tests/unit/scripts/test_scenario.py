"""Scenario directories: naming, slicing at seedLength, order, sidecars.

See docs/scenarios.md#layout.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_dsh_replay import (
    DshReplayError,
    OverrideError,
    ScenarioError,
    ScriptError,
    SessionLogError,
    load_scenario,
    read_session_log,
)
from pytest_dsh_replay._scripts.scenario import locale_sort_key

STOP = {"type": "finish", "reason": {"kind": "stop"}}


def call(turn: int, word: str) -> list[dict[str, Any]]:
    return [
        {"type": "assistant/chunk", "data": {"turn": turn, "step": 1, "chunk": c}}
        for c in (
            {"type": "block-start", "index": 0, "blockType": "text"},
            {"type": "text-delta", "index": 0, "text": word},
            STOP,
        )
    ]


def write_log(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    path.write_bytes(
        b"".join(orjson.dumps(x) + b"\n" for x in [{"type": "session", **header}, *events])
    )
    return path


def words(script: Any) -> list[str]:
    return [c["text"] for e in script.entries for c in e.chunks if c["type"] == "text-delta"]


@pytest.fixture
def fork_scenario(tmp_path: Path) -> Path:
    parent = [*call(1, "P1"), {"type": "turn/end", "data": {"turn": 1}}, *call(2, "P2")]
    write_log(tmp_path / "session.jsonl", {"id": "p", "createdAt": 10}, parent)
    seed = parent[:4]
    child = [*seed, {"type": "session/end-seed", "data": {}}, *call(2, "FORK")]
    write_log(
        tmp_path / "session.1.jsonl",
        {"id": "f", "createdAt": 30, "parentSession": "p", "seedLength": 4},
        child,
    )
    write_log(
        tmp_path / "session.2.jsonl",
        {"id": "s", "createdAt": 20, "parentSession": "p"},
        call(1, "SPAWN"),
    )
    return tmp_path


def test_children_sliced_at_seed_length_and_ordered_by_created_at(fork_scenario: Path) -> None:
    scenario = load_scenario(fork_scenario)
    assert [s.file for s in scenario.scripts] == [
        "session.jsonl",
        "session.2.jsonl",
        "session.1.jsonl",
    ]
    assert [words(s) for s in scenario.scripts] == [["P1", "P2"], ["SPAWN"], ["FORK"]]
    fork = scenario.scripts[2]
    assert (fork.seed_length, fork.event_count, fork.parent_session) == (4, 8, "p")
    assert scenario.to_json()["scripts"][2]["seedLength"] == 4


def test_the_primary_is_never_sliced(tmp_path: Path) -> None:
    write_log(tmp_path / "session.jsonl", {"id": "p", "seedLength": 3}, call(1, "A"))
    assert words(load_scenario(tmp_path).primary) == ["A"]


def test_primary_comes_first_whatever_its_created_at(tmp_path: Path) -> None:
    write_log(tmp_path / "session.jsonl", {"id": "p", "createdAt": 99}, [])
    write_log(tmp_path / "session.1.jsonl", {"id": "c", "createdAt": 1, "parentSession": "p"}, [])
    assert [s.recorded_id for s in load_scenario(tmp_path).scripts] == ["p", "c"]


def test_created_at_ties_break_by_id_like_locale_compare(tmp_path: Path) -> None:
    write_log(tmp_path / "session.jsonl", {"id": "p"}, [])
    for n, cid in enumerate(["b", "B", "a", "_x", "10", "A"], start=1):
        write_log(tmp_path / f"session.{n}.jsonl", {"id": cid, "parentSession": "p"}, [])
    ids = [s.recorded_id for s in load_scenario(tmp_path).children]
    assert ids == ["_x", "10", "a", "A", "b", "B"]
    assert sorted(["{{child-2}}", "{{child-1}}"], key=locale_sort_key) == [
        "{{child-1}}",
        "{{child-2}}",
    ]


@pytest.mark.parametrize(
    ("value", "problem"),
    [(-1, "-1"), (1.5, "1.5"), ("4", "'4'"), (None, "None"), (True, "True")],
)
def test_bad_seed_length_is_a_session_log_error(tmp_path: Path, value: Any, problem: str) -> None:
    write_log(tmp_path / "session.jsonl", {"id": "p"}, [])
    write_log(
        tmp_path / "session.1.jsonl",
        {"id": "c", "parentSession": "p", "seedLength": value},
        call(1, "x"),
    )
    with pytest.raises(SessionLogError) as info:
        load_scenario(tmp_path)
    assert info.value.path == str(tmp_path / "session.1.jsonl")
    assert info.value.line == 1
    assert "seedLength must be a non-negative integer" in str(info.value)
    assert problem in str(info.value)


def test_seed_length_beyond_the_log_is_an_error(tmp_path: Path) -> None:
    write_log(tmp_path / "session.jsonl", {"id": "p"}, [])
    write_log(
        tmp_path / "session.1.jsonl",
        {"id": "c", "parentSession": "p", "seedLength": 4},
        call(1, "x"),
    )
    with pytest.raises(
        SessionLogError,
        match=r"session\.1\.jsonl:1: header seedLength 4 is larger than the log's 3 events",
    ):
        load_scenario(tmp_path)


def test_missing_primary_gap_and_bad_names(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="missing session.jsonl"):
        load_scenario(tmp_path)
    write_log(tmp_path / "session.jsonl", {"id": "p"}, [])
    write_log(tmp_path / "session.2.jsonl", {"id": "c"}, [])
    with pytest.raises(ScenarioError, match="expected session.1.jsonl, found session.2.jsonl"):
        load_scenario(tmp_path)
    (tmp_path / "session.2.jsonl").rename(tmp_path / "session.01.jsonl")
    with pytest.raises(ScenarioError, match="invalid session log name 'session.01.jsonl'") as info:
        load_scenario(tmp_path)
    assert info.value.path == str(tmp_path / "session.01.jsonl")
    (tmp_path / "session.01.jsonl").rename(tmp_path / "session.child.jsonl")
    with pytest.raises(ScenarioError, match="invalid session log name"):
        load_scenario(tmp_path)


def test_nothing_at_the_path(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no scenario here"):
        load_scenario(tmp_path / "absent")


def test_unterminated_call_names_file_and_line(tmp_path: Path) -> None:
    events = [{"type": "turn/start", "data": {"turn": 1}}, *call(1, "a")[:2]]
    write_log(tmp_path / "session.jsonl", {"id": "p"}, events)
    with pytest.raises(ScriptError) as info:
        load_scenario(tmp_path)
    assert (info.value.path, info.value.line, info.value.call_key) == (
        str(tmp_path / "session.jsonl"),
        3,
        "1/1",
    )


def test_summary_without_raw_output_names_file_and_line(tmp_path: Path) -> None:
    events = [*call(1, "a"), {"type": "compaction/summary", "data": {"llmStreamCall": True}}]
    write_log(tmp_path / "session.jsonl", {"id": "p"}, events)
    with pytest.raises(ScriptError, match="rawOutput") as info:
        load_scenario(tmp_path)
    assert info.value.line == 5


def test_array_override_means_the_log_is_not_derived(tmp_path: Path) -> None:
    write_log(tmp_path / "session.jsonl", {"id": "p", "createdAt": 3}, call(1, "a")[:2])
    (tmp_path / "replay.override.json").write_text('[{"kind":"hang"}]')
    scenario = load_scenario(tmp_path)
    assert scenario.to_json()["scripts"][0] == {
        "file": "session.jsonl",
        "recordedId": "p",
        "createdAt": 3,
        "seedLength": 0,
        "primary": True,
        "entries": [{"kind": "hang"}],
    }


def test_child_overrides_apply_to_their_child_only(fork_scenario: Path) -> None:
    throw = {"kind": "throw", "chunks": [], "message": "m", "code": "C"}
    (fork_scenario / "replay.1.override.json").write_text(
        json.dumps({"patches": [{"at": 1, "entry": throw}]})
    )
    scenario = load_scenario(fork_scenario)
    fork = next(s for s in scenario.scripts if s.file == "session.1.jsonl")
    assert [e.kind for e in fork.entries] == ["chunks", "throw"]
    assert [len(s.entries) for s in scenario.scripts] == [2, 1, 2]


def test_override_for_a_missing_child_or_bad_name(fork_scenario: Path) -> None:
    (fork_scenario / "replay.3.override.json").write_text("[]")
    with pytest.raises(ScenarioError, match="has no child log session.3.jsonl"):
        load_scenario(fork_scenario)
    (fork_scenario / "replay.3.override.json").rename(fork_scenario / "replay.x.override.json")
    with pytest.raises(ScenarioError, match="invalid override sidecar name"):
        load_scenario(fork_scenario)


@pytest.mark.parametrize(
    "name",
    [
        "replay.overrides.json",
        "replay-override.json",
        "replay.override.foo.json",
        "replay.1.override.JSON",
        "Replay.override.json",
        "replay.override.json.bak",
    ],
)
def test_a_misspelled_sidecar_is_refused_not_ignored(fork_scenario: Path, name: str) -> None:
    (fork_scenario / name).write_text(
        json.dumps({"patches": [{"at": 0, "entry": {"kind": "hang"}}]})
    )
    with pytest.raises(
        ScenarioError, match=f"invalid override sidecar name {re.escape(repr(name))}"
    ):
        load_scenario(fork_scenario)


def test_override_patch_out_of_range_is_reported_with_the_file(fork_scenario: Path) -> None:
    (fork_scenario / "replay.override.json").write_text(
        json.dumps({"patches": [{"at": 5, "entry": {"kind": "hang"}}]})
    )
    with pytest.raises(
        OverrideError, match=r"replay\.override\.json: override patch index 5 out of range"
    ):
        load_scenario(fork_scenario)


def test_single_log_file_is_a_one_session_scenario(fork_scenario: Path) -> None:
    scenario = load_scenario(fork_scenario / "session.1.jsonl")
    assert len(scenario.scripts) == 1
    assert words(scenario.primary) == ["P1", "FORK"]  # unsliced: a lone file is a primary


def test_compressed_logs_in_a_scenario(fork_scenario: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    log = fork_scenario / "session.2.jsonl"
    (fork_scenario / "session.2.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(log.read_bytes())
    )
    with pytest.raises(ScenarioError, match="child session 2 has two logs"):
        load_scenario(fork_scenario)
    log.unlink()
    assert words(load_scenario(fork_scenario).scripts[1]) == ["SPAWN"]


class _Log:
    def __init__(self, sid: str, parent: str | None = None, created: int = 0):
        from pytest_dsh_replay._format.events import SessionHeader

        self.header = SessionHeader(id=sid, parent_session=parent, created_at=created)
        self.events: list[dict[str, Any]] = []


def test_write_scenario_needs_exactly_one_primary(tmp_path: Path) -> None:
    from pytest_dsh_replay import RecordingError, write_scenario

    with pytest.raises(RecordingError, match="exactly one primary session.*found 0"):
        write_scenario(tmp_path / "x", [_Log("c", parent="p")])
    with pytest.raises(RecordingError, match="found 2: 'a', 'b'"):
        write_scenario(tmp_path / "x", [_Log("a"), _Log("b")])
    assert not (tmp_path / "x").exists()


def test_write_scenario_orders_children_and_replaces_the_directory(tmp_path: Path) -> None:
    from pytest_dsh_replay import write_scenario

    target = tmp_path / "s"
    target.mkdir()
    (target / "session.jsonl").write_text("stale")  # a previous recording, replaced
    (target / "session.5.jsonl").write_text("stale")
    (target / "replay.5.override.json").write_text("{}")
    files = write_scenario(target, [_Log("late", "p", 9), _Log("p"), _Log("early", "p", 1)])
    assert [f.name for f in files] == ["session.jsonl", "session.1.jsonl", "session.2.jsonl"]
    assert sorted(p.name for p in target.iterdir()) == [f.name for f in sorted(files)]
    assert [s.recorded_id for s in load_scenario(target).scripts] == ["p", "early", "late"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "entries",
    [
        ["README.md", "src/app.py"],
        [".git/HEAD"],
        ["replay.override.json", "notes.txt"],
        ["session.jsonl", "session.1.jsonl", "NOTES.md"],
        ["session.jsonl", "session.jsonl.bak"],
        ["session.jsonl", "replay.override.json.bak", "replay-override-notes.md"],
    ],
    ids=[
        "a-project",
        "a-hidden-directory",
        "a-sidecar-and-a-note",
        "a-recording-and-a-note",
        "a-recording-and-its-backup",
        "a-recording-and-sidecar-lookalikes",
    ],
)
def test_write_scenario_refuses_a_directory_that_holds_other_files(
    tmp_path: Path, entries: list[str]
) -> None:
    from pytest_dsh_replay import RecordingError, write_scenario

    target = tmp_path / "proj"
    for entry in entries:
        (target / entry).parent.mkdir(parents=True, exist_ok=True)
        (target / entry).write_text("keep me")
    before = sorted(p.relative_to(target) for p in target.rglob("*"))
    with pytest.raises(RecordingError, match="which (is|are) no scenario's file") as info:
        write_scenario(target, [_Log("p")])
    assert "move them out of it (nothing was written)" in str(info.value)
    assert sorted(p.relative_to(target) for p in target.rglob("*")) == before
    assert all((target / e).read_text() == "keep me" for e in entries)


def test_write_scenario_refuses_a_symbolic_link_naming_its_directory(tmp_path: Path) -> None:
    from pytest_dsh_replay import RecordingError, write_scenario

    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    with pytest.raises(
        RecordingError, match=f"it is a symbolic link.*name the directory it points to \\({real}\\)"
    ):
        write_scenario(tmp_path / "link", [_Log("p")])
    assert (tmp_path / "link").is_symlink()


def test_write_scenario_refuses_a_path_that_is_a_file(tmp_path: Path) -> None:
    from pytest_dsh_replay import RecordingError, write_scenario

    notes = tmp_path / "notes.txt"
    notes.write_text("important")
    with pytest.raises(RecordingError, match="it exists and is not a directory"):
        write_scenario(notes, [_Log("p")])
    assert notes.read_text() == "important"


def test_write_scenario_takes_an_empty_directory_or_one_of_scenario_files(tmp_path: Path) -> None:
    from pytest_dsh_replay import write_scenario

    empty = tmp_path / "empty"
    empty.mkdir()
    leftovers = tmp_path / "leftovers"
    leftovers.mkdir()
    for name in ("session.2.jsonl", "replay.override.json", ".session.jsonl.tmp-0123456789ab"):
        (leftovers / name).write_text("old")
    for target in (empty, leftovers):
        write_scenario(target, [_Log("p")])
        assert sorted(p.name for p in target.iterdir()) == ["session.jsonl"]


def _three_scenarios(tmp_path: Path) -> list[Path]:
    """Scenarios ``s0``..``s2``, one call each (``w0``..``w2``)."""
    dirs = []
    for n in range(3):
        d = tmp_path / f"s{n}"
        d.mkdir()
        write_log(d / "session.jsonl", {"id": f"p{n}", "createdAt": n}, call(1, f"w{n}"))
        dirs.append(d)
    return dirs


def test_scenario_cache_shares_until_the_files_change_and_stays_bounded(tmp_path: Path) -> None:
    from pytest_dsh_replay._scripts.loading import ScenarioCache

    dirs = _three_scenarios(tmp_path)
    cache = ScenarioCache(max_entries=2)
    first = cache.load(dirs[0])
    assert cache.load(dirs[0]) is first
    assert words(first.primary) == ["w0"]
    cache.load(dirs[1])
    cache.load(dirs[2])  # s0 is the least recently used of three: dropped
    assert cache.load(dirs[0]) is not first
    write_log(dirs[2] / "session.jsonl", {"id": "p2", "createdAt": 2}, call(1, "changed!"))
    assert words(cache.load(dirs[2]).primary) == ["changed!"]
    log = cache.recorded_log(dirs[1] / "session.jsonl")
    assert cache.recorded_log(dirs[1] / "session.jsonl") is log
    small = ScenarioCache(max_bytes=10)  # every log is larger: nothing is kept
    assert small.load(dirs[0]) is not small.load(dirs[0])


def test_a_cache_without_recheck_examines_the_files_once_until_it_forgets_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/scenarios.md#loaded-once
    from pytest_dsh_replay import write_scenario
    from pytest_dsh_replay._scripts import loading

    dirs = _three_scenarios(tmp_path)
    cache = loading.ScenarioCache(recheck=False)
    examined: list[Path] = []
    stamp = loading._stamp

    def counted(p: Path) -> Any:
        examined.append(p)
        return stamp(p)

    monkeypatch.setattr(loading, "_stamp", counted)
    first = cache.load(dirs[0], keep_logs=True)
    assert examined == [dirs[0]]  # once: listed and sized in one scan, not again after
    log = cache.recorded_log(dirs[0] / "session.jsonl")
    write_log(dirs[0] / "session.jsonl", {"id": "p0", "createdAt": 0}, call(1, "in place"))
    assert cache.load(dirs[0], keep_logs=True) is first  # rewritten in place: not noticed
    assert cache.recorded_log(dirs[0] / "session.jsonl") is log
    assert examined == [dirs[0]]
    cache.forget(tmp_path / "s1" / ".." / "s0")  # any spelling of the path
    assert words(cache.load(dirs[0], keep_logs=True).primary) == ["in place"]
    assert cache.recorded_log(dirs[0] / "session.jsonl") == read_session_log(
        dirs[0] / "session.jsonl"
    )
    kept = cache.load(dirs[1], keep_logs=True)
    assert words(kept.primary) == ["w1"]  # the others are unaffected
    cache.recorded_log(dirs[1] / "session.jsonl")
    write_scenario(dirs[1], [read_session_log(dirs[2] / "session.jsonl")])  # replaced
    assert words(cache.load(dirs[1]).primary) == ["w2"]  # one stat sees it
    again = cache.recorded_log(dirs[1] / "session.jsonl")  # the old lines were dropped
    assert again == read_session_log(dirs[1] / "session.jsonl")
    assert cache._scenarios.total == sum(v[1] for v in cache._scenarios.entries.values())
    assert cache._logs.total == sum(v[1] for v in cache._logs.entries.values())


def test_scenario_cache_counts_the_bytes_it_keeps_once_per_scenario(tmp_path: Path) -> None:
    from pytest_dsh_replay._scripts.loading import ScenarioCache

    dirs = _three_scenarios(tmp_path)
    size = max((d / "session.jsonl").stat().st_size for d in dirs)
    cache = ScenarioCache(max_bytes=2 * size + 1)  # two scenarios fit, three do not
    first = cache.load(dirs[0])
    for _ in range(3):  # loaded again after a change: its bytes replace, not add
        (dirs[1] / "session.jsonl").touch()
        os.utime(dirs[1] / "session.jsonl", ns=(time.time_ns(), time.time_ns()))
        second = cache.load(dirs[1])
    assert cache.load(dirs[0]) is first  # still kept: s1 counted once
    assert cache.load(dirs[1]) is second
    cache.load(dirs[2])  # the third: the least recently used (s0) goes
    assert cache.load(dirs[1]) is second
    assert cache.load(dirs[0]) is not first


def _generations(d: Path, versions: dict[str, int]) -> None:
    """``d`` holding the runtime-spawn example's primary log under each name and version."""
    from support.paths import EXAMPLES

    header, rest = (EXAMPLES / "runtime-spawn" / "session.jsonl").read_text().split("\n", 1)
    d.mkdir(parents=True)
    for name, version in versions.items():
        patched = json.dumps({**json.loads(header), "version": version}, separators=(",", ":"))
        (d / name).write_text(patched + "\n" + rest)


def test_a_directory_with_two_generations_of_a_log_reads_the_newest(tmp_path: Path) -> None:
    d = tmp_path / "sess-main"
    _generations(d, {"session.v4.jsonl": 4, "session.v5.jsonl": 5})
    scenario = load_scenario(d)
    assert [s.path.name for s in scenario.scripts if s.path] == ["session.v5.jsonl"]
    assert len(scenario.primary.entries) == len(
        load_scenario(d / "session.v4.jsonl").primary.entries
    )


def test_the_newest_generation_is_read_even_when_it_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "sess-main"
    _generations(d, {"session.v4.jsonl": 4, "session.v6.jsonl": 6})
    with pytest.raises(DshReplayError, match="upgrade"):  # never a fall-back to v4
        load_scenario(d)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (6, "session log format v6 is not one this build reads .* upgrade"),
        (5, "session.jsonl holds format v5 beside session.v4.jsonl"),
        (4, "session.jsonl holds format v4 beside session.v4.jsonl"),
    ],
)
def test_a_plain_named_log_no_older_than_the_generation_beside_it_is_refused(
    tmp_path: Path, version: int, message: str
) -> None:
    # A plain name ranked as the oldest generation, unread: a v6 log beside a v4 one was
    # silently skipped, though alone it is refused with the upgrade hint.
    d = tmp_path / "sess-main"
    _generations(d, {"session.v4.jsonl": 4, "session.jsonl": version})
    with pytest.raises(ScenarioError, match=message):
        load_scenario(d)
    plain = d / "session.jsonl"  # the header after a blank line is the header all the same
    plain.write_bytes(b"\n" + plain.read_bytes())
    with pytest.raises(ScenarioError, match=message):
        load_scenario(d)


def test_an_older_plain_named_log_beside_a_generation_is_left_unread(tmp_path: Path) -> None:
    d = tmp_path / "sess-main"
    _generations(d, {"session.v4.jsonl": 4, "session.jsonl": 0})
    assert [s.path.name for s in load_scenario(d).scripts if s.path] == ["session.v4.jsonl"]


def test_one_generation_twice_is_still_refused(tmp_path: Path) -> None:
    d = tmp_path / "sess-main"
    _generations(d, {"session.v5.jsonl": 5, "session.v5.jsonl.zst": 5})
    with pytest.raises(ScenarioError, match="the primary session has several logs"):
        load_scenario(d)


def test_load_scenario_refuses_an_empty_path_and_a_value_that_is_no_path() -> None:
    with pytest.raises(ScenarioError, match="an empty path names no scenario"):
        load_scenario("")  # Path("") is the current directory: never meant
    with pytest.raises(TypeError, match="load_scenario takes a path .*, got None"):
        load_scenario(None)  # type: ignore[arg-type]
