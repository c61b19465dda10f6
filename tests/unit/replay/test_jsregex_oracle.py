"""The JavaScript-pattern translation agrees with an ECMAScript regex engine.

``regress`` (an ECMAScript regular-expression engine, a test-only dependency) is the
oracle: for generated patterns and texts, the last match that
:func:`~pytest_dsh_replay._replay.placeholders.find_last_match` finds through the translated
pattern equals the last match regress finds with JavaScript's global matching. The
product keeps its own bounded search; regress only checks it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_dsh_replay._replay.placeholders import find_last_match

regress = pytest.importorskip("regress", reason="regress (ECMAScript regex oracle) not installed")

ALPHABET = "ab1 _-\n\r.Z\u00e9\u2028"

atoms = st.sampled_from(
    [
        "a",
        "b",
        "1",
        " ",
        "-",
        r"\.",
        ".",
        r"\d",
        r"\D",
        r"\w",
        r"\W",
        r"\s",
        r"\S",
        "[ab]",
        "[^a]",
        "[a-z1]",
        r"[\d_]",
        "[]",
        "[^]",
        r"\u00e9",
        r"\x41",
        r"\n",
    ]
)
quantifiers = st.sampled_from(["", "", "*", "+", "?", "{2}", "{1,2}", "{0,}", "*?", "+?"])
anchors = st.sampled_from(["", "", "^", "$", r"\b", r"\B"])


def _pattern(depth: int) -> st.SearchStrategy[str]:
    piece = st.builds(lambda a, q: a + q, atoms, quantifiers) | anchors
    if depth > 0:
        inner = st.deferred(lambda: _pattern(depth - 1))
        group = st.builds(
            lambda kind, body, q: kind + body + ")" + q,
            st.sampled_from(["(", "(?:", "(?<g>", "(?=", "(?!"]),
            inner,
            st.sampled_from(["", "", "*", "?", "+"]),
        )
        piece = piece | group
    seq = st.lists(piece, min_size=1, max_size=4).map("".join)
    return st.lists(seq, min_size=1, max_size=2).map("|".join)


def _has_plain_group_one(pattern: str) -> bool:
    """Whether group 1 exists (a capturing group opens somewhere)."""
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] == "]" else i + 1)
            i = len(pattern) if j < 0 else j + 1
            continue
        opens = pattern[i] == "(" and pattern[i + 1 : i + 4] not in ("?<=", "?<!")
        if opens and (pattern[i + 1 : i + 2] != "?" or pattern[i + 1 : i + 3] == "?<"):
            return True
        i += 1
    return False


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(pattern=_pattern(2), text=st.text(alphabet=ALPHABET, max_size=24))
def test_the_translation_finds_the_last_match_javascript_finds(pattern: str, text: str) -> None:
    if pattern.count("(?<g>") > 1:
        return  # duplicate group names: newer engines accept them, Node 20 does not
    try:
        compiled = regress.Regex(pattern)
    except regress.RegressError:
        return  # not a pattern JavaScript accepts: nothing to compare
    last: Any = None
    for match in compiled.find_iter(text):
        last = match
    expected: str | None = None
    if last is not None:
        group = last.group(1) if _has_plain_group_one(pattern) else None
        span = group if group is not None else last.group(0)
        expected = text.encode()[span].decode()  # regress reports UTF-8 byte ranges
    assert find_last_match(pattern, text) == expected, (pattern, text)
