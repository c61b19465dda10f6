"""Load + derive of the corpus against the dsh harness's own TypeScript loader, warm.

Usage::

    python3 benchmarks/bench_reference.py --reference CHECKOUT --tsx TSX [--rounds 3] [--repeat 15]

``CHECKOUT`` is a checkout of the dsh harness at the corpus's commit (the corpus README
names the repository and the commit); ``TSX`` is the ``tsx`` command (``npm install
tsx@4`` in a scratch directory outside the repository gives ``node_modules/.bin/tsx``).
Nothing is built and nothing of the harness is kept: the harness's TypeScript runs as
it is, through ``tsx`` under ``node``, with each workspace package name resolved to the
package's own sources by a path map that this script writes, beside its small driver,
into a temporary directory it removes afterwards.

The driver calls the harness's ``loadSessionScripts`` on every scenario of the corpus
(the primary ``session.jsonl``, its ``session.<n>.jsonl`` children in order of ``n``,
``replay.override.json`` where there is one: the corpus README's convention), a few
passes to warm the JIT, then ``--repeat`` passes, each timed in CPU time of the node
process (``process.cpuUsage``) and wall time. A scenario the harness refuses counts as
loaded, as in ``bench_load.py``.

Each round runs the node driver, then the same number of passes of ``bench_load.py``'s
``load`` (``load_scenario`` on every scenario) and ``floor`` in this process, alternating;
medians per round, and over the rounds the median of each round's ratios. Run it once
with ``PYTHONPATH`` at each tree to compare, interleaved. Prints one JSON line: ``ratio``
is load / reference (target <= 0.85), ``floor_ratio`` load / floor (target <= 2.3).

Without ``--reference`` it says so and exits 2.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_load

REPLAY_MODULE = "packages/test-support/llm-replay/src/index.ts"
_CHILD = re.compile(r"session\.([1-9][0-9]*)\.jsonl")

DRIVER = """\
import { readFileSync } from 'node:fs'
import { loadSessionScripts } from %(module)s

const [configsFile, warmText, repeatText] = process.argv.slice(2)
const configs = JSON.parse(readFileSync(configsFile, 'utf8'))

function pass() {
  let refused = 0
  for (const config of configs) {
    try { loadSessionScripts(config) } catch { refused += 1 }
  }
  return refused
}

let refused = 0
for (let i = 0; i < Number(warmText); i += 1) refused = pass()
const cpu = []
const wall = []
for (let i = 0; i < Number(repeatText); i += 1) {
  const c0 = process.cpuUsage()
  const w0 = process.hrtime.bigint()
  pass()
  const c1 = process.cpuUsage(c0)
  cpu.push((c1.user + c1.system) / 1e6)
  wall.push(Number(process.hrtime.bigint() - w0) / 1e9)
}
process.stdout.write(JSON.stringify({ refused, cpu, wall, node: process.version }))
"""


def scenario_config(d: Path) -> dict[str, Any]:
    """The config the harness's snapshot suites give its loader for scenario ``d``."""
    children = sorted((int(m.group(1)), f) for f in d.iterdir() if (m := _CHILD.fullmatch(f.name)))
    config: dict[str, Any] = {"file": str(d / "session.jsonl")}
    if children:
        config["childFiles"] = [str(f) for _, f in children]
    if (d / "replay.override.json").is_file():
        config["overrideFile"] = str(d / "replay.override.json")
    return config


def path_map(reference: Path) -> dict[str, list[str]]:
    """Each workspace package name of the checkout resolved to its own ``src``."""
    paths: dict[str, list[str]] = {}
    for manifest in sorted(reference.glob("*/*/*/package.json")) + sorted(
        reference.glob("vendor/*/package.json")
    ):
        src = manifest.parent / "src"
        if not (src / "index.ts").is_file():
            continue
        name = json.loads(manifest.read_text(encoding="utf-8")).get("name")
        if isinstance(name, str):
            paths[name] = [str(src / "index.ts")]
            paths[f"{name}/*"] = [f"{src}/*.ts", f"{src}/*"]
    return paths


