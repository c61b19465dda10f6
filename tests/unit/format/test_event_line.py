"""The line a log file holds an event on, for the log check's messages."""

from __future__ import annotations

from pathlib import Path

import orjson
from support.paths import REPO

from pytest_dsh_replay._format.jsonl import event_line, read_session_log

EXAMPLES = REPO / "example_snapshots"

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":0,"cwd":"/w"}\n'


def test_a_plain_log_has_its_events_on_their_lines(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(HEADER + b'{"type":"a"}\n\n{"type":"b"}\n')
    assert event_line(log, 0, 2) == 2
    assert event_line(log, 1, 2) == 4  # a blank line is counted as a line, not an event


def test_the_members_of_a_packed_chunk_row_are_on_its_line() -> None:
    # The example recording packs runs of chunk events into rows: 40 events on 32 lines.
    log = EXAMPLES / "tool-call" / "session.jsonl"
    _, events = read_session_log(log)
    lines = log.read_bytes().splitlines()
    packed = 0
    for index, event in enumerate(events):
        line = event_line(log, index, len(events))
        assert line is not None
        record = orjson.loads(lines[line - 1])
        if record["type"] == event["type"]:
            continue
        packed += 1
        assert event["type"] == "assistant/chunk", (index, record["type"])
    assert packed > 0  # the example does pack some


def test_no_line_past_the_end_or_when_the_file_changed(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    log.write_bytes(HEADER + b'{"type":"a"}\n')
    assert event_line(log, 0, 3) is None  # the file no longer holds the events read
    assert event_line(log, 1, 1) is None
    assert event_line(tmp_path / "missing.jsonl", 0, 1) is None
