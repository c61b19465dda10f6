"""Normalization, redaction and the replayed-log comparison (see docs/checks.md#normalization)."""

from __future__ import annotations

import re
from typing import Any

import orjson
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.values import same_values

from pytest_dsh_replay._check.normalize import (
    _UUID_BYTES,
    LogDifference,
    Normalizer,
    describe_difference,
    diff_logs,
    tokenize_cwd,
)
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._format.redact import REDACTED, Redactor

UUID_A = "959ffdf5-03e2-465e-9482-009b704632dc"
UUID_B = "02b3a8dd-1d5e-4866-825f-5fbf5000a632"


def ev(kind: str, data: Any, seq: int = 0, time: int = 0) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "time": time, "data": data}


def test_ids_map_by_first_appearance_and_times_vanish() -> None:
    n = Normalizer(session_ids=["session-7"], cwds=["/tmp/run-1/work"])
    assert n.text(f"{UUID_A} then {UUID_B} then {UUID_A.upper()}") == (
        "{{id-1}} then {{id-2}} then {{id-1}}"
    )
    assert n.text("session-7 in /tmp/run-1/work/src, not /tmp/run-1/workshop") == (
        "{{id-3}} in {{cwd}}/src, not /tmp/run-1/workshop"
    )
    event = n.event(ev("hook/result", {"durationMs": 12, "createdAt": 5, "at": "x"}, 4, 99))
    assert event == {"type": "hook/result", "data": {"durationMs": 0, "createdAt": 0, "at": "x"}}


def test_short_non_uuid_ids_never_rewrite_prose() -> None:
    n = Normalizer(session_ids=["main", "a", "P", "session-12345"])
    assert n.text("Explain the main idea of a paper") == "Explain the main idea of a paper"
    assert n.text("main") == "{{id-1}}"
    assert n.text("P") == "{{id-2}}"
    assert n.text("child of session-12345, not session-123456") == (
        "child of {{id-3}}, not session-123456"
    )


def test_equal_behaviour_with_other_ids_compares_equal() -> None:
    def log(sid: str, msg: str) -> tuple[SessionHeader, list[dict[str, Any]]]:
        header = SessionHeader(id=sid, created_at=123, cwd="/w/" + sid)
        return header, [
            ev("user/message", {"id": msg, "text": f"see /w/{sid}/a.txt"}, 0, 1),
            ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish"}}, 1, 7),
        ]

    expected = log(UUID_A, UUID_B)
    actual = log("f" * 8 + UUID_A[8:], "0" * 8 + UUID_B[8:])
    assert (
        diff_logs(
            "session.jsonl",
            expected,
            actual,
            expected_normalizer=Normalizer(cwds=["/w/" + UUID_A]),
            actual_normalizer=Normalizer(cwds=["/w/" + actual[0].id]),
        )
        is None
    )


def compare(expected: list[Any], actual: list[Any]) -> LogDifference | None:
    header = SessionHeader(id="s")
    return diff_logs(
        "session.1.jsonl",
        (header, expected),
        (header, actual),
        expected_normalizer=Normalizer(),
        actual_normalizer=Normalizer(),
    )


def test_first_difference_names_event_type_and_path() -> None:
    common = [ev("turn/start", {"turn": 1}, 0)]
    diff = compare(
        [*common, ev("tool/result", {"message": {"content": [{"text": "Paris"}]}}, 1)],
        [*common, ev("tool/result", {"message": {"content": [{"text": "Lyon"}]}}, 1)],
    )
    assert diff == LogDifference(
        "session.1.jsonl",
        1,
        "tool/result",
        "$.data.message.content[0].text",
        "Paris",
        "Lyon",
        "event differs",
    )
    report = describe_difference(diff)
    assert report.splitlines() == [
        "session.1.jsonl: event #1 (tool/result): event differs",
        "  at $.data.message.content[0].text",
        '  recorded: "Paris"',
        '  replayed: "Lyon"',
    ]


