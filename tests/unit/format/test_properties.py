"""Property tests: random event streams never make the core raise anything but its own errors.

- packed rows: ``pack_chunk_runs`` then ``decode_storage_record`` gives the events back,
  and decoding arbitrary row-shaped values raises only ``SessionLogError``;
- logs: ``dump_session_log`` then ``parse_session_log`` gives the events back (full and
  projected forms);
- scripts: ``derive_replay_script`` and ``load_scenario`` on arbitrary event orders either
  succeed or raise a ``DshReplayError`` subclass, and the one-pass reader that
  ``load_scenario`` uses derives exactly what ``parse_session_log`` +
  ``derive_replay_script`` derive, with the typed row decoder and without it;
- the typed row decoder accepts a line only when the reference checks accept it, with
  the same values.
"""

from __future__ import annotations

import enum
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay import (
    DshReplayError,
    ScriptError,
    SessionLogError,
    decode_storage_record,
    derive_replay_script,
    dump_session_log,
    load_scenario,
    pack_chunk_runs,
    parse_session_log,
)
from pytest_dsh_replay._format.chunk_rows import (
    PACKED_TAGS,
)
from pytest_dsh_replay._scripts.scenario import load_session_script

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# --- strategies ---------------------------------------------------------------------------

texts = st.text(UTF8, max_size=12)
numbers = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
small = st.sampled_from([0, 1, 2, 1.0, 1.5, -1])
keys = st.sampled_from([1, 2]) | small


def deltas() -> st.SearchStrategy[dict[str, Any]]:
    text_delta = st.builds(
        lambda kind, index, text: {"type": kind, "index": index, "text": text},
        st.sampled_from(["text-delta", "reasoning-delta"]),
        st.sampled_from([0, 1]),
        texts,
    )
    tool_delta = st.builds(
        lambda index, cid, name, args: (
            {"type": "tool-call-delta", "index": index, "id": cid, "argumentsDelta": args}
            if name is None
            else {
                "type": "tool-call-delta",
                "index": index,
                "id": cid,
                "name": name,
                "argumentsDelta": args,
            }
        ),
        st.sampled_from([0, 2]),
        st.sampled_from(["c1", "c2"]),
        st.sampled_from([None, "read"]),
        texts,
    )
    return text_delta | tool_delta


def other_chunks() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.builds(lambda i: {"type": "block-start", "index": i, "blockType": "text"}, small),
        st.builds(lambda b: {"type": "block-end", "index": 0, "block": b}, json_values),
        st.builds(lambda u: {"type": "usage", "usage": u}, json_values),
        st.sampled_from(
            [
                {"type": "finish", "reason": {"kind": "stop"}},
                {"type": "finish", "reason": {"kind": "error", "code": "X"}},
            ]
        ),
        json_values,
    )


def chunk_events() -> st.SearchStrategy[dict[str, Any]]:
    data = st.builds(
        lambda turn, step, chunk: {"turn": turn, "step": step, "chunk": chunk},
        keys,
        keys,
        deltas() | deltas() | other_chunks(),
    )
    return st.builds(lambda d: {"type": "assistant/chunk", "data": d}, data)


def other_events() -> st.SearchStrategy[dict[str, Any]]:
    summary = st.builds(
        lambda flag, raw, usage: {
            k: v
            for k, v in (("llmStreamCall", flag), ("rawOutput", raw), ("usage", usage))
            if v is not None
        },
        st.sampled_from([True, False, None, 1]),
        st.none() | st.lists(json_values, max_size=3) | json_values,
        st.none() | json_values,
    )
    return st.one_of(
        st.builds(lambda d: {"type": "compaction/summary", "data": d}, summary),
        st.builds(
            lambda t: {
                "type": "user/message",
                "data": {"role": "user", "content": [{"type": "text", "text": t}]},
            },
            texts,
        ),
        st.builds(lambda t, d: {"type": t, "data": d}, texts, json_values),
        st.builds(
            lambda d: {"type": "assistant/chunk", "data": d},
            json_values,
        ),
    )


_deltas = deltas()  # built once: a strategy built inside a draw is built again every draw


