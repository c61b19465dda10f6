"""Replay throughput of ReplayModel: chunks per second through stream() and astream().

Usage::

    python3 benchmarks/bench_replay.py                    # a synthetic scenario (temp dir)
    python3 benchmarks/bench_replay.py PATH [PATH ...]    # scenarios, logs, stores, or
                                                          # folders holding scenarios

Every pass replays each scenario as a well-behaved caller does: a new ReplayModel, one
live session per recorded session in script order, every call read to the end. Calls
that cannot be read without help (``hang`` entries, entries with ``{{fromRequest:}}``
placeholders) are made but not read and not counted; ``throw`` entries count their
prefix. The baselines iterate the same chunk lists in a plain loop: ``plain`` over lists
built once, ``plain_fresh`` over ``entry.chunks`` (which builds new chunk objects, as
replay must). The four kinds of pass alternate (in both orders) ``--repeat`` times; each
figure is the median of the passes' CPU time of this process (``time.process_time``),
so other work on the machine does not count.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_dsh_replay import (
    DshReplayError,
    HangEntry,
    ReplayedModelError,
    ReplayEntry,
    ReplayModel,
    Scenario,
    ThrowEntry,
    dump_session_log,
    load_scenario,
)
from pytest_dsh_replay._scripts.scenario import iter_scenario_dirs

REQUEST: dict[str, Any] = {"messages": [{"role": "user", "content": "benchmark"}]}


def synthetic(root: Path, *, sessions: int, calls: int, deltas: int) -> Path:
    """Write a scenario of ``sessions`` logs with ``calls`` calls of ``deltas`` deltas each."""
    target = root / "synthetic"
    target.mkdir()
    parent = "00000000-0000-4000-8000-000000000000"
    for n in range(sessions):
        sid = parent if n == 0 else f"00000000-0000-4000-8000-{n:012d}"
        header: dict[str, Any] = {"type": "session", "version": 0, "id": sid, "createdAt": n}
        if n:
            header["parentSession"] = parent
        header["delegationDepth"] = 1 if n else 0
        events: list[dict[str, Any]] = []

        def chunk(turn: int, c: dict[str, Any], events: list[dict[str, Any]] = events) -> None:
            data = {"turn": turn, "step": 1, "chunk": c}
            events.append({"type": "assistant/chunk", "seq": len(events), "time": 0, "data": data})

        for turn in range(1, calls + 1):
            events.append(
                {
                    "type": "user/message",
                    "seq": len(events),
                    "time": 0,
                    "data": {"role": "user", "content": [{"type": "text", "text": f"q{turn}"}]},
                }
            )
            words = [f"word{i} " for i in range(deltas)]
            chunk(turn, {"type": "block-start", "index": 0, "blockType": "reasoning"})
            for w in words[: deltas // 4]:
                chunk(turn, {"type": "reasoning-delta", "index": 0, "text": w})
            thought = "".join(words[: deltas // 4])
            chunk(
                turn,
                {"type": "block-end", "index": 0, "block": {"type": "reasoning", "text": thought}},
            )
            chunk(turn, {"type": "block-start", "index": 1, "blockType": "text"})
            for w in words[deltas // 4 :]:
                chunk(turn, {"type": "text-delta", "index": 1, "text": w})
            text = "".join(words[deltas // 4 :])
            chunk(turn, {"type": "block-end", "index": 1, "block": {"type": "text", "text": text}})
            chunk(turn, {"type": "usage", "usage": {"inputTokens": 100, "outputTokens": deltas}})
            chunk(turn, {"type": "finish", "reason": {"kind": "stop"}})
        name = "session.jsonl" if n == 0 else f"session.{n}.jsonl"
        (target / name).write_bytes(dump_session_log(header, events, envelope=False))
    return target


def readable(entry: ReplayEntry) -> bool:
    return not isinstance(entry, HangEntry) and not entry.has_placeholders


def replay_sync(scenarios: list[Scenario]) -> int:
    count = 0
    for scenario in scenarios:
        model = ReplayModel(scenario)
        stream = model.stream
        for i, script in enumerate(scenario.scripts):
            sid = str(i)
            for entry in script.entries:
                if not readable(entry):
                    stream(REQUEST, session_id=sid)
                    continue
                try:
                    for _chunk in stream(REQUEST, session_id=sid):
                        count += 1
                except ReplayedModelError:
                    pass
    return count


async def _replay_async(scenarios: list[Scenario]) -> int:
    count = 0
    for scenario in scenarios:
        model = ReplayModel(scenario)
        for i, script in enumerate(scenario.scripts):
            sid = str(i)
            for entry in script.entries:
                if not readable(entry):
                    model.astream(REQUEST, session_id=sid)
                    continue
                try:
                    async for _chunk in model.astream(REQUEST, session_id=sid):
                        count += 1
                except ReplayedModelError:
                    pass
    return count


def replay_async(scenarios: list[Scenario]) -> int:
    return asyncio.run(_replay_async(scenarios))


def readable_entries(scenarios: list[Scenario]) -> list[ReplayEntry]:
    return [e for s in scenarios for script in s.scripts for e in script.entries if readable(e)]


def fresh_objects(scenarios: list[Scenario]) -> bool:
    """Whether two replays of the same calls yield equal but distinct chunk objects."""
    first, second = ReplayModel(scenarios[0]), ReplayModel(scenarios[0])
    for i, script in enumerate(scenarios[0].scripts):
        for entry in script.entries:
            if not readable(entry):
                return True
            try:
                a = list(first.stream(REQUEST, session_id=str(i)))
                b = list(second.stream(REQUEST, session_id=str(i)))
            except ReplayedModelError:
                continue
            if a != b or any(x is y for x, y in zip(a, b, strict=True)):
                return False
            if a:
                a[0]["mutated"] = True  # a consumer that changes what it got changes nothing
                third = ReplayModel(scenarios[0]).stream(REQUEST, session_id=str(i))
                if next(iter(third)) != b[0]:
                    return False
            return True
    return True


def median_rates(fns: dict[str, Callable[[], int]], repeat: int) -> dict[str, tuple[float, int]]:
    """Each pass's median rate (items per CPU second) and item count, passes interleaved."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    counts: dict[str, int] = {}
    names = list(fns)
    for i in range(repeat):
        for name in names if i % 2 == 0 else names[::-1]:
            start = time.process_time()
            counts[name] = fns[name]()
            times[name].append(time.process_time() - start)
    out = {}
    for name, values in times.items():
        median = statistics.median(values)
        out[name] = (counts[name] / median if median > 0 else float("inf")), counts[name]
    return out


