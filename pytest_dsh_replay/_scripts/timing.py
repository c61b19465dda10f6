"""Recorded chunk times: the pause before each chunk of a call, for pacing.

See [docs/scenarios.md#pacing](../scenarios.md#pacing).

A call's chunks carry times (Unix ms) in a log's full form: an ``assistant/chunk``
event's ``time``, a packed row's ``time0`` and ``dt`` gaps (formats 0 and 1), a stream
record's ``time`` or ``time0`` and ``dt`` (formats 2 to 5). The builder keeps them as
they were read, in one tuple of the values the parser made (`raw_times`: a load pays
next to nothing for them; serializing them cost a corpus load 1.4 % more instructions),
and the entry turns them into its gaps when they are first asked for (`gaps_of`,
only by a paced replay): one per chunk, the first from the call's start event, each
next from the chunk before; unknown and negative gaps are 0. A call without any time
keeps nothing, so the common committed recording without rows costs nothing; gaps take
one, two or four bytes a chunk (`Gaps`).
"""

from __future__ import annotations

from array import array
from typing import Final, TypeAlias

__all__ = ["START_EVENTS", "Gaps", "RawTimes", "gaps_of", "raw_times", "stream_times"]

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


RawTimes: TypeAlias = "tuple[object, ...]"
"""A call's times as read, turned into its gaps on first use (`gaps_of`).

The start event's time, then one value per chunk or run in order: a chunk's ``time`` as
it was parsed (only an integer is a time), a run's ``(time0, dt)`` tuple (a parsed value
is never a tuple, so a chunk's ``time`` cannot pass for a run). A plain tuple, which
`Gaps` never is: what an entry holds tells the two apart.
"""


def raw_times(times: list[object]) -> RawTimes | None:
    """A call's times kept for later (`gaps_of`); ``None`` when none is known.

    Args:
        times: The time of the call's start event, then one time per chunk or run, in
            order: a chunk's ``time`` (any value; only an integer is a time), a run's
            ``(time0, dt)``.
    """
    if not any(times):
        return None  # no time at all (or only 0s): a committed call without rows
    return tuple(times)


def gaps_of(raw: RawTimes, count: int) -> Gaps | None:
    """The gaps of the ``count`` chunks whose times ``raw`` holds (see `RawTimes`).

    Returns:
        One gap per chunk; ``None`` when every gap is 0, or when the times do not
        stand for ``count`` chunks.
    """
    start, *times = raw
    gaps: list[int] = []
    append = gaps.append
    last = start if start.__class__ is int else None
    for time in times:
        dt: object = None
        if time.__class__ is tuple:
            time, dt = time
        if time.__class__ is not int:
            append(0)  # unknown, and so is the next gap
            last = None
        else:
            append(0 if last is None else time - last)
            last = time
        if dt:
            assert isinstance(dt, list | tuple)
            if {*map(type, dt)} == _INT_ONLY:
                gaps.extend(dt)
                if last is not None:
                    last += sum(dt)
            else:  # integral floats: not times here
                gaps.extend([0] * len(dt))
                last = None
    return _kept(gaps) if len(gaps) == count else None


def stream_times(records: list[dict[str, object]], start: object) -> RawTimes | None:
    """The times of a format 2-5 call from its validated ``data.stream`` records.

    Args:
        records: The stream records (each a ``chunk`` record with ``time``, or a run
            record with ``time0`` and ``dt``), already checked by the reader.
        start: The time of the call's start event (``None``: unknown).
    """
    times = [r["time"] if r["type"] == "chunk" else (r["time0"], r["dt"]) for r in records]
    times.insert(0, start)
    return raw_times(times)
