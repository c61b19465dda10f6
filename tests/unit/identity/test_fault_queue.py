"""`FaultQueue`: which attempt of which session a fault answers, without the fixture."""

from __future__ import annotations

from pytest_dsh_replay import Fault
from pytest_dsh_replay._identity.faults import FaultQueue

LIMIT = Fault.rate_limit()
CUT = Fault.disconnect(after_chunks=1)


def test_none_names_the_first_session_that_calls() -> None:
    queue = FaultQueue()
    queue.inject(LIMIT)
    assert queue.take("main") is LIMIT  # the first caller is the primary
    assert queue.take("main") is None  # its retry: call 1 again, answered


def test_a_session_is_named_by_its_live_id_and_calls_count_per_session() -> None:
    queue = FaultQueue()
    queue.inject(CUT, session="kid", call=2)
    assert queue.take("main") is None
    assert queue.take("kid") is None  # the kid's call 1
    assert queue.take("main") is None
    assert queue.take("kid") is CUT  # the kid's call 2, first attempt
    assert queue.take("kid") is None  # its second attempt
    assert queue.unfired() == []


def test_a_faulted_attempt_is_not_counted_but_a_latency_that_proceeds_is() -> None:
    queue = FaultQueue()
    late = Fault.latency(1)
    queue.inject(late)
    queue.inject(LIMIT, call=2)
    assert queue.take(None) is late
    queue.proceed(None)  # the latency ended and the call was made: call 1
    assert queue.take(None) is LIMIT  # call 2
    assert queue.take(None) is None


def test_the_anonymous_session_is_the_primary_when_it_calls_first() -> None:
    queue = FaultQueue()
    queue.inject(LIMIT, call=2)
    assert queue.take(None) is None
    assert queue.take("other") is None  # another session's call 1
    assert queue.take(None) is LIMIT
    assert queue.unfired() == []


def test_unfired_faults_are_listed_with_their_session_and_call() -> None:
    queue = FaultQueue()
    queue.inject(LIMIT, call=4)
    queue.inject(CUT, session="kid")
    assert queue.unfired() == [
        "Fault.rate_limit(retry_after=0) for the primary session, call 4",
        "Fault.disconnect(after_chunks=1) for session 'kid', call 1",
    ]
