"""Recorded chunk gaps kept in script entries (docs/scenarios.md#pacing).

Each log here is written with known times; the entry's ``gaps_ms`` must be the gaps
between them: the first from the call's start event, unknown and negative gaps 0.
"""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_dsh_replay import ChunksEntry, derive_replay_script, load_scenario
from pytest_dsh_replay._format import jsonl
from pytest_dsh_replay._scripts.builder import ScriptBuilder

V0 = {"type": "session", "version": 0, "id": "s", "createdAt": 1}
V4 = {"type": "session", "version": 4, "id": "s", "createdAt": 1, "isSeeded": False,
      "delegationDepth": 0}  # fmt: skip
BLOCK = {"type": "block-start", "index": 0, "blockType": "text"}
END = {"type": "block-end", "index": 0, "block": {"type": "text", "text": "abcd"}}
FINISH = {"type": "finish", "reason": {"kind": "stop"}}


def _write(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in [header, *events]))
    return path


def _chunk(seq: int, time: object, chunk: dict[str, Any], step: int = 1) -> dict[str, Any]:
    event: dict[str, Any] = {"type": "assistant/chunk", "seq": seq}
    if time is not None:
        event["time"] = time
    event["data"] = {"turn": 1, "step": step, "chunk": chunk}
    return event


def _row(seq0: int, time0: int | None, dt: list[int], step: int = 1) -> dict[str, Any]:
    row: dict[str, Any] = {"type": "text-chunks", "seq0": seq0}
    if time0 is not None:
        row["time0"] = time0
    row["data"] = {"turn": 1, "step": step, "index": 0, "dt": dt, "texts": list("abcd")}
    return row


def _v0_call(full: bool) -> list[dict[str, Any]]:
    """A format 0 call: step/start at 1000, chunks at 1100, 1130..1145 (a row), 1160, 1500."""

    def t(value: int) -> int | None:
        return value if full else None

    events = [
        {"type": "turn/start", "seq": 0, "time": t(990), "data": {"turn": 1}},
        {"type": "step/start", "seq": 1, "time": t(1000), "data": {"turn": 1, "step": 1}},
        _chunk(2, t(1100), BLOCK),
        _row(3, t(1130), [20, -5, 0]),  # members at 1130, 1150, 1145, 1145
        _chunk(7, t(1160), END),
        _chunk(8, t(1500), FINISH),
    ]
    if not full:
        for event in events:
            event.pop("seq", None) if event["type"] != "text-chunks" else event.pop("seq0")
            event.pop("time", None)
    return events


def _entry(path: Path) -> ChunksEntry:
    (script,) = load_scenario(path).scripts
    (entry,) = script.entries
    assert isinstance(entry, ChunksEntry)
    return entry


def test_a_full_format_0_log_keeps_every_gap_from_the_calls_start(tmp_path: Path) -> None:
    entry = _entry(_write(tmp_path / "session.jsonl", V0, _v0_call(full=True)))
    # 100 from step/start; 30 to the row; its dt with -5 as 0; 15 and 340 after it.
    assert entry.gaps_ms == [100, 30, 20, 0, 0, 15, 340]
    assert len(entry.gaps_ms) == entry.chunk_count


def test_a_committed_log_keeps_only_the_gaps_inside_its_packed_rows(tmp_path: Path) -> None:
    entry = _entry(_write(tmp_path / "session.jsonl", V0, _v0_call(full=False)))
    assert entry.gaps_ms == [0, 0, 20, 0, 0, 0, 0]


def test_events_derive_the_same_gaps_as_the_log(tmp_path: Path) -> None:
    from pytest_dsh_replay import parse_session_log

    path = _write(tmp_path / "session.jsonl", V0, _v0_call(full=True))
    (entry,) = derive_replay_script(parse_session_log(path.read_bytes()))
    assert isinstance(entry, ChunksEntry)
    assert entry.gaps_ms == [100, 30, 20, 0, 0, 15, 340]


def test_a_retry_is_timed_from_its_retry_started_event(tmp_path: Path) -> None:
    failure = {"message": "x", "code": "RATE_LIMIT"}
    failed = {"type": "finish", "reason": {"kind": "error", "failure": failure}}
    events = [
        {"type": "step/start", "seq": 0, "time": 1000, "data": {"turn": 1, "step": 1}},
        _chunk(1, 1040, failed),
        {"type": "llm/retry", "seq": 2, "time": 1050,
         "data": {"retryId": "r", "turn": 1, "step": 1, "delayMs": 500}},
        {"type": "llm/retry-started", "seq": 3, "time": 1600,
         "data": {"retryId": "r", "turn": 1, "step": 1, "retry": 1}},
        _chunk(4, 1625, BLOCK),
        _chunk(5, 1700, FINISH),
    ]  # fmt: skip
    (script,) = load_scenario(_write(tmp_path / "session.jsonl", V0, events)).scripts
    assert [e.gaps_ms for e in script.entries] == [[40], [25, 75]]  # type: ignore[union-attr]


