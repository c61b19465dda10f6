"""The fast paths of the replay, the load and the log check give what the plain paths gave.

The plain implementations the fast ones replaced (commit 4df6cdb) are kept here as
oracles and compared with the current ones on generated inputs; the rest checks behaviour
the plain code had (a replayed stream can be closed; equal JSON text of values that are
not plain JSON is not an agreement; the logs a load keeps equal the logs read again, for
every kind of log).
"""

from __future__ import annotations

import contextlib
import datetime
import shutil
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.corpus_support import corpus_scenarios, require_corpus
from support.scenarios import one_session
from support.values import UTF8

from pytest_dsh_replay import DshReplayError, ReplayedModelError
from pytest_dsh_replay._check.normalize import Normalizer, diff_logs
from pytest_dsh_replay._format.chunk_rows import PACKED_TAGS, expand_packed_row, validate_packed_row
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._format.jsonl import read_session_log
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, ThrowEntry, materialize_runs
from pytest_dsh_replay._scripts.loading import ScenarioCache, load_scenario

REQ = {"messages": [{"role": "user", "content": "hi"}]}


def _model(*entries: Any) -> ReplayModel:
    return ReplayModel(one_session(*entries, path=Path("/nowhere")))


def _chunks(n: int) -> list[dict[str, Any]]:
    body = [{"type": "text-delta", "index": 0, "text": f"t{i}", "x": {"l": [i]}} for i in range(n)]
    return [*body, {"type": "finish", "reason": {"kind": "stop"}}]


# --- a replayed stream can be closed as a generator can -----------------------------------


def test_a_replayed_stream_can_be_closed() -> None:
    """``contextlib.closing`` (or ``.close()``) on a replayed stream ends it, as on a generator."""
    model = _model(ChunksEntry(_chunks(3)))
    stream: Any = model.stream(REQ)
    with contextlib.closing(stream) as s:
        assert next(s)["type"] == "text-delta"
    assert list(stream) == []  # a closed stream hands out nothing more


# --- cancelling at every chunk ------------------------------------------------------------


def _run(entry: Any, cancel_at: int) -> tuple[int, str, str]:
    model = _model(entry, entry)
    it = model.stream(REQ)
    got = 0
    try:
        while True:
            if got == cancel_at:
                model.cancel()
            chunk = next(it)
            chunk.clear()  # mutating a served chunk changes nothing else
            got += 1
    except StopIteration:
        result = "end"
    except Exception as err:
        result = type(err).__name__
    try:
        second = [c["type"] for c in model.stream(REQ)]
        later = f"{len(second)}"
    except Exception as err:
        later = type(err).__name__
    return got, result, later


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            ChunksEntry(_chunks(3)),
            [(0, "ReplayCancelledError", "4"), (1, "ReplayCancelledError", "4"),
             (2, "ReplayCancelledError", "4"), (3, "ReplayCancelledError", "4"),
             (4, "end", "4"), (4, "end", "4")],
        ),
        (
            ThrowEntry(_chunks(2)[:2], "boom", "X"),
            [(0, "ReplayCancelledError", "ReplayedModelError"),
             (1, "ReplayCancelledError", "ReplayedModelError"),
             (2, "ReplayedModelError", "ReplayedModelError"),
             (2, "ReplayedModelError", "ReplayedModelError"),
             (2, "ReplayedModelError", "ReplayedModelError"),
             (2, "ReplayedModelError", "ReplayedModelError")],
        ),
    ],
)  # fmt: skip
def test_cancel_at_every_chunk_behaves_as_before(entry: Any, expected: list[Any]) -> None:
    # the expected table is what 4df6cdb gives
    assert [_run(entry, at) for at in range(6)] == expected


# --- equal text of values that are not plain JSON -----------------------------------------


class _Str(str):
    __slots__ = ()


