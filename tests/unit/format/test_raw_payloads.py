"""Payloads left raw by the typed read of a large log (docs/format.md#raw-payloads).

The typed read of a log of 1 MiB or more checks each stream line's envelope while
decoding and keeps its ``data.stream`` as the log's JSON text until the call is first
served. These tests lower that threshold to every
log and hold the typed read to the plain one: the same scripts where the plain read
accepts a log, and where it refuses one, the same message, file and line, raised at the
load or, for a payload, when the call is first served.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus

from pytest_dsh_replay import DshReplayError, ReplayModel, load_scenario
from pytest_dsh_replay._errors import SessionLogError
from pytest_dsh_replay._format import jsonl

V4 = {
    "type": "session",
    "version": 4,
    "id": "s",
    "createdAt": 1,
    "isSeeded": False,
    "delegationDepth": 0,
}
FINISH: dict[str, Any] = {"type": "finish", "reason": {"kind": "stop"}}
STOP = {"type": "chunk", "time": 5, "chunk": FINISH}
START = {
    "type": "chunk",
    "time": 1,
    "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
}
TEXT = {"type": "text-chunks", "time0": 1, "index": 0, "dt": [1, 0], "texts": ["a", "b", "c"]}


def _outcome(path: Path, *, typed: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``("load"|"serve", reason, path, line)`` for a refusal, else ``("ok", chunks)``."""
    with monkeypatch.context() as m:
        if typed:
            m.setattr(jsonl, "TYPED_MIN_BYTES", 0)
        try:
            scenario = load_scenario(path)
        except SessionLogError as err:
            return ("load", err.reason, err.path, err.line)
        except DshReplayError as err:
            return ("load", type(err).__name__, str(err))
    chunks = []
    for script in scenario.scripts:
        for entry in script.entries:
            try:
                ended = getattr(entry, "ends_with_finish", None)
                chunks.append((entry.chunks, ended, getattr(entry, "chunk_count", None)))
            except SessionLogError as err:
                return ("serve", err.reason, err.path, err.line)
    return ("ok", chunks)


def _agreed(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The plain read's outcome, once the typed read has given the same."""
    plain = _outcome(path, typed=False, monkeypatch=monkeypatch)
    assert _outcome(path, typed=True, monkeypatch=monkeypatch) == plain
    return plain


def _v4_log(tmp_path: Path, *records: Any) -> Path:
    message = {"type": "assistant/message", "seq": 0, "time": 0,
               "data": {"turn": 1, "step": 1, "stream": list(records)}}  # fmt: skip
    path = tmp_path / "session.jsonl"
    path.write_bytes(orjson.dumps(V4) + b"\n" + orjson.dumps(message) + b"\n")
    return path


PAYLOAD_FAULTS = [
    pytest.param([{**TEXT, "texts": ["a", 1, "c"]}], id="member-not-a-string"),
    pytest.param([{**TEXT, "texts": []}], id="no-members"),
    pytest.param([{**TEXT, "texts": {"a": 1}}], id="members-not-an-array"),
    pytest.param([{**TEXT, "texts": ["a", "b"]}], id="dt-longer"),
    pytest.param([{**TEXT, "dt": [], "texts": ["a", "b"]}], id="dt-shorter"),
    pytest.param(
        [{"type": "tool-call-chunks", "time0": 1, "index": 1, "dt": [], "id": "c", "args": [2]}],
        id="tool-args",
    ),
    pytest.param([{"type": "chunk", "time": 1, "chunk": [1]}], id="chunk-not-an-object"),
    pytest.param(
        [{"type": "chunk", "time": 1, "chunk": {"type": "block-end", "index": 2**53}}],
        id="chunk-unsafe-integer",
    ),
    pytest.param([{"type": "chunk", "time": 1, "chunk": {"type": "nope"}}], id="unknown-chunk"),
    pytest.param(
        [{"type": "chunk", "time": 1, "chunk": {"type": "nope"}}, {**TEXT, "texts": [1, 2, 3]}],
        id="record-problem-before-chunk-problem",
    ),
]


@pytest.mark.parametrize("records", PAYLOAD_FAULTS)
def test_a_raw_payload_is_refused_when_served_as_the_plain_read_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[Any]
) -> None:
    path = _v4_log(tmp_path, START, *records, STOP)
    plain = _outcome(path, typed=False, monkeypatch=monkeypatch)
    typed = _outcome(path, typed=True, monkeypatch=monkeypatch)
    assert plain[0] == "load"
    assert typed == ("serve", *plain[1:])
    assert plain[2:] == (str(path), 2)


