"""Load + derive throughput of format-4 logs (the dsh runtime's), plain and zstd.

Usage::

    python3 benchmarks/bench_load_v4.py                # generate ~100 MB once, then measure
    python3 benchmarks/bench_load_v4.py --mb 20 --repeat 11

Generates, once, a large scenario in the dsh runtime's format 4 (one primary and 20
children, half of them fork children seeded with a completed-turn prefix of the primary
and its inherited ``session/end-seed`` marker), as the runtime writes it: every event
with ``seq`` and ``time``, each model call one ``assistant/message`` whose ``data.stream``
holds raw chunk records and ``text-chunks`` / ``reasoning-chunks`` / ``tool-call-chunks``
runs, ``delivery-accepted`` receipts, tool calls and results. It is written twice under
``benchmarks/data/`` (git-ignored): plain (``large-v4``) and zstd-compressed with the
header alone in the first frame and one frame per write batch of 20 to 80 events
(``large-v4-zstd``, ``session.v4.jsonl.zstd`` names).

For each form, one pass of ``load`` is ``load_scenario`` on the scenario; one pass of
``floor`` reads every log, decompresses it (zstd) and calls plain ``orjson.loads`` on
every line. They alternate, in both orders, ``--repeat`` times; figures are medians of
this process's CPU time (and wall time); ``ratio`` is load / floor.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

import orjson
import zstandard

from pytest_dsh_replay import load_scenario

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
CHILDREN = 20
PRIMARY_ID = "sess-main"
_TEXT = (
    "the agent reads the file and then calls a tool to list every entry of the directory "
    "before it writes its answer with care because tests replay each stream exactly as "
    "recorded über naïve café 日本語 テスト 🚀 done"
)
_WORDS = _TEXT.split(" ")


class _Log:
    """One session's events as the runtime writes them (seq = position, time in ms)."""

    def __init__(self, header: dict[str, Any], rng: random.Random, clock: int):
        self.header = header
        self.rng = rng
        self.clock = clock
        self.events: list[dict[str, Any]] = []
        self.size = 0

    def tick(self, most: int = 3) -> int:
        self.clock += self.rng.randint(0, most)
        return self.clock

    def add(self, kind: str, data: dict[str, Any], **envelope: Any) -> None:
        event = {"type": kind, "seq": len(self.events), "time": self.tick(), "data": data}
        event.update(envelope)
        self.events.append(event)
        self.size += len(orjson.dumps(event)) + 1

    def pieces(self, low: int, high: int) -> list[str]:
        rng = self.rng
        return [
            " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3))) + " "
            for _ in range(rng.randint(low, high))
        ]

    def run(self, kind: str, index: int, texts: list[str]) -> dict[str, Any]:
        time0 = self.tick()
        dt = [self.rng.randint(0, 2) for _ in texts[1:]]
        self.clock += sum(dt)
        return {"type": kind, "time0": time0, "index": index, "dt": dt, "texts": texts}

    def raw(self, chunk: dict[str, Any]) -> dict[str, Any]:
        return {"type": "chunk", "time": self.tick(), "chunk": chunk}

    def call(self, turn: int, step: int, *, tool: bool) -> list[str]:
        """One settled model call; returns the tool call ids it made."""
        stream: list[dict[str, Any]] = []
        content: list[dict[str, Any]] = []
        blocks: list[dict[str, Any]] = []
        index = 0
        thought = self.pieces(20, 120)
        stream.append(self.raw({"type": "block-start", "index": index, "blockType": "reasoning"}))
        stream.append(self.run("reasoning-chunks", index, thought))
        block = {"type": "reasoning", "text": "".join(thought)}
        stream.append(self.raw({"type": "block-end", "index": index, "block": block}))
        content.append(block)
        blocks.append({"type": "reasoning", "signature": "sig"})
        index += 1
        said = self.pieces(20, 200)
        stream.append(self.raw({"type": "block-start", "index": index, "blockType": "text"}))
        stream.append(self.run("text-chunks", index, said))
        block = {"type": "text", "text": "".join(said)}
        stream.append(self.raw({"type": "block-end", "index": index, "block": block}))
        content.append(block)
        blocks.append({"type": "text"})
        ids: list[str] = []
        if tool:
            index += 1
            call_id = f"call-{turn}-{step}-{len(self.events)}"
            ids.append(call_id)
            args = ['{"path": "', *(p.replace('"', "") for p in self.pieces(5, 40)), '"}']
            stream.append(
                self.raw({"type": "block-start", "index": index, "blockType": "tool-call"})
            )
            first = {
                "type": "tool-call-delta",
                "index": index,
                "id": call_id,
                "name": "read",
                "argumentsDelta": "",
            }
            stream.append(self.raw(first))
            tool_run = self.run("tool-call-chunks", index, args)
            tool_run["id"] = call_id
            tool_run["args"] = tool_run.pop("texts")
            stream.append(tool_run)
            arguments = "".join(args)
            block = {"type": "tool-call", "id": call_id, "name": "read", "arguments": arguments}
            stream.append(self.raw({"type": "block-end", "index": index, "block": block}))
            content.append(block)
            blocks.append({"type": "tool-call"})
        usage = {"inputTokens": 900, "outputTokens": 300, "totalTokens": 1200}
        stream.append(self.raw({"type": "usage", "usage": usage}))
        state = {
            "response": {"kind": "deepseek-messages", "version": 1, "model": "m"},
            "blocks": blocks,
        }
        reason = {"kind": "tool-calls" if tool else "stop"}
        stream.append(self.raw({"type": "finish", "reason": reason, "replayState": state}))
        self.add(
            "session-log-deepseek/delivery-accepted",
            {
                "sessionId": self.header["id"],
                "sessionFormatVersion": 4,
                "throughSeq": len(self.events) - 1,
            },
        )
        message = {
            "role": "assistant",
            "content": content,
            "source": {
                "kind": "model",
                "provider": "deepseek-official",
                "model": "m",
                "replayState": state,
            },
            "id": f"msg-{self.header['id']}-{len(self.events)}",
        }
        self.add(
            "assistant/message",
            {"turn": turn, "step": step, "message": message, "usage": usage, "stream": stream},
            surfaceOp="append",
        )
        return ids

    def turn(self, turn: int) -> None:
        self.add("turn/start", {"turn": turn})
        step = 1
        while True:
            self.add("step/start", {"turn": turn, "step": step})
            if step == 1:
                text = "".join(self.pieces(5, 30))
                user = {
                    "content": [{"type": "text", "text": text}],
                    "source": {"kind": "user"},
                    "role": "user",
                    "id": f"u-{turn}",
                }
                self.add("user/message", user, surfaceOp="append")
            tool = step < 3 and self.rng.random() < 0.6
            for call_id in self.call(turn, step, tool=tool):
                self.add(
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "callId": call_id,
                        "name": "read",
                        "arguments": "{}",
                    },
                )
                result = {
                    "role": "tool",
                    "source": {"kind": "tool", "callId": call_id},
                    "toolCallId": call_id,
                    "content": [{"type": "text", "text": "".join(self.pieces(10, 60))}],
                    "id": f"r-{call_id}",
                }
                self.add(
                    "tool/result",
                    {"turn": turn, "step": step, "message": result},
                    surfaceOp="append",
                    sourceEventSeqs=[len(self.events) - 1],
                )
            self.add("step/end", {"turn": turn, "step": step})
            if not tool:
                break
            step += 1
        self.add("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


def _session(rng: random.Random, header: dict[str, Any], mb: float, seed: _Log | None) -> _Log:
    log = _Log(header, rng, 1_796_100_000_000 + rng.randint(0, 10_000))
    turn = 1
    if seed is not None:  # a fork child: the parent's completed turns, then its marker
        for event in seed.events:
            log.events.append(event)
            log.size += len(orjson.dumps(event)) + 1
        turn = 1 + sum(1 for e in seed.events if e["type"] == "turn/end")
        log.add("session/end-seed", {"inherited": True})
    else:
        log.add("permission/preset", {"preset": "workspace-write"})
    while log.size < mb * 1e6:
        log.turn(turn)
        turn += 1
    return log


def generate(mb: float, seed: int) -> list[_Log]:
    """A primary and its children, about ``mb`` megabytes in all."""
    rng = random.Random(seed)
    share = mb / (CHILDREN + 2)
    primary = _session(
        rng,
        {
            "type": "session",
            "version": 4,
            "id": PRIMARY_ID,
            "createdAt": 1_796_100_000_000,
            "cwd": "{{cwd}}",
            "isSeeded": False,
            "delegationDepth": 0,
        },
        2 * share,
        None,
    )
    ends = [i for i, e in enumerate(primary.events) if e["type"] == "turn/end"]
    logs = [primary]
    for n in range(1, CHILDREN + 1):
        fork = n % 2 == 1
        header = {
            "type": "session",
            "version": 4,
            "id": f"00000000-0000-4000-8000-{n:012d}",
            "createdAt": 1_796_100_001_000 + n,
            "cwd": "{{cwd}}",
            "parentSession": PRIMARY_ID,
            "isSeeded": fork,
            "origin": "subagent",
            "delegationDepth": 1,
        }
        prefix = None
        if fork:
            cut = ends[rng.randint(0, len(ends) - 1)]
            prefix = _Log(header, rng, 0)
            prefix.events = primary.events[: cut + 1]
        logs.append(_session(rng, header, share, prefix))
    return logs


def write(logs: list[_Log], plain: Path, packed: Path) -> None:
    """Both forms: plain JSONL, and zstd with one frame per write batch (header alone)."""
    for out in (plain, packed):
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    rng = random.Random(7)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
    for n, log in enumerate(logs):
        lines = [orjson.dumps(log.header), *map(orjson.dumps, log.events)]
        stem = "session" if n == 0 else f"session.{n}"
        (plain / f"{stem}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
        frames = [compressor.compress(lines[0] + b"\n")]
        k = 1
        while k < len(lines):
            size = rng.randint(20, 80)
            frames.append(compressor.compress(b"\n".join(lines[k : k + size]) + b"\n"))
            k += size
        (packed / f"{stem}.v4.jsonl.zstd").write_bytes(b"".join(frames))


def floor_pass(files: list[Path]) -> int:
    loads = orjson.loads
    n = 0
    for f in files:
        data = f.read_bytes()
        if f.name.endswith(".zstd"):
            reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
            data = reader.read()
        for line in data.splitlines():
            loads(line)
            n += 1
    return n


def measure(directory: Path, repeat: int) -> dict[str, Any]:
    files = sorted(f for f in directory.iterdir() if f.name.startswith("session."))
    size = sum(f.stat().st_size for f in files)
    scenario = load_scenario(directory)  # warm, and check that it loads
    lines = floor_pass(files)
    runs: dict[str, dict[str, list[float]]] = {
        k: {"cpu": [], "wall": []} for k in ("floor", "load")
    }
    for i in range(repeat):
        for name in ("floor", "load") if i % 2 == 0 else ("load", "floor"):
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            if name == "floor":
                floor_pass(files)
            else:
                load_scenario(directory)
            runs[name]["cpu"].append(time.process_time() - c0)
            runs[name]["wall"].append(time.perf_counter() - w0)
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in runs.items()}
    return {
        "logs": len(files),
        "lines": lines,
        "calls": scenario.call_count,
        "mb_on_disk": round(size / 1e6, 2),
        "floor_cpu_s": round(med["floor"]["cpu"], 4),
        "load_cpu_s": round(med["load"]["cpu"], 4),
        "ratio": round(med["load"]["cpu"] / med["floor"]["cpu"], 3),
        "ratio_wall": round(med["load"]["wall"] / med["floor"]["wall"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=100.0, help="plain size to generate (100)")
    parser.add_argument("--repeat", type=int, default=7, help="passes of each (7)")
    parser.add_argument("--seed", type=int, default=4, help="generator seed (4)")
    parser.add_argument("--regenerate", action="store_true", help="generate even if present")
    args = parser.parse_args(argv)
    plain, packed = DATA / "large-v4", DATA / "large-v4-zstd"
    if args.regenerate or not (plain / "session.jsonl").is_file() or not packed.is_dir():
        write(generate(args.mb, args.seed), plain, packed)
    result: dict[str, Any] = {
        "benchmark": "load-v4",
        "date": datetime.date.today().isoformat(),
        "repeat": args.repeat,
        "plain": measure(plain, args.repeat),
        "zstd": measure(packed, args.repeat),
        "python": platform.python_version(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
