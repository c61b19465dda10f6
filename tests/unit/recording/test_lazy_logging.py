"""Replayed calls logged lazily give the events eager logging gives (docs/recording.md#lazy).

A replayed call whose stream the recorder can follow is logged when the session is next
read or written; the same call relayed chunk by chunk is logged as each chunk passes.
Both must leave the same events in the same order (ids minted per run and times aside):

- on every corpus scenario that loads (CI requires the corpus), each recorded session
  replayed call by call with generated ways of reading (to the end, a few chunks then
  closing, dropping or leaving the stream open across the next call, the session's
  events read or written in the middle of a stream);
- on a call whose stream the code under test keeps reading after it wrote chunks into
  the same session itself (the rest is then logged as it passes);
- with requests the caller changes after the call, as agents do that keep one message
  list and append to it (what is logged is what the call was asked).

A whole replayed call (its opening too) is logged only when its session is next read
or written: nothing is built for a session nobody reads, and a reader in another thread
builds it in order.

The fixture's replays are logged lazily, so the log check's tests (tests/unit/check)
run on lazily built events.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus
from support.scenarios import one_session

from pytest_dsh_replay import (
    ChunksEntry,
    DshReplayError,
    HangEntry,
    MemoryBackend,
    RecordingModel,
    ReplayModel,
    SessionStore,
    load_scenario,
)
from pytest_dsh_replay._scripts.scenario import Scenario

_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


class _Relayed:
    """A replay model whose streams the recorder cannot follow: it logs chunk by chunk."""

    def __init__(self, model: ReplayModel):
        self.model = model

    def stream(self, request: Any, **kwargs: Any) -> Iterator[Any]:
        inner = self.model.stream(request, **kwargs)

        def relay() -> Iterator[Any]:
            try:
                yield from inner
            finally:
                close = getattr(inner, "close", None)
                if close is not None:
                    close()

        return relay()


# How a call's stream is read: ("all",), ("close", k), ("drop", k), ("open", k) (left
# open across the next call), ("peek", k) (the session's events read after k chunks,
# then the rest), ("write", k) (an event the code under test appends after k chunks).
_READS = st.one_of(
    st.just(("all", 0)),
    st.tuples(st.sampled_from(["close", "drop", "open", "peek", "write"]), st.integers(0, 60)),
)


def _read(stream: Iterator[Any], how: tuple[str, int], session: Any, held: list[Any]) -> None:
    kind, k = how
    try:
        if kind == "all":
            for _ in stream:
                pass
            return
        for n, _chunk in enumerate(stream):
            if n + 1 >= k:
                break
        if kind == "close":
            stream.close()  # type: ignore[attr-defined]
        elif kind == "open":
            held.append(stream)
        elif kind in ("peek", "write"):
            if session is not None:
                if kind == "peek":
                    len(session.events)
                else:
                    session.append("status/update", {"note": "the code under test"})
            for _ in stream:
                pass
        # "drop": the stream goes when this frame does
    except DshReplayError:
        pass  # a replayed failure: logged either way


def _run(
    scenario: Scenario, reads: list[tuple[str, int]], lazy: bool, grow: bool = False
) -> list[Any]:
    """Replay every session of ``scenario`` call by call; the store's logs, as JSON.

    With ``grow``, each session's requests are one message list the caller extends in
    place after each call (its question, then an answer and a tool result of its own).
    """
    store = SessionStore(MemoryBackend())
    replay = ReplayModel(scenario)
    model = RecordingModel(
        replay if lazy else _Relayed(replay),
        store,
        parsed_chunks=True,
        request_views=True,
    )
    held: list[Any] = []
    n = 0
    for script in scenario.scripts:
        if any(isinstance(entry, HangEntry) for entry in script.entries):
            continue  # a hang blocks until cancelled
        parent = script.header.parent_session
        messages: list[Any] = []
        for call in range(len(script.entries)):
            if not grow:
                messages = []
            messages.append({"role": "user", "content": [{"type": "text", "text": f"call {call}"}]})
            request = {"messages": messages}
            how = reads[n % len(reads)]
            n += 1
            stream = model.stream(request, session_id=script.recorded_id, parent_session_id=parent)
            _read(stream, how, store.get(script.recorded_id), held)
            del stream  # a dropped stream is closed now (reference counting)
            if grow:  # the caller goes on with the same list, and changes what it sent
                messages[-1]["content"][0]["text"] += " (edited)"
                messages.append({"role": "assistant", "content": f"answer {call}"})
    held.clear()
    model.close_open_calls()
    logs = []
    for session in store.sessions():
        events = [dict(event, time=0) for event in session.events]
        logs.append([dict(session.header.to_json(), createdAt=0), *events])
    return _ids_in_order(logs)


def _ids_in_order(logs: list[Any]) -> list[Any]:
    """``logs`` with each UUID replaced by its order of first appearance."""
    text = orjson.dumps(logs)
    seen: dict[bytes, bytes] = {}
    text = _UUID.sub(lambda m: seen.setdefault(m[0].lower(), b"id-%d" % len(seen)), text)
    result: list[Any] = orjson.loads(text)
    return result


def _scenario(path: Path | None) -> Scenario:
    if path is None:
        require_corpus()
    assert path is not None
    try:
        return load_scenario(path)
    except DshReplayError as error:
        pytest.skip(f"the scenario does not load: {error}")


@pytest.mark.parametrize("path", corpus_params(corpus_scenarios()))
def test_lazy_logging_of_each_corpus_scenario_read_to_the_end(path: Path | None) -> None:
    scenario = _scenario(path)
    assert _run(scenario, [("all", 0)], lazy=True) == _run(scenario, [("all", 0)], lazy=False)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    reads=st.lists(_READS, min_size=1, max_size=6),
    pick=st.integers(0, 10_000),
    grow=st.booleans(),
)
def test_lazy_logging_with_generated_reads(
    reads: list[tuple[str, int]], pick: int, grow: bool
) -> None:
    paths = corpus_scenarios()
    if not paths:
        require_corpus()
        return
    try:
        scenario = load_scenario(paths[pick % len(paths)])
    except DshReplayError:
        return
    assert _run(scenario, reads, lazy=True, grow=grow) == _run(
        scenario, reads, lazy=False, grow=grow
    )


def _two_call_scenario() -> Scenario:
    text = [{"type": "text-delta", "index": 0, "text": f"w{k} "} for k in range(3)]
    finish = {"type": "finish", "reason": {"kind": "stop"}}
    return one_session(ChunksEntry([*text, finish]), ChunksEntry([*text, finish]))


@pytest.mark.parametrize("lazy", [True, False])
def test_a_request_changed_after_the_call_is_logged_as_it_was_sent(lazy: bool) -> None:
    store = SessionStore(MemoryBackend())
    replay = ReplayModel(_two_call_scenario())
    model = RecordingModel(
        replay if lazy else _Relayed(replay), store, parsed_chunks=True, request_views=True
    )
    messages: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "first"}]}]
    list(model.stream({"messages": messages, "system": "be brief"}, session_id="s"))
    messages[0]["content"][0]["text"] = "changed"  # in place, after the call
    messages.append({"role": "assistant", "content": "an answer of the caller's own"})
    session = store.get("s")
    assert session is not None
    users = [e["data"]["content"] for e in session.events if e["type"] == "user/message"]
    assistants = [e for e in session.events if e["type"] == "assistant/message"]
    assert users == [[{"type": "text", "text": "first"}]]
    assert len(assistants) == 1  # the replayed answer, not the caller's later one


def test_a_replayed_call_is_built_only_when_its_session_is_read() -> None:
    store = SessionStore(MemoryBackend())
    model = RecordingModel(
        ReplayModel(_two_call_scenario()), store, parsed_chunks=True, request_views=True
    )
    for n in range(2):
        list(model.stream({"messages": [{"role": "user", "content": f"q{n}"}]}, session_id="s"))
    assert store.backend.read("s") is None  # nothing built, nothing written yet
    session = store.get("s")
    assert session is not None
    kinds = [e["type"] for e in session.events]
    assert kinds.count("turn/start") == 2
    assert kinds.count("assistant/chunk") == 8
    assert kinds[-1] == "turn/end"
    stored = store.backend.read("s")
    assert stored is not None
    assert len(stored.events) == len(kinds)


def test_a_reader_in_another_thread_builds_the_calls_in_order() -> None:
    """Calls made in one thread, the session read in others meanwhile: the eager log."""
    entries = [
        ChunksEntry(
            [
                *({"type": "text-delta", "index": 0, "text": f"c{n}w{k}"} for k in range(4)),
                {"type": "finish", "reason": {"kind": "stop"}},
            ]
        )
        for n in range(40)
    ]
    scenario = one_session(*entries)

    def logged(lazy: bool, readers: int) -> list[Any]:
        store = SessionStore(MemoryBackend())
        replay = ReplayModel(scenario)
        model = RecordingModel(
            replay if lazy else _Relayed(replay), store, parsed_chunks=True, request_views=True
        )
        list(model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="s"))
        session = store.get("s")
        assert session is not None
        done = threading.Event()

        def read() -> None:
            while not done.is_set():
                len(session.events)

        threads = [threading.Thread(target=read) for _ in range(readers)]
        for thread in threads:
            thread.start()
        try:
            for n in range(1, len(entries)):
                request = {"messages": [{"role": "user", "content": f"q{n}"}]}
                list(model.stream(request, session_id="s"))
        finally:
            done.set()
            for thread in threads:
                thread.join(10)
        model.close_open_calls()
        return _ids_in_order([[dict(e, time=0) for e in session.events]])

    assert logged(lazy=True, readers=2) == logged(lazy=False, readers=0)


def _one_call_store(lazy: bool, writes_chunks: bool) -> list[Any]:
    chunks = [{"type": "text-delta", "index": 0, "text": f"w{k} "} for k in range(6)]
    scenario = one_session(ChunksEntry([*chunks, {"type": "finish", "reason": {"kind": "stop"}}]))
    store = SessionStore(MemoryBackend())
    replay = ReplayModel(scenario)
    model = RecordingModel(
        replay if lazy else _Relayed(replay), store, parsed_chunks=True, request_views=True
    )
    stream = model.stream({"messages": [{"role": "user", "content": "hi"}]}, session_id="s")
    got = [next(stream), next(stream)]
    session = store.get("s")
    assert session is not None
    if writes_chunks:
        session.append_chunk(1, 1, {"type": "text-delta", "index": 0, "text": "theirs"})
    got.extend(stream)
    assert [c.get("text") for c in got[:6]] == [f"w{k} " for k in range(6)]
    model.close_open_calls()
    return _ids_in_order([[dict(e, time=0) for e in session.events]])


@pytest.mark.parametrize("writes_chunks", [False, True])
def test_chunks_the_code_writes_mid_stream_keep_their_place(writes_chunks: bool) -> None:
    lazy = _one_call_store(lazy=True, writes_chunks=writes_chunks)
    assert lazy == _one_call_store(lazy=False, writes_chunks=writes_chunks)
    texts = [e["data"]["chunk"].get("text") for e in lazy[0] if e["type"] == "assistant/chunk"]
    if writes_chunks:  # the code's chunk after the two read, the rest after it
        assert texts[:3] == ["w0 ", "w1 ", "theirs"]


def test_a_replayed_call_is_followed_not_relayed() -> None:
    """The fast path is taken: the caller reads the replay model's own stream."""
    chunks = [{"type": "text-delta", "index": 0, "text": "a"}]
    scenario = one_session(ChunksEntry([*chunks, {"type": "finish", "reason": {"kind": "stop"}}]))
    store = SessionStore(MemoryBackend())
    model = RecordingModel(ReplayModel(scenario), store, parsed_chunks=True, request_views=True)
    stream = model.stream({"messages": [{"role": "user", "content": "hi"}]}, session_id="s")
    assert type(stream).__name__ == "ChunkStream"
    list(stream)
    session = store.get("s")
    assert session is not None
    kinds = [e["type"] for e in session.events]
    assert kinds.count("assistant/chunk") == 2
    assert kinds[-1] == "turn/end"


def test_a_diverted_stream_hands_out_nothing_once_closed() -> None:
    """Closed after the code wrote into its session mid-stream, the stream ends there."""
    chunks = [{"type": "text-delta", "index": 0, "text": f"w{k}"} for k in range(5)]
    scenario = one_session(ChunksEntry([*chunks, {"type": "finish", "reason": {"kind": "stop"}}]))
    store = SessionStore(MemoryBackend())
    model = RecordingModel(ReplayModel(scenario), store, parsed_chunks=True, request_views=True)
    stream = model.stream({"messages": [{"role": "user", "content": "hi"}]}, session_id="s")
    next(stream)
    session = store.get("s")
    assert session is not None
    session.append_chunk(1, 1, {"type": "text-delta", "index": 0, "text": "theirs"})
    next(stream)
    stream.close()  # type: ignore[attr-defined]
    assert list(stream) == []
