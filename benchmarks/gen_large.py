"""Generate a large scenario: one parent and 20 children, half of them fork children.

Usage::

    python3 benchmarks/gen_large.py                       # ~100 MB into benchmarks/data/large
    python3 benchmarks/gen_large.py --mb 20 --out /tmp/x  # smaller, elsewhere

The logs look like the harness's persisted logs: full ``seq``/``time`` envelopes, delta runs
packed into chunk rows per write batch (a batch is 20 to 80 events, like the 200 ms
write-behind window), reasoning, text and tool-call blocks, ``block-end`` blocks and
``assistant/message`` events that repeat the streamed text, tool results, usage and a
``finish`` per call. Fork children (odd numbers) start with a copy of a prefix of the
parent's events and record it as ``seedLength``; spawn children (even numbers) start
empty. The output is deterministic for a given ``--seed``. ``benchmarks/data/`` is
git-ignored: never commit what this writes.

With ``--format 4`` the same sessions are written as the dsh runtime writes session log
v4 (``session.v4.jsonl.zstd``, ``session.<n>.v4.jsonl.zstd``: one zstd frame per write
batch): each call's chunks embedded in its ``assistant/message`` as ``data.stream``
records (delta runs as ``text-chunks``/``reasoning-chunks``/``tool-call-chunks``), every
event with ``seq``/``time``, ``isSeeded`` headers and an inherited ``session/end-seed``
marker where a fork child's seed ends (default output ``benchmarks/data/large-v4-b``).

Prints one JSON line: the directory, the number of files, bytes, lines and calls.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from pathlib import Path
from typing import Any

import orjson

from pytest_dsh_replay._format.chunk_rows import pack_chunk_runs

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "data" / "large"
DEFAULT_OUT_V4 = HERE / "data" / "large-v4-b"
_RUN_TAGS = {
    "text-delta": "text-chunks",
    "reasoning-delta": "reasoning-chunks",
    "tool-call-delta": "tool-call-chunks",
}
CHILDREN = 20
PARENT_ID = "0b9d4a52-6f0e-4c1e-9a57-000000000000"

_TEXT = (
    "the agent reads file and then calls a tool to list every entry in the directory "
    "before writing its answer with care because tests replay each stream exactly as "
    "recorded so nothing may change between runs of the suite while the model thinks "
    "über naïve café 日本語 テスト emoji 🚀 done"
)
_WORDS = _TEXT.split(" ")


class _Log:
    """Events of one session, with seq and time kept as the runtime writes them."""

    def __init__(self, rng: random.Random, start_time: int):
        self.rng = rng
        self.time = start_time
        self.events: list[dict[str, Any]] = []
        self.sizes: list[int] = []  # an estimate of each event's bytes once packed

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def add(self, kind: str, data: Any, **extra: Any) -> None:
        self.time += self.rng.choice((0, 0, 0, 1, 1, 27, 30))
        event = {"type": kind, "seq": len(self.events), "time": self.time, "data": data}
        event.update(extra)
        self.events.append(event)
        chunk = data.get("chunk") if kind == "assistant/chunk" else None
        if chunk is not None and chunk["type"].endswith("-delta"):
            payload = chunk.get("text", chunk.get("argumentsDelta", ""))
            self.sizes.append(len(payload.encode()) + 6)
        else:
            self.sizes.append(len(orjson.dumps(event)) + 1)

    def chunk(self, turn: int, step: int, chunk: dict[str, Any]) -> None:
        self.add("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk})


def _tokens(rng: random.Random, n: int) -> list[str]:
    return [(" " if rng.random() < 0.7 else "") + rng.choice(_WORDS) for _ in range(n)]


def _call(log: _Log, turn: int, step: int, deltas: int, *, tool: bool) -> str:
    """Append one model call (reasoning, text, optional tool call); return its text."""
    rng = log.rng
    reasoning = _tokens(rng, deltas // 3)
    text = _tokens(rng, deltas - len(reasoning))
    log.chunk(turn, step, {"type": "block-start", "index": 0, "blockType": "reasoning"})
    for t in reasoning:
        log.chunk(turn, step, {"type": "reasoning-delta", "index": 0, "text": t})
    log.chunk(turn, step, {"type": "block-start", "index": 1, "blockType": "text"})
    for t in text:
        log.chunk(turn, step, {"type": "text-delta", "index": 1, "text": t})
    r_text, t_text = "".join(reasoning), "".join(text)
    content: list[dict[str, Any]] = [
        {"type": "reasoning", "text": r_text},
        {"type": "text", "text": t_text},
    ]
    log.chunk(turn, step, {"type": "block-end", "index": 0, "block": content[0]})
    log.chunk(turn, step, {"type": "block-end", "index": 1, "block": content[1]})
    if tool:
        call_id = f"call_{turn}_{step}_{rng.randrange(1 << 30):08x}"
        log.chunk(turn, step, {"type": "block-start", "index": 2, "blockType": "tool-call"})
        args = ['{"path": "', "src/", "module_", str(rng.randrange(100)), '.py"', "}"]
        for i, a in enumerate(args):
            delta: dict[str, Any] = {"type": "tool-call-delta", "index": 2, "id": call_id}
            if i == 0:
                delta["name"] = "read_file"
            delta["argumentsDelta"] = a
            log.chunk(turn, step, delta)
        block = {
            "type": "tool-call",
            "id": call_id,
            "name": "read_file",
            "arguments": "".join(args),
        }
        content.append(block)
        log.chunk(turn, step, {"type": "block-end", "index": 2, "block": block})
    usage = {"inputTokens": 1000 + 37 * turn, "outputTokens": deltas, "cacheReadTokens": 512}
    log.chunk(turn, step, {"type": "usage", "usage": usage})
    reason = {"kind": "tool-calls"} if tool else {"kind": "stop"}
    log.chunk(turn, step, {"type": "finish", "reason": reason})
    message = {
        "role": "assistant",
        "content": content,
        "source": {"kind": "model", "provider": "bench", "model": "bench-1"},
        "id": f"m-{turn}-{step}-a",
    }
    log.add("assistant/message", {"turn": turn, "step": step, "message": message})
    return t_text


def _turns(log: _Log, first_turn: int, turns: int, deltas: int) -> None:
    rng = log.rng
    for turn in range(first_turn, first_turn + turns):
        log.add("turn/start", {"turn": turn})
        steps = rng.randint(1, 3)
        for step in range(1, steps + 1):
            log.add("step/start", {"turn": turn, "step": step})
            if step == 1:
                question = " ".join(_tokens(rng, 30)).strip()
                log.add(
                    "user/message",
                    {
                        "content": [{"type": "text", "text": question}],
                        "source": {"kind": "user"},
                        "role": "user",
                        "id": f"u-{turn}",
                    },
                    surfaceOp="append",
                )
            log.add(
                "request/header",
                {"header": {"config": {"provider": "bench", "model": "bench-1"}}},
            )
            tool = step < steps
            _call(log, turn, step, rng.randint(deltas // 2, deltas * 3 // 2), tool=tool)
            if tool:
                output = " ".join(_tokens(rng, 120))
                log.add(
                    "tool/result",
                    {
                        "turn": turn,
                        "step": step,
                        "message": {
                            "source": {"kind": "tool", "callId": f"c{turn}-{step}"},
                            "content": [{"type": "text", "text": output}],
                            "role": "user",
                            "id": f"t-{turn}-{step}",
                        },
                    },
                )
            log.add("step/end", {"turn": turn, "step": step})
        log.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _encode(header: dict[str, Any], events: list[dict[str, Any]], rng: random.Random) -> bytes:
    """Serialize as the runtime does: delta runs packed per write batch."""
    parts = [orjson.dumps(header)]
    i = 0
    while i < len(events):
        size = rng.randint(20, 80)
        parts.extend(orjson.dumps(r) for r in pack_chunk_runs(events[i : i + size]))
        i += size
    parts.append(b"")
    return b"\n".join(parts)


def _stream_records(chunks: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """A call's ``(time, chunk)`` pairs as v4 ``data.stream`` records, delta runs packed."""
    records: list[dict[str, Any]] = []
    run: dict[str, Any] | None = None
    last_time = 0
    for time, chunk in chunks:
        tag = _RUN_TAGS.get(chunk["type"])
        key = (tag, chunk.get("index"), chunk.get("id"))
        joins = run is not None and run["key"] == key and "name" not in run["chunk"]
        if tag is not None and joins and "name" not in chunk:
            assert run is not None
            run["dt"].append(time - last_time)
            run["members"].append(chunk.get("text", chunk.get("argumentsDelta")))
        elif tag is not None:
            run = {"key": key, "time0": time, "dt": [], "chunk": chunk}
            run["members"] = [chunk.get("text", chunk.get("argumentsDelta"))]
            records.append(run)
        else:
            run = None
            records.append({"type": "chunk", "time": time, "chunk": chunk})
        last_time = time
    out: list[dict[str, Any]] = []
    for r in records:
        if "key" not in r:
            out.append(r)
            continue
        tag, index, cid = r["key"]
        record: dict[str, Any] = {"type": tag, "time0": r["time0"], "index": index, "dt": r["dt"]}
        if tag == "tool-call-chunks":
            record["id"] = cid
            if "name" in r["chunk"]:
                record["name"] = r["chunk"]["name"]
            record["args"] = r["members"]
        else:
            record["texts"] = r["members"]
        out.append(record)
    return out


