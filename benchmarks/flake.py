"""How often the dsh runtime's parallel children replay wrongly, beside busy loops.

Usage::

    python3 benchmarks/flake.py                        # 50 replays per route, 4 busy loops
    python3 benchmarks/flake.py --runs 10 --busy 0     # a quick look on an idle machine
    python3 benchmarks/flake.py --routes openai --keep /tmp/flake   # keep failing outputs

The task (issue 40): the runtime's primary starts two spawned children of equal speed
in parallel, each calls a tool (``glob``) and reports; both children's notices reach
the primary close together, and the primary then forks a reviewer. Its recordings are
``example_snapshots/runtime-parallel`` (the runtime's own ``deepseek-official`` route,
Anthropic Messages) and ``example_snapshots/runtime-parallel-openai`` (its
``llm-pi-ai`` route, chat completions), recorded by ``tests/e2e/test_dsh_runtime.py``.

Each replay is that test, ``test_runtime_example[<scenario>]``, in a fresh ``pytest``
subprocess (``-p no:randomly -p no:cacheprovider``, its own ``--basetemp``): the real
runtime against the replay endpoint, the replayed-log check and the transcript
snapshot. A replay fails when that test fails for any reason. The routes alternate
run by run. ``--busy`` processes spin (``while True: pass``) for the whole measurement,
so the runtime, the endpoint and the busy loops share the machine's cores; they are
stopped at the end.

Prints one JSON line: per route the replays, the failures and, per failure, the first
line naming the error (the exception and, for a log difference, the event and the JSON
path).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = {"messages": "runtime-parallel", "openai": "runtime-parallel-openai"}
TEST = "tests/e2e/test_dsh_runtime.py::test_runtime_example[{}]"
_ERROR = re.compile(
    r"^E\s+(?:pytest_dsh_replay\.\w+\.)?(\w+(?:Error|Exception)\b.*)$|"
    r"^E\s+(.*\bat \$\S* recorded: .*)$|"
    r"^E\s+(AssertionError.*)$",
    re.M,
)


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def _summary(output: str) -> str:
    """The lines that name what failed (the error and where a log differs)."""
    found = [next(g for g in m.groups() if g) for m in _ERROR.finditer(output)]
    if not found:
        tail = [line for line in output.splitlines() if line.strip()][-3:]
        return " | ".join(tail)[:600]
    return " | ".join(dict.fromkeys(line.strip() for line in found))[:600]


def replay(route: str, basetemp: Path) -> tuple[bool, float, str]:
    """One replay of the route's scenario; returns (passed, wall seconds, output)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "pytest",
        TEST.format(SCENARIOS[route]),
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        f"--basetemp={basetemp}",
    ]
    start = time.monotonic()
    done = subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600
    )
    return done.returncode == 0, time.monotonic() - start, done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=50, help="replays per route")
    parser.add_argument("--busy", type=int, default=4, help="busy loops beside the replays")
    parser.add_argument("--routes", default="messages,openai", help="messages, openai or both")
    parser.add_argument("--keep", type=Path, help="write each failing replay's output here")
    args = parser.parse_args()
    routes = [r.strip() for r in args.routes.split(",") if r.strip()]
    unknown = set(routes) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown route(s) {sorted(unknown)}: choose from {sorted(SCENARIOS)}")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    results: dict[str, dict[str, Any]] = {
        r: {"scenario": SCENARIOS[r], "runs": 0, "failed": 0, "failures": [], "wall_s": []}
        for r in routes
    }
    try:
        with tempfile.TemporaryDirectory(prefix="dsh-flake-") as scratch:
            for run in range(args.runs):
                for route in routes:
                    passed, wall, output = replay(route, Path(scratch) / f"{route}-{run}")
                    result = results[route]
                    result["runs"] += 1
                    result["wall_s"].append(wall)
                    if not passed:
                        result["failed"] += 1
                        result["failures"].append({"run": run, "error": _summary(output)})
                        if args.keep is not None:
                            (args.keep / f"{route}-{run}.txt").write_text(output, "utf-8")
                    print(
                        f"{route} #{run}: {'ok' if passed else 'FAILED'} ({wall:.1f} s)",
                        file=sys.stderr,
                    )
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    for result in results.values():
        walls = result.pop("wall_s")
        result["wall_s_median"] = round(statistics.median(walls), 2) if walls else None
    print(
        json.dumps(
            {
                "benchmark": "flake",
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "commit": _commit(),
                "python": platform.python_version(),
                "cores": os.cpu_count(),
                "busy_loops": args.busy,
                "routes": results,
            }
        )
    )


if __name__ == "__main__":
    main()
