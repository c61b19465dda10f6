"""Bedrock's encoder framing a recorded entry's chunk runs (`BedrockEncoder.feed_runs`).

See docs/wires.md#encoded-once: for an answer served at once, the endpoint hands the
Bedrock encoder the entry's runs as stored (a run of text deltas is a list of its texts)
instead of its chunk objects; the bytes must be exactly those the chunks give, one
``contentBlockDelta`` message per non-empty text as `event_message` frames it.
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

pytest.importorskip("botocore")

from botocore.eventstream import EventStreamBuffer

from pytest_dsh_replay._scripts.entries import materialize_runs
from pytest_dsh_replay._wire.bedrock import (
    WIRE,
    BedrockEncoder,
    event_message,
)

# Texts whose serialized forms hold what a cut between them could be confused with:
# quotes, commas, backslashes, line breaks (raw and escaped), control characters.
_PIECES = ["a", '"', "\\", ",", '","', '",\n  "', "\n", "\\n", "\r\t", "\x00", "é", "😀", "\u2028"]


def _texts(rng: random.Random) -> list[str]:
    return [
        "".join(rng.choice(_PIECES) for _ in range(rng.randrange(0, 5)))
        for _ in range(rng.randrange(0, 7))
    ]


def _by_chunks(runs: list[Any]) -> bytes:
    """The slow path: the chunks built, then fed one by one."""
    encoder = BedrockEncoder()
    out = encoder.start() + b"".join(encoder.feed(chunk) for chunk in materialize_runs(runs))
    return out + encoder.finish({"kind": "stop"}) + orjson.dumps(encoder.marks())


def _by_runs(runs: list[Any]) -> bytes:
    encoder = WIRE.runs_encoder({}, model="m", call_id="c")
    out = encoder.start() + encoder.feed_runs(runs)
    return out + encoder.finish({"kind": "stop"}) + orjson.dumps(encoder.marks())


def _text_block(texts: list[Any], *, packed: bool = True, index: int = 0) -> list[Any]:
    start = {"type": "block-start", "index": index, "blockType": "text"}
    if packed:
        deltas: list[Any] = [["text-delta", index, texts]]
    else:
        deltas = [{"type": "text-delta", "index": index, "text": t} for t in texts]
    joined = "".join(t for t in texts if isinstance(t, str))
    end = {"type": "block-end", "index": index, "block": {"type": "text", "text": joined}}
    return [start, *deltas, end]


def test_each_text_is_the_message_event_message_frames() -> None:
    texts = ['say "hi"', 'ends in ",', "", "a,\nb", '",\n  "', "\\"]
    encoder = BedrockEncoder()
    encoder.feed({"type": "block-start", "index": 0, "blockType": "text"})
    got = encoder.feed_runs([["text-delta", 0, texts]])
    headers = (
        (":event-type", "contentBlockDelta"),
        (":content-type", "application/json"),
        (":message-type", "event"),
    )
    expected = b"".join(
        event_message(orjson.dumps({"delta": {"text": t}, "contentBlockIndex": 0}), headers)
        for t in texts
        if t
    )
    assert got == expected
    parser = EventStreamBuffer()  # and botocore reads it, CRCs checked
    parser.add_data(got)
    assert [orjson.loads(m.payload)["delta"]["text"] for m in parser] == [t for t in texts if t]


@pytest.mark.parametrize("packed", [True, False], ids=["runs of texts", "chunk objects"])
def test_runs_give_the_bytes_of_their_chunks(packed: bool) -> None:
    rng = random.Random(44)
    for _ in range(300):
        runs = _text_block(_texts(rng), packed=packed)
        assert _by_runs(runs) == _by_chunks(runs), runs


def test_runs_of_every_kind_give_the_bytes_of_their_chunks() -> None:
    reasoning = [
        {"type": "block-start", "index": 0, "blockType": "reasoning"},
        ["reasoning-delta", 0, ["think", "ing"]],
        {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": "thinking"}},
    ]
    tool = [
        {"type": "block-start", "index": 2, "blockType": "tool-call"},
        ["tool-call-delta", 2, ['{"a"', ": 1}"], "call-1", "f"],
        {
            "type": "block-end",
            "index": 2,
            "block": {"type": "tool-call", "id": "call-1", "name": "f", "arguments": '{"a": 1}'},
        },
    ]
    cases = {
        "mixed": [*reasoning, *_text_block(["x", "", "y"], index=1), *tool],
        "no block-start": [["text-delta", 0, ["a", "b"]]],
        "only empty texts": _text_block(["", ""]),
        "a stopped block": [*_text_block(["a"]), ["text-delta", 0, ["b", "c"]]],
        "a reasoning block's index": [
            {"type": "block-start", "index": 0, "blockType": "reasoning"},
            ["text-delta", 0, ["a"]],
        ],
        "two runs": [*_text_block(["a", "b"])[:2], ["text-delta", 0, ["c"]]],
        "a member that is no string": _text_block(["a", 5, "b"]),
        "finished short": [
            *_text_block(["ab", "c"])[:2],
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "abcd"}},
        ],
    }
    for name, runs in cases.items():
        assert _by_runs(runs) == _by_chunks(runs), name


def test_the_runs_are_only_read() -> None:
    runs = _text_block(["a", "", "b"])
    kept = orjson.dumps(runs)
    _by_runs(runs)
    assert orjson.dumps(runs) == kept
