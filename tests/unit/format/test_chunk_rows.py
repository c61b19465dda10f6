"""Packed chunk rows: decoding as the harness does, encoding (see docs/format.md#packed-rows)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from pytest_dsh_replay import SessionLogError, decode_storage_record, pack_chunk_runs
from pytest_dsh_replay._format.chunk_rows import SQLITE_MAX_DATA_BYTES
from pytest_dsh_replay._format.jsonl import parse_session_log

TEXT_ROW: dict[str, Any] = {
    "type": "text-chunks",
    "seq0": 3,
    "time0": 100,
    "data": {"turn": 2, "step": 1, "index": 1, "dt": [5, -2], "texts": ["M", "AR", "ML"]},
}
TOOL_ROW: dict[str, Any] = {
    "type": "tool-call-chunks",
    "seq0": 0,
    "time0": 0,
    "data": {
        "turn": 1,
        "step": 1,
        "index": 0,
        "id": "c",
        "name": "n",
        "dt": [0],
        "args": ["{", "}"],
    },
}


def test_decode_expands_members_with_seq_and_time() -> None:
    events = decode_storage_record(copy.deepcopy(TEXT_ROW))
    assert [(e["seq"], e["time"]) for e in events] == [(3, 100), (4, 105), (5, 103)]
    assert events[1] == {
        "type": "assistant/chunk",
        "seq": 4,
        "time": 105,
        "data": {"turn": 2, "step": 1, "chunk": {"type": "text-delta", "index": 1, "text": "AR"}},
    }
    reasoning = decode_storage_record({**TEXT_ROW, "type": "reasoning-chunks"})
    assert reasoning[0]["data"]["chunk"]["type"] == "reasoning-delta"


def test_ordinary_values_pass_through_unvalidated() -> None:
    for value in [None, [1], "x", {"type": "turn/end"}, {"type": ["text-chunks"]}]:
        assert decode_storage_record(value) == [value]


def test_integral_floats_count_as_integers() -> None:
    row = {**TEXT_ROW, "seq0": 3.0, "data": {**TEXT_ROW["data"], "dt": [5.0, -2]}}
    assert [e["seq"] for e in decode_storage_record(row)] == [3, 4, 5]


def _mutated(base: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    row = copy.deepcopy(base)
    target = row
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return row


_DELETE = object()
MAX = 2**53 - 1

MALFORMED = [
    (TEXT_ROW, ("extra",), 1, "envelope must be exactly {type, seq0, time0, data}"),
    (TEXT_ROW, ("seq0",), _DELETE, "envelope must be exactly {type, seq0, time0, data}"),
    (TEXT_ROW, ("seq0",), -1, "seq0 must be a non-negative safe integer"),
    (TEXT_ROW, ("seq0",), 1.5, "seq0 must be a non-negative safe integer"),
    (TEXT_ROW, ("seq0",), True, "seq0 must be a non-negative safe integer"),
    (TEXT_ROW, ("seq0",), 2**53, "seq0 must be a non-negative safe integer"),
    (TEXT_ROW, ("time0",), "0", "time0 must be a safe integer"),
    (TEXT_ROW, ("data",), [], "data must be an object"),
    (TEXT_ROW, ("data",), None, "data must be an object"),
    (TEXT_ROW, ("data", "id"), "x", "data must be exactly {turn, step, index, dt, texts}"),
    (
        TOOL_ROW,
        ("data", "texts"),
        [],
        "data must be exactly {turn, step, index, id, name?, dt, args}",
    ),
    (TOOL_ROW, ("data", "id"), 7, "id (and name when present) must be strings"),
    (TOOL_ROW, ("data", "name"), None, "id (and name when present) must be strings"),
    (TEXT_ROW, ("data", "turn"), "2", "turn/step/index must be numbers"),
    (TEXT_ROW, ("data", "index"), False, "turn/step/index must be numbers"),
    (TEXT_ROW, ("data", "texts"), [], "texts must be a non-empty string array"),
    (TEXT_ROW, ("data", "texts"), ["a", 1, "b"], "texts must be a non-empty string array"),
    (TOOL_ROW, ("data", "args"), "{}", "args must be a non-empty string array"),
    (TEXT_ROW, ("data", "dt"), [1, 0.5], "dt must be an array of safe integers"),
    (TEXT_ROW, ("data", "dt"), None, "dt must be an array of safe integers"),
    (TEXT_ROW, ("data", "dt"), [1], "dt length 1 does not match 3 members"),
    (TEXT_ROW, ("seq0",), MAX - 1, "member seqs must stay safe integers"),
    (TEXT_ROW, ("time0",), MAX - 3, "member times must stay safe integers"),
]


@pytest.mark.parametrize(
    ("base", "path", "value", "reason"),
    MALFORMED,
    ids=[f"{m[0]['type']}-{'.'.join(m[1])}-{m[3][:20]}" for m in MALFORMED],
)
def test_every_malformation_has_the_reference_reason(
    base: dict[str, Any], path: tuple[str, ...], value: Any, reason: str
) -> None:
    row = _mutated(base, path, value)
    with pytest.raises(SessionLogError) as info:
        decode_storage_record(row)
    assert str(info.value) == f"malformed {base['type']} storage row: {reason}"


def test_malformed_row_in_a_log_names_file_and_line() -> None:
    bad = _mutated(TEXT_ROW, ("data", "dt"), [1])
    raw = b'{"type":"session","id":"s"}\n\n' + orjson.dumps(bad) + b"\n"
    with pytest.raises(SessionLogError) as info:
        parse_session_log(raw, source="s.jsonl")
    assert (info.value.path, info.value.line) == ("s.jsonl", 3)
    assert (
        str(info.value)
        == "s.jsonl:3: malformed text-chunks storage row: dt length 1 does not match 3 members"
    )


def test_projected_row_with_an_extra_key_fails_the_envelope_check() -> None:
    row = {"type": "text-chunks", "seq": 0, "data": TEXT_ROW["data"]}
    with pytest.raises(SessionLogError, match="envelope must be exactly"):
        parse_session_log(b'{"type":"session"}\n' + orjson.dumps(row))


# --- encoding ---------------------------------------------------------------------------


def delta(
    seq: int,
    text: str,
    *,
    time: int | None = None,
    turn: int = 1,
    step: int = 1,
    index: int = 0,
    kind: str = "text-delta",
) -> dict[str, Any]:
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": seq * 10 if time is None else time,
        "data": {"turn": turn, "step": step, "chunk": {"type": kind, "index": index, "text": text}},
    }


def expand(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for r in records for e in decode_storage_record(copy.deepcopy(r))]


def test_runs_of_three_pack_and_shorter_runs_stay_verbatim() -> None:
    events = [
        delta(0, "a"),
        delta(1, "b"),
        delta(2, "c", index=1),
        delta(3, "d", index=1),
        delta(4, "e", index=1),
    ]
    records = pack_chunk_runs(events)
    assert [r["type"] for r in records] == ["assistant/chunk", "assistant/chunk", "text-chunks"]
    assert records[2] == {
        "type": "text-chunks",
        "seq0": 2,
        "time0": 20,
        "data": {"turn": 1, "step": 1, "index": 1, "dt": [10, 10], "texts": ["c", "d", "e"]},
    }
    assert expand(records) == events


@pytest.mark.parametrize(
    "breaker",
    [
        lambda e: e.update(seq=e["seq"] + 1),  # seq gap
        lambda e: e["data"].update(turn=2),
        lambda e: e["data"].update(step=2),
        lambda e: e["data"]["chunk"].update(index=9),
        lambda e: e["data"]["chunk"].update(type="reasoning-delta"),
        lambda e: e.update(extra=True),  # not exactly the four envelope keys
        lambda e: e["data"]["chunk"].update(extra=True),
    ],
)
def test_anything_that_breaks_continuity_splits_the_run(breaker: Any) -> None:
    events = [delta(i, str(i)) for i in range(6)]
    breaker(events[3])
    records = pack_chunk_runs(events)
    assert len(records) > 1
    assert records[0]["type"] == "text-chunks"
    assert records[0]["data"]["texts"] == ["0", "1", "2"]
    assert expand(records) == events


def test_tool_call_runs_need_the_same_id_and_name() -> None:
    def tool(seq: int, args: str, name: str | None = "read", cid: str = "c") -> dict[str, Any]:
        chunk: dict[str, Any] = {"type": "tool-call-delta", "index": 0, "id": cid}
        if name is not None:
            chunk["name"] = name
        chunk["argumentsDelta"] = args
        return {
            "type": "assistant/chunk",
            "seq": seq,
            "time": 0,
            "data": {"turn": 1, "step": 1, "chunk": chunk},
        }

    same = [tool(i, str(i)) for i in range(3)]
    assert [r["type"] for r in pack_chunk_runs(same)] == ["tool-call-chunks"]
    mixed = [tool(0, "a"), tool(1, "b", name=None), tool(2, "c")]
    assert [r["type"] for r in pack_chunk_runs(mixed)] == ["assistant/chunk"] * 3
    assert expand(pack_chunk_runs(mixed)) == mixed


def test_sqlite_limits_split_long_runs() -> None:
    events = [delta(i, "x" * 100) for i in range(2100)]
    records = pack_chunk_runs(events, max_members=1024)
    assert [len(r["data"]["texts"]) for r in records if r["type"] == "text-chunks"] == [
        1024,
        1024,
        52,
    ]
    big = [delta(i, "y" * 300_000) for i in range(8)]
    records = pack_chunk_runs(big, max_members=1024, max_data_bytes=SQLITE_MAX_DATA_BYTES)
    for r in records:
        if r["type"] == "text-chunks":
            assert len(orjson.dumps(r["data"])) <= SQLITE_MAX_DATA_BYTES
    assert expand(records) == big


def test_encoder_does_not_mutate_its_input() -> None:
    events = [delta(i, "z") for i in range(4)]
    before = copy.deepcopy(events)
    pack_chunk_runs(events)
    assert events == before


def _float_row(time0: float, dt: list[float]) -> dict[str, Any]:
    data = {"turn": 1, "step": 1, "index": 0, "dt": dt, "texts": ["a"] * (len(dt) + 1)}
    return {"type": "text-chunks", "seq0": 2.0, "time0": time0, "data": data}


def test_the_one_accept_path_takes_integral_floats_as_ints_and_keeps_times_safe() -> None:
    """The rare forms are decided by the accept path itself: integral floats are made
    ints, and member times that leave the safe range are refused, as the rules say."""
    from pytest_dsh_replay._format.chunk_rows import packed_row, validate_packed_row

    row = packed_row(_float_row(5.0, [1.0, 2.0]))
    assert row is not None
    assert (row.seq0, row.time0, row.dt) == (2, 5, [1, 2])
    assert [type(n) for n in (row.seq0, row.time0, *row.dt)] == [int] * 4
    near = float(2**53 - 4)
    assert packed_row(_float_row(near, [1.0, 2.0])) is not None
    unsafe = _float_row(near, [2.0, 2.0])
    assert packed_row(unsafe) is None
    with pytest.raises(SessionLogError, match="member times must stay safe integers"):
        validate_packed_row(unsafe)
