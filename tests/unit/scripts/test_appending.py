"""append_scenario: new events after a log's bytes, new children after the highest number."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.scenarios import make_scenario

from pytest_dsh_replay import (
    RecordingError,
    SessionHeader,
    SessionLog,
    load_scenario,
    read_session_log,
)
from pytest_dsh_replay._format.jsonl import dump_session_log
from pytest_dsh_replay._scripts.appending import append_scenario, appended_log


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.iterdir())}


def test_a_log_gains_events_after_its_bytes(tmp_path: Path) -> None:
    donor = make_scenario(tmp_path / "donor", ask="q", primary=["a1", "a2"])
    target = make_scenario(tmp_path / "target", ask="q", primary=["a1"])
    old = (target / "session.jsonl").read_bytes()
    donor_events = read_session_log(donor / "session.jsonl").events
    first = len(read_session_log(target / "session.jsonl").events)
    new = appended_log(target / "session.jsonl", donor_events[first:])
    assert new.startswith(old)
    assert len(new) > len(old)


def test_children_are_numbered_after_the_highest_and_other_files_are_kept(
    tmp_path: Path,
) -> None:
    scenario = make_scenario(tmp_path / "s", ask="q", primary=["a1"], child1=["c1"])
    (scenario / "notes.txt").write_text("kept\n")
    os.utime(scenario / "notes.txt", ns=(1_000_000_000, 1_000_000_000))
    before = _files(scenario)
    header = SessionHeader(id="n", created_at=10**13, parent_session="p", delegation_depth=1)
    written = append_scenario(scenario, [], [read_log_as(header, scenario / "session.1.jsonl")])
    assert written == [scenario / "session.2.jsonl"]
    after = _files(scenario)
    assert {k: after[k] for k in before} == before
    assert [s.file for s in load_scenario(scenario).scripts] == [
        "session.jsonl",
        "session.1.jsonl",
        "session.2.jsonl",
    ]


def read_log_as(header: SessionHeader, log: Path) -> SessionLog:
    """The events of ``log`` under another header (a new child's)."""
    return SessionLog(header, read_session_log(log).events)


def test_a_log_not_in_the_committed_form_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    scenario = make_scenario(tmp_path / "s", ask="q", primary=["a1"])
    log = read_session_log(scenario / "session.jsonl")
    (scenario / "session.jsonl").write_bytes(dump_session_log(log.header, log.events))  # seq/time
    before = _files(scenario)
    with pytest.raises(RecordingError, match="not in the committed form.*dsh-replay fmt"):
        append_scenario(scenario, [("session.jsonl", log.events[-2:])], [])
    assert _files(scenario) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s"]
