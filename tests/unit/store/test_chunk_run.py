"""Session.chunk_run: a call's chunks handed over, built on the next read, as append builds them."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay import MemoryBackend, SessionStoreError
from pytest_dsh_replay._store.store import SessionStore

T0 = 1_785_000_000_000


def clock() -> Callable[[], int]:
    counter = itertools.count(T0)
    return lambda: next(counter)


def text_chunks(*texts: str) -> list[dict[str, Any]]:
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": t} for t in texts),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(texts)}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def without_times(events: Any) -> list[dict[str, Any]]:
    return [{k: v for k, v in event.items() if k != "time"} for event in events]


# A log written two ways: ("chunk", c) | ("event", type, data) | ("read",)
Step = tuple[Any, ...]


def write(steps: list[Step], *, runs: bool) -> list[Any]:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    run = session.chunk_run(1, 1) if runs else None
    for step in steps:
        if step[0] == "chunk":
            if run is not None:
                run.add(step[1])
            else:
                session.append("assistant/chunk", {"turn": 1, "step": 1, "chunk": step[1]})
        elif step[0] == "event":
            session.append(step[1], step[2])
        else:
            len(session.events)
    return list(session.events)


chunk = st.fixed_dictionaries(
    {"type": st.just("text-delta"), "index": st.integers(0, 3), "text": st.text(UTF8, max_size=5)}
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("chunk"), chunk),
        st.tuples(
            st.just("event"),
            st.just("model/change"),
            st.fixed_dictionaries({"n": st.integers(0, 9)}),
        ),
        st.tuples(st.just("read")),
    ),
    max_size=25,
)


@given(steps)
def test_a_run_gives_the_events_of_appending_one_by_one_wherever_reads_and_events_fall(
    plan: list[Step],
) -> None:
    assert without_times(write(plan, runs=True)) == without_times(write(plan, runs=False))


def test_the_events_are_there_at_the_next_read_and_seqs_name_them() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    session.append("turn/start", {"turn": 1})
    run = session.chunk_run(1, 1)
    view = session.events  # taken before the chunks
    for c in text_chunks("Hel", "lo"):
        run.add(c)
    assert len(view) == 6
    assert run.seqs == [1, 2, 3, 4, 5]
    assert [e["data"]["chunk"] for e in session.events[1:]] == text_chunks("Hel", "lo")
    assert run.chunks == text_chunks("Hel", "lo")


def test_an_event_appended_mid_run_stands_between_the_chunks_before_and_after() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    run = session.chunk_run(1, 1)
    run.add({"type": "text-delta", "index": 0, "text": "a"})
    session.append("model/change", {"n": 1})
    run.add({"type": "text-delta", "index": 0, "text": "b"})
    assert [e["type"] for e in session.events] == [
        "assistant/chunk",
        "model/change",
        "assistant/chunk",
    ]
    assert run.seqs == [0, 2]


def test_a_run_ended_by_another_keeps_its_later_chunks_in_order() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    first = session.chunk_run(1, 1)
    first.add({"type": "text-delta", "index": 0, "text": "a"})
    second = session.chunk_run(2, 1)
    second.add({"type": "text-delta", "index": 0, "text": "x"})
    first.add({"type": "text-delta", "index": 0, "text": "b"})  # after x
    session.append_chunk(3, 1, {"type": "text-delta", "index": 0, "text": "y"})
    second.add({"type": "text-delta", "index": 0, "text": "z"})
    texts = [(e["data"]["turn"], e["data"]["chunk"]["text"]) for e in session.events]
    assert texts == [(1, "a"), (2, "x"), (1, "b"), (3, "y"), (2, "z")]
    assert first.seqs == [0, 2]
    assert second.seqs == [1, 4]


def test_the_built_events_are_written_through_the_backend() -> None:
    backend = MemoryBackend()
    store = SessionStore(backend, clock=clock())
    session = store.create("s")
    run = session.chunk_run(1, 1)
    for c in text_chunks("hi"):
        run.add(c)
    session.flush()
    stored = backend.read("s")
    assert stored is not None
    assert stored.events == list(session.events)


def test_a_chunk_that_is_not_lossless_json_is_refused_when_the_run_is_built() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    run = session.chunk_run(1, 1)
    run.add({"type": "usage", "usage": {"cost": -0.0}})
    with pytest.raises(SessionStoreError, match=r"assistant/chunk data.*-0\.0"):
        len(session.events)


def test_a_closed_store_refuses_a_new_run() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    store.close()
    with pytest.raises(SessionStoreError, match="not live"):
        session.chunk_run(1, 1)


def test_chunks_added_from_one_thread_while_another_reads_are_all_built_in_order() -> None:
    store = SessionStore(MemoryBackend(), clock=clock())
    session = store.create("s")
    run = session.chunk_run(1, 1)
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            len(session.events)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for n in range(2000):
            run.add({"type": "text-delta", "index": 0, "text": str(n)})
    finally:
        done.set()
        reader.join()
    assert [e["data"]["chunk"]["text"] for e in session.events] == [str(n) for n in range(2000)]
    assert run.seqs == list(range(2000))
