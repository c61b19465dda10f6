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
run on lazily built events. Where a session qualifies for the log check by reference
(docs/checks.md#by-reference), the events the recorder works out without building them
are the events it then builds (ids and times aside), and their normalized form, a run
that replayed its entry whole taken as the recorded run it came from by identity, is the
form of the built events.
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
    JsonlBackend,
    MemoryBackend,
    RecordingModel,
    ReplayModel,
    SessionStore,
    SessionStoreError,
    ThrowEntry,
)
from pytest_dsh_replay._check.log_check import lines_forms
from pytest_dsh_replay._check.normalize import Normalizer, RunTexts, normalized_form, segments_form
from pytest_dsh_replay._scripts.loading import ScenarioCache
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
    scenario: Scenario,
    reads: list[tuple[str, int]],
    lazy: bool,
    grow: bool = False,
    runs: RunTexts | None = None,
) -> list[Any]:
    """Replay every session of ``scenario`` call by call; the store's logs, as JSON.

    With ``grow``, each session's requests are one message list the caller extends in
    place after each call (its question, then an answer and a tool result of its own).
    ``runs``: the recorded runs the scenario's entries were derived from (`_loaded`): a
    session worked out by reference has the normalized form of the events then built,
    its whole-entry runs taken as those runs by identity.
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
    worked = [model._by_reference(session) for session in store.sessions()] if lazy else []
    model.close_open_calls()
    logs = []
    for session in store.sessions():
        events = [dict(event, time=0) for event in session.events]
        logs.append([dict(session.header.to_json(), createdAt=0), *events])
    for reference, session in zip(worked, store.sessions(), strict=False):
        if reference is not None:  # the check by reference's events are the built ones
            assert _payloads(reference.events) == _payloads(session.events)
            by_reference = segments_form(
                reference.header, reference.segments, Normalizer(), runs=runs
            )
            assert by_reference == normalized_form(session.header, session.events, Normalizer())
    return _ids_in_order(logs)


def _loaded(path: Path) -> tuple[Scenario, RunTexts | None]:
    """The scenario as a run's cache loads it, and the recorded runs its entries came from.

    ``None`` for the runs when a log's lines were not kept (a log without events).
    """
    cache = ScenarioCache()
    scenario = cache.load(path, keep_logs=True)
    scripts = [s for s in scenario.scripts if s.path is not None]
    kept = [cache.kept_lines(s.path) for s in scripts if s.path is not None]
    logs = [
        (k.header, k.lines, k.source, s.entries) for k, s in zip(kept, scripts, strict=True) if k
    ]
    made = lines_forms(logs, [s.header for s in scripts]) if len(logs) == len(scripts) else None
    return scenario, None if made is None else made[1]


def _payloads(events: Any) -> list[Any]:
    """Events without ``seq`` and ``time``, UUIDs numbered by first appearance."""
    return _ids_in_order([{k: v for k, v in e.items() if k not in ("seq", "time")} for e in events])


def _ids_in_order(logs: list[Any]) -> list[Any]:
    """``logs`` with each UUID replaced by its order of first appearance."""
    text = orjson.dumps(logs)
    seen: dict[bytes, bytes] = {}
    text = _UUID.sub(lambda m: seen.setdefault(m[0].lower(), b"id-%d" % len(seen)), text)
    result: list[Any] = orjson.loads(text)
    return result


def _scenario(path: Path | None) -> tuple[Scenario, RunTexts | None]:
    if path is None:
        require_corpus()
    assert path is not None
    try:
        return _loaded(path)
    except DshReplayError as error:
        pytest.skip(f"the scenario does not load: {error}")


@pytest.mark.parametrize("path", corpus_params(corpus_scenarios()))
def test_lazy_logging_of_each_corpus_scenario_read_to_the_end(path: Path | None) -> None:
    scenario, runs = _scenario(path)
    lazy = _run(scenario, [("all", 0)], lazy=True, runs=runs)
    assert lazy == _run(scenario, [("all", 0)], lazy=False)


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
        scenario, runs = _loaded(paths[pick % len(paths)])
    except DshReplayError:
        return
    assert _run(scenario, reads, lazy=True, grow=grow, runs=runs) == _run(
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
        errors: list[BaseException] = []

        def read() -> None:
            while not done.is_set():
                try:
                    len(session.events)
                except BaseException as error:  # reported by the test
                    errors.append(error)
                    return

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
        assert not errors
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


def test_closing_a_store_on_disk_writes_the_calls_nobody_read(tmp_path: Path) -> None:
    store = SessionStore(JsonlBackend(tmp_path))
    model = RecordingModel(
        ReplayModel(_two_call_scenario()), store, parsed_chunks=True, request_views=True
    )
    list(model.stream({"messages": [{"role": "user", "content": "hi"}]}, session_id="s"))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # nothing built yet
    store.close()
    with SessionStore(JsonlBackend(tmp_path)) as again:
        kinds = [e["type"] for e in again.load("s").events]
    assert kinds[0] == "turn/start"
    assert kinds.count("assistant/chunk") == 4
    assert kinds[-1] == "turn/end"


# --- what a review of the deferred logging broke (each failed before its fix) ----------


def _pair(scenario: Scenario, **options: Any) -> list[tuple[SessionStore, RecordingModel]]:
    """A lazily logging recorder and an eagerly logging one, each on a store of its own."""
    out = []
    for lazy in (True, False):
        store = SessionStore(MemoryBackend(), **options)
        replay = ReplayModel(scenario)
        model = RecordingModel(
            replay if lazy else _Relayed(replay), store, parsed_chunks=True, request_views=True
        )
        out.append((store, model))
    return out


def _text(n: int, tag: str) -> ChunksEntry:
    deltas = [{"type": "text-delta", "index": 0, "text": f"{tag}{k}"} for k in range(n)]
    return ChunksEntry([*deltas, {"type": "finish", "reason": {"kind": "stop"}}])


def _logged(store: SessionStore) -> list[Any]:
    return _ids_in_order([[dict(e, time=0) for e in s.events] for s in store.sessions()])


def test_a_request_the_log_refuses_fails_at_the_call() -> None:
    for store, model in _pair(one_session(_text(2, "a"), _text(2, "b"))):
        request = {"messages": [{"role": "user", "content": "hi"}], "temperature": -0.0}
        with pytest.raises(SessionStoreError, match="-0.0"):
            list(model.stream(request, session_id="s"))
        session = store.get("s")
        assert session is not None
        len(session.events)  # the next reader is not the one that fails
        session.append("status/update", {"note": "the code goes on"})


def test_a_stream_left_open_across_the_next_call_ends_where_it_was() -> None:
    logs = []
    for store, model in _pair(one_session(_text(4, "a"), _text(2, "b"))):
        first = model.stream({"messages": [{"role": "user", "content": "q1"}]}, session_id="s")
        next(first)
        next(first)
        second = model.stream({"messages": [{"role": "user", "content": "q2"}]}, session_id="s")
        list(first)  # read on after the next call: nothing more is logged for it
        list(second)
        model.close_open_calls()
        logs.append(_logged(store))
    assert logs[0] == logs[1]
    texts = [e["data"]["chunk"].get("text") for e in logs[0][0] if e["type"] == "assistant/chunk"]
    assert texts[:3] == ["a0", "a1", None]  # then the aborted finish


def test_a_relayed_call_left_open_logs_nothing_into_the_next_turn() -> None:
    throw = ThrowEntry(
        [{"type": "text-delta", "index": 0, "text": f"t{k}"} for k in range(4)], "boom", "E"
    )
    logs = []
    for store, model in _pair(one_session(throw, _text(2, "b"))):
        first = model.stream({"messages": [{"role": "user", "content": "q1"}]}, session_id="s")
        next(first)
        second = model.stream({"messages": [{"role": "user", "content": "q2"}]}, session_id="s")
        next(first)
        list(second)
        model.close_open_calls()
        logs.append(_logged(store))
    assert logs[0] == logs[1]


def test_a_dropped_stream_is_closed_for_what_reads_the_session_next() -> None:
    seeds = []
    for store, model in _pair(one_session(_text(4, "a"))):
        stream = model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="s")
        next(stream)
        del stream  # dropped, not closed: the turn ends (aborted) as for a generator
        session = store.get("s")
        assert session is not None
        seeds.append(store.fork(session).seed_length)
    assert seeds[0] == seeds[1] > 0


def test_a_read_waits_for_a_deferred_write_another_thread_runs() -> None:
    inside, release = threading.Event(), threading.Event()

    def clock() -> int:  # holds the reader's deferred write open until released
        if threading.current_thread().name == "reader" and not inside.is_set():
            inside.set()
            assert release.wait(10)
        return 1_700_000_000_000

    store = SessionStore(MemoryBackend(), clock=clock)
    model = RecordingModel(
        ReplayModel(one_session(_text(3, "a"))), store, parsed_chunks=True, request_views=True
    )
    list(model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="s"))
    session = store.get("s")
    assert session is not None
    reader = threading.Thread(target=lambda: len(session.events), name="reader")
    reader.start()
    assert inside.wait(10)  # the reader is inside the deferred write now
    # The write is released a moment after the caller's own read has started.
    threading.Timer(0.05, release.set).start()
    kinds = [e["type"] for e in session.events]  # the caller's own read, after its call
    reader.join(10)
    assert not reader.is_alive()
    assert kinds[0] == "turn/start"
    assert kinds[-1] == "turn/end"


def test_closing_a_store_while_a_thread_reads_its_session_does_not_deadlock(
    tmp_path: Path,
) -> None:
    for attempt in range(8):
        store = SessionStore(JsonlBackend(tmp_path / str(attempt)))
        model = RecordingModel(
            ReplayModel(one_session(*(_text(3, f"c{n}") for n in range(20)))),
            store,
            parsed_chunks=True,
            request_views=True,
        )
        list(model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="s"))
        session = store.get("s")
        assert session is not None
        stop = threading.Event()
        errors: list[BaseException] = []

        def read(
            session: Any = session, stop: threading.Event = stop, errors: list[Any] = errors
        ) -> None:
            while not stop.is_set():
                try:
                    len(session.events)
                except SessionStoreError:
                    return  # closed under it: fine
                except BaseException as error:
                    errors.append(error)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for n in range(1, 20):
            list(model.stream({"messages": [{"role": "user", "content": f"q{n}"}]}, session_id="s"))
        closer = threading.Thread(target=store.close, daemon=True)
        closer.start()
        closer.join(10)
        stop.set()
        reader.join(10)
        assert not closer.is_alive(), "deadlocked"
        assert not reader.is_alive(), "deadlocked"
        assert not errors


def test_a_turn_or_step_the_log_refuses_fails_at_the_call() -> None:
    for _store, model in _pair(one_session(_text(2, "a"))):
        request = {"messages": [{"role": "user", "content": "q"}]}
        with pytest.raises(SessionStoreError):
            list(model.stream(request, session_id="s", step=float("nan")))  # type: ignore[arg-type]


def test_a_store_closed_mid_stream_writes_nothing_more(tmp_path: Path) -> None:
    on_disk, in_memory = [], []
    for n, (lazy, wrap) in enumerate(((True, False), (False, True))):
        store = SessionStore(JsonlBackend(tmp_path / str(n)))
        replay = ReplayModel(one_session(_text(4, "w")))
        model = RecordingModel(
            _Relayed(replay) if wrap else replay, store, parsed_chunks=True, request_views=True
        )
        stream = model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="s")
        next(stream)
        next(stream)
        session = store.get("s")
        store.close()
        try:
            list(stream)
        except SessionStoreError:
            assert not lazy  # chunk by chunk, the next chunk's write is refused
        assert session is not None
        in_memory.append([e["type"] for e in session.events])
        with SessionStore(JsonlBackend(tmp_path / str(n))) as again:  # closes the open turn
            on_disk.append([e["type"] for e in again.load("s").events])
    assert in_memory[0] == in_memory[1]
    assert in_memory[0].count("assistant/chunk") == 2  # what was read when the store closed
    assert on_disk[0] == on_disk[1]


def test_an_entry_with_chunks_after_its_finish_is_logged_as_eagerly() -> None:
    chunks: list[Any] = [
        {"type": "text-delta", "index": 0, "text": "a"},
        {"type": "finish", "reason": {"kind": "stop"}},
        {"type": "text-delta", "index": 0, "text": "b"},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]
    assert not ChunksEntry(chunks).ends_with_finish
    logs = []
    for store, model in _pair(one_session(ChunksEntry(chunks))):
        list(model.stream({"messages": [{"role": "user", "content": "q"}]}, session_id="s"))
        logs.append(_logged(store))
    assert logs[0] == logs[1]
