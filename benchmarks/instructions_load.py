"""One load of a scenario, for counting its instructions under valgrind.

Usage::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        python3 benchmarks/instructions_load.py MODE DIR

``MODE`` is ``import`` (the imports only, to subtract), ``floor`` (``bench_load.py``'s
floor: read, decompress, ``orjson.loads`` per line), ``load`` (``load_scenario(DIR)``)
or ``all`` (the load, then every call's chunks read once, as a test that serves every
call does). valgrind prints ``Collected : N`` at exit: the instructions of the whole
process, which do not depend on the machine's speed (CPU time on a shared machine
does). Run the script from the repository root or anywhere with ``PYTHONPATH`` set to
the tree to count.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec  # noqa: F401 - imported in every mode, so "import" subtracts it
import zstandard  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_load

from pytest_dsh_replay import load_scenario


def main() -> None:
    mode, path = sys.argv[1], Path(sys.argv[2])
    if mode == "floor":
        bench_load.floor_pass(bench_load.log_files([path]))
    elif mode in ("load", "all"):
        scenario = load_scenario(path)
        if mode == "all":
            for script in scenario.scripts:
                for entry in script.entries:
                    entry.chunks  # noqa: B018 (reading them is the work counted)
    elif mode != "import":
        raise SystemExit(f"unknown mode {mode!r}: import, floor, load or all")


if __name__ == "__main__":
    main()