def test_a_call_without_a_start_event_has_a_first_gap_of_0(tmp_path: Path) -> None:
    events = [_chunk(0, 1100, BLOCK), _chunk(1, 1110, FINISH)]
    assert _entry(_write(tmp_path / "session.jsonl", V0, events)).gaps_ms == [0, 10]


def test_times_are_read_into_gaps_on_first_use_and_all_0_keep_nothing(tmp_path: Path) -> None:
    events = [_chunk(0, 5, BLOCK), _chunk(1, 5, FINISH)]
    entry = _entry(_write(tmp_path / "session.jsonl", V0, events))
    assert entry._gaps == (None, 5, 5)  # as read (RawTimes), until asked for
    assert entry.gaps_ms == [0, 0]
    assert entry._gaps is None  # all 0: nothing kept


def test_a_chunk_time_shaped_like_a_run_is_not_a_time(tmp_path: Path) -> None:
    # A list is not a time, even one shaped as a run's (time0, dt): its gap and the next
    # are unknown (0), never read from the list.
    events = [_chunk(0, [1000, []], BLOCK), _chunk(1, 1100, FINISH)]
    assert _entry(_write(tmp_path / "session.jsonl", V0, events)).gaps_ms == [0, 0]


def test_a_committed_call_without_rows_keeps_nothing(tmp_path: Path) -> None:
    events = [_chunk(0, None, BLOCK), _chunk(1, None, FINISH)]
    for event in events:
        del event["seq"]
    entry = _entry(_write(tmp_path / "session.jsonl", V0, events))
    assert entry._gaps is None
    assert entry.gaps_ms == [0, 0]


def test_gaps_take_one_two_or_four_bytes_a_chunk(tmp_path: Path) -> None:
    for top, kind in [(255, "bytes"), (256, "H"), (65_536, "I"), (2**32 + 5, "I")]:
        events = [_chunk(0, 0, BLOCK), _chunk(1, top, FINISH)]
        entry = _entry(_write(tmp_path / "session.jsonl", V0, events))
        assert entry.gaps_ms == [0, min(top, 2**32 - 1)]  # at most 49 days
        kept = entry._gaps
        assert (kept.typecode if isinstance(kept, array) else type(kept).__name__) == kind


def test_a_non_integer_time_is_unknown(tmp_path: Path) -> None:
    events = [_chunk(0, 1100, BLOCK), _chunk(1, 1110, END), _chunk(2, 1150, FINISH)]
    events[1]["time"] = 1110.5
    assert _entry(_write(tmp_path / "session.jsonl", V0, events)).gaps_ms == [0, 0, 0]


def _v4_events() -> list[dict[str, Any]]:
    stream = [
        {"type": "chunk", "time": 2100, "chunk": BLOCK},
        {"type": "text-chunks", "time0": 2120, "index": 0, "dt": [5, -1, 30],
         "texts": list("abcd")},
        {"type": "chunk", "time": 2100, "chunk": END},  # before the last member: 0
        {"type": "chunk", "time": 2400, "chunk": FINISH},
    ]  # fmt: skip
    return [
        {"type": "step/start", "seq": 0, "time": 2000, "data": {"turn": 1, "step": 1}},
        {"type": "assistant/message", "seq": 1, "time": 2401,
         "data": {"turn": 1, "step": 1, "stream": stream}},
    ]  # fmt: skip


V4_GAPS = [100, 20, 5, 0, 30, 0, 300]


def test_a_format_4_stream_keeps_its_record_times(tmp_path: Path) -> None:
    assert _entry(_write(tmp_path / "session.v4.jsonl", V4, _v4_events())).gaps_ms == V4_GAPS


def test_a_large_format_4_log_derives_its_gaps_when_the_call_is_first_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "TYPED_MIN_BYTES", 0)  # every log takes the large-log read
    entry = _entry(_write(tmp_path / "session.v4.jsonl", V4, _v4_events()))
    assert repr(entry) == "ChunksEntry(<chunks not read yet>)"
    assert entry.gaps_ms == V4_GAPS


def _child_entries(events: list[dict[str, Any]], seed_length: int) -> list[Any]:
    """The script of a format 0 fork child whose first ``seed_length`` events are inherited."""
    builder = ScriptBuilder(version=0, skip=seed_length)
    builder.feed(enumerate(events, start=2))  # as the log's lines after the header
    return builder.finish()


def test_a_fork_childs_gaps_start_after_its_seed() -> None:
    events = [
        {"type": "step/start", "seq": 0, "time": 10, "data": {"turn": 1, "step": 1}},
        _chunk(1, 20, BLOCK),
        _chunk(2, 30, FINISH),
        {"type": "step/start", "seq": 3, "time": 5000, "data": {"turn": 2, "step": 1}},
        _chunk(4, 5007, BLOCK, step=1),
        _chunk(5, 5010, FINISH, step=1),
    ]
    for event in events[4:]:
        event["data"]["turn"] = 2
    # The first three events (a call) are the parent's: the step/start at 10 too.
    assert [e.gaps_ms for e in _child_entries(events, 3)] == [[7, 3]]
    assert [e.gaps_ms for e in _child_entries(events, 4)] == [[0, 3]]  # its start inherited