def _to_v4(events: list[dict[str, Any]], seed_end: int | None) -> list[dict[str, Any]]:
    """The v0 events as the runtime's v4 log holds them (chunks inside their messages)."""
    out: list[dict[str, Any]] = []
    pending: list[tuple[int, dict[str, Any]]] = []
    for i, event in enumerate(events):
        kind = event["type"]
        if kind == "assistant/chunk":
            pending.append((event["time"], event["data"]["chunk"]))
            continue
        data = event["data"]
        if kind == "assistant/message" and pending:
            data = {**data, "stream": _stream_records(pending)}
            pending = []
        elif kind == "tool/result":
            message = data["message"]
            call_id = message["source"]["callId"]
            data = {
                **data,
                "message": {
                    "role": "tool",
                    "source": message["source"],
                    "toolCallId": call_id,
                    "content": message["content"],
                    "id": message["id"],
                },
            }
        elif seed_end is not None and i == seed_end:
            data = {"inherited": True}
        renamed = {**event, "seq": len(out), "data": data}
        out.append(renamed)
    return out


def _encode_v4(header: dict[str, Any], events: list[dict[str, Any]], rng: random.Random) -> bytes:
    """Serialize as the runtime's v4 writer does: one zstd frame per write batch."""
    import zstandard

    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    frames = [compressor.compress(orjson.dumps(header) + b"\n")]
    i = 0
    while i < len(events):
        size = rng.randint(20, 80)
        batch = b"".join(orjson.dumps(e) + b"\n" for e in events[i : i + size])
        frames.append(compressor.compress(batch))
        i += size
    return b"".join(frames)


