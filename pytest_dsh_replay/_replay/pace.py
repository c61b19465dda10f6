"""Recorded pacing: how long a replayed call waits before each of its chunks.

See [docs/scenarios.md#pacing](../scenarios.md#pacing).

A replay model paced by a factor (``ReplayModel(pace=...)``, the ``dsh_scenario``
marker's ``pace=``, ``--dsh-pace``) waits the recorded gap before each chunk
(`ChunksEntry.gaps_ms`) times the factor, plus ``pace_ms`` when that is set too. The
serving loops (`ReplayCall`'s sync and async drivers, and so the HTTP endpoint, which
reads the model's stream) ask `chunk_waits` once per call and wait through the model's
``sleep``/``asleep``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from itertools import repeat
from typing import TYPE_CHECKING, Protocol

from .._scripts.entries import HangEntry

if TYPE_CHECKING:
    from .._scripts.entries import ReplayEntry

__all__ = ["Paced", "check_pace", "chunk_waits"]


def check_pace(pace: object, what: str = "pace") -> float:
    """``pace`` as a factor: a finite number >= 0 (``bool`` is not a number here).

    Args:
        pace: The value given.
        what: How the message names it.

    Raises:
        ValueError: ``pace`` is not a finite number >= 0; the message quotes it.
    """
    if (
        isinstance(pace, bool)
        or not isinstance(pace, int | float)
        or not math.isfinite(pace)
        or pace < 0
    ):
        raise ValueError(
            f"{what} must be a finite number >= 0 (the factor recorded chunk gaps are "
            f"scaled by; 0 serves as fast as possible), got {pace!r}"
        )
    return float(pace)


class Paced(Protocol):
    """How a model paces (`call.Pacing`): what `chunk_waits` reads of it."""

    @property
    def pace_s(self) -> float:
        """Seconds to wait before every chunk."""
        ...

    @property
    def factor(self) -> float:
        """What recorded gaps are scaled by (``0``: not paced by them)."""
        ...


def chunk_waits(entry: ReplayEntry | None, count: int, pacing: Paced) -> Iterable[float]:
    """The seconds to wait before each of a call's ``count`` chunks (0: none).

    ``pacing.pace_s`` before every chunk, plus each recorded gap (in ms) times
    ``pacing.factor``. A ``hang`` entry's two chunks and an entry without recorded gaps
    wait ``pace_s`` alone.
    """
    factor = pacing.factor
    pace_s = pacing.pace_s
    if not factor or entry is None or isinstance(entry, HangEntry):
        return repeat(pace_s, count)
    gaps = entry.gaps_ms
    if len(gaps) != count:  # pragma: no cover - a resolved placeholder keeps the count
        gaps = [*gaps[:count], *repeat(0, count - len(gaps))]
    return [pace_s + gap * factor / 1000 for gap in gaps]
