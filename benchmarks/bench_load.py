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

Two more passes bound what a loader can reach: ``touch`` is the floor with each event
looked at once in Python (its type and its data read), the least any loader that
parses every event and handles it in Python costs (``touch_vs_floor``); ``raw`` looks at
each event the same way but decodes each line with ``msgspec`` into its type and its
``data`` as raw JSON, unparsed (``raw_vs_floor``): the least a loader that leaves
payloads raw until they are used costs.

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

import msgspec
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


def _lines(f: Path) -> list[bytes]:
    with open(f, "rb") as fh:
        data = fh.read()
    return (_plain(data) if f.name.endswith((".zst", ".zstd")) else data).splitlines()


def touch_pass(files: list[Path]) -> int:
    """The floor, and each event looked at once in Python (its type and its data read)."""
    loads = orjson.loads
    n = 0
    for f in files:
        for line in _lines(f):
            event = loads(line)
            if event.__class__ is dict and event.get("type") == "assistant/chunk":
                event.get("data")
            n += 1
    return n


def raw_pass(files: list[Path]) -> int:
    """The same look at each event, each line decoded with its ``data`` left as raw JSON."""
    decode = _raw_decoder()
    n = 0
    for f in files:
        for line in _lines(f):
            event = decode(line)
            if event.type == "assistant/chunk":
                event.data  # noqa: B018 - the look the touch pass takes
            n += 1
    return n


class _Envelope(msgspec.Struct):
    """An event's type, and its ``data`` as raw JSON (other fields are skipped)."""

    type: str = ""
    data: msgspec.Raw = msgspec.Raw(b"null")


def _raw_decoder() -> Callable[[bytes], Any]:
    return msgspec.json.Decoder(_Envelope).decode


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
    fns: dict[str, Callable[[], int]] = {
        "floor": lambda: floor_pass(files),
        "load": lambda: load_pass(dirs),
        "touch": lambda: touch_pass(files),
        "raw": lambda: raw_pass(files),
    }
    runs = {name: {"cpu": [], "wall": []} for name in fns}
    lines = floor_pass(files)  # warm the page cache and the imports
    refused = load_pass(dirs)
    touch_pass(files)
    raw_pass(files)
    names = list(fns)
    for i in range(repeat):
        for name in names if i % 2 == 0 else reversed(names):
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
        "touch_vs_floor": round(med["touch"]["cpu"] / med["floor"]["cpu"], 3),
        "raw_vs_floor": round(med["raw"]["cpu"] / med["floor"]["cpu"], 3),
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