@pytest.mark.parametrize(
    ("recorded", "replayed"),
    [
        ([1, 2], (1, 2)),
        ("hi", _Str("hi")),
        ("2020-01-01T00:00:00", datetime.datetime(2020, 1, 1)),
    ],
    ids=["tuple", "str-subclass", "datetime"],
)
def test_values_of_other_types_with_the_same_json_text_still_differ(
    recorded: Any, replayed: Any
) -> None:
    """The old ``_first_difference`` reports a type difference; ``_same_text`` (orjson
    serializes tuples, str subclasses, datetimes, dataclasses, enums, UUIDs) hides it."""
    header = SessionHeader(id="s1")
    diff = diff_logs(
        "session.jsonl",
        (header, [{"type": "x", "data": {"a": recorded}}]),
        (header, [{"type": "x", "data": {"a": replayed}}]),
        expected_normalizer=Normalizer(session_ids=["s1"]),
        actual_normalizer=Normalizer(session_ids=["s1"]),
        shortcut=False,
    )
    assert diff is not None
    assert diff.path == "$.data.a"


# --- packed rows and chunk runs against the plain code ------------------------------------


def _old_expand_packed_row(row: Any) -> list[Any]:
    events = []
    t = row.time0
    for k in range(len(row.payload)):
        if k:
            t += row.dt[k - 1]
        events.append(
            {
                "type": "assistant/chunk",
                "seq": row.seq0 + k,
                "time": t,
                "data": {"turn": row.turn, "step": row.step, "chunk": row.chunk(k)},
            }
        )
    return events


_num = st.one_of(st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False, width=32))


@st.composite
def _rows(draw: Any) -> dict[str, Any]:
    tag = draw(st.sampled_from(sorted(PACKED_TAGS)))
    n = draw(st.integers(1, 5))
    payload = draw(st.lists(st.text(UTF8, max_size=3), min_size=n, max_size=n))
    dt = draw(
        st.lists(
            st.one_of(st.integers(-(10**6), 10**6), st.integers(0, 9).map(float)),
            min_size=n - 1,
            max_size=n - 1,
        )
    )
    data: dict[str, Any] = {"turn": draw(_num), "step": draw(_num), "index": draw(_num)}
    if tag == "tool-call-chunks":
        data["id"] = draw(st.text(UTF8, max_size=3))
        if draw(st.booleans()):
            data["name"] = draw(st.text(UTF8, max_size=3))
        data["dt"], data["args"] = dt, payload
    else:
        data["dt"], data["texts"] = dt, payload
    time0 = draw(st.one_of(st.integers(-(10**9), 10**9), st.integers(0, 9).map(float)))
    return {"type": tag, "seq0": draw(st.integers(0, 100)), "time0": time0, "data": data}


@settings(max_examples=150, deadline=None)
@given(_rows())
def test_expand_packed_row_equals_the_old_expansion(value: dict[str, Any]) -> None:
    row = validate_packed_row(value)
    new, old = expand_packed_row(row), _old_expand_packed_row(row)
    assert new == old
    assert orjson.dumps(new) == orjson.dumps(old)  # key order and number types too


