"""What the format does not allow is refused with the file and line (docs/format.md#vocabulary)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay import SessionLogError, load_scenario
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._format.vocabulary import CHUNK_FIELDS, chunk_problem
from pytest_dsh_replay._store.backends.sqlite import SqliteBackend
from pytest_dsh_replay.cli import main

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}\n'
START = {"type": "block-start", "index": 0, "blockType": "text"}
DELTA = {"type": "text-delta", "index": 0, "text": "hi"}
END = {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}}
FINISH = {"type": "finish", "reason": {"kind": "stop"}}


def chunk(c: dict[str, Any]) -> dict[str, Any]:
    return {"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": c}}


def scenario(tmp_path: Path, events: list[dict[str, Any]]) -> Path:
    d = tmp_path / "scn"
    d.mkdir()
    (d / "session.jsonl").write_bytes(HEADER + b"".join(orjson.dumps(e) + b"\n" for e in events))
    return d


def call(*chunks: dict[str, Any]) -> list[dict[str, Any]]:
    return [chunk(c) for c in chunks]


REFUSED = [
    ("unknown-event", [{"type": "assistant$chunk", "data": {}}], 2,
     'unknown event type "assistant$chunk"'),
    ("finish-without-kind", call(START, DELTA, END, {"type": "finish", "reason": {}}), 5,
     "finish reason whose kind is"),
    ("block-end-without-index", call(START, DELTA, {"type": "block-end", "block": END["block"]},
                                     FINISH), 4, "a block-end chunk needs index"),
    ("unknown-chunk", call(START, DELTA, {"type": "block-eMd", "index": 0}, FINISH), 4,
     'unknown stream chunk type "block-eMd"'),
    ("delta-without-text", call(START, {"type": "text-delta", "index": 0}, FINISH), 3,
     "a text-delta chunk needs text"),
    ("tool-delta-without-id", call({"type": "block-start", "index": 0, "blockType": "tool-call"},
                                   {"type": "tool-call-delta", "index": 0, "argumentsDelta": "{}"},
                                   FINISH), 3, "a tool-call-delta chunk needs id"),
    ("unknown-field", call(START, {**DELTA, "txet": "x"}, FINISH), 3, 'unknown field "txet"'),
    ("bad-block-type", call({**START, "blockType": "texu"}, FINISH), 2, "blockType must be"),
]  # fmt: skip


@pytest.mark.parametrize(("events", "line", "expected"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])  # fmt: skip
def test_what_the_format_does_not_allow_is_refused_with_file_and_line(
    tmp_path: Path, events: list[dict[str, Any]], line: int, expected: str
) -> None:
    d = scenario(tmp_path, events)
    with pytest.raises(SessionLogError) as caught:
        load_scenario(d)
    assert (caught.value.path, caught.value.line) == (str(d / "session.jsonl"), line)
    assert expected in str(caught.value)


def test_an_ignorable_event_of_an_unknown_type_is_skipped(tmp_path: Path) -> None:
    events = [
        {"type": "plugin/thing", "data": {}, "ignorable": True},
        *call(START, DELTA, END, FINISH),
    ]
    (entry,) = load_scenario(scenario(tmp_path, events)).primary.entries
    assert entry.chunks[-1] == FINISH


def test_a_v4_log_refuses_assistant_chunk_and_unknown_stream_chunks(tmp_path: Path) -> None:
    header = (b'{"type":"session","version":4,"id":"s","createdAt":1,"isSeeded":false,'
              b'"delegationDepth":0}\n')  # fmt: skip
    log = tmp_path / "session.v4.jsonl"
    log.write_bytes(header + orjson.dumps({"type": "assistant/chunk", "seq": 0, "time": 1,
                                           "data": {"chunk": FINISH}}) + b"\n")  # fmt: skip
    with pytest.raises(SessionLogError, match=r"session\.v4\.jsonl:2: unknown event type"):
        load_scenario(log)
    stream = [{"type": "chunk", "time": 1, "chunk": {"type": "finish", "reason": {}}}]
    message = {"type": "assistant/message", "seq": 0, "time": 1,
               "data": {"turn": 1, "step": 1, "stream": stream}}  # fmt: skip
    log.write_bytes(header + orjson.dumps(message) + b"\n")
    with pytest.raises(SessionLogError, match=r"v4\.jsonl:2: assistant/message stream: a finish"):
        load_scenario(log)


def test_a_sqlite_store_refuses_a_bad_chunk_naming_the_store_and_seq(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    events = [{**e, "seq": i, "time": i} for i, e in
              enumerate(call(START, {"type": "block-eMd", "index": 0}, FINISH))]  # fmt: skip
    with SqliteBackend(path) as backend:
        backend.append(SessionHeader(id="s", created_at=1, delegation_depth=0), events, create=True)
    with pytest.raises(
        SessionLogError, match=r"store\.sqlite#s: unknown stream chunk .*event seq 1"
    ):
        load_scenario(path)


def test_check_reports_the_refusals_and_exits_non_zero(tmp_path: Path) -> None:
    d = scenario(tmp_path, call(START, DELTA, {"type": "block-end", "block": {}}, FINISH))
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(d)], stdout=out, stderr=err) == 1
    first = err.getvalue().splitlines()[0]
    assert first.startswith(f"{d / 'session.jsonl'}:4: a block-end chunk needs index")


# --- the one checker against its table, rule by rule -----------------------------------

_VALUES: st.SearchStrategy[Any] = st.one_of(
    st.sampled_from(
        [0, 1, -1, 2**53 - 1, 2**53, 2**60, 1.0, -0.0, 0.5, True, None, "", "text", [],
         {}, {"kind": "stop"}, {"kind": "error", "failure": {"message": "m", "code": "c"}},
         {"type": "text", "text": "hi"}, {"type": "tool-call", "id": "i", "name": "n"},
         {"inputTokens": 1, "outputTokens": 2}, {"inputTokens": 1, "outputTokens": -2},
         {"inputTokens": 1, "outputTokens": 2, "totalTokens": 2**53}, "plugin:x",
         "tool-call", "reasoning"]
    ),
    st.text(UTF8, max_size=3),
    st.integers(),
)  # fmt: skip


_STRINGS = st.one_of(st.text(UTF8, max_size=3), st.sampled_from([None, 1]))
_FIELD_VALUES = {
    "index": st.sampled_from([0, 3, -1, 2**53 - 1, 2**53, 2**60, 1.0, -0.0, True, "0"]),
    "text": _STRINGS,
    "id": _STRINGS,
    "name": _STRINGS,
    "argumentsDelta": _STRINGS,
}


def _rule_by_rule(chunk: dict[str, Any]) -> bool:
    """Whether ``chunk`` passes CHUNK_FIELDS's rules, each field checked by its own rule."""
    spec = CHUNK_FIELDS.get(chunk.get("type"))  # type: ignore[arg-type]
    if spec is None:
        return False
    required, optional = spec
    if any(key not in chunk or rule(chunk[key]) is not None for key, rule in required.items()):
        return False
    rules = {**required, **optional}
    return all(
        key in rules and rules[key](value) is None for key, value in chunk.items() if key != "type"
    )


