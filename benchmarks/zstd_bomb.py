"""Decompression bombs against the loader, under a capped address space.

Usage::

    python3 benchmarks/zstd_bomb.py                  # two 4 GiB bombs in a temp dir
    python3 benchmarks/zstd_bomb.py --gib 4 --as-gib 1.5 --dir /tmp

Two ``session.jsonl.zst`` logs are generated with zstandard's streaming compressor (never
committed, deleted afterwards): a header frame, then one frame (no content size in its
header) of ``--gib`` GiB of NUL bytes (``zeros``: the 131 KB file of issue 41) and of
small event lines (``small-lines``: the 361 KB file). Each is loaded in a fresh child
process whose address space is capped (``RLIMIT_AS``, ``--as-gib``) through
``load_scenario`` and through ``python -m pytest_dsh_replay check``; the target is a
``SessionLogError`` naming the file and ``MAX_DECOMPRESSED_BYTES``, within 2 s, under
a 1.5 GiB address space, and the command's exit code 1 with one line and no traceback.

Prints one JSON line: per bomb, the file's size, and per way of loading the outcome,
the wall and CPU seconds and the child's peak RSS.
"""

from __future__ import annotations

import argparse
import datetime
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HEADER = b'{"type":"session","version":0,"id":"bomb","createdAt":1,"delegationDepth":0}\n'
PATTERNS = {"zeros": b"\0", "small-lines": b'{"type":"turn/start","data":{}}\n'}

_LOAD = r"""
import json, resource, sys, time
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # PYTHONPATH picks the tree
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from pytest_dsh_replay import DshReplayError, load_scenario
wall, cpu = time.perf_counter(), time.process_time()
try:
    scenario = load_scenario(sys.argv[1])
    outcome = f"loaded {len(scenario.scripts)} session(s)"
except DshReplayError as err:
    outcome = f"{type(err).__name__}: {err}"
except MemoryError:
    outcome = "MemoryError"
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"outcome": outcome, "wall_s": round(time.perf_counter() - wall, 3),
                  "cpu_s": round(time.process_time() - cpu, 3), "peak_rss_mib": round(peak, 1)}))
"""

_CHECK = r"""
import resource, runpy, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # PYTHONPATH picks the tree
limit = int(sys.argv.pop(1))
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
sys.argv[0] = "dsh-replay"
runpy.run_module("pytest_dsh_replay", run_name="__main__")
"""


def write_bomb(path: Path, pattern: bytes, size: int) -> None:
    """A header frame, then one streamed frame of ``size`` bytes of ``pattern``."""
    import zstandard

    block = pattern * ((1 << 20) // len(pattern))
    with open(path, "wb") as f:
        f.write(zstandard.ZstdCompressor(write_checksum=True).compress(HEADER))
        compressor = zstandard.ZstdCompressor(level=3, write_checksum=True)
        with compressor.stream_writer(f, closefd=False) as writer:
            written = 0
            while written < size:
                piece = block[: size - written]
                writer.write(piece)
                written += len(piece)


def load(directory: Path, limit: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _LOAD, str(directory), str(limit)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return dict(json.loads(out.stdout))


def check(directory: Path, limit: int) -> dict[str, Any]:
    wall = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-c", _CHECK, str(limit), "check", str(directory)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return {
        "exit": done.returncode,
        "lines": len(lines),
        "traceback": "Traceback" in done.stderr,
        "first_line": lines[0] if lines else "",
        "wall_s": round(time.perf_counter() - wall, 3),
        "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 3),
        "peak_rss_mib": round(after.ru_maxrss / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gib", type=float, default=4.0, help="what each bomb expands to (4)")
    parser.add_argument("--as-gib", type=float, default=1.5, help="the address-space cap (1.5)")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the bombs")
    args = parser.parse_args(argv)
    size = int(args.gib * (1 << 30))
    limit = int(args.as_gib * (1 << 30))
    result: dict[str, Any] = {
        "benchmark": "zstd_bomb",
        "date": datetime.date.today().isoformat(),
        "expands_to": size,
        "address_space": limit,
    }
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="dsh-zstd-bomb-") as tmp:
        for name, pattern in PATTERNS.items():
            scenario = Path(tmp) / name
            scenario.mkdir()
            log = scenario / "session.jsonl.zst"
            started = time.perf_counter()
            write_bomb(log, pattern, size)
            result[name] = {
                "file_bytes": log.stat().st_size,
                "generate_s": round(time.perf_counter() - started, 1),
                "load_scenario": load(scenario, limit),
                "check": check(scenario, limit),
            }
            log.unlink()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
