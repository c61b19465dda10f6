"""Surrogate repair of streams and requests; visible control characters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.values import UTF8

from pytest_dsh_replay._format.text import TextSafeModel, repair_surrogates, text_safe, visible
from pytest_dsh_replay._identity.options import NO_OPTIONS, CallOptions, LiveModelAdapter


def delta(text: str, index: int = 0, kind: str = "text-delta") -> dict[str, Any]:
    field = "argumentsDelta" if kind == "tool-call-delta" else "text"
    return {"type": kind, "index": index, field: text}


class Scripted:
    def __init__(self, chunks: list[dict[str, Any]]):
        self.chunks = chunks
        self.requests: list[Any] = []

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.requests.append(request)
        yield from self.chunks


class ScriptedAsync(Scripted):
    async def astream(self, request: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        self.requests.append(request)
        for chunk in self.chunks:
            yield chunk


def safe(live: object) -> TextSafeModel[CallOptions]:
    """The recorder's wrapping of a live model: text safety over the live-model adapter."""
    return TextSafeModel(LiveModelAdapter(live))


def test_a_split_pair_is_joined_in_the_later_delta() -> None:
    chunks = [delta("a\ud83d"), delta("\ude00b"), {"type": "finish"}]
    out = list(safe(Scripted(chunks)).stream_call({}, NO_OPTIONS))
    assert out == [delta("a"), delta("\U0001f600b"), {"type": "finish"}]


def test_lone_surrogates_become_the_replacement_character() -> None:
    chunks = [
        delta("x\ud83d"),  # the next chunk does not continue it
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "y\udfff"}},
        delta("a\ud83d", index=1),  # continued by another block's delta: not a pair
        delta("\ude00", index=2),
        delta("end\ud800"),  # held at the end of the stream
    ]
    out = list(safe(Scripted(chunks)).stream_call({}, NO_OPTIONS))
    assert [orjson.dumps(c) for c in out]  # every chunk is valid UTF-8 JSON now
    assert out == [
        delta("x\ufffd"),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "y\ufffd"}},
        delta("a\ufffd", index=1),
        delta("\ufffd", index=2),
        delta("end\ufffd"),
    ]


def test_requests_are_repaired_and_clean_values_are_not_copied() -> None:
    live = Scripted([{"type": "finish"}])
    clean = {"messages": [{"role": "user", "content": "héllo ✓ \U0001f600"}]}
    list(safe(live).stream_call(clean, NO_OPTIONS))
    assert live.requests[0] is clean
    dirty = {"messages": [{"role": "user", "content": "a\udfff", "k\ud800": ["\ud83d\ude00"]}]}
    list(safe(live).stream_call(dirty, NO_OPTIONS))
    assert live.requests[1] == {
        "messages": [{"role": "user", "content": "a\ufffd", "k\ufffd": ["\U0001f600"]}]
    }
    assert dirty["messages"][0]["content"] == "a\udfff"  # the caller's value is untouched
    assert text_safe(clean) is clean


def test_async_streams_are_repaired_with_or_without_the_wrapped_astream() -> None:
    chunks = [delta("a\ud83d"), delta("\ude00b")]
    with_astream = ScriptedAsync(chunks)
    without = Scripted(chunks)

    async def collect(model: object) -> list[dict[str, Any]]:
        return [c async for c in safe(model).astream_call({}, NO_OPTIONS)]

    assert asyncio.run(collect(with_astream)) == [delta("a"), delta("\U0001f600b")]
    assert asyncio.run(collect(without)) == [delta("a"), delta("\U0001f600b")]
    assert with_astream.requests == [{}]
    assert without.requests == [{}]


def test_closing_the_stream_early_closes_the_wrapped_stream() -> None:
    closed: list[bool] = []

    class Live:
        def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
            try:
                yield delta("a")
                yield delta("b")
            finally:
                closed.append(True)

    stream = safe(Live()).stream_call({}, NO_OPTIONS)
    assert isinstance(stream, Generator)
    assert next(stream) == delta("a")
    stream.close()
    assert closed == [True]


