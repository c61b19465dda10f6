r"""Text that every path can carry: surrogates repaired, control characters made visible.

What each kind of character does on each path (the README's *Limits* section says the
same for users):

- **U+0000-U+001F** (C0 controls: NUL, ``\t``, ``\n``, ``\r``, ESC, ...) and
  **U+2028/U+2029** (line and paragraph separators) are ordinary text: recorded exactly
  (JSON escapes the C0 controls, the separators are written as they are), replayed
  exactly, checked like any text. Only a transcript (Markdown, stored by syrupy as a
  text file whose reader turns ``\r`` and ``\r\n`` into ``\n``) shows them as
  visible symbols (`visible`), so a transcript always matches its own snapshot.
- **Surrogates** (U+D800-U+DFFF) are not characters: UTF-8 files and JSON writers
  cannot hold them alone. A high and a low surrogate that a stream split across two
  deltas of one block (as UTF-16 based servers do) are joined again in the later delta
  (`TextSafeModel`), so the code under test receives the character whole, and a
  recording holds valid UTF-8. A lone surrogate anywhere in a chunk or a request
  becomes U+FFFD (the replacement character) before the recorder sees it, and a
  transcript shows any it still meets as ``<U+D83D>``.
- **Control pictures** (U+2400-U+2421, ``␍``) and a ``<`` that begins ``<U+`` are
  ordinary text everywhere; a transcript escapes them (``<U+240D>``, ``<U+003C>U+``) so
  that they never read as a shown control character or escape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from typing import Any, Final, Generic, Protocol, TypeVar

import orjson

from .events import StreamChunk
from .json_values import PLAIN_ONLY, holds_lone_surrogate

__all__ = [
    "BLOCK_SEPARATOR",
    "TextSafeModel",
    "join_blocks",
    "join_split_surrogates",
    "repair_surrogates",
    "text_safe",
    "visible",
]

BLOCK_SEPARATOR: Final = " ¦ "
"""Shown between the text blocks of one quoted message.