def generate(out: Path, *, mb: float, seed: int, deltas: int, fmt: int = 0) -> dict[str, Any]:
    """Write the scenario into ``out`` (replaced); return a summary."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    rng = random.Random(seed)
    budget = int(mb * 1_000_000)
    parent_share = budget // 5

    def grow(log: _Log, target: int, first_turn: int) -> None:
        turn = first_turn
        while log.size < target:
            _turns(log, turn, 5, deltas)
            turn += 5

    parent = _Log(rng, 1_780_000_000_000)
    grow(parent, parent_share, 1)
    header = {
        "type": "session",
        "version": 0,
        "id": PARENT_ID,
        "createdAt": 1_780_000_000_000,
        "cwd": "{{cwd}}",
        "delegationDepth": 0,
    }
    raw: dict[int, tuple[dict[str, Any], list[dict[str, Any]], int | None]] = {}
    raw[0] = (header, parent.events, None)
    files = {"session.jsonl": _encode(header, parent.events, rng)}
    calls = _calls(parent.events)
    ends = [i for i, e in enumerate(parent.events) if e["type"] == "turn/end"]
    # Fork children copy a prefix of the parent that ends at a turn boundary, cut in its
    # first quarter; the seeds count against the size budget.
    cuts = {n: ends[rng.randrange(len(ends) // 8, len(ends) // 4)] + 1 for n in range(1, 21, 2)}
    seeds = sum(sum(parent.sizes[:cut]) for cut in cuts.values())
    child_share = max(budget - parent.size - seeds, 0) // CHILDREN
    for n in range(1, CHILDREN + 1):
        child = _Log(rng, 1_780_000_100_000 + n)
        head: dict[str, Any] = {
            "type": "session",
            "version": 0,
            "id": f"0b9d4a52-6f0e-4c1e-9a57-{n:012d}",
            "createdAt": 1_780_000_100_000 + n,
            "cwd": "{{cwd}}",
            "parentSession": PARENT_ID,
        }
        first_turn = 1
        if n in cuts:
            cut = cuts[n]
            child.events = [dict(e) for e in parent.events[:cut]]
            child.sizes = parent.sizes[:cut]
            child.time = parent.events[cut - 1]["time"]
            child.add("session/end-seed", {})  # the child's own first event, at seq cut
            head["seedLength"] = cut
            first_turn = parent.events[cut - 1]["data"]["turn"] + 1
        head["origin"] = "subagent"
        head["delegationDepth"] = 1
        grow(child, child_share + child.size, first_turn)
        raw[n] = (head, child.events, cuts.get(n))
        files[f"session.{n}.jsonl"] = _encode(head, child.events, rng)
        calls += _calls(child.events[head.get("seedLength", 0) :])
    if fmt == 4:
        files = {}
        lines = 0
        for n, (head, events, cut) in raw.items():
            v4 = _to_v4(events, cut)
            head4 = {k: v for k, v in head.items() if k != "seedLength"}
            head4["version"] = 4
            head4["isSeeded"] = cut is not None
            name = "session.v4.jsonl.zstd" if n == 0 else f"session.{n}.v4.jsonl.zstd"
            files[name] = _encode_v4(head4, v4, rng)
            lines += 1 + len(v4)
    else:
        lines = sum(b.count(b"\n") for b in files.values())
    for name, blob in files.items():
        (out / name).write_bytes(blob)
    return {
        "benchmark": "generate",
        "out": str(out),
        "files": len(files),
        "bytes": sum(len(b) for b in files.values()),
        "lines": lines,
        "format": fmt,
        "calls": calls,
        "seed": seed,
    }


def _calls(events: list[dict[str, Any]]) -> int:
    return sum(
        1
        for e in events
        if e["type"] == "assistant/chunk" and e["data"]["chunk"]["type"] == "finish"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="output directory")
    parser.add_argument("--format", type=int, choices=(0, 4), default=0, help="log format (0)")
    parser.add_argument("--mb", type=float, default=100.0, help="approximate size in MB (100)")
    parser.add_argument("--seed", type=int, default=8, help="random seed (8)")
    parser.add_argument("--deltas", type=int, default=400, help="mean deltas per call (400)")
    args = parser.parse_args(argv)
    out = args.out or (DEFAULT_OUT_V4 if args.format == 4 else DEFAULT_OUT)
    summary = generate(out, mb=args.mb, seed=args.seed, deltas=args.deltas, fmt=args.format)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
