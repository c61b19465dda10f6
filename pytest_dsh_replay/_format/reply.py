"""The one chunk assembler: what a call's stream chunks add up to.

A model call streams chunks (see
[docs/format.md#stream-chunks](../format.md#stream-chunks)); `assemble_reply` turns them
into the content blocks, usage and finish the harness logs for the call. Everything that
needs a call's blocks reads them from here: the recorder's logged ``assistant/message``, the
wires' whole (``stream: false``) responses, transcripts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from .events import JSONObject, StreamChunk

__all__ = ["Reply", "assemble_reply"]

_DELTA_BLOCK: Final = {"text-delta": "text", "reasoning-delta": "reasoning"}


@dataclass(frozen=True)
class Reply:
    """What one call streamed, assembled as the harness assembles it.

    Attributes:
        content: The content blocks in index order: each ``block-end``'s block, or, for
            a block the stream never ended (a cancelled call), what its deltas built.
        usage: The last ``usage`` chunk's usage, if any.
        finish: The ``finish`` chunk's ``reason``, or ``None``.
        replay_state: The ``finish`` chunk's ``replayState``, if any.
        ended: The blocks of the ``block-end`` chunks only, in the order they ended.
    """

    content: list[JSONObject]
    usage: Any
    finish: JSONObject | None
    replay_state: Any
    ended: list[Any]

    @property
    def finish_kind(self) -> str | None:
        """``stop``, ``tool-calls``, ``max-tokens``, ``aborted``, ``error`` or ``None``."""
        kind = self.finish.get("kind") if self.finish else None
        return kind if isinstance(kind, str) else None

    @property
    def tool_calls(self) -> list[JSONObject]:
        """The ``tool-call`` blocks."""
        return [b for b in self.content if b.get("type") == "tool-call"]

    @property
    def failure(self) -> JSONObject | None:
        """The failure of an ``error`` or ``aborted`` finish.

        ``{"message": "the recorded call failed", "code": "UNKNOWN"}`` when the finish
        names none; ``None`` for any other finish.
        """
        if self.finish_kind not in ("error", "aborted"):
            return None
        return finish_failure(self.finish)


def finish_failure(reason: object) -> JSONObject | None:
    """The failure of a ``finish`` chunk's ``reason`` (``None``: not an error or abort)."""
    if not isinstance(reason, dict) or reason.get("kind") not in ("error", "aborted"):
        return None
    failure = reason.get("failure")
    if isinstance(failure, dict):
        return dict(failure)
    return {"message": "the recorded call failed", "code": "UNKNOWN"}


def _tool_delta(partial: dict[int, JSONObject], index: int, chunk: StreamChunk) -> None:
    block = partial.setdefault(index, {"type": "tool-call", "id": "", "name": "", "arguments": ""})
    if chunk.get("id"):
        block["id"] = chunk["id"]
    if chunk.get("name"):
        block["name"] = chunk["name"]
    block["arguments"] = str(block.get("arguments", "")) + str(chunk.get("argumentsDelta", ""))


def assemble_reply(chunks: Iterable[StreamChunk]) -> Reply:
    """Assemble one call's chunks (see `Reply`)."""
    ended: dict[int, JSONObject] = {}
    in_order: list[Any] = []
    partial: dict[int, JSONObject] = {}
    texts: dict[int, list[str]] = {}  # the deltas of a partial block's text, joined last
    usage: Any = None
    finish: JSONObject | None = None
    replay_state: Any = None
    for chunk in chunks:
        kind = chunk.get("type")
        index = chunk.get("index")
        if kind in _DELTA_BLOCK:
            if isinstance(index, int):
                if index not in partial:
                    partial[index] = {"type": _DELTA_BLOCK[kind], "text": ""}
                if index in texts:
                    texts[index].append(str(chunk.get("text", "")))
                else:
                    texts[index] = [str(chunk.get("text", ""))]
        elif kind == "block-end":
            if "block" in chunk:
                in_order.append(chunk["block"])
            block = chunk.get("block")
            if isinstance(index, int) and isinstance(block, dict):
                ended[index] = block
        elif kind == "tool-call-delta" and isinstance(index, int):
            _tool_delta(partial, index, chunk)
        elif kind == "usage":
            usage = chunk.get("usage")
        elif kind == "finish":
            reason = chunk.get("reason")
            finish = reason if isinstance(reason, dict) else {}
            replay_state = chunk.get("replayState")
    for index, parts in texts.items():
        if index not in ended:  # a block the stream never ended: what its deltas built
            partial[index]["text"] = "".join(parts)
    blocks = {**partial, **ended}
    return Reply([blocks[i] for i in sorted(blocks)], usage, finish, replay_state, in_order)