@st.composite
def delta_runs(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A run of deltas of one block under one (turn, step): what the encoder packs."""
    first = draw(_deltas)
    turn, step = draw(keys), draw(keys)
    n = draw(st.integers(1, 6))
    run = []
    for _ in range(n):
        chunk = dict(first)
        chunk["text" if "text" in chunk else "argumentsDelta"] = draw(texts)
        data = {"turn": turn, "step": step, "chunk": chunk}
        run.append({"type": "assistant/chunk", "data": data})
    return run


segments = st.one_of(
    delta_runs(),
    delta_runs(),
    chunk_events().map(lambda e: [e]),
    other_events().map(lambda e: [e]),
)


def with_envelopes(events: list[dict[str, Any]], times: list[int]) -> list[dict[str, Any]]:
    out = []
    for i, (event, t) in enumerate(zip(events, times, strict=False)):
        out.append({"type": event["type"], "seq": i, "time": t, "data": event["data"]})
    return out


# Built once, not for every example: Hypothesis then reuses the list strategy of a length.
_times = st.integers(-(2**40), 2**40) | st.sampled_from([0, 1, 27])
event_lists = (
    st.lists(segments, max_size=12)
    .map(lambda segs: [e for seg in segs for e in seg])
    .flatmap(
        lambda evs: st.lists(_times, min_size=len(evs), max_size=len(evs)).map(
            lambda times: with_envelopes(evs, times)
        )
    )
)


HEADER = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}

# --- packed rows ------------------------------------------------------------------------------


@SETTINGS
@given(event_lists, st.one_of(st.none(), st.integers(3, 6)))
def test_pack_then_decode_gives_the_events_back(
    events: list[dict[str, Any]], max_members: int | None
) -> None:
    records = pack_chunk_runs(events, max_members=max_members)
    decoded = [e for r in records for e in decode_storage_record(r)]
    assert decoded == events


row_values = st.fixed_dictionaries(
    {"type": st.sampled_from(sorted(PACKED_TAGS))},
    optional={
        "seq0": json_values | st.integers(-5, 2**53 + 5),
        "time0": json_values | st.integers(-(2**53) - 5, 2**53 + 5),
        "data": st.fixed_dictionaries(
            {},
            optional={
                "turn": json_values,
                "step": json_values,
                "index": json_values,
                "dt": st.lists(st.integers(-(2**53), 2**53) | json_values, max_size=4),
                "texts": st.lists(texts | json_values, max_size=4),
                "args": st.lists(texts | json_values, max_size=4),
                "id": texts | json_values,
                "name": texts | json_values,
                "extra": json_values,
            },
        )
        | json_values,
        "extra": json_values,
    },
)


@SETTINGS
@given(row_values)
def test_decoding_any_row_shaped_value_raises_only_session_log_errors(
    value: dict[str, Any],
) -> None:
    value.setdefault("seq0", 0)
    value.setdefault("time0", 0)
    try:
        events = decode_storage_record(value)
    except SessionLogError as err:
        message = str(err)
    else:
        assert all(e["type"] == "assistant/chunk" for e in events)
        return
    assert message.startswith(f"malformed {value['type']} storage row: ")


# --- the typed row decoder against the reference checks -------------------------------------

good_numbers = st.sampled_from([b"0", b"1", b"27", b"1780000000000"])
odd_numbers = st.sampled_from(
    [
        b"0",
        b"1",
        b"-1",
        b"-0",
        b"1.0",
        b"1.5",
        b"1e2",
        b"9007199254740991",
        b"9007199254740992",
        b"-9007199254740991",
        b"4294967296",
        b"4294967297",
        b"18446744073709551616",
        b"123456789012345678901234567890",
        b"1e400",
        b"true",
        b"null",
        b'"1"',
    ]
)
number_literals = st.one_of(good_numbers, good_numbers, good_numbers, odd_numbers)
string_literals = st.one_of(
    st.sampled_from([b'"a"', b'"\\u00e9"', b'""', b'"\\ud83d\\ude80"']),
    st.sampled_from([b'"a"', b"1", b"null", b'"\\ud800"', b"true"]),
)


good_strings = st.sampled_from([b'"a"', b'"\\u00e9"', b'""', b'"\\ud83d\\ude80"', b'" x"'])

# The composite strategies below draw from strategies built once, here: one built inside
# a draw (``st.sampled_from`` is not cached) is built again every draw, the same examples
# at a higher cost.
_tags = st.sampled_from(sorted(PACKED_TAGS))
_line_ends = st.sampled_from([b"\n", b"\r\n", b"", b" \n"])
_odd_names = string_literals | st.just(b"null")


@st.composite
def row_lines(draw: st.DrawFn) -> bytes:
    """Packed row lines: half of them valid, the rest with some field made hostile."""
    valid = draw(st.booleans())
    num = good_numbers if valid else number_literals
    text = good_strings if valid else string_literals
    tag = draw(_tags)
    n = draw(st.integers(1, 5) if valid else st.integers(0, 5))
    data: list[bytes] = []
    for key in ("turn", "step", "index"):
        if valid or draw(st.integers(0, 9)):
            data.append(b'"%s":%s' % (key.encode(), draw(num)))
    size = max(n - 1, 0) if valid or draw(st.integers(0, 5)) else draw(st.integers(0, n + 1))
    gaps = draw(st.lists(num, min_size=size, max_size=size))
    data.append(b'"dt":[' + b",".join(gaps) + b"]")
    members = draw(st.lists(text, min_size=n, max_size=n))
    if tag == "tool-call-chunks":
        data.append(b'"id":' + draw(text))
        if draw(st.booleans()):
            data.append(b'"name":' + draw(text if valid else _odd_names))
        data.append(b'"args":[' + b",".join(members) + b"]")
    else:
        data.append(b'"texts":[' + b",".join(members) + b"]")
    if not valid and not draw(st.integers(0, 9)):
        data.append(b'"extra":1')
    if draw(st.booleans()):
        data = draw(st.permutations(data))
    parts = [b'"type":"%s"' % tag.encode()]
    for key in ("seq0", "time0"):
        if draw(st.integers(0, 3)):
            parts.append(b'"%s":%s' % (key.encode(), draw(num)))
    parts.append(b'"data":{' + b",".join(data) + b"}")
    if not valid and not draw(st.integers(0, 9)):
        parts.append(b'"type":"%s"' % draw(_tags).encode())
    return b"{" + b",".join(parts) + b"}" + draw(_line_ends)


# --- logs ------------------------------------------------------------------------------------


@SETTINGS
@given(event_lists, st.booleans())
def test_dump_then_parse_gives_the_events_back(events: list[dict[str, Any]], pack: bool) -> None:
    full = dump_session_log(HEADER, events, pack_chunks=pack)
    assert parse_session_log(full) == events
    projected = parse_session_log(
        dump_session_log(HEADER, events, pack_chunks=pack, envelope=False)
    )
    assert [e["seq"] for e in projected] == list(range(len(events)))

    def strip(e: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in e.items() if k not in ("seq", "time")}

    assert [strip(e) for e in projected] == [strip(e) for e in events]


# --- scripts ------------------------------------------------------------------------------------


def outcome(fn: Any) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except DshReplayError as err:
        return type(err).__name__, getattr(err, "reason", str(err))


def closed_at(events: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """``events`` with a ``session/end-seed`` at ``seed`` (seqs renumbered)."""
    time = events[seed - 1]["time"] if 0 < seed <= len(events) else 0
    marked = [*events[:seed], {"type": "session/end-seed", "seq": 0, "time": time, "data": {}}]
    return [{**e, "seq": i} for i, e in enumerate(marked + events[seed:])]


@SETTINGS
@given(event_lists, st.booleans(), st.booleans(), st.integers(0, 50), st.booleans())
def test_the_one_pass_reader_derives_what_parse_then_derive_derives(
    events: list[dict[str, Any]], pack: bool, envelope: bool, seed: int, mark: bool
) -> None:
    if mark and seed <= len(events):
        events = closed_at(events, seed)
    text = dump_session_log(
        {**HEADER, "seedLength": seed}, events, pack_chunks=pack, envelope=envelope
    )
    reference = outcome(
        lambda: [e.to_json() for e in derive_replay_script(parse_session_log(text))]
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "session.jsonl"
        path.write_bytes(text)
        streamed = outcome(lambda: [e.to_json() for e in load_session_script(path).entries])
        assert streamed == reference
        # A child derives from its events at or after seedLength: the same as slicing,
        # where a session/end-seed follows the seed or ends it (docs/scenarios.md#seeds).
        closed = seed == 0 or any(
            i < len(events) and events[i]["type"] == "session/end-seed" for i in (seed - 1, seed)
        )
        if seed <= len(events) and closed:
            sliced = outcome(
                lambda: [e.to_json() for e in derive_replay_script(parse_session_log(text)[seed:])]
            )
            child = outcome(
                lambda: [e.to_json() for e in load_session_script(path, primary=False).entries]
            )
            assert child == sliced
        else:  # a seedLength past the log, or one the log's end-seed does not follow
            assert outcome(lambda: load_session_script(path, primary=False))[0] == (
                "SessionLogError"
            )


@SETTINGS
@given(st.lists(st.one_of(chunk_events(), other_events()), max_size=30))
def test_derive_on_any_event_order_raises_only_script_or_format_errors(
    events: list[dict[str, Any]],
) -> None:
    try:
        entries = derive_replay_script(events)
    except (ScriptError, SessionLogError):  # the latter: what the format does not allow
        return
    for entry in entries:
        assert entry.to_json()["kind"] == "chunks"


@SETTINGS
@given(
    st.lists(event_lists, min_size=1, max_size=3),
    st.lists(st.integers(0, 20), min_size=3, max_size=3),
)
def test_load_scenario_on_any_events_loads_or_raises_a_dsh_replay_error(
    sessions: list[list[dict[str, Any]]], seeds: list[int]
) -> None:
    assume(sessions)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        for n, events in enumerate(sessions):
            header: dict[str, Any] = {**HEADER, "id": f"s{n}", "createdAt": seeds[n]}
            if n:
                header["parentSession"] = "s0"
                header["seedLength"] = seeds[n]
            name = "session.jsonl" if n == 0 else f"session.{n}.jsonl"
            (d / name).write_bytes(dump_session_log(header, events, envelope=bool(n % 2)))
        try:
            scenario = load_scenario(d)
        except DshReplayError as err:
            error: DshReplayError | None = err
        else:
            assert len(scenario.scripts) == len(sessions)
            assert scenario.to_json()["scripts"][0]["primary"] is True
            return
    assert isinstance(error, SessionLogError | ScriptError)
    assert error.path is not None


# --- the store's lossless-JSON copy: the C fast path equals the walk ------------------


class _Label(str):
    pass


class _Kind(str, enum.Enum):
    A = "a"


_odd_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.sampled_from([2**53 - 1, 2**53, -(2**53), 0.0, -0.0, 1.5, float("nan"), float("inf")]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(UTF8, max_size=6),  # st.text()'s alphabet: no lone surrogates
    st.sampled_from([_Label("x"), _Kind.A, b"bytes", (1, 2), "-0.0 in text"]),
)
_odd_values = st.recursive(
    _odd_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(UTF8, max_size=4), inner, max_size=4),
        st.dictionaries(st.sampled_from([1, _Label("k"), "k"]), inner, max_size=2),
    ),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.one_of(
        st.lists(_odd_values, max_size=3),
        st.dictionaries(st.text(UTF8, max_size=3), _odd_values, max_size=3),
    )
)
def test_the_fast_lossless_copy_equals_the_walk(value: Any) -> None:
    from pytest_dsh_replay._errors import SessionStoreError
    from pytest_dsh_replay._format.json_values import _json_walk, json_copy

    message: str | None = None
    try:
        expected = _json_walk(value, "data")
    except SessionStoreError as err:
        message = str(err)
    if message is not None:
        with pytest.raises(SessionStoreError) as refused:
            json_copy(value, "data")
        assert str(refused.value) == message
        return
    copy = json_copy(value, "data")
    assert _same(copy, expected)
    assert copy is not value


# --- the replayed-log check: the byte shortcut finds what normalizing everything finds ----

_IDS = [
    "0b9d4a52-6f0e-4c1e-9a57-000000000001",
    "0B9D4A52-6F0E-4C1E-9A57-000000000002",
    "p",
    "session-long-id",
]
_CWDS = ["/work/proj", "/tmp/x y"]
_pieces = st.sampled_from(
    [
        *_IDS,
        *_CWDS,
        "/work/proj/file.py",
        "hi",
        "x session-long-id y",
        "createdAt",
        "\n",
        "\x01",
        "",
    ]
)
_strings = st.lists(_pieces, max_size=3).map("".join)
_leaf = st.one_of(_strings, st.none(), st.booleans(), st.sampled_from([0, 1, 1.0, -0.0, 2.5, 7]))
_payload = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["text", "id", "createdAt", "durationMs", "p"]), inner, max_size=3
        ),
    ),
    max_leaves=8,
)
_log_events = st.lists(
    st.fixed_dictionaries(
        {"type": st.sampled_from(["assistant/chunk", "user/message"]), "data": _payload},
        optional={"seq": st.integers(0, 5), "time": st.integers(0, 5)},
    ),
    max_size=5,
)


# Runs of plain chunk events, as most of a replayed log is (compared as one text).
_chunk_log_events = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["assistant/chunk"] * 4 + ["user/message"]),
            "seq": st.integers(0, 5),
            "time": st.integers(0, 5),
            "data": _payload,
        }
    ),
    max_size=8,
)


# Built once: a strategy built inside a draw is built again every draw.
_expected_logs = st.one_of(_log_events, _chunk_log_events)
_some_log_events = _log_events.filter(bool)
_changes = st.sampled_from([0, 1, 2, 3, 3, 3])
_names = st.sampled_from(_IDS + _CWDS)


@st.composite
def _log_pairs(draw: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    expected = draw(_expected_logs)
    actual = [dict(e) for e in expected]
    for _ in range(draw(st.integers(0, 3))):  # a few events changed, added or dropped
        choice = draw(_changes)
        if choice == 3 and actual:  # one id or path written as another in one event
            # The last event most often: an id first seen earlier matters there.
            k = draw(st.sampled_from([len(actual) - 1, draw(st.integers(0, len(actual) - 1))]))
            text = orjson.dumps(actual[k]).decode()
            present = [x for x in _IDS + _CWDS if x in text]
            if present:
                old, new = draw(st.sampled_from(present)), draw(_names)
                actual[k] = orjson.loads(text.replace(old, new))
        elif choice == 0 and actual:
            actual[draw(st.integers(0, len(actual) - 1))] = draw(_some_log_events)[0]
        elif choice == 1:
            actual.append(draw(_some_log_events)[0])
        elif actual:
            actual.pop()
    return expected, actual


@settings(max_examples=100, deadline=None, derandomize=True)
@given(_log_pairs(), _log_pairs(), st.sampled_from([[], _IDS[2:], _IDS]), st.booleans())
def test_the_log_check_shortcut_finds_what_normalizing_everything_finds(
    first: Any, second: Any, ids: list[str], with_cwd: bool
) -> None:
    from pytest_dsh_replay._check.normalize import Normalizer, diff_logs
    from pytest_dsh_replay._format.events import SessionHeader

    header = SessionHeader(id="p")
    cwds = _CWDS if with_cwd else []

    def run(shortcut: bool) -> list[Any]:
        expected = Normalizer(session_ids=ids, cwds=cwds)
        actual = Normalizer(session_ids=ids[::-1], cwds=cwds)
        return [
            diff_logs(
                name,
                (header, pair[0]),
                (header, pair[1]),
                expected_normalizer=expected,
                actual_normalizer=actual,
                shortcut=shortcut,
            )
            for name, pair in (("session.jsonl", first), ("session.1.jsonl", second))
        ]

    assert run(True) == run(False)


# --- the typed decoder of call lines against the plain path ------------------------------


def _same_value(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1 and 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


_good_gaps = st.sampled_from([b"0", b"1", b"27"])


# Strings as writers write them without escapes (raw UTF-8): a line with no escape is
# the one whose payloads the typed decoder leaves raw (docs/format.md#raw-payloads).
unescaped_strings = st.sampled_from(
    [b'"a"', '"\u00e9"'.encode(), b'""', '"\U0001f680"'.encode(), b'" x"']
)


_record_kinds = st.sampled_from(["chunk", "text-chunks", "reasoning-chunks", "tool-call-chunks"])
_plain_chunks = st.sampled_from([b'{"type":"finish","reason":{"kind":"stop"}}', b'{"a":[1,2.5]}'])


@st.composite
def _record_fields(draw: st.DrawFn, strings: Any = good_strings) -> list[tuple[bytes, bytes]]:
    """One valid stream record as (key, value) pairs."""
    kind = draw(_record_kinds)
    fields = [(b"type", b'"%s"' % kind.encode())]
    if kind == "chunk":
        chunk = draw(_plain_chunks)
        return [*fields, (b"time", draw(good_numbers)), (b"chunk", chunk)]
    n = draw(st.integers(1, 4))
    gaps = draw(st.lists(_good_gaps, min_size=n - 1, max_size=n - 1))
    members = b"[" + b",".join(draw(st.lists(strings, min_size=n, max_size=n))) + b"]"
    fields += [(b"time0", draw(good_numbers)), (b"index", draw(good_numbers))]
    fields.append((b"dt", b"[" + b",".join(gaps) + b"]"))
    if kind == "tool-call-chunks":
        fields.append((b"id", b'"call-1"'))
        if draw(st.booleans()):
            fields.append((b"name", b'"bash"'))
        return [*fields, (b"args", members)]
    return [*fields, (b"texts", members)]


_FAULTS: dict[bytes, list[bytes]] = {
    b"dt": [b"[]", b"[1]", b"[1,1]", b"[1.5]", b"[1099511627777]", b"[9007199254740992]", b"[-1]"],
    b"chunk": [
        b'{"a":null}',
        b'{"a":1e300}',
        b"[]",
        b'{"a":18446744073709551616}',
        b'{"a":9007199254740992}',
        b'{"a":[9007199254740991,-9007199254740992]}',
    ],
    b"texts": [b"[]", b'[""]', b"[1]", b'["a",1]', b'["\\ud800"]', b"null"],
    b"args": [b"[]", b"[1]", b'["a",null]'],
    b"id": [b'""', b"1", b"null"],
    b"name": [b'""', b"1", b"null"],
}
_fault_values = {key: st.sampled_from(values) for key, values in _FAULTS.items()}
_other_faults = st.one_of(odd_numbers, string_literals, st.sampled_from([b"[]", b"{}", b"null"]))


def _faulty(draw: st.DrawFn, key: bytes) -> bytes:
    """A value that may break the rule for ``key``."""
    if key in _FAULTS and draw(st.integers(0, 5)):
        return draw(_fault_values[key])
    return draw(_other_faults)


_string_kinds = st.sampled_from([good_strings, unescaped_strings])
_records_of = {strings: _record_fields(strings) for strings in (good_strings, unescaped_strings)}
_event_types = st.sampled_from([b"assistant/message", b"assistant/attempt"])
_tails = st.sampled_from([b'"seq":3,"time":5,', b""])


@st.composite
def stream_lines(draw: st.DrawFn) -> bytes:
    """``assistant/message`` lines of valid records with at most one fault somewhere."""
    strings = draw(_string_kinds)
    records = [draw(_records_of[strings]) for _ in range(draw(st.integers(0, 3)))]
    data: list[tuple[bytes, bytes]] = []
    for key in (b"turn", b"step"):
        if draw(st.integers(0, 4)):
            data.append((key, draw(good_numbers)))
    if draw(st.booleans()):
        data.append((b"message", b'{"role":"assistant","content":[]}'))
    fault = draw(st.integers(0, 4))
    if fault and records:  # one record's value replaced, a key dropped, or a key added
        fields = records[draw(st.integers(0, len(records) - 1))]
        ruled = [i for i, (key, _) in enumerate(fields) if key in _FAULTS]
        use_ruled = bool(ruled) and draw(st.booleans())
        k = draw(st.sampled_from(ruled)) if use_ruled else draw(st.integers(0, len(fields) - 1))
        if fault == 1:
            fields[k] = (fields[k][0], _faulty(draw, fields[k][0]))
        elif fault == 2 and k:
            del fields[k]
        elif fault == 3:
            fields.append((b"extra", b"1"))
        else:
            fields[k] = (fields[k][0], _faulty(draw, fields[k][0]))
    elif fault == 4 and data:
        data[0] = (data[0][0], _faulty(draw, data[0][0]))
    elif fault == 3:
        data.append((b"other", b"true"))

    def obj(pairs: list[tuple[bytes, bytes]]) -> bytes:
        return b"{" + b",".join(b'"%s":%s' % (k, v) for k, v in pairs) + b"}"

    stream = b"[" + b",".join(obj(r) for r in records) + b"]"
    body = obj([(b"stream", stream), *data])
    event_type = draw(_event_types)
    tail = draw(_tails)
    return b'{"type":"' + event_type + b'",' + tail + b'"data":' + body + b"}\n"


@st.composite
def single_fault_rows(draw: st.DrawFn) -> bytes:
    """Packed row lines, valid but for at most one value, missing key or extra key."""
    tag = draw(_tags)
    n = draw(st.integers(1, 4))
    gaps = draw(st.lists(_good_gaps, min_size=n - 1, max_size=n - 1))
    strings = draw(_string_kinds)
    members = b"[" + b",".join(draw(st.lists(strings, min_size=n, max_size=n))) + b"]"
    data = [(b"turn", draw(good_numbers)), (b"step", b"1"), (b"index", b"0")]
    data.append((b"dt", b"[" + b",".join(gaps) + b"]"))
    if tag == "tool-call-chunks":
        data.append((b"id", b'"call-1"'))
        if draw(st.booleans()):
            data.append((b"name", b'"bash"'))
        data.append((b"args", members))
    else:
        data.append((b"texts", members))
    envelope = [(b"seq0", b"4"), (b"time0", draw(good_numbers))][: draw(st.integers(0, 2))]
    fault = draw(st.integers(0, 3))
    target = data if draw(st.booleans()) or not envelope else envelope
    ruled = [i for i, (key, _) in enumerate(target) if key in _FAULTS]
    use_ruled = bool(ruled) and draw(st.booleans())
    k = draw(st.sampled_from(ruled)) if use_ruled else draw(st.integers(0, len(target) - 1))
    if fault == 1:
        target[k] = (target[k][0], _faulty(draw, target[k][0]))
    elif fault == 2:
        del target[k]
    elif fault == 3:
        target.append((b"extra", b"1"))

    def obj(pairs: list[tuple[bytes, bytes]]) -> bytes:
        return b"{" + b",".join(b'"%s":%s' % (k, v) for k, v in pairs) + b"}"

    head = b'{"type":"%s",' % tag.encode()
    return head + obj([*envelope, (b"data", obj(data))])[1:] + b"\n"


def _typed_stream_outcome(decoded: Any) -> tuple[str | None, list[Any] | None]:
    """What the script builder makes of a typed stream line: ``(refusal, chunks)``.

    Decoded runs are checked at the load; a stream kept as text is read when the call is
    first served, as the plain reader reads it (docs/format.md#raw-payloads).
    """
    from pytest_dsh_replay._errors import DshReplayError
    from pytest_dsh_replay._format.vocabulary import chunk_problem
    from pytest_dsh_replay._scripts.builder import _stream_check
    from pytest_dsh_replay._scripts.entries import materialize_runs

    if decoded.stream is not None:
        try:
            entry, runs = _stream_check(decoded.stream, decoded.kind, "1/1", None, None, 0)()
        except DshReplayError as err:
            return str(err), None
        assert runs is None or materialize_runs(runs) == entry.chunks
        return None, entry.chunks
    for run in decoded.runs:
        if run.__class__ is dict and (problem := chunk_problem(run)) is not None:
            return f"{decoded.kind} stream: {problem}", None
    return None, materialize_runs(orjson.loads(orjson.dumps(decoded.runs)))


def _plain_stream_outcome(value: Any) -> tuple[str | None, list[Any] | None]:
    """The plain path's ``(refusal, chunks)``."""
    from pytest_dsh_replay._errors import SessionLogError
    from pytest_dsh_replay._format.stream_records import stream_runs
    from pytest_dsh_replay._format.vocabulary import chunk_problem
    from pytest_dsh_replay._scripts.entries import materialize_runs

    kind = value["type"]
    try:
        runs = stream_runs(value["data"]["stream"], event_type=kind, source=None, line=None)
    except SessionLogError as err:
        return err.reason, None
    for run in runs:
        if run.__class__ is dict and (problem := chunk_problem(run)) is not None:
            return f"{kind} stream: {problem}", None
    return None, materialize_runs(orjson.loads(orjson.dumps(runs)))


@settings(max_examples=250, deadline=None, derandomize=True)
@given(stream_lines())
def test_the_typed_decoder_accepts_a_stream_only_as_the_checks_do(line: bytes) -> None:
    """A stream line the typed decoder takes ends as the plain path ends it: the same
    chunks, or a refusal (at the load, or of a raw payload when it is first served)
    with the message the plain path gives."""
    from pytest_dsh_replay._format.json_values import ABSENT
    from pytest_dsh_replay._format.typed import StreamLine, decode_call_line

    decoded = decode_call_line(line)
    if decoded is None:
        return  # the plain path decides, with its messages
    assert isinstance(decoded, StreamLine)
    value = orjson.loads(line)
    data = value["data"]
    if decoded.stream is not None:  # kept as text: the line's stream, its finish last
        assert _same_value(orjson.loads(decoded.stream), data["stream"])
        assert _same_value(decoded.runs, [data["stream"][-1]["chunk"]])
    else:  # an empty stream: no records
        assert (decoded.runs, data["stream"]) == ([], [])
    refusal, chunks = _typed_stream_outcome(decoded)
    plain_refusal, plain_chunks = _plain_stream_outcome(value)
    assert refusal == plain_refusal
    assert _same_value(chunks, plain_chunks)
    assert decoded.kind == value["type"]
    for key in ("turn", "step"):
        found = getattr(decoded, key)
        assert (found is ABSENT) == (key not in data)
        if found is not ABSENT:
            assert _same_value(found, data[key])


@settings(max_examples=250, deadline=None, derandomize=True)
@given(st.one_of(row_lines(), single_fault_rows()))
def test_the_typed_decoder_accepts_a_row_only_as_the_checks_do(line: bytes) -> None:
    from pytest_dsh_replay._format.chunk_rows import PackedRow, validate_packed_row
    from pytest_dsh_replay._format.typed import ROW_LINE_PREFIXES, decode_call_line

    assume(line.startswith(ROW_LINE_PREFIXES))
    decoded = decode_call_line(line)
    if decoded is None:
        return  # the plain path decides, with its messages
    assert isinstance(decoded, PackedRow)
    value = orjson.loads(line)  # the plain path parses it ...
    numbered = "seq0" in value
    value.setdefault("seq0", 0)
    value.setdefault("time0", 0)
    row = validate_packed_row(value)  # ... and accepts it, with the same fields
    fields = ("turn", "step", "index", "payload", "id", "name", "has_name", "dt", "time0")
    assert all(_same_value(getattr(decoded, f), getattr(row, f)) for f in fields)
    assert decoded.chunk_type == row.chunk_type
    assert decoded.seq0 == (row.seq0 if numbered else None)


@pytest.mark.parametrize(
    "shared",
    ["0b9d4a52-6f0e-4c1e-9a57-000000000001", "p", "/work/proj/a.py", "createdAt", None],
)
def test_a_run_of_equal_chunk_events_still_counts_for_the_ids_it_holds(shared: Any) -> None:
    """Chunk events equal on both sides but holding an id are normalized, not passed over:
    the id's first appearance decides the placeholders of later events."""
    from pytest_dsh_replay._check.normalize import Normalizer, diff_logs
    from pytest_dsh_replay._format.events import SessionHeader

    def chunk(n: int, text: Any) -> dict[str, Any]:
        return {"type": "assistant/chunk", "seq": n, "time": 0, "data": {"chunk": {"t": text}}}

    run = [chunk(n, shared if n == 1 else f"w{n}") for n in range(4)]
    later = {"type": "user/message", "seq": 4, "time": 0, "data": {"id": _IDS[0]}}
    other = {**later, "data": {"id": _IDS[1]}}
    header = SessionHeader(id="p")

    def check(shortcut: bool) -> list[Any]:
        return [
            diff_logs(
                "session.jsonl",
                (header, [*run, later]),
                (header, [*run, actual]),
                expected_normalizer=Normalizer(session_ids=["p"], cwds=["/work/proj"]),
                actual_normalizer=Normalizer(session_ids=["p"], cwds=["/work/proj"]),
                shortcut=shortcut,
            )
            for actual in (later, other)
        ]

    assert check(True) == check(False)


def _expected_run(record: dict[str, Any]) -> Any:
    """A stream record's run as docs/format.md#stream-records derives it."""
    if record["type"] == "chunk":
        return record["chunk"]
    kind = {"text-chunks": "text-delta", "reasoning-chunks": "reasoning-delta"}
    if record["type"] in kind:
        return [kind[record["type"]], int(record["index"]), record["texts"]]
    tail = [record["id"], record["name"]] if "name" in record else [record["id"]]
    return ["tool-call-delta", int(record["index"]), record["args"], *tail]


def _one_record_path(record: Any) -> None:
    """The one accept path of a stream record: a refusal is worded by the rules checked one
    by one (their first broken rule), an acceptance breaks none and gives the run the
    rules derive."""
    from pytest_dsh_replay._format.stream_records import record_problem, stream_run

    run = stream_run(record)
    problem = record_problem(record)
    if run is None:
        assert problem
    else:
        assert problem == ""
        assert _same_value(run, _expected_run(record))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.one_of(row_lines(), single_fault_rows()), stream_lines())
def test_the_one_accept_path_refuses_only_what_a_rule_refuses(row: bytes, stream: bytes) -> None:
    """Packed rows and stream records each have one accept path; a refusal is worded by
    the rules in the dsh harness's order, and what is accepted breaks none of them, with
    the values the rules derive."""
    from pytest_dsh_replay._format.chunk_rows import packed_row, row_error

    try:
        value = orjson.loads(row)
    except orjson.JSONDecodeError:
        value = None
    if isinstance(value, dict) and value.get("type") in PACKED_TAGS:
        value.setdefault("seq0", 0)
        value.setdefault("time0", 0)
        accepted = packed_row(value)
        reason = row_error(value).reason
        if accepted is None:
            assert "not a row the format allows" not in reason, reason
        else:
            assert "not a row the format allows" in reason
            data = value["data"]
            payload = data.get("args", data.get("texts"))
            assert _same_value(
                [accepted.seq0, accepted.time0, accepted.dt, accepted.payload, accepted.turn],
                [int(value["seq0"]), int(value["time0"]), [int(d) for d in data["dt"]],
                 payload, data["turn"]],
            )  # fmt: skip
    try:
        event = orjson.loads(stream)
    except orjson.JSONDecodeError:
        return
    for record in event["data"]["stream"]:
        _one_record_path(record)


class _Text(str):
    pass


_run_kinds = st.sampled_from(["text-chunks", "reasoning-chunks", "tool-call-chunks"])
_gaps = st.sampled_from([0, 1, 27])
_odd_members = st.sampled_from([1, None, _Text("x"), b"x"])
_odd_ints = st.sampled_from(
    [-1, 1.0, 1.5, True, None, "1", 2**53, -(2**53), 2**53 - 1, 2**60, float("inf")]
)
_int_keys = st.sampled_from(["time0", "index"])


@st.composite
def stream_records(draw: st.DrawFn) -> dict[str, Any]:
    """Stream run records as parsed (or as code builds them), valid but for one fault."""
    kind = draw(_run_kinds)
    n = draw(st.integers(1, 4))
    members: list[Any] = [f"m{i}" for i in range(n)]
    record: dict[str, Any] = {"type": kind, "time0": 1_780_000_000_000, "index": 1}
    record["dt"] = [draw(_gaps) for _ in range(n - 1)]
    if kind == "tool-call-chunks":
        record["id"] = "call-1"
        if draw(st.booleans()):
            record["name"] = "bash"
        record["args"] = members
    else:
        record["texts"] = members
    fault = draw(st.integers(0, 7))
    if fault == 1:
        members[draw(st.integers(0, n - 1))] = draw(_odd_members)
    elif fault == 2 and n > 1:
        record["dt"][draw(st.integers(0, n - 2))] = draw(_odd_ints)
    elif fault == 3:
        record[draw(_int_keys)] = draw(_odd_ints)
    elif fault == 4:
        record["time0"] = 2**53 - 2  # member times leave the safe range
        record["dt"] = [5] * (n - 1)
    elif fault == 5:
        record[draw(st.sampled_from(sorted(record)))] = draw(st.sampled_from(["", 0, [], None]))
    elif fault == 6:
        del record[draw(st.sampled_from(sorted(record)))]
    elif fault == 7:
        record["extra"] = 1
    return record


@settings(max_examples=200, deadline=None, derandomize=True)
@given(stream_records())
def test_a_stream_record_is_accepted_only_by_the_rules(record: dict[str, Any]) -> None:
    _one_record_path(record)


_NAME_PARTS = ["session", ".", "jsonl", ".jsonl", ".zst", ".zstd", "v", "0", "1", "12", "\u0663"]
_NAME_PARTS += ["x", "\n"]


@given(st.lists(st.sampled_from(_NAME_PARTS), max_size=10).map("".join))
@settings(max_examples=500, deadline=None)
def test_a_log_name_reads_as_its_pattern_says(name: str) -> None:
    """parse_log_name (string operations) accepts exactly what LOG_NAME_PATTERN matches."""
    import re

    from pytest_dsh_replay._format.log_names import LOG_NAME_PATTERN, parse_log_name

    m = re.fullmatch(LOG_NAME_PATTERN, name)
    parsed = parse_log_name(name)
    if m is None:
        assert parsed is None
    else:
        assert parsed is not None
        child, version = m.group("child"), m.group("version")
        assert parsed.child == (None if child is None else int(child))
        assert parsed.version == (None if version is None else int(version))
        assert parsed.compressed == (m.group("zstd") is not None)


@pytest.mark.parametrize(
    "name",
    ["session.jsonl", "session.2.jsonl", "session.v4.jsonl", "session.12.v4.jsonl.zst",
     "session.3.jsonl.zstd", "session.v4.2.jsonl", "session.02.jsonl", "session.v0.jsonl",
     "session.jsonl.jsonl", "session..jsonl", "sessionv4.jsonl", "session.2.3.jsonl"],
)  # fmt: skip
def test_log_names_read_as_their_pattern_says(name: str) -> None:
    import re

    from pytest_dsh_replay._format.log_names import LOG_NAME_PATTERN, parse_log_name

    assert (re.fullmatch(LOG_NAME_PATTERN, name) is None) == (parse_log_name(name) is None)