@pytest.mark.parametrize("records", PAYLOAD_FAULTS)
def test_a_bad_payload_beside_a_bad_finish_is_refused_at_the_load_as_the_plain_read_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, records: list[Any]
) -> None:
    """The finish is decoded at the load; its refusal is the plain read's first problem."""
    bad_finish = {"type": "chunk", "time": 5, "chunk": {"type": "finish", "reason": 3}}
    path = _v4_log(tmp_path, START, *records, bad_finish)
    assert _agreed(path, monkeypatch)[0] == "load"


@pytest.mark.parametrize(
    ("marked", "text"),
    [
        ({**TEXT, "texts": ["a", "MARK", "c"]}, b'"\xff"'),  # not UTF-8
        ({"type": "chunk", "time": 2, "chunk": {"type": "usage", "usage": "MARK"}}, b"1e400"),
        ({**TEXT, "texts": ["a", "MARK", "c"]}, b"-1e400"),  # beyond a double
    ],
    ids=["utf8", "chunk-number", "member-number"],
)
def test_a_payload_that_does_not_parse_is_refused_with_the_reader_s_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marked: dict[str, Any], text: bytes
) -> None:
    path = _v4_log(tmp_path, START, marked, STOP)
    path.write_bytes(path.read_bytes().replace(b'"MARK"', text))
    plain = _outcome(path, typed=False, monkeypatch=monkeypatch)
    assert plain[0] == "load"
    assert plain[2:] == (str(path), 2)
    assert _outcome(path, typed=True, monkeypatch=monkeypatch) == ("serve", *plain[1:])


def test_member_times_beyond_the_safe_range_are_refused_at_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 4096  # 2**52 + 4096 * 2**40 passes 2**53: only a run this long can overflow
    run = {**TEXT, "time0": 2**52, "dt": [2**40] * n, "texts": ["x"] * (n + 1)}
    path = _v4_log(tmp_path, START, run, STOP)
    plain = _outcome(path, typed=False, monkeypatch=monkeypatch)
    assert plain[:2] == ("load", "assistant/message stream record 1: text-chunks member "
                         "times must stay safe integers")  # fmt: skip
    assert _outcome(path, typed=True, monkeypatch=monkeypatch) == plain


def test_a_fork_seed_that_differs_from_its_parent_is_read_and_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork child's inherited calls are the parent's and never served; a seed whose
    lines are the parent's, byte for byte, is not read again (docs/scenarios.md#structure).
    One that differs (here a payload that does not parse, where the parent's does) is
    read as events to compare it with the parent's log: both reads refuse its line."""
    data = {"turn": 1, "step": 1, "stream": [START, TEXT, STOP]}
    good: dict[str, Any] = {"type": "assistant/message", "seq": 1, "time": 0, "data": data}
    user = {"type": "user/message", "seq": 0, "time": 0,
            "data": {"role": "user", "content": [{"type": "text", "text": "hi"}]}}  # fmt: skip
    (tmp_path / "session.jsonl").write_bytes(
        b"".join(orjson.dumps(x) + b"\n" for x in [V4, user, good])
    )
    bad = {**good, "data": {**good["data"], "stream": [START, {**TEXT, "texts": ["MARK"],
                                                              "dt": []}, STOP]}}  # fmt: skip
    marker = {"type": "session/end-seed", "seq": 2, "time": 0, "data": {"inherited": True}}
    child = {**V4, "id": "c", "createdAt": 2, "parentSession": "s", "isSeeded": True}
    lines = [child, user, bad, marker, {**good, "seq": 3}]
    path = tmp_path / "session.1.jsonl"
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines).replace(b'"MARK"', b'"\xff"'))
    plain = _agreed(tmp_path, monkeypatch)
    assert plain[0] == "load"
    assert plain[2:] == (str(path), 3)
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in [child, user, good, *lines[3:]]))
    typed = _agreed(tmp_path, monkeypatch)  # the seed is the parent's: it loads
    assert [len(chunks) for chunks, _, _ in typed[1]] == [5, 5]  # the parent's, the child's


