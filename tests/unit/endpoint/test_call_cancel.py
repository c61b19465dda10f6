"""`CallCancel`: a ``threading.Event`` whose condition is made on first use.

Issue 44 (Bedrock against its floor, round 4): every HTTP call made a `CallCancel`, and
``threading.Event()`` built a ``threading.Condition`` for it (which probes its lock with
three raised ``AttributeError``), though most calls are answered at once and never
waited on nor set. The condition is now made when ``set``, ``clear`` or ``wait`` first
needs it; the event behaves as ``threading.Event`` does.
"""

from __future__ import annotations

import threading

from pytest_dsh_replay._endpoint.response import CallCancel


def test_a_cancel_nobody_waits_on_makes_no_condition() -> None:
    cancel = CallCancel(None, None)
    assert isinstance(cancel, threading.Event)
    assert not cancel.is_set()
    cancel.touch()
    assert not cancel.timed_out
    assert cancel._made is None  # the fast path: nothing built for a call never waited on


def test_its_condition_is_made_once() -> None:
    cancel = CallCancel(None, None)
    condition = cancel._cond
    assert cancel._cond is condition  # set() must notify the condition a waiter waits on
    assert cancel._made is condition


def test_it_behaves_as_a_threading_event() -> None:
    cancel, event = CallCancel(None, None), threading.Event()
    for step in ("wait", "set", "wait", "clear", "wait", "set", "set", "wait"):
        if step == "wait":
            assert cancel.wait(0) == event.wait(0)
        else:
            getattr(cancel, step)()
            getattr(event, step)()
        assert cancel.is_set() == event.is_set()


def test_set_from_another_thread_wakes_a_waiter() -> None:
    cancel = CallCancel(None, None)
    waiting = threading.Event()
    woken: list[bool] = []

    def wait() -> None:
        waiting.set()
        woken.append(cancel.wait())

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiting.wait()
    cancel.set()
    waiter.join()
    assert woken == [True]


def test_threads_making_the_condition_at_once_share_one() -> None:
    cancel = CallCancel(None, None)
    start = threading.Barrier(8)
    made: list[threading.Condition] = []

    def make() -> None:
        start.wait()
        made.append(cancel._cond)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 8
    assert all(condition is made[0] for condition in made)
