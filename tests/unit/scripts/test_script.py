"""Script derivation, entries, and the override sidecar.

See docs/format.md#scripts and docs/scenarios.md#overrides.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_dsh_replay import (
    ChunksEntry,
    HangEntry,
    OverrideError,
    ScriptError,
    ThrowEntry,
    derive_replay_script,
)
from pytest_dsh_replay._scripts.entries import entry_from_json
from pytest_dsh_replay._scripts.override import apply_override, load_override

STOP = {"type": "finish", "reason": {"kind": "stop"}}
ERROR = {"type": "finish", "reason": {"kind": "error", "failure": {"message": "m", "code": "X"}}}


def chunk(c: dict[str, Any], turn: int = 1, step: int = 1) -> dict[str, Any]:
    return {"type": "assistant/chunk", "data": {"turn": turn, "step": step, "chunk": c}}


def text(t: str, index: int = 0) -> dict[str, Any]:
    return {"type": "text-delta", "index": index, "text": t}


def entries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e.to_json() for e in derive_replay_script(events)]


def test_calls_split_at_finish_and_retries_stay_separate() -> None:
    events = [
        {"type": "turn/start", "data": {"turn": 1}},
        chunk(text("a")),
        chunk(ERROR),
        {"type": "llm/retry", "data": {}},
        chunk(text("b")),
        {"type": "tool/call", "data": {}},  # non-chunk events never interrupt a call
        chunk(STOP),
        chunk(text("c"), turn=2),
        chunk(STOP, turn=2),
    ]
    assert entries(events) == [
        {"kind": "chunks", "chunks": [text("a"), ERROR]},
        {"kind": "chunks", "chunks": [text("b"), STOP]},
        {"kind": "chunks", "chunks": [text("c"), STOP]},
    ]


def test_empty_and_chunkless_logs_give_no_calls() -> None:
    assert entries([]) == []
    assert entries([{"type": "turn/start", "data": {"turn": 1}}]) == []


def test_turn_step_change_inside_a_call_raises_naming_the_old_key() -> None:
    events = [chunk(text("a"), turn=1, step=2), chunk(text("b"), turn=1, step=3)]
    with pytest.raises(ScriptError) as info:
        derive_replay_script(events, source="s.jsonl")
    assert info.value.call_key == "1/2"
    assert info.value.event_index == 0
    assert "model call 1/2" in str(info.value)
    assert "replay.override.json" in str(info.value)


def test_unterminated_trailing_call_raises() -> None:
    with pytest.raises(ScriptError, match=r"model call 3/1 \(call #2 of this session\)"):
        derive_replay_script([chunk(STOP), chunk(text("x"), turn=3)])


def test_float_turns_format_like_javascript() -> None:
    with pytest.raises(ScriptError, match="model call 1/2 "):
        derive_replay_script([chunk(text("a"), turn=1.0, step=2.0)])  # type: ignore[arg-type]


def summary(**data: Any) -> dict[str, Any]:
    return {"type": "compaction/summary", "data": data}


def test_compaction_summary_call_sits_at_its_log_position() -> None:
    events = [
        chunk(ERROR),
        summary(
            llmStreamCall=True, rawOutput=[{"type": "text", "text": "S"}], usage={"inputTokens": 1}
        ),
        summary(llmStreamCall="true", rawOutput=[{"type": "text", "text": "ignored"}]),
        summary(rawOutput=[]),
        chunk(STOP),
    ]
    assert entries(events) == [
        {"kind": "chunks", "chunks": [ERROR]},
        {
            "kind": "chunks",
            "chunks": [
                {"type": "block-start", "index": 0, "blockType": "text"},
                {"type": "block-end", "index": 0, "block": {"type": "text", "text": "S"}},
                {"type": "usage", "usage": {"inputTokens": 1}},
                STOP,
            ],
        },
        {"kind": "chunks", "chunks": [STOP]},
    ]


def test_summary_closes_an_open_call_and_raises() -> None:
    with pytest.raises(ScriptError, match="model call 1/1"):
        derive_replay_script([chunk(text("a")), summary()])


def test_marked_summary_without_raw_output_raises() -> None:
    with pytest.raises(ScriptError, match="llmStreamCall: true.*no rawOutput") as info:
        derive_replay_script([chunk(STOP), summary(llmStreamCall=True)])
    assert info.value.event_index == 1


def test_chunk_event_without_chunk_object_is_a_typed_error() -> None:
    with pytest.raises(ScriptError, match="data.chunk"):
        derive_replay_script([{"type": "assistant/chunk", "data": {"turn": 1}}])


def test_entries_hand_out_fresh_chunk_objects() -> None:
    original = [
        text("a"),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "a"}},
    ]
    entry = ChunksEntry(original)
    original[0]["text"] = "changed after construction"
    first = entry.chunks
    first[1]["block"]["text"] = "mutated by a consumer"
    assert entry.chunks == [
        text("a"),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "a"}},
    ]
    assert entry.chunk_count == 2


NESTED_FINISH = {
    "type": "block-end",
    "index": 0,
    "block": {"type": "text", "text": "a", "x": {"type": "finish"}},
}
RUN = ["text-delta", 0, ["a", "b"]]


@pytest.mark.parametrize(
    ("runs", "ends"),
    [
        ([RUN, STOP], True),
        ([STOP], True),
        ([RUN, STOP, STOP], False),  # an earlier finish: the stream went on after it
        ([STOP, RUN], False),
        ([NESTED_FINISH, STOP], True),  # a nested {"type": "finish"} is no finish chunk
        ([NESTED_FINISH, STOP, {**STOP, "replayState": {"type": "finish"}}], False),
        ([{"type": "text-delta", "index": 0, "text": '"type":"finish"'}, STOP], True),
        ([], False),
    ],
)
def test_ends_with_finish_is_true_only_for_a_last_and_only_finish(
    runs: list[Any], ends: bool
) -> None:
    # from_runs reads it off the serialized runs where that is certain; the same answer
    # as the constructor's, which walks the chunks.
    assert ChunksEntry.from_runs(runs, 0).ends_with_finish is ends
    chunks = ChunksEntry.from_runs(runs, 0).chunks
    assert ChunksEntry(chunks).ends_with_finish is ends


def test_entry_wire_forms() -> None:
    assert ThrowEntry([], "boom", "AUTH").to_json() == {
        "kind": "throw",
        "chunks": [],
        "message": "boom",
        "code": "AUTH",
    }
    assert HangEntry().to_json() == {"kind": "hang"}
    assert HangEntry("ready").to_json() == {"kind": "hang", "readyFile": "ready"}
    with pytest.raises(ScriptError):
        ThrowEntry([], "", "X")


# --- override sidecar -------------------------------------------------------------------

VALID_CHUNKS = {"kind": "chunks", "chunks": [STOP]}

OVERRIDE_ERRORS: list[tuple[Any, str]] = [
    (None, "document must be a ReplayEntry[] or { patches: [{at, entry}...] }"),
    ({"patches": [], "x": 1}, "document must be"),
    ({"patches": {}}, "document must be"),
    ({"patches": [[]]}, "patch 0 must contain exactly at and entry"),
    ({"patches": [{"at": 0}]}, "patch 0 must contain exactly at and entry"),
    (
        {"patches": [{"at": -1, "entry": VALID_CHUNKS}]},
        "patch 0 at must be a non-negative safe integer",
    ),
    (
        {"patches": [{"at": 0.5, "entry": VALID_CHUNKS}]},
        "patch 0 at must be a non-negative safe integer",
    ),
    (
        {"patches": [{"at": "0", "entry": VALID_CHUNKS}]},
        "patch 0 at must be a non-negative safe integer",
    ),
    ({"patches": [{"at": 0, "entry": 3}]}, "patch 0.entry must be an object"),
    ([3], "entry 0 must be an object"),
    ([{"kind": "chunks", "chunks": [], "x": 1}], "entry 0 has invalid chunks-entry fields"),
    ([{"kind": "throw", "chunks": [], "message": "m"}], "entry 0 has invalid throw-entry fields"),
    (
        [{"kind": "throw", "chunks": [], "message": "", "code": "C"}],
        "entry 0 message must be a non-empty string",
    ),
    (
        [{"kind": "throw", "chunks": [], "message": "m", "code": 5}],
        "entry 0 code must be a non-empty string",
    ),
    ([{"kind": "hang", "x": 1}], "entry 0 has invalid hang-entry fields"),
    ([{"kind": "hang", "readyFile": None}], "entry 0 readyFile must be a non-empty string"),
    ([{"kind": "hang", "readyFile": ""}], "entry 0 readyFile must be a non-empty string"),
    ([{"kind": "nope"}], 'entry 0 has unknown kind "nope"'),
    ([{"chunks": []}], "entry 0 has unknown kind null"),
    ([{"kind": "chunks", "chunks": {}}], "entry 0 chunks must be an array"),
    (
        [VALID_CHUNKS, {"kind": "chunks", "chunks": [STOP, {"type": "bogus"}]}],
        "entry 1.chunks[1] must have a known StreamChunk type",
    ),
    (
        [{"kind": "throw", "chunks": ["x"], "message": "m", "code": "c"}],
        "entry 0.chunks[0] must have a known StreamChunk type",
    ),
]


@pytest.mark.parametrize(("document", "detail"), OVERRIDE_ERRORS)
def test_every_override_malformation_names_file_and_location(
    tmp_path: Path, document: Any, detail: str
) -> None:
    path = tmp_path / "replay.override.json"
    path.write_text(json.dumps(document))
    with pytest.raises(OverrideError) as info:
        load_override(path)
    assert str(info.value).startswith(f"{path}: invalid override: {detail}")


def test_invalid_json_sidecar_names_line(tmp_path: Path) -> None:
    path = tmp_path / "replay.override.json"
    path.write_text('[\n  {"kind": "hang"},\n  oops\n]')
    with pytest.raises(OverrideError) as info:
        load_override(path)
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: invalid JSON")


def test_only_the_chunk_type_is_checked() -> None:
    entry = entry_from_json({"kind": "chunks", "chunks": [{"type": "text-delta"}]})
    assert entry.to_json() == {"kind": "chunks", "chunks": [{"type": "text-delta"}]}


def _override(tmp_path: Path, document: Any) -> Any:
    path = tmp_path / "o.json"
    path.write_text(json.dumps(document))
    return load_override(path)


def test_array_override_replaces_the_script(tmp_path: Path) -> None:
    ov = _override(tmp_path, [{"kind": "hang", "readyFile": "r"}])
    assert apply_override([ChunksEntry([STOP])], ov) == [HangEntry("r")]


def test_patches_replace_and_append_one_slot(tmp_path: Path) -> None:
    derived = [ChunksEntry([STOP]), ChunksEntry([ERROR])]
    throw = {"kind": "throw", "chunks": [], "message": "m", "code": "C"}
    ov = _override(
        tmp_path, {"patches": [{"at": 2, "entry": VALID_CHUNKS}, {"at": 1, "entry": throw}]}
    )
    assert [e.to_json() for e in apply_override(derived, ov)] == [
        VALID_CHUNKS,
        throw,
        VALID_CHUNKS,
    ]


def test_patch_out_of_range_and_duplicates(tmp_path: Path) -> None:
    derived = [ChunksEntry([STOP])]
    two_appends = _override(
        tmp_path, {"patches": [{"at": 1, "entry": VALID_CHUNKS}, {"at": 2, "entry": VALID_CHUNKS}]}
    )
    with pytest.raises(
        OverrideError, match=r"patch index 2 out of range \(derived script has 1 call"
    ):
        apply_override(derived, two_appends)
    dup = _override(
        tmp_path, {"patches": [{"at": 0, "entry": VALID_CHUNKS}, {"at": 0, "entry": VALID_CHUNKS}]}
    )
    with pytest.raises(OverrideError, match="duplicate override patch index 0"):
        apply_override(derived, dup)