def test_missing_keys_lengths_and_numbers() -> None:
    assert compare([ev("x", {"n": 1})], [ev("x", {"n": 1.0})]) is None
    diff = compare([ev("x", {"a": 1})], [ev("x", {"a": 1, "b": 2})])
    assert diff is not None
    assert (diff.path, diff.expected, diff.actual) == ("$.data.b", None, 2)
    diff = compare([ev("x", {})], [ev("x", {}), ev("y", {})])
    assert diff is not None
    assert "the replayed log is longer" in diff.note
    diff = compare([ev("x", {}), ev("y", {})], [ev("x", {})])
    assert diff is not None
    assert (diff.index, diff.event_type) == (1, "y")
    assert "the replayed log is shorter" in diff.note
    diff = compare([ev("x", {"l": [1, 2]})], [ev("x", {"l": [1]})])
    assert diff is not None
    assert diff.path == "$.data.l[1]"


def test_long_strings_are_shown_as_a_line_diff_and_reports_are_bounded() -> None:
    before = "\n".join(f"line {i}" for i in range(50))
    after = before.replace("line 25", "line twenty-five")
    diff = compare([ev("x", {"t": before})], [ev("x", {"t": after})])
    assert diff is not None
    report = describe_difference(diff)
    assert "  --- recorded" in report
    assert "  -line 25" in report
    assert "  +line twenty-five" in report
    huge = compare([ev("x", {"t": "a" * 100_000})], [ev("x", {"t": "b" * 100_000})])
    assert huge is not None
    assert len(describe_difference(huge)) <= 2000


def test_a_change_near_the_end_of_a_long_log_is_found() -> None:
    events = [
        ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"text": str(i)}}, i)
        for i in range(10_000)
    ]
    changed = [dict(e) for e in events]
    changed[9_990] = ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"text": "x"}}, 9_990)
    diff = compare(events, changed)
    assert diff is not None
    assert (diff.index, diff.path) == (9_990, "$.data.chunk.text")


def test_header_differences_are_reported() -> None:
    diff = diff_logs(
        "session.1.jsonl",
        (SessionHeader(id="a", seed_length=4, parent_session="p"), []),
        (SessionHeader(id="b", seed_length=5, parent_session="p"), []),
        expected_normalizer=Normalizer(session_ids=["a", "p"]),
        actual_normalizer=Normalizer(session_ids=["b", "p"]),
    )
    assert diff is not None
    assert (diff.index, diff.path, diff.expected, diff.actual) == (None, "$.seedLength", 4, 5)
    assert describe_difference(diff).startswith("session.1.jsonl: header: header differs")


def test_redaction_rules() -> None:
    redactor = Redactor(literals=("hunter2-long-secret", "abc"))
    value = {
        "k": "key sk-proj-abcdefghijklmnopqrstuvwxyz0123 end",
        "h": "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload",
        "aws": "AKIAIOSFODNN7EXAMPLE",
        "gh": "ghp_" + "x" * 36,
        "lit": "pw=hunter2-long-secret; abc stays",
        "ok": "sk-short, skeleton, a normal sentence",
        "n": 42,
    }
    out = redactor.redact(value)
    assert out == {
        "k": f"key {REDACTED} end",
        "h": f"Authorization: {REDACTED}",
        "aws": REDACTED,
        "gh": REDACTED,
        "lit": f"pw={REDACTED}; abc stays",
        "ok": "sk-short, skeleton, a normal sentence",
        "n": 42,
    }
    assert [path for path, _ in redactor.find(value)] == ["$.k", "$.h", "$.aws", "$.gh", "$.lit"]


