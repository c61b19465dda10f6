"""Wires that send each tool call whole, once its block ended (Gemini, Ollama): both ways.

Such a wire streams text and reasoning deltas as they come, but has no event for a piece
of a tool call's arguments: the call goes out in one piece when its ``block-end`` arrives
(or at the finish, for a call whose block never ended), and the usage waits for the last
event. `HeldCallsEncoder` keeps that state and reads the chunks; a wire's encoder
subclasses it and says how a text piece and a finished call are framed;
`WholeCallsDecoder` is the decoders' shared part
([docs/wires.md#gemini](../wires.md#gemini), [docs/wires.md#ollama](../wires.md#ollama)).
"""

from __future__ import annotations

from collections.abc import Mapping

from .._format.events import StreamChunk
from .shapes import ContentBlock, FailureRecord, Usage

__all__ = ["HeldCall", "HeldCallsEncoder", "WholeCallsDecoder"]


class HeldCall:
    """A tool call being gathered: its id and name as seen, its argument pieces.

    Attributes:
        id: The call's id (``""`` until a chunk or its block names one).
        name: The function's name (``""`` until known).
        args: The argument pieces so far (one piece, the whole text, once the block ended).
        sent: Whether the call went out.
    """

    __slots__ = ("args", "id", "name", "sent")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args: list[str] = []
        self.sent = False


class HeldCallsEncoder:
    """Reads a call's chunks for a wire that sends tool calls whole.

    Subclasses implement `_text_event` and `_call_event`; `feed` gives their bytes.
    `unsent` lists the calls a finish still has to send.
    """

    def __init__(self) -> None:
        self._tools: dict[int, HeldCall] = {}  # dsh block index -> tool call
        self._texts: dict[int, list[str]] = {}  # dsh block index -> text sent
        self._text: list[str] = []  # the answer's text, in order
        self._usage: Usage | None = None

    def _text_event(self, text: str, reasoning: bool) -> bytes:
        """The event of a text (or, when ``reasoning``, a thinking) piece."""
        raise NotImplementedError

    def _call_event(self, call: HeldCall) -> bytes:
        """The event of a finished tool call (its ``args`` one whole piece)."""
        raise NotImplementedError

    def feed(self, chunk: StreamChunk) -> bytes:
        """The event for one dsh chunk (``b""`` when it has no wire form of its own)."""
        kind = chunk.get("type")
        index = chunk.get("index", 0)
        if kind in ("text-delta", "reasoning-delta"):
            text = chunk.get("text", "")
            text = text if isinstance(text, str) else ""
            self._texts.setdefault(index, []).append(text)
            if kind == "text-delta":
                self._text.append(text)
            return self._text_event(text, kind == "reasoning-delta")
        if kind == "tool-call-delta":
            tool = self._tools.setdefault(index, HeldCall())
            if not tool.id and isinstance(chunk.get("id"), str):
                tool.id = chunk["id"]
            if not tool.name and isinstance(chunk.get("name"), str):
                tool.name = chunk["name"]
            args = chunk.get("argumentsDelta", "")
            tool.args.append(args if isinstance(args, str) else "")
            return b""
        if kind == "block-end" and isinstance(chunk.get("block"), Mapping):
            return self._block_end(index, chunk["block"])
        if kind == "usage" and isinstance(chunk.get("usage"), Mapping):
            self._usage = chunk["usage"]
        return b""

    def _block_end(self, index: int, block: ContentBlock) -> bytes:
        kind = block.get("type")
        if kind == "tool-call":
            tool = self._tools.setdefault(index, HeldCall())
            if tool.sent:
                return b""
            tool.id = tool.id or str(block.get("id") or "")
            tool.name = tool.name or str(block.get("name") or "")
            arguments = block.get("arguments")
            tool.args = [arguments if isinstance(arguments, str) else "".join(tool.args)]
            return self._call_event(tool)
        text = block.get("text")
        if kind in ("text", "reasoning") and isinstance(text, str):
            sent = "".join(self._texts.get(index, ()))
            if text.startswith(sent) and len(text) > len(sent):
                rest = text[len(sent) :]
                self._texts.setdefault(index, []).append(rest)
                if kind == "text":
                    self._text.append(rest)
                return self._text_event(rest, kind == "reasoning")
        return b""

    def unsent(self) -> list[HeldCall]:
        """The named calls not sent yet, in block order (what a finish sends)."""
        return [tool for tool in self._tools.values() if not tool.sent and tool.name]


class WholeCallsDecoder:
    """Turns a live stream of such a wire back into dsh chunks: the decoders' shared part.

    Block indexes count from 0 in order of appearance; consecutive pieces of one kind
    continue one ``text`` or ``reasoning`` block (`_delta`); a whole tool call is a
    ``tool-call`` block of one ``tool-call-delta`` (`_whole_call`). A wire's decoder
    reads its events, calls these, and makes its own ``finish``.
    """

    def __init__(self) -> None:
        self._count = 0
        self._open: tuple[int, str, list[str]] | None = None  # index, kind, text
        self._calls = 0
        self._produced = False  # text, reasoning or a call came
        self._seen: dict[str, int] = {}  # content ids given so far (`call_id_for`)
        self._done = False

    @property
    def done(self) -> bool:
        """Whether the ``finish`` was produced."""
        return self._done

    def failed(self, failure: FailureRecord) -> StreamChunk:
        """The error ``finish`` for a call that failed with ``failure``."""
        self._done = True
        return {"type": "finish", "reason": {"kind": "error", "failure": failure}}

    def _close(self, out: list[StreamChunk]) -> None:
        if self._open is not None:
            index, kind, parts = self._open
            self._open = None
            block = {"type": kind, "text": "".join(parts)}
            out.append({"type": "block-end", "index": index, "block": block})

    def _start(self, out: list[StreamChunk], kind: str) -> int:
        index = self._count
        self._count += 1
        out.append({"type": "block-start", "index": index, "blockType": kind})
        return index

    def _delta(self, kind: str, text: str, out: list[StreamChunk]) -> None:
        """A ``text`` or ``reasoning`` piece, continuing the open block of its kind."""
        if self._open is None or self._open[1] != kind:
            self._close(out)
            self._open = (self._start(out, kind), kind, [])
        self._open[2].append(text)
        self._produced = True
        out.append({"type": f"{kind}-delta", "index": self._open[0], "text": text})

    def _whole_call(self, call_id: str, name: str, arguments: str, out: list[StreamChunk]) -> None:
        """A tool call that came whole: its block, one delta, its end."""
        self._close(out)
        index = self._start(out, "tool-call")
        delta = {"id": call_id, "name": name, "argumentsDelta": arguments}
        out.append({"type": "tool-call-delta", "index": index, **delta})
        block = {"type": "tool-call", "id": call_id, "name": name, "arguments": arguments}
        out.append({"type": "block-end", "index": index, "block": block})
        self._calls += 1
        self._produced = True
