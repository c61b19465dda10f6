"""Load + derive throughput of load_scenario, against the floor of parsing the same bytes.

Usage::

    python3 benchmarks/bench_load.py                  # (a) corpus, (b) large, (c) large v4
    python3 benchmarks/bench_load.py --repeat 21      # more passes (the medians settle)
    python3 benchmarks/bench_load.py --corpus DIR --large DIR --large-v4 DIR

(a) is every scenario directory of the real corpus (``../shared/corpus/dsh-harness``
beside the clone, read in place); (b) is the generated large scenario (run
``benchmarks/gen_large.py`` first) and (c) the same sessions as the runtime writes them,
session log v4 compressed with zstd (``benchmarks/gen_large.py --format 4``). For each,
one pass of ``load`` calls ``load_scenario`` on every scenario (a scenario the reference
itself refuses raises ``DshReplayError`` and counts as loaded: the work up to the refusal
is done); one pass of ``floor`` reads every session log of the same scenarios,
decompresses it when it is zstd (``zstandard``, frame by frame), and calls plain
``orjson.loads`` on each of its lines. The two alternate, in both orders, ``--repeat``
times; figures are medians of this process's CPU time (and wall time), and ``ratio`` is
load / floor. Throughput is the logs' plain-text bytes per second.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from pytest_dsh_replay import DshReplayError, load_scenario
from pytest_dsh_replay._scripts.scenario import iter_scenario_dirs

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus" / "dsh-harness"
DEFAULT_LARGE = HERE / "data" / "large"
DEFAULT_LARGE_V4 = HERE / "data" / "large-v4-b"
TARGET_RATIO = 1.2


def scenario_dirs(root: Path) -> list[Path]:
    return sorted(iter_scenario_dirs(root)) if root.is_dir() else []


def log_files(dirs: list[Path]) -> list[Path]:
    return [
        f
        for d in dirs
        for f in sorted(d.iterdir())
        if f.name.startswith("session.") and f.name.endswith((".jsonl", ".zst", ".zstd"))
    ]


def _plain(data: bytes) -> bytes:
    """Every zstd frame of ``data`` decompressed, one after the other."""
    import zstandard

    parts = []
    while data:
        obj = zstandard.ZstdDecompressor().decompressobj()
        parts.append(obj.decompress(data))
        data = obj.unused_data
    return b"".join(parts)


def floor_pass(files: list[Path]) -> int:
    loads = orjson.loads
    n = 0
    for f in files:
        if f.name.endswith((".zst", ".zstd")):
            with open(f, "rb") as fh:
                for line in _plain(fh.read()).splitlines():
                    loads(line)
                    n += 1
            continue
        with open(f, "rb") as fh:
            for line in fh:
                loads(line)
                n += 1
    return n


def plain_size(files: list[Path]) -> int:
    return sum(
        len(_plain(f.read_bytes())) if f.name.endswith((".zst", ".zstd")) else f.stat().st_size
        for f in files
    )


def load_pass(dirs: list[Path]) -> int:
    refused = 0
    for d in dirs:
        try:
            load_scenario(d)
        except DshReplayError:
            refused += 1
    return refused


def measure(dirs: list[Path], repeat: int) -> dict[str, Any]:
    files = log_files(dirs)
    size = plain_size(files)
    runs: dict[str, dict[str, list[float]]] = {
        "floor": {"cpu": [], "wall": []},
        "load": {"cpu": [], "wall": []},
    }
    fns: dict[str, Callable[[], int]] = {
        "floor": lambda: floor_pass(files),
        "load": lambda: load_pass(dirs),
    }
    lines = floor_pass(files)  # warm the page cache and the imports
    refused = load_pass(dirs)
    for i in range(repeat):
        for name in ("floor", "load") if i % 2 == 0 else ("load", "floor"):
            gc.collect()
            c0, w0 = time.process_time(), time.perf_counter()
            fns[name]()
            runs[name]["cpu"].append(time.process_time() - c0)
            runs[name]["wall"].append(time.perf_counter() - w0)
    med = {k: {m: statistics.median(v) for m, v in r.items()} for k, r in runs.items()}
    return {
        "scenarios": len(dirs),
        "refused_by_design": refused,
        "logs": len(files),
        "lines": lines,
        "mb": round(size / 1e6, 2),
        "floor_cpu_s": round(med["floor"]["cpu"], 4),
        "load_cpu_s": round(med["load"]["cpu"], 4),
        "floor_mb_per_s": round(size / 1e6 / med["floor"]["cpu"], 1),
        "load_mb_per_s": round(size / 1e6 / med["load"]["cpu"], 1),
        "ratio": round(med["load"]["cpu"] / med["floor"]["cpu"], 3),
        "ratio_wall": round(med["load"]["wall"] / med["floor"]["wall"], 3),
        "target_ratio": TARGET_RATIO,
        "met": med["load"]["cpu"] / med["floor"]["cpu"] <= TARGET_RATIO,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="(a) corpus root")
    parser.add_argument("--large", type=Path, default=DEFAULT_LARGE, help="(b) large scenario")
    parser.add_argument(
        "--large-v4", type=Path, default=DEFAULT_LARGE_V4, help="(c) large scenario, v4 + zstd"
    )
    parser.add_argument("--repeat", type=int, default=11, help="passes of each (11)")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {
        "benchmark": "load",
        "date": datetime.date.today().isoformat(),
        "repeat": args.repeat,
    }
    for key, root in (("corpus", args.corpus), ("large", args.large), ("large_v4", args.large_v4)):
        dirs = scenario_dirs(root)
        if not dirs:
            print(f"bench_load: no scenario under {root}", file=sys.stderr)
            result[key] = None
            continue
        result[key] = measure(dirs, args.repeat)
    result["python"] = platform.python_version()
    print(json.dumps(result))
    return 0 if result["corpus"] or result["large"] or result["large_v4"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