def test_secrets_split_across_deltas_are_redacted() -> None:
    redactor = Redactor()
    pieces = ["key: sk-abc", "defghijklmno", "pqrstuvwxyz!", " done"]
    events = [
        ev(
            "assistant/chunk",
            {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": p}},
            i,
        )
        for i, p in enumerate(pieces)
    ]
    out = redactor.redact_events(events)
    texts = [e["data"]["chunk"]["text"] for e in out]
    # Each delta keeps its place; the secret is one [REDACTED] where it starts.
    assert texts == [f"key: {REDACTED}", "", "!", " done"]
    assert "abc" not in "".join(texts)
    assert [e["data"]["chunk"]["text"] for e in events] == pieces  # inputs untouched
    harmless = redactor.redact_events(events[3:])
    assert harmless == events[3:]


def test_tokenize_cwd_only_replaces_whole_path_prefixes() -> None:
    value = {"p": "/home/me/proj/a.py and /home/me/project", "l": ["/home/me/proj"]}
    assert tokenize_cwd(value, "/home/me/proj") == {
        "p": "{{cwd}}/a.py and /home/me/project",
        "l": ["{{cwd}}"],
    }
    assert tokenize_cwd(value, None) is value


_UUID_TEXT = "0f8fad5b-d9cb-469f-a165-70867728950e"
# Pieces that make texts with UUIDs, near-UUIDs, ids, working directories and the keys
# the normalizer zeroes, alone, inside text and side by side.
_PIECES = [
    _UUID_TEXT,
    _UUID_TEXT.upper(),
    _UUID_TEXT[:-1],
    "-ab12-cd34-ef56-",
    "x-1234-",
    "/work/dir",
    "/work/dir/x",
    "/work/dirt",
    "createdAt",
    '"createdAt"',
    "main-session-7",
    "xmain-session-7",
    "session-7",
    "-",
    " ",
    ".",
]
_TEXTS = st.lists(
    st.sampled_from(_PIECES) | st.text(alphabet='0123456789abcdefABCDEF-/." ', max_size=12),
    max_size=8,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_untouched_finds_what_one_search_for_every_needle_finds(value: str) -> None:
    normalizer = Normalizer(session_ids=["main-session-7"], cwds=["/work/dir"])
    text = orjson.dumps(value)
    needles = [b"main-session-7", b"/work/dir", b'"createdAt"', b'"durationMs"']
    combined = re.compile(b"|".join([_UUID_BYTES.pattern, *(re.escape(n) for n in needles)]))
    assert normalizer.untouched(text) is (combined.search(text) is None)


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_text_normalizes_as_the_substitutions_alone_do(text: str) -> None:
    ids = ["main-session-7", "session-7"]
    assume(text not in ids)  # a whole id is looked up, not searched for
    fast, plain = (Normalizer(session_ids=ids, cwds=["/work/dir"]) for _ in range(2))
    cwd_rx, id_rx = plain._cwd_rx, plain._id_rx
    assert cwd_rx is not None
    assert fast.text(text) == id_rx.sub(plain._id, cwd_rx.sub("{{cwd}}", text))


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-3, max_value=3)
    | st.sampled_from([0.0, -0.0, 1.0, 1.5, float("nan"), float("inf")])
    | st.sampled_from(["", "a", "1", "true", "\ud800"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(_VALUES, _VALUES)
def test_equal_text_is_a_shortcut_of_the_value_comparison(left: Any, right: Any) -> None:
    from pytest_dsh_replay._check.normalize import _first_difference, _same_text

    if _same_text(left, right):
        assert _first_difference(left, right, "$") is None


class _Text(str):
    pass


class _Object(dict):  # type: ignore[type-arg]
    pass


class _Array(list):  # type: ignore[type-arg]
    pass


def _by_isinstance(n: Normalizer, value: Any, key: str | None = None) -> Any:
    """Normalizer.value as it is specified: by ``isinstance``, every value its own call."""
    if isinstance(value, str):
        return n._placeholder(value) if key == "responseId" and value else n.text(value)
    if isinstance(value, dict):
        return {k: _by_isinstance(n, v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_by_isinstance(n, v) for v in value]
    zeroed = key in ("createdAt", "durationMs")
    if zeroed and isinstance(value, int | float) and not isinstance(value, bool):
        return 0
    return value


_LEAVES = (
    _SCALARS
    | _TEXTS
    | _TEXTS.map(_Text)
    | st.sampled_from([UUID_A, UUID_B.upper(), "run-42", (1, UUID_A), 2**70, 7.0])
)
_KEYS = st.sampled_from(["a", "text", "createdAt", "durationMs", "responseId", "id"])
_TREES = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(_Array)
        | st.dictionaries(_KEYS, inner, max_size=4)
        | st.dictionaries(_KEYS, inner, max_size=3).map(_Object)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_TREES, st.none() | _KEYS), min_size=1, max_size=4))
def test_value_normalizes_as_its_isinstance_specification(values: list[Any]) -> None:
    # The fast paths (plain types by class, scalars kept in place) give the same values
    # of the same types, and assign the same placeholders in the same order.
    fast, plain = (
        Normalizer(session_ids=["run-42", "main-session-7"], cwds=["/work/dir"]) for _ in range(2)
    )
    for value, key in values:
        assert same_values(fast.value(value, key), _by_isinstance(plain, value, key))
    assert fast._ids == plain._ids
