"""An entry's reply, assembled once from its stored runs (docs/checks.md#by-reference).

``ChunksEntry.reply`` is what the recorder logs after a call that replayed the whole
entry; it is made from the entry's chunk runs without building the deltas' chunks (a run
of text or reasoning deltas counts as one delta of its joined text). For generated runs
(deltas of several blocks, blocks ended or left open, tool-call deltas with and without a
name, usage and finish chunks) it equals `assemble_reply` of the entry's chunks.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_dsh_replay import ChunksEntry
from pytest_dsh_replay._format.reply import assemble_reply

_TEXTS = st.lists(st.text("ab c", max_size=3), min_size=1, max_size=4)
_RUN = st.one_of(
    st.tuples(st.sampled_from(["text-delta", "reasoning-delta"]), st.integers(0, 2), _TEXTS).map(
        list
    ),
    st.tuples(st.just("tool-call-delta"), st.integers(0, 2), _TEXTS, st.just("call-1")).map(list),
    st.tuples(
        st.just("tool-call-delta"), st.integers(0, 2), _TEXTS, st.just("call-2"), st.just("f")
    ).map(list),
    st.builds(
        lambda i, t: {"type": "block-end", "index": i, "block": {"type": "text", "text": t}},
        st.integers(0, 2),
        st.text("xy", max_size=3),
    ),
    st.just({"type": "text-delta", "index": 1, "text": "single"}),
    st.just({"type": "usage", "usage": {"inputTokens": 1, "outputTokens": 2}}),
)


@settings(max_examples=200, deadline=None)
@given(runs=st.lists(_RUN, max_size=6), kind=st.sampled_from(["stop", "tool-calls", "error"]))
def test_the_reply_from_the_runs_is_the_reply_of_the_chunks(runs: list[Any], kind: str) -> None:
    items = [*runs, {"type": "finish", "reason": {"kind": kind}, "replayState": {"k": 1}}]
    count = sum(len(item[2]) if isinstance(item, list) else 1 for item in items)
    entry = ChunksEntry.from_runs(items, count)
    assert entry.reply() == assemble_reply(entry.chunks)
    assert entry.reply() is entry.reply()  # made once, kept with the entry
