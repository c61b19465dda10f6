"""Recorded chunk times: the pause before each chunk of a call, for pacing.

See [docs/scenarios.md#pacing](../scenarios.md#pacing).

A call's chunks carry times (Unix ms) in a log's full form: an ``assistant/chunk``
event's ``time``, a packed row's ``time0`` and ``dt`` gaps (formats 0 and 1), a stream
record's ``time`` or ``time0`` and ``dt`` (formats 2 to 5). `CallTimes` collects them
while a call is read and turns them into the entry's gaps: one per chunk, the first from
the call's start event, each next from the chunk before; unknown and negative gaps are
0. A call whose gaps are all 0 keeps none (``None``), so the common committed recording
without rows costs nothing; the others take one, two or four bytes a chunk (`Gaps`).
"""

from __future__ import annotations

from array import array
from typing import Final, TypeAlias

from .._format.events import ChunkRun

__all__ = ["START_EVENTS", "CallTimes", "Gaps", "call_gaps", "stream_gaps"]

Gaps: TypeAlias = "bytes | array[int]"
"""A call's gaps in ms, one per chunk: ``bytes`` when each is below 256 (a byte a gap),
else an unsigned 16-bit array when each is below 65,536, else a 32-bit one.
``list(gaps)`` reads each."""

START_EVENTS: Final = frozenset({"step/start", "llm/retry-started"})
"""The events whose ``time`` is a call's start: the step's first attempt, or a retry."""

_MAX_GAP: Final = 2**32 - 1  # what an unsigned 32-bit item holds (49 days in ms)
_INT_ONLY: Final = frozenset({int})


def _time(value: object) -> int | None:
    """A record's time when it is an integer (``None``: unknown)."""
    return value if isinstance(value, int) and value.__class__ is int else None


class CallTimes:
    """The times of one call's chunks as they are read, and the gaps they make.

    Args:
        start: The time of the call's start event (``None``: unknown).
    """

    __slots__ = ("_gaps", "_last", "_nonzero")

    def __init__(self, start: object = None):
        self._gaps: list[int] = []
        self._last = _time(start)
        self._nonzero = False

    def chunk(self, time: object) -> None:
        """A single chunk at ``time`` (``None`` or a non-integer: unknown)."""
        t = _time(time)
        last = self._last
        gap = 0 if t is None or last is None else t - last
        self._add(gap)
        self._last = t

    def run(self, time0: object, dt: list[int]) -> None:
        """A run of chunks: the first at ``time0``, each next ``dt[k]`` ms after the one before."""
        self.chunk(time0)
        if not dt:
            return
        if {*map(type, dt)} != _INT_ONLY:  # integral floats: the times are unknown
            for _ in dt:
                self.chunk(None)
            return
        if min(dt) >= 0 and max(dt) <= _MAX_GAP:
            self._gaps.extend(dt)
            self._nonzero = self._nonzero or max(dt) > 0
        else:
            for gap in dt:
                self._add(gap)
        last = self._last
        self._last = None if last is None else last + sum(dt)

    def _add(self, gap: int) -> None:
        if gap <= 0:
            self._gaps.append(0)
            return
        self._gaps.append(gap if gap <= _MAX_GAP else _MAX_GAP)
        self._nonzero = True

    def gaps(self) -> Gaps | None:
        """The gaps in ms, one per chunk read; ``None`` when every one is 0."""
        if not self._nonzero:
            return None
        gaps = self._gaps
        top = max(gaps)
        if top < 256:
            return bytes(gaps)
        # 2 and 4 bytes a gap on every platform CPython supports
        return array("H" if top < 65536 else "I", gaps)


def stream_gaps(records: list[dict[str, object]], start: object) -> Gaps | None:
    """The gaps of a format 2-5 call from its validated ``data.stream`` records.

    Args:
        records: The stream records (each a ``chunk`` record with ``time``, or a run
            record with ``time0`` and ``dt``), already checked by the reader.
        start: The time of the call's start event (``None``: unknown).
    """
    times = CallTimes(start)
    for record in records:
        if record["type"] == "chunk":
            times.chunk(record["time"])
        else:
            times.run(record["time0"], record["dt"])  # type: ignore[arg-type]
    return times.gaps()


def call_gaps(items: list[ChunkRun], times: list[object]) -> Gaps | None:
    """The gaps of a format 0/1 call from the times its items were read with.

    Args:
        items: The call's chunks and chunk runs, in order.
        times: The call's start time, then one time per item: a chunk's ``time`` (any
            value; only an integer is a time), a run's ``(time0, dt)``.
    """
    if len(times) != len(items) + 1:  # pragma: no cover - the builder keeps them in step
        return None
    clock = CallTimes(times[0])
    chunk = clock.chunk
    for item, time in zip(items, times[1:], strict=True):
        if item.__class__ is dict:
            chunk(time)
        else:
            run: tuple[object, list[int]] = time  # type: ignore[assignment]
            clock.run(*run)
    return clock.gaps()
