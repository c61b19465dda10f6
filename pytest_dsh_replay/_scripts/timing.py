"""Recorded chunk times: the pause before each chunk of a call, for pacing.

See [docs/scenarios.md#pacing](../scenarios.md#pacing).

A call's chunks carry times (Unix ms) in a log's full form: an ``assistant/chunk``
event's ``time``, a packed row's ``time0`` and ``dt`` gaps (formats 0 and 1), a stream
record's ``time`` or ``time0`` and ``dt`` (formats 2 to 5). The builder keeps them
while a call is read and `timed_gaps` turns them into the entry's gaps: one per chunk,
the first from the call's start event, each next from the chunk before; unknown and
negative gaps are 0. A call whose gaps are all 0 keeps none (``None``), so the common
committed recording without rows costs nothing; the others take one, two or four bytes
a chunk (`Gaps`).
"""

from __future__ import annotations

from array import array
from typing import Final, TypeAlias

__all__ = ["START_EVENTS", "Gaps", "stream_gaps", "timed_gaps"]

Gaps: TypeAlias = "bytes | array[int]"
"""A call's gaps in ms, one per chunk: ``bytes`` when each is below 256 (a byte a gap),
else an unsigned 16-bit array when each is below 65,536, else a 32-bit one.
``list(gaps)`` reads each."""

START_EVENTS: Final = frozenset({"step/start", "llm/retry-started"})
"""The events whose ``time`` is a call's start: the step's first attempt, or a retry."""

_MAX_GAP: Final = 2**32 - 1  # what an unsigned 32-bit item holds (49 days in ms)
_INT_ONLY: Final = frozenset({int})


def _kept(gaps: list[int]) -> Gaps | None:
    """``gaps`` as kept: clamped to 0 .. 2**32 - 1; ``None`` when every one is 0."""
    top = max(gaps)
    if top <= 0:
        return None
    if top > _MAX_GAP or min(gaps) < 0:
        gaps = [0 if g < 0 else g if g <= _MAX_GAP else _MAX_GAP for g in gaps]
        top = max(gaps)
    if top < 256:
        return bytes(gaps)
    # 2 and 4 bytes a gap on every platform CPython supports
    return array("H" if top < 65536 else "I", gaps)


def timed_gaps(start: object, times: list[object]) -> Gaps | None:
    """The gaps of a call's chunks, from the times they were read with.

    Args:
        start: The time of the call's start event (only an integer is a time).
        times: One time per chunk or run, in order: a chunk's ``time`` (any value; only
            an integer is a time), a run's ``(time0, dt)`` (its members at ``time0``,
            then each ``dt[k]`` ms after the one before).

    Returns:
        One gap per chunk (a run gives one per member); ``None`` when every gap is 0.
    """
    if times.count(None) == len(times):
        return None  # no time at all: a committed call without rows
    gaps: list[int] = []
    append = gaps.append
    last = start if start.__class__ is int else None
    for time in times:
        if time.__class__ is tuple:
            time, dt = time
        else:
            dt = None
        if time.__class__ is not int:
            append(0)  # unknown, and so is the next gap
            last = None
        else:
            append(0 if last is None else time - last)
            last = time
        if dt:
            if {*map(type, dt)} == _INT_ONLY:
                gaps.extend(dt)
                if last is not None:
                    last += sum(dt)
            else:  # integral floats: not times here
                gaps.extend([0] * len(dt))
                last = None
    return _kept(gaps)


def stream_gaps(records: list[dict[str, object]], start: object) -> Gaps | None:
    """The gaps of a format 2-5 call from its validated ``data.stream`` records.

    Args:
        records: The stream records (each a ``chunk`` record with ``time``, or a run
            record with ``time0`` and ``dt``), already checked by the reader.
        start: The time of the call's start event (``None``: unknown).
    """
    return timed_gaps(
        start,
        [r["time"] if r["type"] == "chunk" else (r["time0"], r["dt"]) for r in records],
    )