def test_a_row_cut_by_a_seed_keeps_the_gaps_of_its_own_members() -> None:
    events = [
        _chunk(0, 100, BLOCK),
        _row(1, 200, [10, 20, 40]),  # seq 1..4: members 1 in the seed, 2..4 the child's
        _chunk(5, 300, FINISH),
    ]
    # The second member (at 210) is the child's first chunk: no start event, gap 0.
    (entry,) = _child_entries(events, 2)
    assert entry.gaps_ms == [0, 20, 40, 30]


def test_a_start_event_times_one_call_only(tmp_path: Path) -> None:
    # Two attempts under one step/start, no llm/retry-started between them.
    events = [
        {"type": "step/start", "seq": 0, "time": 1000, "data": {"turn": 1, "step": 1}},
        _chunk(1, 1010, BLOCK),
        _chunk(2, 1020, FINISH),
        _chunk(3, 1100, BLOCK),
        _chunk(4, 1120, FINISH),
    ]
    (script,) = load_scenario(_write(tmp_path / "session.jsonl", V0, events)).scripts
    assert [e.gaps_ms for e in script.entries] == [[10, 10], [0, 20]]  # type: ignore[union-attr]


def test_a_format_4_call_after_another_without_a_start_has_a_first_gap_of_0(
    tmp_path: Path,
) -> None:
    first, second = _v4_events()[1], _v4_events()[1]
    first = {**first, "type": "assistant/attempt"}
    second = {**second, "seq": 2}
    events = [_v4_events()[0], first, second]
    (script,) = load_scenario(_write(tmp_path / "session.v4.jsonl", V4, events)).scripts
    assert [e.gaps_ms for e in script.entries] == [V4_GAPS, [0, *V4_GAPS[1:]]]  # type: ignore[union-attr]


HIGH, LOW = "\\ud83d", "\\ude00"  # U+1F600's pair, as JSON escapes
SPLIT_GAPS = [50, 50, 40, 60, 30]  # step/start 1000; chunks 1050, 1100, 1140, 1200, 1230


def _split_pair_log(kind: str) -> tuple[dict[str, Any], str]:
    """A call whose text splits a surrogate pair across two deltas (as JavaScript may)."""
    if kind.startswith("format 4"):
        stream = (
            f'[{{"type":"chunk","time":1050,"chunk":{orjson.dumps(BLOCK).decode()}}},'
            f'{{"type":"text-chunks","time0":1100,"index":0,"dt":[40],'
            f'"texts":["a{HIGH}","{LOW}b"]}},'
            f'{{"type":"chunk","time":1200,"chunk":{orjson.dumps(END).decode()}}},'
            f'{{"type":"chunk","time":1230,"chunk":{orjson.dumps(FINISH).decode()}}}]'
        )
        return V4, (
            '{"type":"step/start","seq":0,"time":1000,"data":{"turn":1,"step":1}}\n'
            '{"type":"assistant/message","seq":1,"time":1231,"data":{"turn":1,"step":1,'
            f'"stream":{stream}}}}}'
        )
    if kind == "a packed row":
        deltas = (
            '{"type":"text-chunks","seq0":2,"time0":1100,"data":{"turn":1,"step":1,'
            f'"index":0,"dt":[40],"texts":["a{HIGH}","{LOW}b"]}}}}'
        )
    else:
        deltas = "\n".join(
            f'{{"type":"assistant/chunk","seq":{seq},"time":{time},"data":{{"turn":1,'
            f'"step":1,"chunk":{{"type":"text-delta","index":0,"text":"{text}"}}}}}}'
            for seq, time, text in ((2, 1100, f"a{HIGH}"), (3, 1140, f"{LOW}b"))
        )
    lines = ['{"type":"step/start","seq":0,"time":1000,"data":{"turn":1,"step":1}}']
    lines += [orjson.dumps(_chunk(1, 1050, BLOCK)).decode(), deltas]
    lines += [orjson.dumps(_chunk(4, 1200, END)).decode()]
    lines += [orjson.dumps(_chunk(5, 1230, FINISH)).decode()]
    return V0, "\n".join(lines)


@pytest.mark.parametrize(
    "kind", ["chunk events", "a packed row", "format 4", "format 4, a large log"]
)
def test_a_call_whose_text_splits_a_surrogate_pair_keeps_its_gaps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    # The entry joins the pair into the later delta, one chunk per chunk, and keeps the
    # recorded gaps (they were all 0 before).
    if kind.endswith("a large log"):
        monkeypatch.setattr(jsonl, "TYPED_MIN_BYTES", 0)  # the large-log read
    header, body = _split_pair_log(kind)
    path = tmp_path / ("session.v4.jsonl" if header is V4 else "session.jsonl")
    path.write_text(orjson.dumps(header).decode() + "\n" + body + "\n", encoding="utf-8")
    entry = _entry(path)
    texts = [c.get("text") for c in entry.chunks if c["type"] == "text-delta"]
    assert texts == ["a", "\U0001f600b"]
    assert entry.gaps_ms == SPLIT_GAPS
