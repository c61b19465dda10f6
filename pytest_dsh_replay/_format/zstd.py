"""Zstd-compressed session logs: a sequence of frames, one per written batch.

See [docs/format.md#zstd](../format.md#zstd).

A log named ``*.jsonl.zst`` / ``*.jsonl.zstd``, or any file starting with the zstd frame
magic, is read through the ``zstandard`` package (the ``zstd`` extra), one frame at a
time, so a damaged frame is named by its byte offset and a torn last frame (an
interrupted write) is told apart from corruption. `iter_frames` is the one zstd
reader: the line reader (`pytest_dsh_replay._format.jsonl`) and the store's crash repair
(`pytest_dsh_replay._store.log_rules`) both go through it (`zstd_frames`). It
never decompresses past [`MAX_DECOMPRESSED_BYTES`][pytest_dsh_replay.MAX_DECOMPRESSED_BYTES]
([docs/limits.md#decompressed-size](../limits.md#decompressed-size)).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Final

from .._errors import SessionLogError

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "ZSTD_MAGIC",
    "ZSTD_SUFFIXES",
    "OutputLimitError",
    "check_compressed_size",
    "compress_frame",
    "decompress_frame",
    "decompress_frames",
    "is_zstd_log",
    "iter_frames",
    "zstd_frames",
]

ZSTD_SUFFIXES: Final[tuple[str, ...]] = (".zst", ".zstd")
"""File name suffixes of zstd-compressed logs (``session.jsonl.zst``, ``.jsonl.zstd``)."""

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The four bytes every zstd frame starts with."""


def is_zstd_log(name: str, head: bytes) -> bool:
    """Whether a log is zstd-compressed: by its name's suffix, or by its first bytes.

    A file that starts with a zstd frame is read as compressed whatever its name
    ([docs/format.md#zstd](../format.md#zstd)); ``head`` needs its first four bytes.
    """
    return name.endswith(ZSTD_SUFFIXES) or head[:4] == ZSTD_MAGIC


MAX_DECOMPRESSED_BYTES: Final[int] = 512 * 1024 * 1024
"""The most plain text one zstd log may decompress to: 512 MiB.

See [docs/limits.md#decompressed-size](../limits.md#decompressed-size).

A zstd log is decompressed whole before its lines are read (every frame is checked
first, so a torn or damaged frame is refused before anything loads), so its text is
held in memory at once; a file of a few hundred KB can expand to gigabytes. Decoding
stops, and the log is refused, as soon as its frames would exceed this. The figure is
eight records of the longest line ([`MAX_LINE_BYTES`][pytest_dsh_replay.MAX_LINE_BYTES],
64 MiB) and about a hundred times a large recorded session (the benchmarks' 21-session
set holds 98 MB of text); a larger log loads decompressed, as a plain ``.jsonl`` file,
which is read line by line. A zstd file larger than this on disk is refused from its
size, before it is read.
"""

_MAX_RATIO: Final = 32 * 1024
"""The most bytes a zstd frame regenerates per byte of it: 128 KiB from a 4-byte RLE block."""

_MIN_FEED: Final = 64
"""The smallest piece of a frame fed to the decompressor (at most 2 MiB of output)."""


def _zstandard(source: str) -> ModuleType:
    try:
        import zstandard
    except ImportError:
        raise SessionLogError(
            "this log is zstd-compressed and the zstandard package is not installed; "
            "install it with: pip install 'pytest-dsh-replay[zstd]'",
            path=source,
        ) from None
    return zstandard


def compress_frame(zstandard: ModuleType, plaintext: bytes, level: int = 3) -> bytes:
    """One zstd frame of ``plaintext``, with its content checksum (the one zstd writer).

    Every frame this package writes carries the checksum, as the dsh runtime's frames
    do, so a flipped byte anywhere in a frame is refused on read
    ([docs/format.md#zstd](../format.md#zstd)).

    Args:
        zstandard: The imported ``zstandard`` module.
        plaintext: The bytes to compress.
        level: The compression level (3, the runtime's default).
    """
    return bytes(zstandard.ZstdCompressor(level=level, write_checksum=True).compress(plaintext))