@settings(max_examples=200, deadline=None)
@given(st.text(UTF8, max_size=20), st.lists(st.integers(0, 40), max_size=5))
def test_any_utf16_split_reassembles_the_text(text: str, cuts: list[int]) -> None:
    units = text.encode("utf-16-le")
    points = sorted({2 * min(c, len(units) // 2) for c in cuts})
    pieces = [
        units[a:b].decode("utf-16-le", "surrogatepass")
        for a, b in zip([0, *points], [*points, len(units)], strict=True)
    ]
    out = list(safe(Scripted([delta(p) for p in pieces])).stream_call({}, NO_OPTIONS))
    assert len(out) == len(pieces)
    assert "".join(c["text"] for c in out) == repair_surrogates(text) == text


def test_visible_shows_what_a_text_file_or_terminal_would_lose() -> None:
    assert visible("a\r\nb\tc\n") == "a\u240d\nb\tc\n"
    assert visible("\x00\x1b[1m\x7f") == "\u2400\u241b[1m\u2421"
    assert visible("x\u2028y\u2029z\ud83d") == "x<U+2028>y<U+2029>z<U+D83D>"
    plain = "nothing to show: é ✓ \U0001f600"
    assert visible(plain) == plain


@pytest.mark.parametrize("code", range(0x20))
def test_every_c0_control_is_shown_or_kept(code: int) -> None:
    ch = chr(code)
    shown = visible(f"a{ch}b")
    if ch in "\n\t":
        assert shown == f"a{ch}b"
    else:
        assert shown == f"a{chr(0x2400 + code)}b"
        assert shown.splitlines() == [shown]  # never a line break of its own


def test_literal_control_pictures_and_escapes_do_not_read_as_controls() -> None:
    # A real CR and a literal "␍" used to render alike; so did U+2028 and "<U+2028>".
    assert visible("a\rb") != visible("a\u240db")
    assert visible("a\u240db") == "a<U+240D>b"
    assert visible("\u2400\u2421") == "<U+2400><U+2421>"
    assert visible("x\u2028") != visible("x<U+2028>")
    assert visible("x<U+2028>") == "x<U+003C>U+2028>"
    assert visible("a < b, <U, U+1") == "a < b, <U, U+1"  # only "<U+" is escaped


def _unshow(shown: str) -> str:
    """The inverse of ``visible``, read left to right: an escape, a picture, or text."""
    pictures = {chr(0x2400 + c): chr(c) for c in range(0x20)} | {"\u2421": "\x7f"}
    out: list[str] = []
    i = 0
    while i < len(shown):
        if shown.startswith("<U+", i):
            end = shown.index(">", i)
            out.append(chr(int(shown[i + 3 : end], 16)))
            i = end + 1
        else:
            out.append(pictures.get(shown[i], shown[i]))
            i += 1
    return "".join(out)


_TRICKY = st.text(
    alphabet=st.sampled_from(
        list("\r\n\t\x00\x1b\x7f<>U+024DAa \u2028\u2029\u2400\u240d\u2421\u2422\ud83d\udfff")
    ),
    max_size=24,
)


@settings(max_examples=500, deadline=None)
@given(_TRICKY)
def test_visible_can_be_read_back(text: str) -> None:
    shown = visible(text)
    assert _unshow(shown) == text  # so distinct texts never render alike
    assert "\r" not in shown
    assert "\x1b" not in shown


@settings(max_examples=500, deadline=None)
@given(_TRICKY, st.data())
def test_distinct_texts_render_distinctly(a: str, data: st.DataObject) -> None:
    # The other text is another draw, or what ``a`` renders to: a text written the way
    # a transcript shows ``a`` must not render the same as ``a``.
    b = data.draw(st.one_of(st.just(visible(a)), _TRICKY))
    assert (visible(a) == visible(b)) == (a == b)


class _Str(str):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


_PIECES = st.sampled_from(["a", "é", "\U0001f600", "\ud83d", "\ude00", "\ud800", "x\udfff"])
_STRINGS = st.lists(_PIECES, max_size=4).map("".join)
_LEAVES = (
    _STRINGS
    | _STRINGS.map(_Str)
    | st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.sampled_from([1.5, float("nan"), -0.0])
)
_JSONISH = st.recursive(
    _LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(_STRINGS, inner, max_size=3)
        | st.dictionaries(_STRINGS, inner, max_size=2).map(_Dict)
        | st.dictionaries(st.integers(0, 3), inner, max_size=2)
    ),
    max_leaves=10,
)


@settings(max_examples=400, deadline=None)
@given(_JSONISH)
def test_text_safe_gives_what_the_walk_gives(value: Any) -> None:
    # The serializer's shortcut returns the value itself exactly when the walk would.
    from pytest_dsh_replay._format.text import _text_safe_walk

    fast, walked = text_safe(value), _text_safe_walk(value)
    assert (fast is value) is (walked is value)
    assert repr(fast) == repr(walked)  # nan and -0.0 included


class _Shown(dict):  # type: ignore[type-arg]
    def items(self) -> Any:  # what the walk reads, not what the dict holds
        return [("k", "\ud800")]


def test_text_safe_walks_subclasses_the_serializer_would_read_differently() -> None:
    assert text_safe([_Shown()]) == [{"k": "\ufffd"}]


def test_text_safe_does_not_hand_dataclasses_to_the_serializer() -> None:
    # orjson 3.13 crashes the interpreter on a slots dataclass with an unset field; the
    # shortcut leaves dataclasses to the walk (which keeps them as they are).
    import subprocess
    import sys

    code = (
        "from dataclasses import dataclass, field\n"
        "from pytest_dsh_replay._format.text import text_safe\n"
        "@dataclass(slots=True)\n"
        "class C:\n"
        "    a: int = field(init=False)\n"
        "value = {'messages': [], 'metadata': C()}\n"
        "assert text_safe(value) is value\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr
