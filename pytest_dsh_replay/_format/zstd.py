"""Zstd-compressed session logs: a sequence of frames, one per written batch (docs/format.md#zstd).

A log named ``*.jsonl.zst`` / ``*.jsonl.zstd``, or any file starting with the zstd frame
magic, is read through the ``zstandard`` package (the ``zstd`` extra), one frame at a
time, so a damaged frame is named by its byte offset and a torn last frame (an
interrupted write) is told apart from corruption. :func:`zstd_frames` is the one zstd
reader: the line reader (:mod:`pytest_dsh_replay._format.jsonl`) and the store's crash repair
(:mod:`pytest_dsh_replay._store.log_rules`) both go through it.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import SessionLogError

__all__ = ["ZSTD_MAGIC", "ZSTD_SUFFIXES", "compress_frame", "decompress_frames", "zstd_frames"]

ZSTD_SUFFIXES: Final[tuple[str, ...]] = (".zst", ".zstd")
"""File name suffixes of zstd-compressed logs (``session.jsonl.zst``, ``.jsonl.zstd``)."""

ZSTD_MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The four bytes every zstd frame starts with."""


def _zstandard(source: str) -> Any:
    try:
        import zstandard
    except ImportError:
        raise SessionLogError(
            "this log is zstd-compressed and the zstandard package is not installed; "
            "install it with: pip install 'pytest-dsh-replay[zstd]'",
            path=source,
        ) from None
    return zstandard


def compress_frame(zstandard: Any, plaintext: bytes, level: int = 3) -> bytes:
    """One zstd frame of ``plaintext``, with its content checksum (the one zstd writer).

    Every frame this package writes carries the checksum, as the dsh runtime's frames
    do, so a flipped byte anywhere in a frame is refused on read (docs/format.md#zstd).

    Args:
        zstandard: The imported ``zstandard`` module.
        plaintext: The bytes to compress.
        level: The compression level (3, the runtime's default).
    """
    return bytes(zstandard.ZstdCompressor(level=level, write_checksum=True).compress(plaintext))


def zstd_frames(data: bytes, source: str) -> tuple[list[tuple[int, bytes]], int | None, bytes]:
    """Split a zstd log into its frames and decompress each (the one zstd reader).

    A log written in batches is a sequence of zstd frames, one per batch. Each is
    decoded by ``zstandard`` on its own, so a damaged frame is named by its offset.

    Args:
        data: The whole file.
        source: The file name used in error messages.

    Returns:
        ``(frames, torn_at, partial)``: every complete frame as ``(byte offset,
        plaintext)``; the offset of a last frame that ends early (a torn write), else
        ``None``; and what that torn frame still decodes to.

    Raises:
        SessionLogError: ``zstandard`` is missing, or a frame has a bad magic number or
            does not decode.
    """
    zstandard = _zstandard(source)
    view = memoryview(data)
    frames: list[tuple[int, bytes]] = []
    offset = 0
    while offset < len(data):
        if not data.startswith(ZSTD_MAGIC, offset):
            if len(data) - offset < len(ZSTD_MAGIC) and ZSTD_MAGIC.startswith(data[offset:]):
                return frames, offset, b""
            raise SessionLogError(
                f"corrupt zstd session log: invalid frame magic at byte {offset}", path=source
            )
        obj = zstandard.ZstdDecompressor().decompressobj()
        try:
            text = obj.decompress(view[offset:])
        except zstandard.ZstdError as err:
            raise SessionLogError(
                f"corrupt zstd session log: the frame at byte {offset} does not decode ({err})",
                path=source,
            ) from None
        if not obj.eof:
            return frames, offset, text
        frames.append((offset, text))
        offset = len(data) - len(obj.unused_data)
    return frames, None, b""


def decompress_frames(data: bytes, source: str) -> bytes:
    """A whole zstd log's plain text: every frame decompressed, in order.

    Raises:
        SessionLogError: The file is empty, ``zstandard`` is missing, a frame is
            damaged, or the last frame is torn (the recording was interrupted).
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
