"""The long run of the corpus mutation fuzzer (the engine is tests/unit/format/test_fuzz.py).

Usage::

    python3 benchmarks/fuzz.py --cases 200000              # seeded, reproducible
    python3 benchmarks/fuzz.py --cases 50000 --seed 7 --corpus DIR
    python3 benchmarks/fuzz.py --sqlite-flips 1200          # the SQLite store flip loop

Each case damages one file of a corpus scenario and loads it; a case fails when the
outcome is anything but a loaded scenario or a ``DshReplayError`` naming the file (and a
line that exists, when the problem is on a line), or when it hangs (each case has a
deadline). The run stops at the first failure; the message names the case number, file
and mutation, and the same ``--seed`` and ``--cases`` reproduce it.

With ``--sqlite-flips N`` it runs the SQLite flip loop instead (the engine is
``tests/support/store_flips.py``): N single-byte flips over a store of a primary, a
fork child and a spawn child, each loaded; a flip that loads with other sessions,
parents, seed lengths, event counts or calls than the original (a *silent structural
change*) stops the run.

Prints one JSON line: cases, seed, seconds, and how many cases ended in each outcome.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "unit" / "format")]

from support import store_flips  # noqa: E402
from test_fuzz import SEED, fuzz  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200_000, help="how many cases (200000)")
    parser.add_argument("--seed", type=int, default=SEED, help="random seed")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=REPO.parent / "shared" / "corpus" / "dsh-harness",
        help="the dsh-harness corpus directory",
    )
    parser.add_argument(
        "--sqlite-flips", type=int, default=0, metavar="N", help="run the SQLite flip loop"
    )
    args = parser.parse_args(argv)
    if args.sqlite_flips:
        seed = args.seed if args.seed != SEED else store_flips.SEED
        return sqlite_flips(args.sqlite_flips, seed)
    scenarios = sorted(p for p in args.corpus.iterdir() if (p / "session.jsonl").is_file())
    if not scenarios:
        print(f"fuzz: no scenario under {args.corpus}", file=sys.stderr)
        return 2
    start = time.perf_counter()

    def progress(n: int) -> None:
        if n and n % 10_000 == 0:
            rate = n / (time.perf_counter() - start)
            print(f"fuzz: {n} cases, {rate:.0f}/s", file=sys.stderr)

    with tempfile.TemporaryDirectory() as tmp:
        try:
            outcomes = fuzz(scenarios, args.cases, args.seed, Path(tmp), progress)
        except Exception as err:  # the message names the case number, file and mutation
            print(f"fuzz: FAILED (seed {args.seed}): {type(err).__name__}: {err}", file=sys.stderr)
            raise
    result = {
        "benchmark": "fuzz",
        "date": datetime.date.today().isoformat(),
        "cases": args.cases,
        "seed": args.seed,
        "scenarios": len(scenarios),
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": dict(sorted(outcomes.items())),
        "failures": 0,
    }
    print(json.dumps(result))
    return 0


def sqlite_flips(flips: int, seed: int) -> int:
    """The SQLite flip loop: ``flips`` byte flips, 0 silent structural changes or a failure."""
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.sqlite"
        size = len(store_flips.build_store(path))
        try:
            outcomes = store_flips.flip_loop(path, flips, seed)
        except AssertionError as err:  # names the flip: the same --seed reproduces it
            print(f"fuzz: FAILED (seed {seed}): {err}", file=sys.stderr)
            raise
    result = {
        "benchmark": "sqlite_flips",
        "date": datetime.date.today().isoformat(),
        "flips": flips,
        "seed": seed,
        "store_bytes": size,
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": dict(sorted(outcomes.items())),
        "silent_structural_changes": 0,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
