"""Reading session logs: the lenient replay rules and typed errors.

See docs/format.md#lenient-reading.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from pytest_dsh_replay import SessionLogError, parse_session_header, parse_session_log
from pytest_dsh_replay._format.jsonl import dump_session_log, read_log_bytes, read_session_log

HEADER = b'{"type":"session","version":0,"id":"s-1","createdAt":5,"delegationDepth":0}\n'


def line(obj: object) -> bytes:
    return orjson.dumps(obj) + b"\n"


def chunk_event(seq: int, chunk: dict[str, object], turn: int = 1, step: int = 1) -> bytes:
    return line(
        {
            "type": "assistant/chunk",
            "seq": seq,
            "time": 100 + seq,
            "data": {"turn": turn, "step": step, "chunk": chunk},
        }
    )


@pytest.mark.parametrize("header", ["[]", "1", '"session"', "null"])
def test_parse_session_log_refuses_a_header_that_is_not_an_object(header: str) -> None:
    text = f"\n{header}\n" + '{"type":"turn/start","data":{"turn":1}}\n'
    with pytest.raises(SessionLogError, match=r"^x\.jsonl:2: the first line must be"):
        parse_session_log(text, source="x.jsonl")


def test_header_fields_and_defaults() -> None:
    header = parse_session_header(
        b'{"type":"session","id":"c","createdAt":7,"seedLength":3,"parentSession":"p",'
        b'"cwd":"/w","origin":"subagent","delegationDepth":1,"x":true}\n'
    )
    assert (header.id, header.created_at, header.seed_length) == ("c", 7, 3)
    assert (header.parent_session, header.cwd, header.origin) == ("p", "/w", "subagent")
    assert header.delegation_depth == 1
    assert header.extra == {"x": True}
    mistyped = parse_session_header(b'{"id":5,"createdAt":"x","seedLength":true}')
    assert (mistyped.id, mistyped.created_at, mistyped.seed_length) == ("", 0, 0)


def test_header_only_file_has_no_events() -> None:
    assert parse_session_log(HEADER) == []


def test_crlf_blank_lines_and_bom_are_tolerated() -> None:
    body = b'{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}'
    text = b"\xef\xbb\xbf\r\n" + HEADER.rstrip(b"\n") + b"\r\n\r\n   \r\n" + body + b"\r\n\n"
    events = parse_session_log(text)
    assert events == [{"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}}]
    assert parse_session_header(text).id == "s-1"


def test_str_input_equals_bytes_input() -> None:
    text = HEADER + line({"type": "turn/start", "data": {"turn": 1}})
    assert parse_session_log(text.decode()) == parse_session_log(text)


@pytest.mark.parametrize("special", ["\u2028", "\u2029", "\x1e", "\x85", "\x0b\x0c"])
def test_line_separator_characters_inside_strings_stay_intact(special: str) -> None:
    text = f"a{special}b"
    raw = HEADER + line({"type": "user/message", "seq": 0, "time": 0, "data": {"t": text}})
    (event,) = parse_session_log(raw)
    assert event["data"]["t"] == text


def test_projected_records_get_seq_and_time_synthesized() -> None:
    raw = (
        HEADER
        + line({"type": "turn/start", "data": {"turn": 1}})
        + line(
            {
                "type": "text-chunks",
                "data": {"turn": 1, "step": 1, "index": 0, "dt": [2, 3], "texts": ["a", "b", "c"]},
            }
        )
        + line({"type": "turn/end", "data": {"turn": 1}})
    )
    events = parse_session_log(raw)
    assert [(e["type"], e["seq"], e["time"]) for e in events] == [
        ("turn/start", 0, 0),
        ("assistant/chunk", 1, 0),
        ("assistant/chunk", 2, 2),
        ("assistant/chunk", 3, 5),
        ("turn/end", 4, 0),
    ]
    assert events[2]["data"] == {
        "turn": 1,
        "step": 1,
        "chunk": {"type": "text-delta", "index": 0, "text": "b"},
    }


def test_present_envelopes_are_kept_as_found() -> None:
    raw = HEADER + line({"type": "x", "seq": 9, "time": -4, "data": {}})
    assert parse_session_log(raw) == [{"type": "x", "seq": 9, "time": -4, "data": {}}]


def test_tool_call_rows_expand_with_and_without_name() -> None:
    row = {
        "type": "tool-call-chunks",
        "seq0": 0,
        "time0": 10,
        "data": {"turn": 1, "step": 1, "index": 2, "dt": [0], "id": "c1", "args": ["{", "}"]},
    }
    named = {**row, "data": {**row["data"], "name": "read"}}  # type: ignore[dict-item]
    plain = parse_session_log(HEADER + line(row))
    assert [e["data"]["chunk"] for e in plain] == [
        {"type": "tool-call-delta", "index": 2, "id": "c1", "argumentsDelta": "{"},
        {"type": "tool-call-delta", "index": 2, "id": "c1", "argumentsDelta": "}"},
    ]
    with_name = parse_session_log(HEADER + line(named))
    assert with_name[0]["data"]["chunk"]["name"] == "read"


# --- errors -----------------------------------------------------------------------------


def errors_of(raw: bytes) -> SessionLogError:
    with pytest.raises(SessionLogError) as info:
        parse_session_log(raw, source="log.jsonl")
    return info.value


def test_empty_file_is_an_error() -> None:
    err = errors_of(b"")
    assert err.path == "log.jsonl"
    assert "empty session log" in str(err)
    with pytest.raises(SessionLogError, match="empty session log"):
        parse_session_header(b"\n  \n")


def test_truncated_last_line_names_file_and_line() -> None:
    raw = HEADER + line({"type": "turn/start", "data": {"turn": 1}}) + b'{"type":"turn/en'
    err = errors_of(raw)
    assert (err.path, err.line) == ("log.jsonl", 3)
    assert str(err).startswith("log.jsonl:3: truncated last line")


def test_invalid_json_in_the_middle_names_the_line() -> None:
    raw = HEADER + b"\n" + b'{"type": nope}\n' + line({"type": "x"})
    err = errors_of(raw)
    assert err.line == 3  # physical lines: the blank line counts
    assert "invalid JSON" in str(err)
    assert "column" in str(err)


def test_a_line_cut_short_in_the_middle_names_the_column_where_it_ends() -> None:
    # orjson reads the line with its newline and reports the end as column 1 of a line 2
    cut = b'{"type":"turn/start","data":{"turn":1}'
    raw = HEADER + cut + b"\n" + line({"type": "x"})
    err = errors_of(raw)
    assert err.line == 2
    assert f"(unexpected end of data at column {len(cut) + 1})" in str(err)
    crlf = errors_of(HEADER + cut + b"\r\n" + line({"type": "x"}))
    assert f"at column {len(cut) + 1})" in str(crlf)


@pytest.mark.parametrize(
    ("raw_line", "got"),
    [(b"null", "null"), (b"[1]", "an array"), (b"42", "a number"), (b'"s"', "a string")],
)
def test_non_object_body_line_is_an_error(raw_line: bytes, got: str) -> None:
    err = errors_of(HEADER + raw_line + b"\n")
    assert err.line == 2
    assert f"must be a JSON object (an event), got {got}" in str(err)


def test_non_object_header_is_an_error() -> None:
    with pytest.raises(SessionLogError, match=r"^h\.jsonl:1: the first line must be"):
        parse_session_header(b"[1,2]\n", source="h.jsonl")


def test_invalid_utf8_is_an_error_not_a_crash() -> None:
    err = errors_of(HEADER + b'{"type":"x","data":"\xff\xfe"}\n')
    assert err.line == 2


# --- files ------------------------------------------------------------------------------


def test_zstd_logs_are_read_frame_by_frame(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    body = line({"type": "turn/start", "seq": 0, "time": 0, "data": {"turn": 1}})
    path = tmp_path / "session.jsonl.zstd"
    path.write_bytes(compressor.compress(HEADER) + compressor.compress(body))
    header, events = read_session_log(path)
    assert header.id == "s-1"
    assert [e["type"] for e in events] == ["turn/start"]
    zst = tmp_path / "session.jsonl.zst"
    zst.write_bytes(path.read_bytes())
    assert read_log_bytes(zst) == HEADER + body


def test_torn_zstd_frame_is_reported_with_offset(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    compressor = zstandard.ZstdCompressor(write_checksum=True)
    first = compressor.compress(HEADER)
    second = compressor.compress(line({"type": "x", "data": {}}))
    path = tmp_path / "session.jsonl.zst"
    path.write_bytes(first + second[:-3])
    with pytest.raises(SessionLogError, match=rf"frame at byte {len(first)} is incomplete"):
        read_log_bytes(path)
    path.write_bytes(first + b"garbage")
    with pytest.raises(SessionLogError, match=rf"invalid frame magic at byte {len(first)}"):
        read_log_bytes(path)


def test_missing_file_is_a_session_log_error(tmp_path: Path) -> None:
    with pytest.raises(SessionLogError, match="cannot read session log"):
        read_session_log(tmp_path / "nope.jsonl")


# --- writing ----------------------------------------------------------------------------


def test_dump_then_parse_round_trips_and_packs_runs() -> None:
    header = parse_session_header(HEADER)
    events = parse_session_log(
        HEADER
        + b"".join(
            chunk_event(i, {"type": "text-delta", "index": 0, "text": t})
            for i, t in enumerate(["a", "b", "c", "d"])
        )
        + line(
            {
                "type": "assistant/chunk",
                "seq": 4,
                "time": 0,
                "data": {
                    "turn": 1,
                    "step": 1,
                    "chunk": {"type": "finish", "reason": {"kind": "stop"}},
                },
            }
        )
    )
    full = dump_session_log(header, events)
    assert full.count(b"\n") == 3  # header, one packed row, the finish
    assert b'"type":"text-chunks","seq0":0,"time0":100' in full
    assert parse_session_log(full) == events
    projected = dump_session_log(header, events, envelope=False)
    assert b'"seq' not in projected.split(b"\n", 1)[1]
    reread = parse_session_log(projected)
    assert [e["data"] for e in reread] == [e["data"] for e in events]
    assert [e["seq"] for e in reread] == [0, 1, 2, 3, 4]


def test_header_is_written_in_reference_field_order() -> None:
    header = parse_session_header(
        b'{"owner":"o","delegationDepth":2,"seedLength":4,"parentSession":"p","cwd":"/c",'
        b'"createdAt":1,"id":"i","version":0,"type":"session","origin":"subagent"}'
    )
    first = dump_session_log(header, []).split(b"\n")[0]
    assert list(orjson.loads(first)) == [
        "type",
        "version",
        "id",
        "createdAt",
        "cwd",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "owner",
    ]


def test_the_committed_form_finds_the_header_as_the_reader_does() -> None:
    from pytest_dsh_replay._check.normalize import canonical_log
    from pytest_dsh_replay._format.jsonl import header_line

    # A line of Unicode white space is blank to the reader, so the header follows it.
    data = b"\n\xc2\xa0\n" + HEADER.replace(b"\n", b"\r\n")
    assert header_line(data) == (HEADER.rstrip(b"\n"), orjson.loads(HEADER))
    assert canonical_log(data) == HEADER
    assert canonical_log(b"\xef\xbb\xbf" + HEADER) == HEADER  # a byte-order mark dropped
    with pytest.raises(SessionLogError, match="empty"):
        header_line(b"\n \n")


@pytest.mark.parametrize("encoding", ["latin-1", "utf-16"])
def test_a_line_that_is_not_utf_8_names_its_first_bad_byte(tmp_path: Path, encoding: str) -> None:
    # orjson's message said "surrogates not allowed at column 1" wherever the byte was.
    path = tmp_path / "session.jsonl"
    header = b'{"type":"session","version":0,"id":"s","createdAt":1}\n'
    event = '{"type":"user/message","data":{"content":"café"}}\n'.encode(encoding)
    path.write_bytes(header + event)
    with pytest.raises(SessionLogError) as info:
        read_session_log(path)
    assert info.value.line == 2
    bad = next(i for i, b in enumerate(event) if b >= 0x80 or b == 0) + 1
    assert info.value.reason.startswith(f"not UTF-8 text: byte {bad} of the line (0x")
    assert "surrogate" not in info.value.reason