def write_driver(workdir: Path, reference: Path, configs: list[dict[str, Any]]) -> Path:
    tsconfig = {
        "compilerOptions": {
            "target": "es2022",
            "module": "esnext",
            "moduleResolution": "bundler",
            "allowImportingTsExtensions": True,
            "baseUrl": str(reference),
            "paths": path_map(reference),
        }
    }
    (workdir / "tsconfig.json").write_text(json.dumps(tsconfig), encoding="utf-8")
    (workdir / "configs.json").write_text(json.dumps(configs), encoding="utf-8")
    module = json.dumps(str(reference / REPLAY_MODULE))
    driver = workdir / "driver.mts"
    driver.write_text(DRIVER % {"module": module}, encoding="utf-8")
    return driver


def run_reference(tsx: str, workdir: Path, driver: Path, warm: int, repeat: int) -> dict[str, Any]:
    out = subprocess.run(
        [
            tsx,
            "--tsconfig",
            str(workdir / "tsconfig.json"),
            str(driver),
            str(workdir / "configs.json"),
            str(warm),
            str(repeat),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=workdir,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def python_passes(dirs: list[Path], files: list[Path], repeat: int) -> dict[str, list[float]]:
    fns = {
        "load": lambda: bench_load.load_pass(dirs),
        "floor": lambda: bench_load.floor_pass(files),
    }
    runs: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for i in range(repeat):
        for name in names if i % 2 == 0 else reversed(names):
            gc.collect()
            c0 = time.process_time()
            fns[name]()
            runs[name].append(time.process_time() - c0)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, help="a checkout of the dsh harness")
    parser.add_argument("--tsx", default="tsx", help="the tsx command (default: tsx on PATH)")
    parser.add_argument("--corpus", type=Path, default=bench_load.DEFAULT_CORPUS)
    parser.add_argument("--rounds", type=int, default=3, help="node, then Python, this often (3)")
    parser.add_argument("--repeat", type=int, default=15, help="timed passes per round (15)")
    parser.add_argument("--warm", type=int, default=5, help="untimed passes first (5)")
    args = parser.parse_args(argv)
    if args.reference is None or not (args.reference / REPLAY_MODULE).is_file():
        print(f"bench_reference: no harness checkout with {REPLAY_MODULE} given", file=sys.stderr)
        return 2
    dirs = bench_load.scenario_dirs(args.corpus)
    files = bench_load.log_files(dirs)
    configs = [scenario_config(d) for d in dirs]
    for _ in range(args.warm):
        bench_load.load_pass(dirs)
        bench_load.floor_pass(files)
    rounds: list[dict[str, float]] = []
    workdir = Path(tempfile.mkdtemp(prefix="dsh-reference-"))
    try:
        driver = write_driver(workdir, args.reference.resolve(), configs)
        for _ in range(args.rounds):
            ref = run_reference(args.tsx, workdir, driver, args.warm, args.repeat)
            ours = python_passes(dirs, files, args.repeat)
            med = {
                "reference": statistics.median(ref["cpu"]),
                "reference_wall": statistics.median(ref["wall"]),
                "load": statistics.median(ours["load"]),
                "floor": statistics.median(ours["floor"]),
            }
            rounds.append(med)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    ratios = [r["load"] / r["reference"] for r in rounds]
    floor_ratios = [r["load"] / r["floor"] for r in rounds]
    result = {
        "benchmark": "load-reference",
        "date": datetime.date.today().isoformat(),
        "scenarios": len(dirs),
        "refused_by_reference": ref["refused"],
        "rounds": [{k: round(v, 5) for k, v in r.items()} for r in rounds],
        "ratio": round(statistics.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "floor_ratio": round(statistics.median(floor_ratios), 3),
        "floor_ratios": [round(r, 3) for r in floor_ratios],
        "target_ratio": 0.85,
        "target_floor_ratio": 2.3,
        "python": platform.python_version(),
        "node": ref["node"],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
