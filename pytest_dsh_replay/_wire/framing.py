"""How a wire frames its stream: the media type, one event's bytes, and the splitter.

A streamed answer is a sequence of *frames*, each carrying one event's payload (a JSON
text). The endpoint sends a wire's encoded frames under the wire's
`Framing.headers`; the recording proxy splits a live provider's stream into
frames with `Framing.splitter` and asks the wire what each one means. Neither
names a media type: server-sent events (`SSE`, ``text/event-stream``) are one
framing; newline-delimited JSON (Ollama) or a binary event stream (Bedrock's
``application/vnd.amazon.eventstream``) are others, each a `Framing` subclass
([docs/architecture.md#adding-a-wire](../architecture.md#adding-a-wire)).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, NamedTuple, Protocol

__all__ = [
    "JSON_HEADERS",
    "NDJSON",
    "SSE",
    "SSE_CRLF",
    "Frame",
    "Framing",
    "LineSplitter",
    "SSEParser",
    "Splitter",
]

JSON_HEADERS: Final[tuple[tuple[str, str], ...]] = (("content-type", "application/json"),)
"""The headers of a whole (one JSON object) answer and of an HTTP error body."""


class Frame(NamedTuple):
    """One frame of a stream as a splitter read it.

    Attributes:
        raw: Its bytes as received, its terminator included (what a relay passes on).
        name: Its event name, where the framing has one (SSE ``event:``), else ``None``.
        data: Its payload as text (bytes that are not UTF-8 read as U+FFFD), or ``None``
            for a frame without one (an SSE comment or keep-alive).
    """

    raw: bytes
    name: str | None
    data: str | None


class Splitter(Protocol):
    """Splits a byte stream that arrives in pieces into `Frame` objects."""

    @property
    def pending(self) -> bytes:
        """The bytes of a frame not complete yet (what a stream that ends now cuts)."""
        ...

    def feed_raw(self, data: bytes) -> list[Frame]:
        """Every frame completed by ``data``, in order."""
        ...


class Framing:
    """A stream framing: subclass it and set `media_type` (see `SSE`).

    Attributes:
        media_type: The ``content-type`` of a stream in this framing.
        binary: Whether frames are bytes rather than text (a length prefix, a checksum):
            the recording proxy then never reads a frame's bytes as text, and replaces
            a secret in a frame through `rewritten`, which frames the payload again.
    """

    media_type: str = "application/octet-stream"
    binary: bool = False

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """The headers the endpoint answers a stream with (``content-type`` first)."""
        return (("content-type", self.media_type),)

    def carries(self, content_type: str) -> bool:
        """Whether a response whose ``content-type`` is ``content_type`` is such a stream."""
        return self.media_type in content_type.lower()

    def frame(self, payload: bytes, name: str | None = None) -> bytes:
        """The bytes of one frame carrying ``payload`` (a JSON text), named ``name``."""
        raise NotImplementedError

    def around(self, name: str | None = None) -> tuple[bytes, bytes] | None:
        """The bytes before and after every payload, when frames are such a wrapper.

        Encoders build frames from it without a call per frame; ``None`` (the default)
        for a framing whose frame depends on the payload (a length prefix, a checksum).
        """
        return None

    def splitter(self) -> Splitter:
        """A new splitter for one stream in this framing."""
        raise NotImplementedError

    def rewritten(self, raw: bytes, edit: Callable[[bytes], bytes]) -> bytes:
        """The frame ``raw`` with ``edit`` applied to what it carries.

        By default ``edit(raw)``: a text frame is edited as a whole. A `binary`
        framing applies ``edit`` to the payload and frames the result again (its
        lengths and checksums hold).
        """
        return edit(raw)


class _SSE(Framing):
    r"""Server-sent events: ``event: <name>\n`` (when named), ``data: <payload>``, a blank line.

    Args:
        eol: The line end the encoders write (``"\n"``; Google's API writes ``"\r\n"``).
    """

    media_type = "text/event-stream"

    def __init__(self, eol: bytes = b"\n"):
        self._eol = eol

    @property
    def headers(self) -> tuple[tuple[str, str], ...]:
        """``text/event-stream``, and ``cache-control: no-cache``."""
        return (("content-type", self.media_type), ("cache-control", "no-cache"))

    def around(self, name: str | None = None) -> tuple[bytes, bytes]:
        """``event: <name>`` and ``data: `` before the payload, a blank line after."""
        head = b"data: " if name is None else b"event: " + name.encode() + self._eol + b"data: "
        return head, self._eol + self._eol

    def frame(self, payload: bytes, name: str | None = None) -> bytes:
        """One event (see `around`)."""
        eol = self._eol
        if name is None:
            return b"data: " + payload + eol + eol
        return b"event: " + name.encode() + eol + b"data: " + payload + eol + eol

    def splitter(self) -> SSEParser:
        """A `SSEParser`."""
        return SSEParser()


SSE: Final = _SSE()
"""Server-sent events, lines ending in ``\\n``."""

SSE_CRLF: Final = _SSE(b"\r\n")
"""Server-sent events, lines ending in ``\\r\\n`` (as Google's API sends them)."""

_EVENT_END: Final = re.compile(rb"\r?\n\r?\n")
r"""A blank line: where a server-sent event ends (lines end in ``\n`` or ``\r\n``)."""


class SSEParser:
    r"""Splits a byte stream into server-sent events.

    Lines end in ``\n`` or ``\r\n`` (also when a read splits the two); an event ends
    at a blank line. Bytes that are not UTF-8 read as U+FFFD.
    """

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def pending(self) -> bytes:
        """The bytes of an event not complete yet (what a stream that ends now cuts)."""
        return self._buffer

    def feed(self, data: bytes) -> list[tuple[str | None, str]]:
        """``(name, data)`` of the events completed by ``data`` that carry data."""
        return [(name, text) for _, name, text in self.feed_raw(data) if text is not None]

    def feed_raw(self, data: bytes) -> list[Frame]:
        """Every event completed by ``data`` (comments and keep-alives with ``data=None``)."""
        buffer = self._buffer + data
        at = max(len(self._buffer) - 3, 0)  # an end may begin in the bytes kept before
        start = 0
        events: list[Frame] = []
        while (end := _EVENT_END.search(buffer, at)) is not None:
            block = buffer[start : end.start()].replace(b"\r\n", b"\n")
            events.append(Frame(buffer[start : end.end()], *_sse_fields(block)))
            start = at = end.end()
        self._buffer = buffer[start:]
        return events


def _sse_fields(block: bytes) -> tuple[str | None, str | None]:
    """An event's name and data (``None`` without data lines), from its lines."""
    name: str | None = None
    data_lines: list[str] = []
    for line in block.decode("utf-8", "replace").split("\n"):
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data_lines.append(line[5:].removeprefix(" "))
    return name, "\n".join(data_lines) if data_lines else None


class _NDJSON(Framing):
    r"""Newline-delimited JSON: each frame is one JSON text and ``\n`` (Ollama's streams).

    A frame has no name; a blank line is a frame without a payload.
    """

    media_type = "application/x-ndjson"

    def around(self, name: str | None = None) -> tuple[bytes, bytes]:
        r"""Nothing before the payload, ``\n`` after."""
        return b"", b"\n"

    def frame(self, payload: bytes, name: str | None = None) -> bytes:
        r"""``payload`` and ``\n``."""
        return payload + b"\n"

    def splitter(self) -> LineSplitter:
        """A `LineSplitter`."""
        return LineSplitter()


NDJSON: Final = _NDJSON()
"""Newline-delimited JSON (``application/x-ndjson``), one JSON object a line."""


class LineSplitter:
    r"""Splits a byte stream into lines, each a `Frame` (its payload without the line end).

    Lines end in ``\n`` (a ``\r`` before it is dropped from the payload, kept in
    ``raw``); a blank line is a frame with ``data=None``. Bytes that are not UTF-8 read
    as U+FFFD.
    """

    def __init__(self) -> None:
        self._buffer = b""

    @property
    def pending(self) -> bytes:
        """The bytes of a line not complete yet (what a stream that ends now cuts)."""
        return self._buffer

    def feed_raw(self, data: bytes) -> list[Frame]:
        """Every line completed by ``data``, in order."""
        *lines, self._buffer = (self._buffer + data).split(b"\n")
        frames: list[Frame] = []
        for line in lines:
            text = line.removesuffix(b"\r").decode("utf-8", "replace")
            frames.append(Frame(line + b"\n", None, text if text.strip() else None))
        return frames
