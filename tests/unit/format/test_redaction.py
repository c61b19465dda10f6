"""Redaction sees whole streamed runs, keeps delta boundaries, and never shows a secret."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dsh_replay._check.transcript import render_transcript, sessions_as_jsonl
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._format.redact import REDACTED, Redactor, delta_runs, recording_redactor
from pytest_dsh_replay._store.backends.sqlite import SqliteBackend
from pytest_dsh_replay._store.store import SessionStore
from pytest_dsh_replay.cli import main

KEY = "sk-proj-" + "Ab3" * 10  # looks like a key from its first 19 characters on
HEADER_KEY = "ghp_" + "h" * 36


def chunk_event(chunk: dict[str, Any], seq: int, turn: int = 1) -> dict[str, Any]:
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 0,
        "data": {"turn": turn, "step": 1, "chunk": chunk},
    }


def deltas(pieces: list[str], kind: str = "text-delta") -> list[dict[str, Any]]:
    field = "argumentsDelta" if kind == "tool-call-delta" else "text"
    return [chunk_event({"type": kind, "index": 0, field: p}, i) for i, p in enumerate(pieces)]


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [
        e["data"]["chunk"].get("text", e["data"]["chunk"].get("argumentsDelta")) for e in events
    ]


def test_a_first_piece_that_already_looks_like_a_key_does_not_leak_the_rest() -> None:
    pieces = ["answer: " + KEY[:22], KEY[22:], " end"]
    out = texts(Redactor().redact_events(deltas(pieces)))
    assert out == [f"answer: {REDACTED}", "", " end"]
    assert not any(KEY[18:] in t or KEY[22:] in t for t in out)


def test_the_configured_key_split_anywhere_is_redacted_in_tool_arguments() -> None:
    secret = "my-very-own-api-key-42"
    redactor = Redactor(literals=(secret,))
    pieces = ['{"token": "my-very', "-own-api-k", 'ey-42", "n": 1}']
    out = texts(redactor.redact_events(deltas(pieces, "tool-call-delta")))
    assert out == ['{"token": "' + REDACTED, "", '", "n": 1}']


def test_runs_end_at_block_boundaries_and_calls() -> None:
    # The same index reused by a second block, and a second call of the same turn:
    # each is its own run, so text of one never joins text of another.
    events = [
        chunk_event({"type": "block-start", "index": 0, "blockType": "text"}, 0),
        chunk_event({"type": "text-delta", "index": 0, "text": "a"}, 1),
        chunk_event({"type": "block-end", "index": 0}, 2),
        chunk_event({"type": "block-start", "index": 0, "blockType": "text"}, 3),
        chunk_event({"type": "text-delta", "index": 0, "text": "b"}, 4),
        chunk_event({"type": "text-delta", "index": 0, "text": "c"}, 5),
        chunk_event({"type": "finish", "reason": {"kind": "stop"}}, 6),
        chunk_event({"type": "text-delta", "index": 0, "text": "d"}, 7),
        chunk_event({"type": "reasoning-delta", "index": 0, "text": "e"}, 8),
    ]
    assert [[i for i, _ in run] for run in delta_runs(events)] == [[1], [4, 5], [7], [8]]


@settings(max_examples=150, deadline=None)
@given(
    before=st.text(alphabet=" .,:", max_size=12),
    after=st.text(alphabet=" .!", max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=60), max_size=6),
)
def test_any_split_keeps_boundaries_and_never_leaks(
    before: str, after: str, cuts: list[int]
) -> None:
    text = f"{before}{KEY}{after}"
    points = sorted({min(c, len(text)) for c in cuts})
    pieces = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    redactor = Redactor()
    out = redactor.redact_pieces(pieces)
    assert len(out) == len(pieces)
    assert "".join(out) == redactor.redact_text(text) == f"{before}{REDACTED}{after}"
    for redacted in out:  # not one character of the key survives, in any piece
        assert not set(redacted.replace(REDACTED, "")) & set(KEY)
    # Text outside the secret stays in its own piece.
    offset = 0
    for piece, redacted in zip(pieces, out, strict=True):
        start, end = offset, offset + len(piece)
        offset = end
        outside = (
            text[start : min(end, len(before))] + text[max(start, len(before) + len(KEY)) : end]
        )
        assert redacted.replace(REDACTED, "") == outside


def test_keys_and_nested_values_are_redacted_without_losing_entries() -> None:
    value = {KEY: 1, "sk-" + "x" * 20: 2, "plain": {"deep": [f"Bearer {'t' * 12}"]}}
    out = Redactor().redact(value)
    assert out == {REDACTED: 1, f"{REDACTED}#2": 2, "plain": {"deep": [REDACTED]}}
    found = list(Redactor().find(value))
    assert [path for path, _ in found] == ["$ (a key)", "$ (a key)", "$.plain.deep[0]"]
    assert all(KEY not in path for path, _ in found)


def test_no_redactor_shows_its_secrets() -> None:
    redactor = Redactor(literals=("configured-key-value-123",), patterns=(("mine", r"x{9}"),))
    for shown in (repr(redactor), str(redactor), f"{redactor!r}"):
        assert "configured-key-value-123" not in shown
    assert repr(redactor) == "Redactor(<1 literal secret(s) hidden>, 1 extra pattern(s))"
    assert redactor.redact_text("k=configured-key-value-123") == f"k={REDACTED}"
    env = recording_redactor({"DSH_RECORD_API_KEY": "configured-key-value-123"})
    assert env.literals == ("configured-key-value-123",)
    assert "configured" not in repr(env)


class Log:
    def __init__(self, header: SessionHeader, events: list[dict[str, Any]]):
        self.header = header
        self.events = events


def test_transcripts_and_raw_snapshots_redact_headers_events_and_keys() -> None:
    header = SessionHeader.from_json(
        {"type": "session", "id": "p", "createdAt": 1, "meta": {"auth": KEY}, "agentPreset": KEY}
    )
    events = [
        {"type": "user/message", "seq": 0, "time": 0, "data": {"content": f"use {KEY}"}},
        *[{**e, "seq": e["seq"] + 1} for e in deltas(["here: " + KEY[:12], KEY[12:], ""])],
        {"type": "todo/write", "seq": 4, "time": 0, "data": {KEY: "as a key"}},
    ]
    for text in (
        render_transcript([Log(header, events)]),
        sessions_as_jsonl([Log(header, events)]),
    ):
        assert KEY[:19] not in text
        assert KEY[12:] not in text
    assert REDACTED in sessions_as_jsonl([Log(header, events)])


def test_check_scans_sqlite_stores_for_secrets(tmp_path: Path) -> None:
    store_path = tmp_path / "store.sqlite"
    store = SessionStore(SqliteBackend(store_path))
    session = store.create("main", meta={"agentPreset": HEADER_KEY})
    session.append("todo/write", {"token": KEY})
    store.close()
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(store_path)], stdout=out, stderr=err) == 1
    lines = err.getvalue().splitlines()
    assert f"{store_path}#main: header $.agentPreset looks like a secret (GitHub token)" in lines
    assert any("event seq 0 $.data.token looks like a secret" in line for line in lines)
    assert KEY not in err.getvalue()
    assert HEADER_KEY not in err.getvalue()


def test_check_finds_a_secret_split_across_deltas(tmp_path: Path) -> None:
    from pytest_dsh_replay._scripts.scenario import write_scenario

    events = deltas(["key: sk-pro", "j-" + "Ab3" * 10, " ok"])
    events.append(chunk_event({"type": "finish", "reason": {"kind": "stop"}}, 3))
    write_scenario(tmp_path / "s", [Log(SessionHeader(id="p"), events)])
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(tmp_path / "s")], stdout=out, stderr=err) == 1
    assert err.getvalue().splitlines()[0] == (
        f"{tmp_path / 's' / 'session.jsonl'}: the deltas of events seq 0-2 join into a secret "
        "(api key (sk-...)); remove it and re-record"
    )


def test_extra_patterns_with_flags_or_named_groups_still_match() -> None:
    flagged = Redactor(patterns=(("mine", r"(?i)secret-[a-z]+"),))
    assert flagged.redact_text("a SECRET-abc b") == f"a {REDACTED} b"
    assert flagged.redact_text("no secrets here") == "no secrets here"
    # Two patterns naming the same group cannot share one combined scan.
    named = Redactor(patterns=(("a", r"(?P<k>tok-[0-9]{6})"), ("b", r"(?P<k>pw-[0-9]{6})")))
    assert named.redact_text("tok-123456 pw-654321 x") == f"{REDACTED} {REDACTED} x"


def test_check_finds_a_secret_split_across_the_members_of_a_v4_stream_run(
    tmp_path: Path,
) -> None:
    # The dsh runtime's logs (format 4) keep a call's deltas as members of a run record.
    header = {"type": "session", "version": 4, "id": "p", "createdAt": 1}
    header |= {"isSeeded": False, "delegationDepth": 0}
    stream = [
        {
            "type": "chunk",
            "time": 1,
            "chunk": {"type": "block-start", "index": 0, "blockType": "text"},
        },
        {
            "type": "text-chunks",
            "time0": 2,
            "index": 0,
            "dt": [0, 0],
            "texts": ["key: sk-pro", "j-" + "Ab3" * 10, " ok"],
        },
        {"type": "chunk", "time": 3, "chunk": {"type": "finish", "reason": {"kind": "stop"}}},
    ]
    event = {
        "type": "assistant/attempt",
        "seq": 0,
        "time": 3,
        "data": {"turn": 1, "step": 1, "stream": stream},
    }
    (tmp_path / "s").mkdir()
    log = tmp_path / "s" / "session.jsonl"
    log.write_bytes(orjson.dumps(header) + b"\n" + orjson.dumps(event) + b"\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(tmp_path / "s")], stdout=out, stderr=err) == 1
    assert err.getvalue().splitlines()[0] == (
        f"{log}: the texts of stream record 1 of event seq 0 join into a secret "
        "(api key (sk-...)); remove it and re-record"
    )


def test_the_recording_redactor_knows_the_base_urls_credentials() -> None:
    # Every wire's base URL variable: the wires' table knows them all.
    from pytest_dsh_replay._wire.table import recording_redactor as wires_redactor

    password, query_key = "pass" + "word-0042", "query" + "-key-0042"
    redactor = wires_redactor(
        {
            "DSH_RECORD_BASE_URL": f"http://user:{password}@h/v1?key={query_key}&page=7",
            "DSH_RECORD_GEMINI_BASE_URL": "http://h/?access_token=tok%2Benough",
        }
    )
    text = f"{password} {query_key} tok+enough tok%2Benough user page=7"
    assert redactor.redact_text(text) == f"{REDACTED} {REDACTED} {REDACTED} {REDACTED} user page=7"
