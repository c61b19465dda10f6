"""The replayed-log check on the project's example scenarios: realistic multi-session logs.

Usage::

    python3 benchmarks/bench_check.py                  # 200 tests per example, 5 passes
    python3 benchmarks/bench_check.py --tests 400 --examples mixed,fork

``bench_suite.py`` and ``profile_test.py`` replay one call of text deltas, whose log the
check mostly passes over as one run of chunk events. The example scenarios in
``example_snapshots/`` are what an agent's tests record: a parent and its spawn and fork
children, system prompts, tools, tool calls and results, messages with ids. For each
example, each of ``--tests`` tests replays its own copy of the scenario (as a suite's
tests replay their own recordings) through one shared ``ScenarioCache`` (the plugin's,
files examined once per run): ``DshReplay.open``, the example agent
(``tests/support/example_agent.py``) runs the example's prompts against
``dsh_replay.model`` and ``dsh_replay.sessions``, then ``finish`` (every call used, the
replayed logs compared with the recording) and ``close``.

Per example, the CPU time (``time.process_time``) of the check (``finish``) and of the
whole test, per test, medians over ``--repeat`` passes; the garbage collector's share of
the check is measured through ``gc.callbacks``. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import importlib.util
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from profile_test import _GcClock, plugin_cache

from pytest_dsh_replay import DshReplay
from pytest_dsh_replay._format.redact import recording_redactor

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "example_snapshots"
DEFAULT = "spawn,multi-spawn,fork,mixed,tool-call,retry"


def example_prompts() -> dict[str, list[str]]:
    """The prompts of each example, as the project's own example tests run them."""
    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location(
        "bench_examples", ROOT / "tests" / "plugin" / "test_examples.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.EXAMPLES)


def one_pass(
    name: str, prompts: list[str], copies: Path, work: Path, tests: int, agent: Any
) -> tuple[float, float, float]:
    """CPU seconds of the checks, of the collector inside them, and of the whole tests."""
    cache = plugin_cache()
    redactor = recording_redactor()
    clock = _GcClock()
    check = whole = 0.0
    for n in range(tests):
        started = time.process_time()
        replay = DshReplay.open(
            copies / f"{name}-{n:04d}", cache=cache, workdir=work / str(n), redactor=redactor
        )
        runner = agent(replay.model, replay.sessions)
        for prompt in prompts:
            runner.run(prompt)
        before = time.process_time()
        gc.callbacks.append(clock)
        try:
            replay.finish()
        finally:
            gc.callbacks.remove(clock)
        ended = time.process_time()
        replay.close()
        check += ended - before
        whole += time.process_time() - started
    return check, clock.seconds, whole


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tests", type=int, default=200, help="tests per example (200)")
    parser.add_argument("--repeat", type=int, default=5, help="passes (5)")
    parser.add_argument("--examples", default=DEFAULT, help=f"which ({DEFAULT})")
    args = parser.parse_args()
    prompts = example_prompts()
    from support.example_agent import ExampleAgent  # on the path since example_prompts

    names = args.examples.split(",")
    samples: dict[str, dict[str, list[float]]] = {
        name: {"check": [], "gc": [], "test": []} for name in names
    }
    with tempfile.TemporaryDirectory() as tmp:
        copies = Path(tmp) / "copies"
        for name in names:
            for n in range(args.tests):
                shutil.copytree(EXAMPLES / name, copies / f"{name}-{n:04d}")
        for k in range(args.repeat + 1):  # the first pass warms imports and caches
            for name in names:
                work = Path(tmp) / f"work-{k}-{name}"
                check, collector, whole = one_pass(
                    name, prompts[name], copies, work, args.tests, ExampleAgent
                )
                if k:
                    per = {"check": check, "gc": collector, "test": whole}
                    for key, value in per.items():
                        samples[name][key].append(value / args.tests * 1e3)
    result = {
        "benchmark": "check",
        "date": datetime.date.today().isoformat(),
        "tests": args.tests,
        "repeat": args.repeat,
        "ms_per_test": {
            name: {key: round(statistics.median(v), 4) for key, v in kinds.items()}
            for name, kinds in samples.items()
        },
        "python": platform.python_version(),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
