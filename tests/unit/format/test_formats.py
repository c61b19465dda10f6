"""The format table: every layer asks a log's FormatSpec, none compares version numbers.

Test-only versions registered in a copy of the table (v6 shaped like format 5, format 4
with another header origin; v7 shaped like format 0) are read by the whole load path
(reader, header rules, script builder, seeds, writer) exactly as their spec says, with no
other change to the package.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from pytest_dsh_replay import SessionLogError, load_scenario
from pytest_dsh_replay._format import formats
from pytest_dsh_replay._format.events import SessionHeader, header_problem
from pytest_dsh_replay._format.formats import FORMATS, FormatSpec, format_spec, lenient_spec
from pytest_dsh_replay._format.jsonl import dump_session_log, read_session_log
from pytest_dsh_replay._scripts.scenario import load_session_script

V6 = FORMATS[5].replace(version=6)
V7 = FORMATS[0].replace(version=7, stored=False)


@pytest.fixture
def wider_table(monkeypatch: pytest.MonkeyPatch) -> dict[int, FormatSpec]:
    table = {**FORMATS, 6: V6, 7: V7}
    monkeypatch.setattr(formats, "FORMATS", table)
    return table


def _write(path: Path, header: dict[str, Any], events: list[dict[str, Any]]) -> Path:
    lines = [header, *({"seq": i, "time": i, **e} for i, e in enumerate(events))]
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    return path


_FINISH = {"type": "finish", "reason": {"kind": "stop"}}
_TEXTS = ["Hel", "lo", "!"]


def _streamed_log(tmp_path: Path, version: int) -> Path:
    """A seeded fork child of a format 4 shape: one inherited call, then its own."""
    header = {"type": "session", "version": version, "id": "c", "createdAt": 1,
              "parentSession": "p", "isSeeded": True, "origin": "automation",
              "delegationDepth": 1}  # fmt: skip
    stream = [
        {"type": "text-chunks", "time0": 1, "index": 0, "dt": [0, 0], "texts": _TEXTS},
        {"type": "chunk", "time": 2, "chunk": _FINISH},
    ]
    call = {"type": "assistant/message", "data": {"turn": 1, "step": 1, "stream": stream}}
    events = [call, {"type": "session/end-seed", "data": {"inherited": True}}, call]
    return _write(tmp_path / f"session.v{version}.jsonl", header, events)


def _chunk_log(tmp_path: Path, version: int) -> Path:
    """A fork child of a format 0 shape: one inherited event, then a call of chunks."""
    header = {"type": "session", "version": version, "id": "c", "createdAt": 1,
              "seedLength": 1, "delegationDepth": 1}  # fmt: skip
    chunks = [{"type": "text-delta", "index": 0, "text": t} for t in _TEXTS] + [_FINISH]
    events = [{"type": "user/message", "data": {"role": "user", "content": "hi"}},
              {"type": "session/end-seed", "data": {}}]  # fmt: skip
    events += [{"type": "assistant/chunk", "data": {"turn": 1, "step": 1, "chunk": c}}
               for c in chunks]  # fmt: skip
    name = "session.jsonl" if version == 0 else f"session.v{version}.jsonl"
    return _write(tmp_path / name, header, events)


def _texts(path: Path) -> list[list[Any]]:
    script = load_session_script(path, primary=False)
    return [[c.get("text") for c in e.chunks] for e in script.entries]


def test_an_unregistered_version_is_refused_with_the_table_s_range(tmp_path: Path) -> None:
    with pytest.raises(
        SessionLogError, match=re.escape("format v6 is not one this build reads (v0 to v5)")
    ):
        load_scenario(_streamed_log(tmp_path, 6))
    with pytest.raises(SessionLogError, match="format v8 is not"):
        format_spec(8)


def test_a_negative_version_is_named_damage_not_a_newer_harness(tmp_path: Path) -> None:
    with pytest.raises(SessionLogError, match=r"format v-1 is no format version \(v0 to v5\)"):
        load_scenario(_streamed_log(tmp_path, -1))
    with pytest.raises(SessionLogError) as raised:
        format_spec(-3)
    assert "upgrade" not in str(raised.value)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        ("5", r'header version must be an integer.*got "5": the header is damaged'),
        (4.5, r"got 4\.5: the header is damaged"),
        (None, r"got null: the header is damaged"),
        (True, r"got true: the header is damaged"),
        ([5], r"got \[5\]: the header is damaged"),
        (2**60, r"format v1152921504606846976 is not one this build reads.*upgrade"),
    ],
)
def test_a_version_that_is_no_integer_is_refused_not_read_as_format_0(
    tmp_path: Path, version: object, message: str
) -> None:
    path = _write(
        tmp_path / "session.jsonl", {"type": "session", "version": version, "id": "c"}, []
    )
    with pytest.raises(SessionLogError, match=message):
        load_scenario(path)


def test_a_registered_version_like_format_5_reads_as_its_spec_says(
    tmp_path: Path, wider_table: dict[int, FormatSpec]
) -> None:
    path = _streamed_log(tmp_path, 6)
    # the seed ends at the inherited marker (spec.seeded), calls are streams
    assert _texts(path) == [["Hel", "lo", "!", None]]
    header, events = read_session_log(path)
    assert header.spec is V6
    assert header.seeded
    assert header.to_json()["isSeeded"] is True
    # whole events: written as read, seq and time kept, nothing packed
    assert dump_session_log(header, events, envelope=False) == path.read_bytes()
    # the header's origin is the spec's: format 4 still refuses "automation"
    v4 = {**orjson.loads(path.read_bytes().split(b"\n")[0]), "version": 4}
    assert header_problem(v4, "replay") == (
        "session log format v4 header: origin must be \"subagent\", got 'automation'"
    )
    with pytest.raises(SessionLogError, match=re.escape("(v0 to v7)")):
        load_scenario(_streamed_log(tmp_path, 8))


def test_a_registered_version_like_format_0_reads_as_its_spec_says(
    tmp_path: Path, wider_table: dict[int, FormatSpec]
) -> None:
    v0, v7 = _chunk_log(tmp_path, 0), _chunk_log(tmp_path, 7)
    # chunk events, the seed counted by seedLength, as format 0
    assert _texts(v7) == _texts(v0) == [["Hel", "lo", "!", None]]
    header, events = read_session_log(v7)
    assert header.spec is V7
    assert header.seeded
    assert header.to_json()["seedLength"] == 1
    # not whole events: the writer packs the delta run into one row
    body = dump_session_log(header, events).split(b"\n")[1:-1]
    assert [orjson.loads(line)["type"] for line in body] == [
        "user/message", "session/end-seed", "text-chunks", "assistant/chunk",
    ]  # fmt: skip
    # a stream event is not in format 0's vocabulary
    stream_event = {"type": "assistant/attempt", "data": {"stream": []}}
    _write(v7, orjson.loads(v7.read_bytes().split(b"\n")[0]), [stream_event])
    with pytest.raises(SessionLogError, match="unknown event type"):
        load_session_script(v7, primary=True)


@pytest.mark.parametrize("spec", FORMATS.values(), ids=lambda s: f"v{s.version}")
def test_each_format_s_facts_agree_with_its_vocabulary(spec: FormatSpec) -> None:
    assert FORMATS[spec.version] is spec
    # docs/format.md#event-types: chunk events or stream events, never both
    assert ("assistant/chunk" in spec.event_types) is not spec.streams_in_message
    assert ("assistant/attempt" in spec.event_types) is spec.streams_in_message
    # docs/format.md#v4-header: a seeded header says isSeeded and never seedLength
    if spec.header_keys is not None:
        assert "isSeeded" in spec.header_keys
        assert "seedLength" not in spec.header_keys
    assert (spec.header_keys is not None) is spec.seeded
    assert lenient_spec(spec.version) is spec
    assert SessionHeader.from_json({"version": spec.version}).spec is spec


def test_lenient_reading_takes_the_nearest_version() -> None:
    newest, oldest = FORMATS[max(FORMATS)], FORMATS[min(FORMATS)]
    assert lenient_spec(None) is oldest
    assert lenient_spec(-3) is oldest
    assert lenient_spec(max(FORMATS) + 10) is newest
