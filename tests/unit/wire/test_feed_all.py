"""``Encoder.feed_all`` gives the bytes and leaves the state that ``feed`` chunk by chunk does.

The endpoint encodes a call's chunks with ``feed_all`` (docs/wires.md#encoded-once);
the Responses and chat completions encoders fill runs of deltas into a frame. Every
wire's encoder is compared with feeding each chunk, on generated chunks (indices that
are equal but not identical, texts that are not strings, runs broken by other chunks)
and on every corpus scenario's recorded calls; after the chunks, ``marks`` and
``finish`` agree too, so the state left behind is the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.corpus_support import corpus_scenarios, require_corpus
from support.values import UTF8

from pytest_dsh_replay._format.events import StreamChunk
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._scripts.loading import load_scenario
from pytest_dsh_replay._wire.base import Encoder
from pytest_dsh_replay._wire.table import WIRES

REQUESTS: dict[str, dict[str, Any]] = {
    "openai": {"model": "m", "stream": True, "stream_options": {"include_usage": True}},
    "responses": {"model": "m", "stream": True},
    "anthropic": {"model": "m", "stream": True},
    "gemini": {"model": "m"},
}


def _makers() -> list[tuple[str, Callable[[], Encoder]]]:
    def maker(wire: Any) -> Callable[[], Encoder]:
        request = REQUESTS.get(wire.name, {"model": "m"})
        return lambda: wire.encoder(request, model="m", call_id="call-1")

    return [(wire.name, maker(wire)) for wire in WIRES]


MAKERS = _makers()


def _outcome(step: Callable[[], Any]) -> Any:
    """What a step gives, or the type of what it raised (both ways must agree on it)."""
    try:
        return step()
    except Exception as error:
        return type(error)


def _both(make: Callable[[], Encoder], chunks: Sequence[StreamChunk]) -> None:
    one, each = make(), make()
    assert one.start() == each.start()
    assert _outcome(lambda: one.feed_all(chunks)) == _outcome(
        lambda: b"".join(each.feed(c) for c in chunks)
    )
    assert _outcome(one.marks) == _outcome(each.marks)
    reason = {"kind": "stop"}
    assert _outcome(lambda: one.finish(reason)) == _outcome(lambda: each.finish(reason))


INDICES = st.sampled_from([0, 1, 0.0, True, "a"])
TEXTS = st.one_of(st.text(UTF8, max_size=4), st.sampled_from([None, 3, "", "é\n\"'"]))


@st.composite
def chunk(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(
        st.sampled_from(
            [
                "text-delta",
                "text-delta",
                "reasoning-delta",
                "tool-call-delta",
                "block-start",
                "block-end",
                "usage",
            ]
        )
    )
    index = draw(INDICES)
    if kind in ("text-delta", "reasoning-delta"):
        out = {"type": kind, "index": index, "text": draw(TEXTS)}
        if draw(st.booleans()) and draw(st.booleans()):
            del out["index"]  # the default index, 0
        return out
    if kind == "tool-call-delta":
        return {
            "type": kind,
            "index": index,
            "id": draw(st.sampled_from(["call_1", "call_2"])),
            "name": draw(st.sampled_from(["look", None])),
            "argumentsDelta": draw(st.sampled_from(["{", "}", '"q":1', 5])),
        }
    if kind == "block-start":
        block_type = draw(st.sampled_from(["text", "reasoning", "tool-call"]))
        return {"type": kind, "index": index, "blockType": block_type}
    if kind == "block-end":
        block = draw(
            st.sampled_from(
                [
                    {"type": "text", "text": "ab"},
                    {"type": "reasoning", "text": "r"},
                    {"type": "tool-call", "id": "call_1", "name": "look", "arguments": "{}"},
                    None,
                ]
            )
        )
        return {"type": kind, "index": index, "block": block}
    return {"type": kind, "usage": {"inputTokens": 2, "outputTokens": 3}}


@settings(max_examples=150, deadline=None)
@given(chunks=st.lists(chunk(), max_size=24))
def test_feed_all_is_feed_of_each(chunks: list[dict[str, Any]]) -> None:
    """Generated chunks: the same bytes, marks and finish either way, on every wire.

    Each generated list is fed to every wire's encoder: 150 lists for each wire, as when
    the test was parametrized by wire, for one wire's cost of generating them (drawing
    a list cost more than feeding it to one encoder both ways).
    """
    for name, make in MAKERS:
        try:
            _both(make, chunks)
        except AssertionError as error:
            raise AssertionError(f"wire {name}: {error}") from error


@pytest.mark.parametrize(("name", "make"), MAKERS, ids=[name for name, _ in MAKERS])
def test_a_run_of_deltas_with_a_text_that_is_not_a_string(
    name: str, make: Callable[[], Encoder]
) -> None:
    """A run of deltas broken by a number, a missing text and an equal other index."""
    chunks: list[dict[str, Any]] = [
        {"type": "block-start", "index": 0, "blockType": "text"},
        {"type": "text-delta", "index": 0, "text": 7},
        {"type": "text-delta", "index": 0, "text": "a"},
        {"type": "text-delta", "index": 0.0, "text": "b"},
        {"type": "text-delta", "index": 0},
        {"type": "text-delta", "text": "c"},
        {"type": "reasoning-delta", "index": 0, "text": "d"},
        {"type": "text-delta", "index": 1, "text": "e"},
        {"type": "text-delta", "index": True, "text": "f"},
    ]
    _both(make, chunks)


@pytest.mark.parametrize(("name", "make"), MAKERS, ids=[name for name, _ in MAKERS])
def test_a_run_of_deltas_across_indices(name: str, make: Callable[[], Encoder]) -> None:
    """What a run sent at each index decides what each block's end sends."""
    chunks: list[dict[str, Any]] = [
        {"type": "text-delta", "index": 0, "text": "g"},
        {"type": "text-delta", "index": 2, "text": "h"},
        {"type": "text-delta", "index": 0, "text": "i"},
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "gi!"}},
        {"type": "block-end", "index": 2, "block": {"type": "text", "text": "h!"}},
    ]
    _both(make, chunks)


def test_every_corpus_call_on_every_wire() -> None:
    """Every recorded call of the corpus: the same bytes on every wire."""
    require_corpus()
    calls = 0
    for path in corpus_scenarios():
        if not orjson.loads((path / "expected.json").read_bytes())["ok"]:
            continue  # the reference does not replay it either
        scenario = load_scenario(path)
        for script in scenario.scripts:
            for entry in script.entries:
                if not isinstance(entry, ChunksEntry):
                    continue
                chunks = [c for c in entry.chunks if c.get("type") != "finish"]
                for _name, make in MAKERS:
                    _both(make, chunks)
                calls += 1
    assert calls > 0
