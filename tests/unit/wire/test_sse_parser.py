"""The server-sent-events splitter: events as received, and what they carry."""

from __future__ import annotations

import pytest

from pytest_dsh_replay._wire.base import SSEParser

STREAM = b'event: a\r\ndata: {"x": 1}\r\n\r\n: keep-alive\n\ndata: one\ndata: two\n\n'


@pytest.mark.parametrize("size", [1, 2, 3, 5, len(STREAM)])
def test_events_are_the_same_however_the_reads_split_them(size: int) -> None:
    parser = SSEParser()
    raw = []
    for at in range(0, len(STREAM), size):
        raw += parser.feed_raw(STREAM[at : at + size])
    assert raw == [
        (b'event: a\r\ndata: {"x": 1}\r\n\r\n', "a", '{"x": 1}'),
        (b": keep-alive\n\n", None, None),
        (b"data: one\ndata: two\n\n", None, "one\ntwo"),
    ]
    assert b"".join(event for event, _, _ in raw) == STREAM  # passed on whole
    assert parser.pending == b""


def test_a_crlf_split_between_two_reads_still_ends_the_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"\n\r") == []
    assert parser.feed(b"\n") == [(None, "a")]


def test_an_unfinished_event_waits_and_is_what_a_cut_stream_loses() -> None:
    parser = SSEParser()
    assert parser.feed(b'data: 1\n\ndata: {"te') == [(None, "1")]
    assert parser.pending == b'data: {"te'


def test_bytes_that_are_not_utf8_read_as_replacement_characters() -> None:
    assert SSEParser().feed(b"data: caf\xe9\n\n") == [(None, "caf\ufffd")]
