"""A guard that turns a hang into a test failure (POSIX main thread; elsewhere no-op)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Raise ``TimeoutError`` inside the block once it has run for ``seconds``."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expired(signum: int, frame: Any) -> None:
        raise TimeoutError(f"hang: still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