def test_a_call_an_override_replaces_is_read_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _v4_log(tmp_path, START, {"type": "chunk", "time": 2, "chunk": {"type": "nope"}}, STOP)
    patch = {"at": 0, "entry": {"kind": "chunks", "chunks": [STOP["chunk"]]}}
    (tmp_path / "replay.override.json").write_bytes(orjson.dumps({"patches": [patch]}))
    assert _agreed(tmp_path, monkeypatch)[0] == "load"


def test_the_response_id_of_a_kept_stream_is_read_from_its_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    finish = {**FINISH, "replayState": {"response": {"MARK": "r1"}}}
    path = _v4_log(tmp_path, START, {**STOP, "chunk": finish})
    path.write_bytes(path.read_bytes().replace(b'"MARK"', b'"response\\u0049d"'))
    ids = []
    for typed in (False, True):
        with monkeypatch.context() as m:
            if typed:
                m.setattr(jsonl, "TYPED_MIN_BYTES", 0)
            entry = load_scenario(path).scripts[0].entries[0]
        assert repr(entry) in ("ChunksEntry(<2 chunks>)", "ChunksEntry(<chunks not read yet>)")
        ids.append(entry.response_id)  # before anything else reads the entry
    assert ids == ["r1", "r1"]


@pytest.mark.parametrize(
    "text",
    [
        b'"fin\\u0069sh"',  # a finish hidden by an escape, before the last one
        b'"\\ud83d"',  # half of a surrogate pair: the plain reader keeps it
        b'"\xed\xa0\xbd"',  # the same half written as UTF-8 bytes
    ],
    ids=["escaped-finish", "lone-surrogate-escape", "surrogate-bytes"],
)
def test_escapes_and_surrogates_in_a_kept_stream_read_as_the_plain_read_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes
) -> None:
    middle = {"type": "chunk", "time": 2, "chunk": {"type": "MARK", "reason": {"kind": "stop"}}}
    if b"fin" not in text:
        middle = {**TEXT, "texts": ["a", "MARK", "c"]}
    path = _v4_log(tmp_path, START, middle, STOP)
    path.write_bytes(path.read_bytes().replace(b'"MARK"', text))
    if b"fin" in text:  # a chunk follows that finish: refused when the call is served
        plain = _outcome(path, typed=False, monkeypatch=monkeypatch)
        assert plain[0] == "load"
        assert _outcome(path, typed=True, monkeypatch=monkeypatch) == ("serve", *plain[1:])
    else:
        assert _agreed(path, monkeypatch)[0] == "ok"


def test_a_bad_payload_fails_the_call_that_streams_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _v4_log(tmp_path, START, {**TEXT, "texts": ["a", 1, "c"]}, STOP)
    with monkeypatch.context() as m:
        m.setattr(jsonl, "TYPED_MIN_BYTES", 0)
        model = ReplayModel(load_scenario(path))
    with pytest.raises(DshReplayError, match=r"session\.jsonl:2: .*texts must be a string array"):
        list(model.stream({"messages": []}, session_id="s"))


@pytest.mark.parametrize("scenario", corpus_params(corpus_scenarios()))
def test_every_corpus_scenario_reads_typed_as_it_reads_plain(
    monkeypatch: pytest.MonkeyPatch, scenario: Path | None
) -> None:
    if scenario is None:
        require_corpus()
        return
    plain = _outcome(scenario, typed=False, monkeypatch=monkeypatch)
    assert _outcome(scenario, typed=True, monkeypatch=monkeypatch) == plain


