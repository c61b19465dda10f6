"""Where a replaying test's time goes: the plugin's per-test work, phase by phase.

Usage::

    python3 benchmarks/profile_test.py                 # 1,000 tests, 50-chunk calls
    python3 benchmarks/profile_test.py --tests 2000 --chunks 50 --top 25
    python3 benchmarks/profile_test.py --tests 1000 --scenarios 4   # tests share scenarios

Does, in this process, what the ``dsh_replay`` fixture and its end-of-test check do for
each of ``--tests`` tests that replay one recorded call of ``--chunks`` chunks (each
test its own scenario directory, as in ``bench_suite.py``): ``DshReplay.open`` through
one shared ``ScenarioCache`` (``open``: load, models, the test's store), read the call
to the end through ``model.stream`` (``stream``: the replay and the recorder logging
the call's conversation and chunks), then ``finish`` (``check``: every call used, the
replayed log compared with the recording) and ``close``. Each phase's CPU time
(``time.process_time``) is summed, and the garbage collector's own time is measured
through ``gc.callbacks`` (collections run inside whatever phase allocated last).

A second pass runs the same tests under ``cProfile`` and lists the functions with the
most internal time (``--top``), so the figures say what bounds the cost. Profiling
slows every Python call, so read its figures as shares, not as times.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import gc
import json
import platform
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_suite import REQUEST, write_scenarios

from pytest_dsh_replay import DshReplay
from pytest_dsh_replay._format.redact import recording_redactor
from pytest_dsh_replay._scripts.loading import ScenarioCache


class _GcClock:
    """The CPU time the collector spends, read from its start and stop callbacks."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start
            self.collections += 1


def plugin_cache() -> ScenarioCache:
    """A scenario cache as the plugin keeps it (files examined once per run)."""
    try:
        return ScenarioCache(recheck=False)  # type: ignore[call-arg, unused-ignore]
    except TypeError:  # older code: one kind of cache
        return ScenarioCache()


def run_tests(root: Path, work: Path, tests: int, scenarios: int = 0) -> dict[str, float]:
    """Replay ``tests`` tests as the plugin does; CPU seconds per phase.

    Test ``n`` replays scenario ``n % scenarios`` (``0``: each test its own).
    """
    scenarios = scenarios or tests
    cache = plugin_cache()
    redactor = recording_redactor()
    phases = {"open": 0.0, "stream": 0.0, "check": 0.0}
    for n in range(tests):
        c0 = time.process_time()
        replay = DshReplay.open(
            root / f"s{n % scenarios:05d}", cache=cache, workdir=work / str(n), redactor=redactor
        )
        c1 = time.process_time()
        for _chunk in replay.model.stream(REQUEST):
            pass
        c2 = time.process_time()
        replay.finish()
        replay.close()
        c3 = time.process_time()
        phases["open"] += c1 - c0
        phases["stream"] += c2 - c1
        phases["check"] += c3 - c2
    return phases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=1000, help="replaying tests (1000)")
    parser.add_argument("--chunks", type=int, default=50, help="chunks of the call (50)")
    parser.add_argument("--top", type=int, default=20, help="functions listed (20)")
    parser.add_argument(
        "--scenarios",
        type=int,
        default=0,
        help="distinct scenarios, the tests replaying them in turn (0: one per test)",
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "snapshots"
        root.mkdir()
        scenarios = args.scenarios or args.tests
        write_scenarios(root, scenarios, args.chunks)
        run_tests(root, Path(tmp) / "warm", min(scenarios, 50))  # imports, caches
        clock = _GcClock()
        gc.collect()
        gc.callbacks.append(clock)
        try:
            phases = run_tests(root, Path(tmp) / "timed", args.tests, scenarios)
        finally:
            gc.callbacks.remove(clock)
        profiler = cProfile.Profile()
        profiler.enable()
        run_tests(root, Path(tmp) / "profiled", args.tests, scenarios)
        profiler.disable()
    stats = pstats.Stats(profiler)
    total_internal = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda item: -item[1][2])  # type: ignore[attr-defined]
    top = [
        {
            "function": f"{Path(file).name}:{line}({name})",
            "calls_per_test": round(row[1] / args.tests, 1),
            "internal_share": round(row[2] / total_internal, 4),
        }
        for (file, line, name), row in rows[: args.top]
    ]
    per_test = {k: round(v / args.tests * 1e3, 4) for k, v in phases.items()}
    total = sum(phases.values())
    print(
        json.dumps(
            {
                "benchmark": "per_test_profile",
                "date": datetime.date.today().isoformat(),
                "tests": args.tests,
                "scenarios": scenarios,
                "chunks_per_call": args.chunks,
                "cpu_ms_per_test": per_test,
                "total_cpu_ms_per_test": round(total / args.tests * 1e3, 4),
                "gc_cpu_ms_per_test": round(clock.seconds / args.tests * 1e3, 4),
                "gc_share": round(clock.seconds / total, 4) if total else 0.0,
                "gc_collections": clock.collections,
                "top_internal_time": top,
                "python": platform.python_version(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
