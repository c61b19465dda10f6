"""Peak memory of load_scenario on the large scenario, against the size of its logs.

Usage::

    python3 benchmarks/bench_memory.py                 # benchmarks/data/large
    python3 benchmarks/bench_memory.py PATH

Each figure comes from a fresh child process that imports the package, notes its
resident set size (RSS), loads the scenario once and keeps it alive:

- ``rss_growth``: the process's peak RSS (``ru_maxrss``) minus its RSS before the load;
- ``traced_peak`` / ``traced_retained``: in a second child, ``tracemalloc``'s peak of
  Python allocations during the load, and what the loaded scenario still holds.

The target is ``rss_growth`` (and ``traced_peak``) at most 3x the logs' bytes. The same
peak can be read with ``/usr/bin/time -v python3 -c "..."`` ("Maximum resident set size").

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_LARGE = HERE / "data" / "large"

_CHILD = r"""
import gc, json, resource, sys
from pytest_dsh_replay import load_scenario

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()

path, mode = sys.argv[1], sys.argv[2]
gc.collect()
if mode == "rss":
    before = rss()
    scenario = load_scenario(path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"rss_before": before, "rss_peak": peak, "rss_after": rss(),
                      "calls": scenario.call_count}))
else:
    import tracemalloc
    tracemalloc.start()
    scenario = load_scenario(path)
    current, peak = tracemalloc.get_traced_memory()
    print(json.dumps({"traced_peak": peak, "traced_retained": current}))
"""


def child(path: Path, mode: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), mode],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_LARGE)
    args = parser.parse_args(argv)
    path: Path = args.path
    if not path.exists():
        print(f"bench_memory: {path} is missing; run benchmarks/gen_large.py", file=sys.stderr)
        return 1
    logs = [path] if path.is_file() else sorted(path.glob("session*.jsonl*"))
    size = sum(f.stat().st_size for f in logs)
    rss = child(path, "rss")
    traced = child(path, "trace")
    growth = rss["rss_peak"] - rss["rss_before"]
    result = {
        "benchmark": "memory",
        "date": datetime.date.today().isoformat(),
        "scenario": str(path),
        "mb": round(size / 1e6, 2),
        "calls": rss["calls"],
        "rss_before_mb": round(rss["rss_before"] / 1e6, 1),
        "rss_peak_mb": round(rss["rss_peak"] / 1e6, 1),
        "rss_growth_mb": round(growth / 1e6, 1),
        "rss_retained_mb": round((rss["rss_after"] - rss["rss_before"]) / 1e6, 1),
        "traced_peak_mb": round(traced["traced_peak"] / 1e6, 1),
        "traced_retained_mb": round(traced["traced_retained"] / 1e6, 1),
        "rss_growth_vs_size": round(growth / size, 3),
        "traced_peak_vs_size": round(traced["traced_peak"] / size, 3),
        "target_vs_size": 3.0,
        "met": growth <= 3 * size and traced["traced_peak"] <= 3 * size,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