@pytest.mark.parametrize(
    "later",
    [
        {"type": "assistant/attempt", "seq": 1, "time": 0,
         "data": {"turn": 1, "step": 2, "stream": [START]}},  # never finished
        {"type": "no/such-event", "seq": 1, "time": 0, "data": {}},
    ],
    ids=["unterminated", "unknown-event"],
)  # fmt: skip
def test_check_reports_a_raw_payload_as_a_load_would(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    later: dict[str, Any],
) -> None:
    """The first problem in log order: a payload before a later line's problem."""
    from pytest_dsh_replay.cli import main

    path = _v4_log(tmp_path, START, {**TEXT, "texts": ["a", 1, "c"]}, STOP)
    path.write_bytes(path.read_bytes() + orjson.dumps(later) + b"\n")
    monkeypatch.setattr(jsonl, "TYPED_MIN_BYTES", 0)
    assert main(["check", str(tmp_path)]) == 1
    assert f"{path}:2: assistant/message stream record 1: text-chunks texts" in (
        capsys.readouterr().err
    )


def test_verify_checks_a_kept_stream_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = _v4_log(tmp_path, START, TEXT, STOP)
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = _v4_log(bad_dir, START, {**TEXT, "texts": ["a", 1, "c"]}, STOP)
    monkeypatch.setattr(jsonl, "TYPED_MIN_BYTES", 0)
    entry = load_scenario(good).scripts[0].entries[0]
    assert repr(entry) == "ChunksEntry(<chunks not read yet>)"
    entry.verify()
    assert repr(entry) == "ChunksEntry(<5 chunks>)"
    entry.verify()  # once checked, nothing more to do
    broken = load_scenario(bad).scripts[0].entries[0]
    with pytest.raises(SessionLogError) as info:
        broken.verify()
    assert (info.value.path, info.value.line) == (str(bad), 2)
    assert info.value.reason.endswith("text-chunks texts must be a string array")


def test_a_bad_payload_fails_its_own_call_not_the_session_s_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large log's payload is checked when its call is served: earlier calls replay."""
    monkeypatch.setattr(jsonl, "TYPED_MIN_BYTES", 0)

    def message(seq: int, record: dict[str, Any]) -> dict[str, Any]:
        data = {"turn": seq + 1, "step": 1, "stream": [START, record, STOP]}
        return {"type": "assistant/message", "seq": seq, "time": 0, "data": data}

    bad = {**TEXT, "texts": ["a", 1, "c"]}
    path = tmp_path / "session.jsonl"
    path.write_bytes(
        b"".join(orjson.dumps(x) + b"\n" for x in (V4, message(0, TEXT), message(1, bad)))
    )
    model = ReplayModel(load_scenario(path))
    request = {"messages": [{"role": "user", "content": "hi"}]}
    assert [c["type"] for c in model.stream(request)][-1] == "finish"
    for _ in range(2):  # the failed call can be made again: it fails the same way
        with pytest.raises(SessionLogError, match="texts must be a string array") as err:
            list(model.stream(request))
        assert (err.value.path, err.value.line) == (str(path), 3)


@pytest.mark.parametrize(
    ("after", "record"),
    [([STOP], 2), ([STOP, TEXT], 2), ([TEXT, STOP, TEXT], 2)],
    ids=["second-finish", "text-after-finish", "text-between-two-finishes"],
)
def test_a_chunk_after_the_call_s_finish_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after: list[Any], record: int
) -> None:
    # A second finish loaded as part of the call; any other chunk after the finish was
    # called a missing finish (and sent the user to write a sidecar).
    path = _v4_log(tmp_path, START, STOP, *after)
    assert _agreed(path, monkeypatch) == (
        "load",
        f"assistant/message stream record {record}: a chunk follows the call's finish "
        f"chunk (record {record - 1}); a call's stream ends with its finish",
        str(path),
        2,
    )
