"""Where a call's ``finish`` chunks are, read by type in one pass (`_finishes`).

The streamed answer is encoded up to the first ``finish`` and with the last one's replay
state; both are found from the chunks' types without a Python call per chunk, and must
be what scanning the chunks one by one finds.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_dsh_replay._endpoint.endpoint import _finishes

KINDS = st.sampled_from(["text-delta", "finish", "usage", "block-end", None, 3])


def _scanned(chunks: list[dict[str, Any]]) -> tuple[int, dict[str, Any] | None]:
    first = next((n for n, c in enumerate(chunks) if c.get("type") == "finish"), len(chunks))
    last = next((c for c in reversed(chunks) if c.get("type") == "finish"), None)
    return first, last


@given(st.lists(KINDS.map(lambda kind: {} if kind is None else {"type": kind}), max_size=12))
def test_the_first_and_last_finish_are_those_a_scan_finds(chunks: list[dict[str, Any]]) -> None:
    first, last = _finishes(chunks)
    expected_first, expected_last = _scanned(chunks)
    assert first == expected_first
    assert last is expected_last  # the very chunk, not an equal one
