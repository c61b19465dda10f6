"""Recorded pacing in the serving loops: waits are the recorded gaps times the factor.

No test here waits: the model's ``sleep``/``asleep`` are injected and record what they
are asked for (docs/scenarios.md#pacing).
"""

from __future__ import annotations

import asyncio
import math
from array import array
from pathlib import Path
from typing import Any

import pytest
from support.scenarios import one_session

from pytest_dsh_replay import ChunksEntry, HangEntry, ReplayModel, ThrowEntry
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._errors import ReplayCancelledError, ReplayedModelError
from pytest_dsh_replay._scripts.scenario import Scenario
from pytest_dsh_replay._wire.base import httpx_module

REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}]}
CHUNKS: list[dict[str, Any]] = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "Hel"},
    {"type": "text-delta", "index": 0, "text": "lo"},
    {"type": "text-delta", "index": 0, "text": "!"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "Hello!"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]
GAPS = [120, 0, 35, 7, 0, 400]  # one per chunk


def timed(gaps: list[int] = GAPS) -> ChunksEntry:
    return ChunksEntry.from_runs([dict(c) for c in CHUNKS], len(CHUNKS), array("I", gaps))


def scenario(*entries: Any) -> Scenario:
    return one_session(*entries, recorded_id="p", first="hi")


def expected(factor: float, gaps: list[int] = GAPS, pace_s: float = 0.0) -> list[float]:
    return [pace_s + g * factor / 1000 for g in gaps if pace_s + g * factor / 1000]


@pytest.mark.parametrize("factor", [1, 0.5, 3])
def test_a_sync_call_waits_each_recorded_gap_times_the_factor(factor: float) -> None:
    waits: list[float] = []
    model = ReplayModel(scenario(timed()), pace=factor, sleep=waits.append)
    assert list(model.stream(REQUEST)) == CHUNKS
    assert waits == expected(factor)
    assert math.isclose(sum(waits), sum(GAPS) * factor / 1000)


def test_an_async_call_waits_the_same_through_asleep() -> None:
    waits: list[float] = []

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    async def read() -> list[Any]:
        return [c async for c in model.astream(REQUEST)]

    model = ReplayModel(scenario(timed()), pace=2, asleep=asleep)
    assert asyncio.run(read()) == CHUNKS
    assert waits == expected(2)


def test_pace_0_never_waits_and_reads_from_the_chunk_list() -> None:
    waits: list[float] = []
    model = ReplayModel(scenario(timed()), pace=0, sleep=waits.append)
    stream = model.stream(REQUEST)
    assert type(stream).__name__ == "ChunkStream"  # the unpaced fast path
    assert list(stream) == CHUNKS
    assert waits == []


def test_pace_ms_adds_to_every_recorded_wait() -> None:
    waits: list[float] = []
    model = ReplayModel(scenario(timed()), pace=1, pace_ms=10, sleep=waits.append)
    list(model.stream(REQUEST))
    assert waits == [0.01 + g / 1000 for g in GAPS]


def test_an_entry_without_recorded_gaps_is_served_at_once() -> None:
    waits: list[float] = []
    model = ReplayModel(scenario(ChunksEntry(CHUNKS)), pace=5, sleep=waits.append)
    assert list(model.stream(REQUEST)) == CHUNKS
    assert waits == []


def test_a_throw_entry_and_a_hang_are_not_paced_by_recorded_gaps(tmp_path: Path) -> None:
    waits: list[float] = []
    throw = ThrowEntry(CHUNKS[:2], "boom", "RATE_LIMIT")
    model = ReplayModel(scenario(throw, HangEntry()), pace=5, sleep=waits.append, workdir=tmp_path)
    with pytest.raises(ReplayedModelError):
        list(model.stream(REQUEST, session_id="p"))
    stream = model.stream(REQUEST, session_id="p")
    assert [next(stream), next(stream)] == list(HangEntry.PREFIX)
    model.cancel("p")
    with pytest.raises(ReplayCancelledError):
        next(stream)
    assert waits == []


def test_a_cancel_during_a_recorded_wait_ends_the_call() -> None:
    model: ReplayModel
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        model.cancel("p")

    model = ReplayModel(scenario(timed()), pace=1, sleep=sleep)
    with pytest.raises(ReplayCancelledError, match="while pacing"):
        list(model.stream(REQUEST, session_id="p"))
    assert waits == [0.12]


@pytest.mark.parametrize("bad", [-1, -0.5, math.inf, math.nan, True, "1", None])
def test_pace_must_be_a_finite_number_at_least_0(bad: Any) -> None:
    with pytest.raises(ValueError, match=r"pace must be a finite number >= 0 .*, got "):
        ReplayModel(scenario(timed()), pace=bad)


def test_the_factor_is_kept() -> None:
    assert ReplayModel(scenario(timed()), pace=1.5).pace == 1.5
    assert ReplayModel(scenario(timed())).pace == 0.0


# --- over HTTP ---------------------------------------------------------------------------


def test_the_endpoint_streams_each_chunk_after_its_recorded_wait() -> None:
    """The waits happen while the body streams: each between two pieces, not all first."""
    pieces: list[bytes] = []
    waits: list[tuple[float, int]] = []
    model = ReplayModel(scenario(timed()), pace=2, sleep=lambda s: waits.append((s, len(pieces))))
    http = httpx_module().Client(transport=sync_transport(Endpoint.replaying(model)))
    body = {"model": "m", "stream": True, **REQUEST}
    with http.stream("POST", "http://t/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        pieces.extend(response.iter_raw())
    assert [s for s, _ in waits] == expected(2)
    # block-start and the first delta are read before the answer starts (its head);
    # the later waits each come after a piece went out.
    assert [n for _, n in waits] == [0, 1, 2, 3]
    streamed = b"".join(pieces)
    assert streamed.index(b'"Hel"') < streamed.index(b'"lo"') < streamed.index(b'"!"')


def test_a_whole_answer_over_http_waits_the_whole_recorded_time() -> None:
    waits: list[float] = []
    model = ReplayModel(scenario(timed()), pace=1, sleep=waits.append)
    http = httpx_module().Client(transport=sync_transport(Endpoint.replaying(model)))
    answer = http.post("http://t/v1/chat/completions", json={"model": "m", **REQUEST})
    assert answer.status_code == 200
    assert waits == expected(1)