def load(paths: list[Path]) -> tuple[list[Scenario], list[str]]:
    scenarios: list[Scenario] = []
    skipped: list[str] = []
    for path in paths:
        candidates = (
            [path]
            if not path.is_dir() or (path / "session.jsonl").exists()
            else list(iter_scenario_dirs(path))
        )
        for candidate in candidates:
            try:
                scenarios.append(load_scenario(candidate))
            except DshReplayError:
                skipped.append(str(candidate))
    return scenarios, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    parser.add_argument("--sessions", type=int, default=3, help="synthetic: sessions (3)")
    parser.add_argument("--calls", type=int, default=200, help="synthetic: calls per session (200)")
    parser.add_argument("--deltas", type=int, default=40, help="synthetic: deltas per call (40)")
    parser.add_argument("--repeat", type=int, default=7, help="passes; the median counts (7)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        if args.paths:
            scenarios, skipped = load(args.paths)
            label = " ".join(str(p) for p in args.paths)
        else:
            path = synthetic(
                Path(tmp), sessions=args.sessions, calls=args.calls, deltas=args.deltas
            )
            scenarios, skipped = load([path])
            label = (
                f"synthetic({args.sessions} sessions x {args.calls} calls x {args.deltas} deltas)"
            )
        if not scenarios:
            print(f"bench_replay: no scenario loaded from {label}", file=sys.stderr)
            return 1
        entries = readable_entries(scenarios)
        lists = [entry.chunks for entry in entries]

        def plain() -> int:
            count = 0
            for chunks in lists:
                for _chunk in chunks:
                    count += 1
            return count

        def plain_fresh() -> int:
            count = 0
            for entry in entries:
                for _chunk in entry.chunks:
                    count += 1
            return count

        def throw_prefixes() -> int:
            return sum(e.chunk_count for e in entries if isinstance(e, ThrowEntry))

        rates = median_rates(
            {
                "plain": plain,
                "plain_fresh": plain_fresh,
                "stream": lambda: replay_sync(scenarios),
                "astream": lambda: replay_async(scenarios),
            },
            args.repeat,
        )
        plain_rate, plain_n = rates["plain"]
        fresh_rate, _ = rates["plain_fresh"]
        stream_rate, stream_n = rates["stream"]
        astream_rate, astream_n = rates["astream"]
        assert stream_n == astream_n == plain_n, (stream_n, astream_n, plain_n, throw_prefixes())
        result = {
            "benchmark": "replay",
            "date": datetime.date.today().isoformat(),
            "scenario": label,
            "scenarios": len(scenarios),
            "skipped": len(skipped),
            "calls": len(entries),
            "chunks_per_pass": stream_n,
            "stream_chunks_per_s": round(stream_rate),
            "astream_chunks_per_s": round(astream_rate),
            "plain_loop_chunks_per_s": round(plain_rate),
            "plain_fresh_chunks_per_s": round(fresh_rate),
            "stream_vs_plain": round(stream_rate / plain_rate, 4),
            "stream_vs_plain_fresh": round(stream_rate / fresh_rate, 4),
            "astream_vs_plain": round(astream_rate / plain_rate, 4),
            "astream_vs_stream": round(astream_rate / stream_rate, 4),
            "fresh_objects_per_call": fresh_objects(scenarios),
            "target_stream_chunks_per_s": 2_000_000,
            "met": stream_rate >= 2_000_000 and fresh_objects(scenarios),
            "repeat": args.repeat,
            "python": platform.python_version(),
            "machine": platform.machine(),
        }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
