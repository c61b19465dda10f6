"""Typed shapes of what the wires read of chunks, failures and usage.

See [docs/format.md](../format.md).

The layers above hand the wires stream chunks as the plain JSON objects they are
([`StreamChunk`][pytest_dsh_replay.StreamChunk]). The parts of a chunk an encoder reads (a
content block, a usage object, a finish reason, a failure) are described here, key by
key, as [docs/format.md](../format.md) documents them; the values come from recorded logs, so the
encoders still check each value's type where a wrong one would break the bytes they
write (a recorded ``text`` that is not a string is skipped, never sent).
"""

from __future__ import annotations

from typing import TypedDict

__all__ = [
    "ContentBlock",
    "FailureRecord",
    "FinishReason",
    "Usage",
]


class _FailureKeys(TypedDict):
    message: str
    code: str


class FailureRecord(_FailureKeys, total=False):
    """A dsh failure: ``{"message", "code", "status"?, ...}``.

    See [docs/format.md#failures](../format.md#failures).

    Attributes:
        message: What went wrong, non-empty.
        code: The failure's name (``RATE_LIMIT``, ``SERVER``, ``HTTP_<status>``, ...).
        status: The HTTP status it came with (100-599).
        requestId: The provider's request id.
        providerRetryAfterMs: The delay the provider asked for, in milliseconds (> 0).
    """

    status: int
    requestId: str
    providerRetryAfterMs: int


class Usage(TypedDict, total=False):
    """A ``usage`` chunk's token counts; counts do not overlap.

    See [docs/format.md#usage](../format.md#usage).
    """

    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    reasoningTokens: int
    totalTokens: int


class ContentBlock(TypedDict, total=False):
    """A ``block-end`` chunk's assembled block.

    See [docs/format.md#content-blocks](../format.md#content-blocks).

    ``type`` is ``text``, ``reasoning``, ``tool-call``, ``image`` or ``tool-result``;
    the other keys are those of that type (``arguments`` a JSON string).
    """

    type: str
    text: str
    id: str
    name: str
    arguments: str
    attachment: object
    toolCallId: str
    content: object
    isError: bool


class FinishReason(TypedDict, total=False):
    """A ``finish`` chunk's ``reason``.

    See [docs/format.md#finish-reasons](../format.md#finish-reasons).

    ``kind`` is ``stop``, ``tool-calls``, ``max-tokens``, ``error`` or ``aborted``; the
    last two carry the ``failure``.
    """

    kind: str
    failure: FailureRecord
