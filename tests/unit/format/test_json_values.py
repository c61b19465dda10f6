"""The lossless-JSON rules of ``_format.json_values``: numbers, whole values, the sentinel."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay._errors import SessionStoreError
from pytest_dsh_replay._format.json_values import (
    ABSENT,
    MAX_SAFE_INTEGER,
    Absent,
    is_count,
    is_lossless,
    js_json,
    js_string,
    json_copy,
    plain_json,
    surely_lossless,
)


class _Kind(str, enum.Enum):
    A = "a"


class _Level(enum.IntEnum):
    ONE = 1


_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([-0.0, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, _Kind.A, _Level.ONE]),
    st.text(UTF8, max_size=4),
    st.sampled_from([b"bytes", (1, "x"), frozenset({1}), object]),
)
_values = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(UTF8, max_size=3), st.integers(0, 3)), inner, max_size=3),
    ),
    max_leaves=10,
)


def _conversation_plain(value: Any) -> Any:
    """The conversion the conversation log used before plain_json (commit efc29c7)."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -(2**53 - 1) <= value <= 2**53 - 1 else str(value)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, Mapping):
        return {str(k): _conversation_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_conversation_plain(v) for v in value]
    return str(value)


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) or (a != a and b != b)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_values)
def test_plain_json_is_what_the_conversation_log_made_of_a_value(value: Any) -> None:
    """The request view's lenient conversion is the one the conversation log had."""
    assert _same(plain_json(value), _conversation_plain(value))


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_values)
def test_surely_lossless_implies_lossless(value: Any) -> None:
    if surely_lossless(value):
        assert is_lossless(value)


@pytest.mark.parametrize(
    ("value", "lossless"),
    [
        ({"a": [1, 2.5, "x", None, True]}, True),
        ({"a": [MAX_SAFE_INTEGER]}, True),
        ({"a": [MAX_SAFE_INTEGER + 1]}, False),
        ([{"b": math.inf}], False),
        ([math.nan], False),
        ({"a": -(2**60)}, False),
    ],
)
def test_is_lossless_refuses_unsafe_integers_and_non_finite_floats(
    value: Any, lossless: bool
) -> None:
    assert is_lossless(value) is lossless


def test_json_copy_names_the_path_of_what_it_refuses() -> None:
    with pytest.raises(SessionStoreError, match=r"^data\.a\[1\] is not lossless JSON: -0\.0"):
        json_copy({"a": [1, -0.0]}, "data")
    assert json_copy({"k": _Kind.A, "n": [_Level.ONE]}, "data") == {"k": "a", "n": [1]}


@pytest.mark.parametrize(
    ("value", "count"),
    [(0, True), (3.0, True), (MAX_SAFE_INTEGER, True), (-0.0, False), (-1, False),
     (1.5, False), (True, False), (MAX_SAFE_INTEGER + 1, False), ("1", False)],
)  # fmt: skip
def test_is_count(value: object, count: bool) -> None:
    assert is_count(value) is count


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "null"), (True, "true"), (3.0, "3"), (1.5, "1.5"), ("x", "x"), ({}, "[object Object]"),
     ([1, None, [2, [3, None]], "a"], "1,,2,3,,a"), ([], "")],
)  # fmt: skip
def test_js_string_prints_as_javascript_string_does(value: Any, text: str) -> None:
    assert js_string(value) == text


def test_js_string_takes_any_nesting_depth() -> None:
    deep: list[Any] = [1]
    for _ in range(5000):
        deep = [deep]
    assert js_string(deep) == "1"


def test_the_absent_sentinel() -> None:
    assert repr(ABSENT) == "ABSENT"
    assert ABSENT is Absent.ABSENT
    assert js_json(ABSENT) == "undefined"
    assert js_json("x") == '"x"'

    def name(value: str | Absent) -> str:
        if value is ABSENT:
            return "-"
        return value.upper()  # narrowed to str: mypy checks this line

    assert name(ABSENT) == "-"
    assert name("a") == "A"