@st.composite
def _chunks(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from([*CHUNK_FIELDS, "block-eMd"]))
    required, optional = CHUNK_FIELDS.get(kind, ({}, {}))
    chunk: dict[str, Any] = {"type": kind}
    for key in [*required, *optional]:
        if draw(st.integers(0, 9)) > (0 if key in required else 5):
            chunk[key] = draw(_FIELD_VALUES.get(key, _VALUES))
    if draw(st.integers(0, 9)) == 0:
        chunk[draw(st.sampled_from(["txet", "index", "usage"]))] = draw(_VALUES)
    return chunk


@settings(max_examples=150, deadline=None, derandomize=True)
@given(_chunks())
def test_chunk_problem_accepts_exactly_what_the_table_accepts(chunk: dict[str, Any]) -> None:
    # The checker's shortcuts (a delta's or a required-only chunk's key set) decide as
    # the rules do: an index past 2**53 - 1 is refused on a delta too.
    assert (chunk_problem(chunk) is None) == _rule_by_rule(chunk)


def test_a_delta_whose_index_is_not_a_safe_integer_is_refused(tmp_path: Path) -> None:
    d = scenario(tmp_path, call(START, {**DELTA, "index": 2**53}, END, FINISH))
    with pytest.raises(SessionLogError) as caught:
        load_scenario(d)
    assert caught.value.line == 3
    assert "a text-delta chunk's index must be a non-negative integer" in str(caught.value)
