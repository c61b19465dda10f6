"""A small log is parsed in one piece: the same header, lines and errors as line by line.

``open_session_log`` parses every line of a log of at most 1 MiB at once when they all
parse as they are, and otherwise reads it line by line (``iter_log_lines``), which
raises the errors. Both must give the same result for any log.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay._errors import DshReplayError
from pytest_dsh_replay._format import jsonl as _jsonl

HEADER = b'{"type":"session","version":0,"id":"s","createdAt":1}'

_event = st.builds(
    lambda n, text: orjson.dumps(
        {"type": "user/message", "seq": n, "time": 0, "data": {"content": text}}
    ),
    st.integers(0, 9),
    st.text(UTF8, max_size=5),
)
_odd = st.sampled_from(
    [b"", b"   ", b"\r", b"{", b"[1,2]", b"42", b'"\\ud83d"', b'{"a":"\\ud83d"}', b"\xff", b"{}"]
)
_line = st.one_of(_event, _event, _odd)


def _read(path: Path) -> Any:
    try:
        with _jsonl.open_session_log(path) as (header, line, lines):
            return header, line, list(lines)
    except DshReplayError as err:
        return type(err).__name__, str(err)


def _both(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        path.write_bytes(data)
        fast = _read(path)
        with monkeypatch.context() as m:
            m.setattr(_jsonl, "_parsed_small_log", lambda f, source: None)
            slow = _read(path)
    return fast, slow


@settings(max_examples=150, deadline=None)
@given(
    bom=st.booleans(),
    header=st.sampled_from([HEADER, b"", b"not json", b"[]"]),
    body=st.lists(_line, max_size=6),
    crlf=st.booleans(),
    final_newline=st.booleans(),
)
def test_a_small_log_reads_the_same_in_one_piece_as_line_by_line(
    bom: bool, header: bytes, body: list[bytes], crlf: bool, final_newline: bool
) -> None:
    end = b"\r\n" if crlf else b"\n"
    data = (b"\xef\xbb\xbf" if bom else b"") + end.join([header, *body])
    if final_newline:
        data += end
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow = _both(data, monkeypatch)
    assert fast == slow


def test_the_one_piece_reading_is_taken_for_a_clean_log(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bool] = []
    real = _jsonl._parsed_small_log

    def spy(f: Any, source: str) -> Any:
        got = real(f, source)
        calls.append(got is not None)
        return got

    monkeypatch.setattr(_jsonl, "_parsed_small_log", spy)
    fast, slow = _both(HEADER + b"\n" + orjson.dumps({"type": "x"}) + b"\n", monkeypatch)
    assert calls[0] is True
    assert fast == slow
    assert fast[2] == [(2, {"type": "x"})]