def _old_materialize_runs(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if item.__class__ is dict:
            out.append(item)
            continue
        kind, index, payload = item[0], item[1], item[2]
        if kind == "tool-call-delta":
            if len(item) == 5:
                out += [
                    {"type": kind, "index": index, "id": item[3], "name": item[4],
                     "argumentsDelta": a}
                    for a in payload
                ]  # fmt: skip
            else:
                out += [{"type": kind, "index": index, "id": item[3], "argumentsDelta": a}
                        for a in payload]  # fmt: skip
        else:
            out += [{"type": kind, "index": index, "text": t} for t in payload]
    return out


_run_item = st.one_of(
    st.dictionaries(st.sampled_from(["type", "index", "text"]), st.integers(0, 3), max_size=3),
    st.tuples(
        st.sampled_from(["text-delta", "reasoning-delta"]),
        _num,
        st.lists(st.text(UTF8, max_size=2)),
    ).map(list),
    st.tuples(
        st.just("tool-call-delta"),
        _num,
        st.lists(st.text(UTF8, max_size=2)),
        st.text(UTF8, max_size=2),
    ).map(list),
    st.tuples(
        st.just("tool-call-delta"),
        _num,
        st.lists(st.text(UTF8, max_size=2)),
        st.text(UTF8, max_size=2),
        st.text(UTF8, max_size=2),
    ).map(list),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(_run_item, max_size=5))
def test_materialize_runs_equals_the_old_materialization(runs: list[Any]) -> None:
    blob = orjson.dumps(runs)
    new, old = materialize_runs(orjson.loads(blob)), _old_materialize_runs(orjson.loads(blob))
    assert orjson.dumps(new) == orjson.dumps(old)
    # every member is its own object
    assert len({id(c) for c in new}) == len(new)


# --- the cache's byte count ---------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    max_entries=st.integers(1, 4),
    max_bytes=st.integers(0, 40),
    ops=st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(0, 30)), max_size=30),
)
def test_the_kept_byte_count_evicts_as_the_old_sum(
    max_entries: int, max_bytes: int, ops: list[tuple[str, int]]
) -> None:
    cache = ScenarioCache(max_entries=max_entries, max_bytes=max_bytes)
    table = cache._logs
    old: OrderedDict[str, tuple[Any, int, Any]] = OrderedDict()
    for i, (key, size) in enumerate(ops):
        cache._put(table, key, (size, (i, size, i)), i)
        if size <= max_bytes:  # the old _put
            old[key] = ((i, size, i), size, i)
            old.move_to_end(key)
            while len(old) > max_entries or sum(v[1] for v in old.values()) > max_bytes:
                old.popitem(last=False)
        assert list(table.entries.items()) == list(old.items())
        assert table.total == sum(v[1] for v in table.entries.values())


# --- kept logs, for every kind of log -----------------------------------------------------

_PAD = orjson.dumps({"type": "todo/write", "data": {"x": "y" * 2000}})


def _variant(data: bytes, kind: str) -> bytes:
    lines = data.split(b"\n")
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "blank":
        return b"\n\n".join(lines)
    if kind == "no-final-newline":
        return data.rstrip(b"\n")
    if kind == "large":  # typed decoding
        return b"\n".join([lines[0], *[_PAD] * 600, *lines[1:]])
    if kind == "lone-surrogate":
        return b"\n".join([lines[0], b'{"type":"todo/write","data":{"t":"\\ud83d"}}', *lines[1:]])
    if kind == "projected":
        out = [lines[0]]
        for line in lines[1:]:
            if line.strip():
                value = orjson.loads(line)
                for key in ("seq", "time", "seq0", "time0"):
                    value.pop(key, None)
                line = orjson.dumps(value)
            out.append(line)
        return b"\n".join(out)
    return data


@pytest.mark.parametrize(
    "kind",
    ["crlf", "bom", "blank", "no-final-newline", "large", "lone-surrogate", "projected", "zstd"],
)
def test_kept_logs_of_every_kind_equal_the_logs_read_again(tmp_path: Path, kind: str) -> None:
    require_corpus()
    compared = 0
    for source in corpus_scenarios()[::4]:
        d = tmp_path / source.name
        shutil.copytree(source, d)
        for log in d.glob("session*.jsonl"):
            data = log.read_bytes()
            if kind == "zstd":
                zstandard = pytest.importorskip("zstandard")
                log.unlink()
                log.with_name(log.name + ".zst").write_bytes(
                    zstandard.ZstdCompressor().compress(data)
                )
            else:
                log.write_bytes(_variant(data, kind))
        try:
            expected = load_scenario(d)
        except DshReplayError:
            continue
        cache = ScenarioCache()
        scenario = cache.load(d, keep_logs=True)
        for old, new in zip(expected.scripts, scenario.scripts, strict=True):
            assert (old.entries, old.header, old.event_count) == (
                new.entries,
                new.header,
                new.event_count,
            )
            assert new.path is not None
            kept = cache.recorded_log(new.path)
            again = read_session_log(new.path)
            assert kept[0] == again[0]
            assert repr(kept[1]) == repr(again[1]), new.path  # key order too
            compared += 1
    assert compared >= 20