See [docs/limits.md#block-separator](../limits.md#block-separator).

Messages are compared with their blocks joined without a separator, as on the wire; a
message or ``dsh-replay show`` that quotes several blocks puts this between them, so a
reader sees where one block ends and the next begins.
"""


def join_blocks(texts: Iterable[str]) -> str:
    """``texts`` (the text blocks of one message) joined with `BLOCK_SEPARATOR`."""
    return BLOCK_SEPARATOR.join(texts)


_DELTA_FIELDS: Final = {
    "text-delta": "text",
    "reasoning-delta": "text",
    "tool-call-delta": "argumentsDelta",
}


def repair_surrogates(text: str) -> str:
    r"""Join surrogate pairs into their characters and replace lone surrogates by U+FFFD.

    Args:
        text: A string (for example one decoded from JSON with ``\ud83d`` escapes).

    Returns:
        ``text`` itself when it holds no surrogate, else a string that encodes to UTF-8.
    """
    if not holds_lone_surrogate(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def text_safe(value: Any) -> Any:
    """A JSON value with `repair_surrogates` applied to every string and key.

    Returns:
        ``value`` itself when nothing changed (no copy is made), else a copy.
    """
    if value.__class__ is dict or value.__class__ is list:
        # The common case in C: the serializer refuses a surrogate in any string or key
        # it meets, and it meets every one the walk below would repair. It refuses
        # subclasses, datetimes and dataclasses too (those are walked).
        try:
            orjson.dumps(value, option=PLAIN_ONLY)
        except TypeError:  # orjson.JSONEncodeError included: walk to find out
            pass
        else:
            return value
    return _text_safe_walk(value)


class _Container:
    """One dict, list or tuple on `_text_safe_walk`'s stack: its items as walked."""

    __slots__ = ("items", "keys", "out", "pairs", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.pairs: list[tuple[object, object]] | None = None
        self.keys: list[object] = []
        if isinstance(value, dict):
            pairs = self.pairs = list(value.items())  # what a subclass shows, read once
            self.keys = [repair_surrogates(k) if isinstance(k, str) else k for k, _ in pairs]
            self.items: Iterator[object] = (v for _, v in pairs)
        else:
            self.items = iter(value)
        self.out: list[object] = []

    def result(self) -> Any:
        """The container with its walked items: itself when none changed, else a copy."""
        value, out, pairs = self.value, self.out, self.pairs
        if pairs is None:
            same = all(a is b for a, b in zip(out, value, strict=True))
            return value if same else out
        same = all(
            key is k and item is v for key, item, (k, v) in zip(self.keys, out, pairs, strict=True)
        )
        return value if same else dict(zip(self.keys, out, strict=True))


_END: Final = object()


def _text_safe_walk(value: Any) -> Any:
    """`text_safe`, value by value, without recursion (any depth; a cycle is kept).

    A container met again inside itself (a cyclic in-process object, which no JSON
    value is) is left as it is there rather than walked for ever.
    """
    if isinstance(value, str):
        return repair_surrogates(value)
    if not isinstance(value, dict | list | tuple):
        return value
    stack = [_Container(value)]
    open_ids = {id(value)}
    while True:
        top = stack[-1]
        item = next(top.items, _END)
        if item is _END:
            stack.pop()
            open_ids.discard(id(top.value))
            done = top.result()
            if not stack:
                return done
            stack[-1].out.append(done)
        elif isinstance(item, str):
            top.out.append(repair_surrogates(item))
        elif isinstance(item, dict | list | tuple) and id(item) not in open_ids:
            stack.append(_Container(item))
            open_ids.add(id(item))
        else:
            top.out.append(item)


def _ends_high(text: str) -> bool:
    return bool(text) and "\ud800" <= text[-1] <= "\udbff"


def _starts_low(text: str) -> bool:
    return bool(text) and "\udc00" <= text[0] <= "\udfff"


class _Joiner:
    """One call's chunks: a delta ending in a high surrogate waits for the next chunk."""

    def __init__(self) -> None:
        self.held: StreamChunk | None = None

    def _key(self, chunk: StreamChunk) -> tuple[Any, Any] | None:
        kind = chunk.get("type")
        field = _DELTA_FIELDS.get(kind) if isinstance(kind, str) else None
        if field is None or not isinstance(chunk.get(field), str):
            return None
        return kind, chunk.get("index")

    def feed(self, chunk: StreamChunk) -> list[StreamChunk]:
        """The chunks to hand on now, in order, after ``chunk`` arrived."""
        out: list[StreamChunk] = []
        key = self._key(chunk) if isinstance(chunk, dict) else None
        if self.held is not None:
            held, self.held = self.held, None
            field = _DELTA_FIELDS[held["type"]]
            if (
                key is not None
                and key == self._key(held)
                and _starts_low(chunk[_DELTA_FIELDS[key[0]]])
            ):
                chunk = {**chunk, field: held[field][-1] + chunk[field]}
                held = {**held, field: held[field][:-1]}
            out.append(text_safe(held))
        if key is not None and _ends_high(chunk[_DELTA_FIELDS[key[0]]]):
            self.held = chunk
            return out
        out.append(text_safe(chunk))
        return out

    def flush(self) -> list[StreamChunk]:
        """What is still held when the stream ends (its surrogate becomes U+FFFD)."""
        held, self.held = self.held, None
        return [] if held is None else [text_safe(held)]


def join_split_surrogates(chunks: list[StreamChunk]) -> list[StreamChunk]:
    """One call's chunks with valid Unicode text only.

    A surrogate pair split across two consecutive deltas of one block is joined into the
    later delta; a lone surrogate anywhere becomes U+FFFD (as the recorder does live).
    """
    joiner = _Joiner()
    out: list[StreamChunk] = []
    for chunk in chunks:
        out.extend(joiner.feed(chunk))
    out.extend(joiner.flush())
    return out


_Options = TypeVar("_Options")
_TakesOptions = TypeVar("_TakesOptions", contravariant=True)


class OptionsStreaming(Protocol[_TakesOptions]):
    """A model that takes a call's options as one value (``_identity.options.OptionsModel``)."""

    def stream_call(
        self, request: Mapping[str, object], options: _TakesOptions
    ) -> Iterable[StreamChunk]:
        """Stream the chunks of one call."""
        ...

    def astream_call(
        self, request: Mapping[str, object], options: _TakesOptions
    ) -> AsyncIterator[StreamChunk]:
        """The async form of `stream_call`."""
        ...


class TextSafeModel(Generic[_Options]):
    """Wraps a model so that requests and chunks hold only valid Unicode text.

    Requests are passed on with lone surrogates replaced (`text_safe`); chunks
    come back with surrogate pairs that were split across two deltas joined in the later
    delta and every other lone surrogate replaced by U+FFFD. A chunk is delayed only
    when its delta ends with a high surrogate (until the next chunk shows whether the
    pair continues). Everything else is passed through unchanged, the same objects; the
    call's options go to the wrapped model as they are.

    Args:
        model: A model with ``stream_call(request, options)`` and
            ``astream_call(request, options)``.
    """

    __slots__ = ("model",)

    def __init__(self, model: OptionsStreaming[_Options]):
        self.model = model

    def stream_call(
        self, request: Mapping[str, object], options: _Options
    ) -> Iterator[StreamChunk]:
        """The wrapped model's chunks for ``request``, text made safe."""
        return self._relay(iter(self.model.stream_call(text_safe(request), options)))

    def _relay(self, upstream: Iterator[StreamChunk]) -> Iterator[StreamChunk]:
        joiner = _Joiner()
        try:
            for chunk in upstream:
                yield from joiner.feed(chunk)
            yield from joiner.flush()
        finally:
            close = getattr(upstream, "close", None)
            if close is not None:
                close()

    def astream_call(
        self, request: Mapping[str, object], options: _Options
    ) -> AsyncIterator[StreamChunk]:
        """The async form of `stream_call`."""
        return self._arelay(self.model.astream_call(text_safe(request), options))

    async def _arelay(self, upstream: AsyncIterator[StreamChunk]) -> AsyncIterator[StreamChunk]:
        joiner = _Joiner()
        try:
            async for chunk in upstream:
                for out in joiner.feed(chunk):
                    yield out
            for out in joiner.flush():
                yield out
        finally:
            aclose = getattr(upstream, "aclose", None)
            if aclose is not None:
                await aclose()

    def __repr__(self) -> str:
        return f"TextSafeModel({self.model!r})"


_VISIBLE: Final = {
    **{chr(c): chr(0x2400 + c) for c in range(0x20) if chr(c) not in "\n\t"},
    "\x7f": "\u2421",
}


@functools.cache
def _invisible() -> re.Pattern[str]:  # compiled on first use: not on the replay path
    # The characters shown as something else, and what could be mistaken for that: a
    # literal control picture (U+2400-U+2421), and a literal "<" that begins "<U+".
    return re.compile("[\x00-\x08\x0b-\x1f\x7f\u2028\u2029\u2400-\u2421\ud800-\udfff]|<(?=U\\+)")


def _show(match: re.Match[str]) -> str:
    ch = match.group(0)
    return _VISIBLE.get(ch) or f"<U+{ord(ch):04X}>"


def visible(text: str) -> str:
    r"""Show the characters a text file or a terminal would lose or obey, one way only.

    ``\n`` and ``\t`` stay; every other C0 control and DEL becomes its Unicode control
    picture (``\r`` -> ``␍``, NUL -> ``␀``, ESC -> ``␛``), so ``\r\n`` reads ``␍`` at
    the end of a line; U+2028, U+2029 and lone surrogates become ``<U+2028>``,
    ``<U+D83D>``. So that no two texts look the same, what could be read as one of
    those is escaped the same way: a literal control picture (U+2400-U+2421, ``␍`` ->
    ``<U+240D>``) and the ``<`` of a literal ``<U+`` (``<U+003C>U+``). Every ``<U+XXXX>``
    shown is then an escape and every control picture a control character: distinct
    texts give distinct results.

    Args:
        text: The string to show.

    Returns:
        ``text`` with those characters replaced (``text`` itself when it has none).
    """
    return _invisible().sub(_show, text)
