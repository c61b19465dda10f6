"""Single-byte flips of a file, each loaded: the engine of the flip loops."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from pytest_dsh_replay import DshReplayError

T = TypeVar("T")


def rewrite(path: Path, data: bytes | bytearray) -> None:
    """Replace the bytes of the existing file ``path`` with ``data``, in place.

    What ``path.write_bytes(data)`` leaves, for a loop that rewrites one file thousands of
    times: opening with ``O_TRUNC`` frees all its blocks and the write allocates them
    again (about 0.1-0.3 ms of kernel CPU each time on ext4); writing over the old bytes
    and cutting what is left beyond ``data`` costs a tenth of that.
    """
    fd = os.open(path, os.O_WRONLY)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def flipped_loads(
    path: Path, flips: int, rng: random.Random, load: Callable[[Path], T]
) -> Iterator[tuple[str, T | DshReplayError]]:
    """Write ``path`` with one byte flipped per case, load it, and yield the outcome.

    Yields:
        ``(where, outcome)``: the case (file, case number, byte and flip, so the same
        ``rng`` seed reproduces it) and what ``load`` returned or the ``DshReplayError``
        it raised. Any other exception ends the loop. The file is put back at the end.
    """
    original = path.read_bytes()
    try:
        for n in range(flips):
            data = bytearray(original)
            at = rng.randrange(len(data))
            data[at] ^= rng.randrange(1, 256)
            rewrite(path, data)
            where = f"{path.name}: flip {n} at byte {at} ({original[at]:#04x} -> {data[at]:#04x})"
            outcome: T | DshReplayError
            try:
                outcome = load(path)
            except DshReplayError as err:
                outcome = err
            yield where, outcome
    finally:
        rewrite(path, original)
