"""Scale of a suite: the plugin's cost per test over a bare test, and at collection.

Usage::

    python3 benchmarks/bench_suite.py                 # 1,000 scenarios, 5 runs of each
    python3 benchmarks/bench_suite.py --tests 200 --runs 3

A temporary project gets ``--tests`` small scenario directories (``dsh_snapshots/`` beside
the test module, one recorded call of 12 chunks each) and three test modules of as many
parametrized tests:

- ``bare``: the test body does nothing;
- ``fixture``: the test requests ``dsh_replay`` (its scenario named by a
  ``dsh_scenario`` marker) and replays nothing: the plugin loads the scenario, builds the
  model and the
  session store, and runs its end-of-test checks (the unused-call check is switched off
  on the model, or the test would fail);
- ``replay``: the test requests ``dsh_replay`` and replays its one recorded call.

Each module runs in a fresh ``pytest`` subprocess (``-p no:xdist -p no:randomly``, its
own ``--basetemp``) with all the tests and with a fifth of them, ``--runs`` times,
alternating; figures are medians of the wall time of the whole process. The time per
test of a module is the difference between the two sizes divided by the difference in
tests (so start-up and imports cancel out); ``added_ms_per_test`` is ``replay``'s minus
``bare``'s, and ``added_fixed_s_per_run`` what the plugin adds once per run (importing
its core). Collection is timed with ``--collect-only`` on the ``bare`` module, with the
plugin and with ``-p no:dsh_replay``.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_dsh_replay import MemoryBackend, RecordingModel, SessionStore, write_scenario

PARAMS = """
import os

import pytest

CASES = [
    pytest.param(n, marks=pytest.mark.dsh_scenario(f"s{n:04d}"), id=f"{n:04d}")
    for n in range(int(os.environ["DSH_BENCH_TESTS"]))
]
"""

REQUEST = {"messages": [{"role": "user", "content": "hi"}]}

MODULES = {
    "bare": """
@pytest.mark.parametrize("n", CASES)
def test_replay(n):
    pass
""",
    "fixture": """
@pytest.mark.parametrize("n", CASES)
def test_replay(n, dsh_replay):
    assert dsh_replay.scenario is not None
    dsh_replay.model.assert_consumed = lambda: None  # nothing is replayed here
""",
    "replay": f"""
REQUEST = {REQUEST!r}

@pytest.mark.parametrize("n", CASES)
def test_replay(n, dsh_replay):
    for _chunk in dsh_replay.model.stream(REQUEST):
        pass
""",
}


class _Scripted:
    """Streams the benchmark's one recorded call (12 chunks)."""

    CHUNKS = (
        [{"type": "block-start", "index": 0, "blockType": "text"}]
        + [{"type": "text-delta", "index": 0, "text": f"w{i} "} for i in range(8)]
        + [
            {"type": "block-end", "index": 0, "block": {"type": "text", "text": "..."}},
            {"type": "usage", "usage": {"inputTokens": 3, "outputTokens": 8}},
            {"type": "finish", "reason": {"kind": "stop"}},
        ]
    )

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield from (dict(c) for c in self.CHUNKS)


def write_project(root: Path, tests: int) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    for name, source in MODULES.items():
        (root / f"test_{name}.py").write_text(PARAMS + source)
    snapshots = root / "dsh_snapshots"
    snapshots.mkdir()
    # Recorded as --dsh-record records the `replay` module's call, so the replayed-log
    # check of that module compares and passes, as in a real suite.
    store = SessionStore(MemoryBackend())
    model = RecordingModel(_Scripted(), store)
    list(model.stream(REQUEST))
    model.close_open_calls()
    write_scenario(snapshots / "s0000", store.sessions())
    log = (snapshots / "s0000" / "session.jsonl").read_bytes()
    for n in range(1, tests):
        d = snapshots / f"s{n:04d}"
        d.mkdir()
        (d / "session.jsonl").write_bytes(log)


def run_pytest(root: Path, args: list[str], scratch: Path, tests: int) -> float:
    basetemp = Path(tempfile.mkdtemp(dir=scratch))
    shutil.rmtree(basetemp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["DSH_BENCH_TESTS"] = str(tests)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-p",
        "no:randomly",
        f"--basetemp={basetemp}",
        *args,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    shutil.rmtree(basetemp, ignore_errors=True)
    if done.returncode not in (0, 5):
        raise SystemExit(f"bench_suite: {' '.join(args)} failed:\n{done.stdout[-3000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=1000, help="scenarios and tests (1000)")
    parser.add_argument("--runs", type=int, default=5, help="runs of each (5)")
    args = parser.parse_args(argv)
    small = max(args.tests // 5, 1)
    plans: dict[str, tuple[list[str], int]] = {
        "bare": (["test_bare.py"], args.tests),
        "bare_small": (["test_bare.py"], small),
        "bare_without_plugin": (["-p", "no:dsh_replay", "test_bare.py"], args.tests),
        "fixture": (["test_fixture.py"], args.tests),
        "fixture_small": (["test_fixture.py"], small),
        "replay": (["test_replay.py"], args.tests),
        "replay_small": (["test_replay.py"], small),
        "collect": (["--collect-only", "test_bare.py"], args.tests),
        "collect_without_plugin": (
            ["-p", "no:dsh_replay", "--collect-only", "test_bare.py"],
            args.tests,
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in plans}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        root.mkdir()
        scratch = Path(tmp) / "scratch"
        scratch.mkdir()
        write_project(root, args.tests)
        run_pytest(root, ["test_replay.py"], scratch, args.tests)  # warm the file cache
        for i in range(args.runs):
            names = list(plans) if i % 2 == 0 else list(reversed(plans))
            for name in names:
                argv_, tests = plans[name]
                times[name].append(run_pytest(root, argv_, scratch, tests))
    med = {name: statistics.median(values) for name, values in times.items()}
    span = args.tests - small

    def slope(name: str) -> float:
        # Seconds per test: the difference between the two sizes, so the fixed costs of
        # a run (start-up, imports, the summary) cancel out.
        return (med[name] - med[f"{name}_small"]) / span

    per_test = slope("replay") - slope("bare")
    result = {
        "benchmark": "suite",
        "date": datetime.date.today().isoformat(),
        "tests": args.tests,
        "runs": args.runs,
        "seconds": {name: round(value, 3) for name, value in med.items()},
        "bare_ms_per_test": round(slope("bare") * 1e3, 3),
        "replay_ms_per_test": round(slope("replay") * 1e3, 3),
        "added_ms_per_test": round(per_test * 1e3, 3),
        "added_ms_per_test_fixture_only": round((slope("fixture") - slope("bare")) * 1e3, 3),
        "added_fixed_s_per_run": round(med["replay"] - med["bare"] - per_test * args.tests, 3),
        "plugin_ms_per_test_not_using_it": round(
            (med["bare"] - med["bare_without_plugin"]) / args.tests * 1e3, 3
        ),
        "collection_overhead_ms": round((med["collect"] - med["collect_without_plugin"]) * 1e3, 1),
        "target_ms_per_test": 1.0,
        "met": per_test < 1e-3,
        "python": platform.python_version(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