# --- stream()/astream() without CallOptions give what stream_call()/astream_call() give -----


def _entries() -> tuple[Any, ...]:
    return (
        ChunksEntry(_chunks(3)),
        ThrowEntry(_chunks(2)[:2], "overloaded", "overloaded_error"),
        ChunksEntry(_chunks(1)),
    )


def _outcome(read: Any) -> list[Any]:
    """Each call's chunks and how it ended (the error's type and message), then one more."""
    out: list[Any] = []
    for _ in range(len(_entries()) + 1):  # the last call is past the recording
        got: list[Any] = []
        try:
            got.extend(read())
            out.append((got, None))
        except Exception as err:
            out.append((got, type(err).__name__, str(err)))
    return out


@pytest.mark.parametrize("session_id", [None, "s1"])
def test_stream_without_call_options_equals_stream_call(session_id: str | None) -> None:
    """`ReplayModel.stream` admits the call without a `CallOptions`: same chunks and errors."""
    from pytest_dsh_replay._identity.options import CallOptions, ReplayOptions

    fast, plain = _model(*_entries()), _model(*_entries())
    told: list[Any] = []
    assert _outcome(lambda: fast.stream(REQ, session_id=session_id)) == _outcome(
        lambda: plain.stream_call(REQ, CallOptions(session_id))
    )
    assert fast.bindings.keys() == plain.bindings.keys() == {session_id}
    # an option a replay reads still reaches it through stream()
    model = _model(*_entries())
    list(model.stream(REQ, on_entry=told.append))
    other = _model(*_entries())
    list(other.stream_call(REQ, CallOptions(replay=ReplayOptions(on_entry=told.append))))
    assert len(told) == 2
    assert told[0].chunks == told[1].chunks == _chunks(3)


def test_astream_without_call_options_equals_astream_call() -> None:
    """`ReplayModel.astream` admits the call without a `CallOptions`: same chunks and errors."""
    import asyncio

    from pytest_dsh_replay._identity.options import CallOptions

    async def read(stream: Any) -> list[Any]:
        return [chunk async for chunk in stream]

    fast, plain = _model(*_entries()), _model(*_entries())
    assert _outcome(lambda: asyncio.run(read(fast.astream(REQ, session_id="s")))) == _outcome(
        lambda: asyncio.run(read(plain.astream_call(REQ, CallOptions("s"))))
    )
    with pytest.raises(TypeError, match="asyncio.Event"):
        fast.astream(REQ, cancel=object())  # type: ignore[arg-type]


def test_one_generator_read_tells_its_follower_as_before() -> None:
    """The list read (one generator now) still notes its end and its error for a follower."""
    model = _model(*_entries())
    first: Any = model.stream(REQ)
    followed = first.followed()
    assert not followed.done()
    assert followed.error() is None
    assert list(first) == _chunks(3)
    assert followed.done()
    assert followed.error() is None
    assert followed.handed_out(copies=True) == _chunks(3)
    second: Any = model.stream(REQ)
    read = second.followed()
    with pytest.raises(ReplayedModelError):
        list(second)
    assert read.done()
    assert isinstance(read.error(), ReplayedModelError)
    assert read.handed_out() == _chunks(2)[:2]
    third: Any = model.stream(REQ)
    assert next(third) == _chunks(1)[0]
    third.close()  # closed after one chunk: the follower sees the read ended there
    assert third.followed().done()
    assert third.followed().handed_out() == _chunks(1)[:1]
