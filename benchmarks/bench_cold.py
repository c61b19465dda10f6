"""Cold start: from ``import pytest_dsh_replay`` to the first replayed chunk, in a new process.

Usage::

    python3 benchmarks/bench_cold.py                  # 21 processes
    python3 benchmarks/bench_cold.py --runs 41

A temporary scenario (one recorded call of 12 chunks) is written once. Each run is a
fresh interpreter that imports the package, then (timed) imports ``load_scenario`` and
``ReplayModel``, loads the scenario and reads the first chunk of its call; it reports
its own CPU time (``time.process_time``) and wall time for that part, and which of
``regex``, ``asyncio`` and ``sqlite3`` it imported. Bytecode caches are written by a
first run and used by the rest, as in an installed package. Figures are medians.

The floor: interleaved with those runs, as many fresh interpreters import the package,
then (timed) only ``import orjson``, which the path cannot avoid (orjson is a core
dependency, and importing it imports ``dataclasses``, ``inspect``, ``json``, ``uuid``
and more). ``ours_cpu_ms`` is the first chunk's median less the floor's median: the
package's own part.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore, write_scenario

TARGET_MS = 30.0

CHILD = """
import sys, time
import pytest_dsh_replay
c0, w0 = time.process_time(), time.perf_counter()
from pytest_dsh_replay import ReplayModel, load_scenario
model = ReplayModel(load_scenario(sys.argv[1]))
first = next(iter(model.stream({"messages": [{"role": "user", "content": "hi"}]})))
c1, w1 = time.process_time(), time.perf_counter()
loaded = [m for m in ("regex", "asyncio", "sqlite3") if m in sys.modules]
print(json.dumps({"cpu_ms": (c1 - c0) * 1e3, "wall_ms": (w1 - w0) * 1e3, "loaded": loaded}))
"""

FLOOR = """
import sys, time
import pytest_dsh_replay
c0, w0 = time.process_time(), time.perf_counter()
import orjson
c1, w1 = time.process_time(), time.perf_counter()
print(json.dumps({"cpu_ms": (c1 - c0) * 1e3, "wall_ms": (w1 - w0) * 1e3}))
"""


class _Scripted:
    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for i in range(8):
            yield {"type": "text-delta", "index": 0, "text": f"w{i} "}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "..."}}
        yield {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 8}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="processes (21)")
    args = parser.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SessionStore(MemoryBackend())
        model = RecordingModel(_Scripted(), store)
        for _chunk in model.stream({"messages": [{"role": "user", "content": "hi"}]}):
            pass
        close = getattr(model, "close_open_calls", None)  # older versions have none
        if close is not None:
            close()
        scenario = Path(tmp) / "scenario"
        write_scenario(scenario, store.sessions())
        for i in range(args.runs + 1):  # the first run writes the bytecode caches
            for child, into in ((CHILD, runs), (FLOOR, floors)):  # interleaved
                done = subprocess.run(
                    [sys.executable, "-c", "import json\n" + child, str(scenario)],
                    capture_output=True,
                    text=True,
                    check=True,
                    env=env,
                    cwd=tmp,
                )
                if i:
                    into.append(json.loads(done.stdout))
    cpu = statistics.median(r["cpu_ms"] for r in runs)
    floor = statistics.median(r["cpu_ms"] for r in floors)
    result = {
        "benchmark": "cold_start",
        "date": datetime.date.today().isoformat(),
        "runs": args.runs,
        "first_chunk_cpu_ms": round(cpu, 1),
        "first_chunk_wall_ms": round(statistics.median(r["wall_ms"] for r in runs), 1),
        "orjson_import_cpu_ms": round(floor, 1),
        "orjson_import_wall_ms": round(statistics.median(r["wall_ms"] for r in floors), 1),
        "ours_cpu_ms": round(cpu - floor, 1),
        "imported": sorted({m for r in runs for m in r["loaded"]}),
        "target_ms": TARGET_MS,
        "met": cpu <= TARGET_MS,
        "python": platform.python_version(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
