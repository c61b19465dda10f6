"""One replayed call's state and its waits (the replay model's internals).

A live session's binding (:class:`BoundSession`: script, cursor, cancellation epoch, waiters)
and one call (:class:`ReplayCall`), and the two waits a call may do until it is cancelled
(a ``hang`` entry, pacing): :func:`wait_cancelled` for threads and
:func:`await_cancelled` for asyncio tasks. ``model.cancel()`` wakes them through
:func:`wake`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ._entries import ReplayEntry
from ._scenario import SessionScript

if TYPE_CHECKING:
    import asyncio

__all__ = ["BoundSession", "ReplayCall", "SessionKey", "await_cancelled", "wait_cancelled", "wake"]

# How often a synchronous wait that also watches a caller's threading.Event looks for a
# model.cancel() (the Event itself is seen at once).
_POLL_S: Final = 0.05

SessionKey: TypeAlias = "str | None"
_Waiter: TypeAlias = "threading.Event | tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]"


class BoundSession:
    """A live session's binding: its script and cursor (mutable, guarded by the lock)."""

    __slots__ = ("cursor", "entries", "epoch", "index", "key", "placeholders", "script", "waiters")

    def __init__(self, key: SessionKey, index: int, script: SessionScript, flags: tuple[bool, ...]):
        self.key = key
        self.index = index
        self.script = script
        self.entries = script.entries
        self.placeholders = flags
        self.cursor = 0
        # model.cancel() increments the epoch: every call made before it is cancelled.
        self.epoch = 0
        self.waiters: set[_Waiter] = set()


class ReplayCall:
    """One model call: what to replay, or the error to raise when it is read."""

    __slots__ = (
        "bound",
        "entry",
        "epoch",
        "error",
        "flag",
        "messages",
        "number",
        "order",
        "placeholders",
    )

    def __init__(
        self,
        *,
        bound: BoundSession | None = None,
        number: int = 0,
        entry: ReplayEntry | None = None,
        placeholders: bool = False,
        messages: object = None,
        flag: threading.Event | asyncio.Event | None = None,
        error: Exception | None = None,
        order: tuple[int, int] | None = None,
    ):
        self.bound = bound
        self.order = order  # (recorded session, call) when the recorded order is kept
        self.epoch = bound.epoch if bound is not None else 0
        self.number = number
        self.entry = entry
        self.placeholders = placeholders
        self.messages = messages
        self.flag = flag
        self.error = error

    def cancelled(self) -> bool:
        bound = self.bound
        if bound is not None and bound.epoch != self.epoch:
            return True
        return self.flag is not None and self.flag.is_set()


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def wake(waiter: _Waiter) -> None:
    if isinstance(waiter, threading.Event):
        waiter.set()
        return
    loop, future = waiter
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
        loop.call_soon_threadsafe(_settle, future)


def wait_cancelled(lock: threading.Lock, call: ReplayCall, timeout: float | None) -> bool:
    """Block until ``call`` is cancelled (True) or ``timeout`` seconds pass (False)."""
    bound = call.bound
    assert bound is not None
    flag = call.flag
    if isinstance(flag, threading.Event):
        # The caller's event is waited on directly; model.cancel() is polled.
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            step = _POLL_S
            if deadline is not None:
                step = min(step, deadline - time.monotonic())
                if step <= 0:
                    return call.cancelled()
            if flag.wait(step) or bound.epoch != call.epoch:
                return True
    event = threading.Event()
    with lock:
        if call.cancelled():
            return True
        bound.waiters.add(event)
    try:
        event.wait(timeout)
    finally:
        with lock:
            bound.waiters.discard(event)
    return call.cancelled()


async def await_cancelled(lock: threading.Lock, call: ReplayCall, timeout: float | None) -> bool:
    """Wait until ``call`` is cancelled (True) or ``timeout`` seconds pass (False).

    Task cancellation propagates as :class:`asyncio.CancelledError`.
    """
    bound = call.bound
    assert bound is not None
    import asyncio

    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    waiter = (loop, future)
    with lock:
        if call.cancelled():
            return True
        bound.waiters.add(waiter)
    timer = None if timeout is None else loop.call_later(timeout, _settle, future)
    watcher: asyncio.Task[Any] | None = None
    flag = call.flag
    if isinstance(flag, asyncio.Event):
        watcher = loop.create_task(flag.wait())
        watcher.add_done_callback(lambda _task: _settle(future))
    try:
        await future
    finally:
        with lock:
            bound.waiters.discard(waiter)
        if timer is not None:
            timer.cancel()
        if watcher is not None:
            watcher.cancel()
    return call.cancelled()