class OutputLimitError(Exception):
    """A zstd frame decompresses to more than the bytes it was allowed.

    Attributes:
        limit: The allowed output, in bytes.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"decompresses to more than {limit} bytes")


def decompress_frame(
    zstandard: ModuleType, data: bytes | memoryview, offset: int, limit: int
) -> tuple[bytes, int | None]:
    """Decompress the frame at ``offset`` of ``data``, never past ``limit`` bytes of output.

    The frame is fed to the decompressor in pieces no larger than ``limit`` allows: a
    zstd block regenerates at most 128 KiB from at least 4 bytes (an RLE block), so a
    piece of ``n`` bytes yields at most ``n`` * `_MAX_RATIO` bytes, and a bomb is
    stopped within a few MiB of the limit, however small its file.

    Args:
        zstandard: The imported ``zstandard`` module.
        data: The bytes holding the frame (and perhaps more frames after it).
        offset: Where the frame starts in ``data``.
        limit: The most bytes the frame may decompress to.

    Returns:
        ``(text, end)``: the frame's plain text, and the offset just past the frame, or
        ``None`` when ``data`` ends inside it (a torn frame; ``text`` is then what its
        complete blocks decode to).

    Raises:
        OutputLimitError: The frame decompresses to more than ``limit`` bytes.
        zstandard.ZstdError: The frame does not decode.
    """
    view = memoryview(data)
    obj = zstandard.ZstdDecompressor().decompressobj()
    pieces: list[bytes] = []
    produced = 0
    pos = offset
    while pos < len(view):
        step = max(_MIN_FEED, (limit - produced) // _MAX_RATIO)
        piece = obj.decompress(view[pos : pos + step])
        pos += step
        produced += len(piece)
        if produced > limit:
            raise OutputLimitError(limit)
        pieces.append(piece)
        if obj.eof:
            text = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            return text, min(pos, len(view)) - len(obj.unused_data)
    return b"".join(pieces), None


def check_compressed_size(size: int, source: str, *, limit: int = MAX_DECOMPRESSED_BYTES) -> None:
    """Refuse a zstd file of ``size`` bytes on disk when it is larger than ``limit``.

    Compressing never makes a log's text much larger (stored blocks add 3 bytes per 128
    KiB), so a file above the limit cannot hold a log within it; it is refused before
    it is read (the reader reads a zstd file whole).

    Raises:
        SessionLogError: ``size`` is above ``limit``, naming ``source``.
    """
    if size > limit:
        raise SessionLogError(
            f"zstd session log is {size} bytes on disk, more than the "
            f"{limit // (1024 * 1024)} MiB ({limit} bytes) its text may decompress to, the "
            "limit for one log (MAX_DECOMPRESSED_BYTES)",
            path=source,
        )


def _too_large(source: str, limit: int, offset: int) -> SessionLogError:
    return SessionLogError(
        f"zstd session log decompresses to more than {limit // (1024 * 1024)} MiB ({limit} "
        f"bytes), the limit for one log (MAX_DECOMPRESSED_BYTES); refused in the frame at "
        f"byte {offset}, before decompressing further (is this a decompression bomb?)",
        path=source,
    )


def iter_frames(
    data: bytes, source: str, *, limit: int | None = None
) -> Iterator[tuple[int, bytes, bool]]:
    """Decompress a zstd log's frames one after the other (the one zstd reader).

    A log written in batches is a sequence of zstd frames, one per batch. Each is
    decoded by ``zstandard`` on its own, so a damaged frame is named by its offset. All
    frames together may decompress to at most ``limit`` bytes
    ([docs/limits.md#decompressed-size](../limits.md#decompressed-size)): decoding stops as
    soon as they would exceed it, so memory stays bounded by the limit, not by what the
    frames claim or expand to. A reader that needs only the log's head stops early, and the
    rest is never decompressed.

    Args:
        data: The whole file.
        source: The file name used in error messages.
        limit: The most bytes of plain text the whole log may hold;
            [`MAX_DECOMPRESSED_BYTES`][pytest_dsh_replay.MAX_DECOMPRESSED_BYTES] when ``None``.

    Yields:
        ``(byte offset, plaintext, complete)`` per frame; the last one is incomplete
        (``complete`` false, with what its complete blocks decode to) when the file
        ends inside it (a torn write).

    Raises:
        SessionLogError: ``zstandard`` is missing, a frame has a bad magic number or
            does not decode, or the frames decompress to more than ``limit`` bytes.
    """
    zstandard = _zstandard(source)
    cap = MAX_DECOMPRESSED_BYTES if limit is None else limit
    check_compressed_size(len(data), source, limit=cap)
    offset = 0
    produced = 0
    while offset < len(data):
        if not data.startswith(ZSTD_MAGIC, offset):
            if len(data) - offset < len(ZSTD_MAGIC) and ZSTD_MAGIC.startswith(data[offset:]):
                yield offset, b"", False
                return
            raise SessionLogError(
                f"corrupt zstd session log: invalid frame magic at byte {offset}", path=source
            )
        try:
            text, end = decompress_frame(zstandard, data, offset, cap - produced)
        except OutputLimitError:
            raise _too_large(source, cap, offset) from None
        except zstandard.ZstdError as err:
            raise SessionLogError(
                f"corrupt zstd session log: the frame at byte {offset} does not decode ({err})",
                path=source,
            ) from None
        yield offset, text, end is not None
        if end is None:
            return
        produced += len(text)
        offset = end


def zstd_frames(
    data: bytes, source: str, *, limit: int | None = None
) -> tuple[list[tuple[int, bytes]], int | None, bytes]:
    """Split a zstd log into its frames and decompress each (`iter_frames`).

    Returns:
        ``(frames, torn_at, partial)``: every complete frame as ``(byte offset,
        plaintext)``; the offset of a last frame that ends early (a torn write), else
        ``None``; and what that torn frame still decodes to.

    Raises:
        SessionLogError: As `iter_frames`.
    """
    frames: list[tuple[int, bytes]] = []
    for offset, text, complete in iter_frames(data, source, limit=limit):
        if not complete:
            return frames, offset, text
        frames.append((offset, text))
    return frames, None, b""


def decompress_frames(data: bytes, source: str) -> bytes:
    """A whole zstd log's plain text: every frame decompressed, in order.

    Raises:
        SessionLogError: The file is empty, ``zstandard`` is missing, a frame is
            damaged, the last frame is torn (the recording was interrupted), or the
            frames decompress to more than
            [`MAX_DECOMPRESSED_BYTES`][pytest_dsh_replay.MAX_DECOMPRESSED_BYTES].
    """
    if not data:
        raise SessionLogError("empty zstd session log: expected at least one frame", path=source)
    frames, torn_at, _ = zstd_frames(data, source)
    if torn_at is not None:
        raise SessionLogError(
            f"torn zstd session log: the frame at byte {torn_at} is incomplete "
            "(was the recording interrupted?)",
            path=source,
        )
    return b"".join(text for _, text in frames)
