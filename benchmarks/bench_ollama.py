"""A replayed call through the ``ollama`` client: the endpoint against the client's own floor.

Usage::

    pip install ollama -r benchmarks/requirements.txt
    python3 benchmarks/bench_ollama.py            # 300 calls of 50 chunks, 7 passes

The scenario of ``bench_endpoint.py`` (one session of ``--calls`` recorded calls, each
of 50 chunks: a text block of 46 deltas, its end, usage, finish). Per call, the
``ollama`` client streams one ``chat(stream=True)`` (Ollama's NDJSON, ``POST
/api/chat``) and reads every part:

- ``floor``: the client parsing the same NDJSON bytes from a prebuilt ``httpx``
  ``MockTransport`` response (no replay at all: the least a replayed call can cost);
- ``endpoint``: ``DshReplay.client("ollama")``: the in-process transport, the
  endpoint, binding, the replay model and the logging of the call into the test's
  session.

The two sides alternate call by call (the order reversed on every other call) in each
of ``--repeat`` passes; figures are medians of the per-pass CPU time per call of this
process. Prints one JSON line: ``endpoint_vs_floor`` (target <= 1.1). Instruction counts,
which do not move with the machine's load: ``bench_instructions.py --workloads
ollama_call,ollama_call_floor``.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import ollama
from bench_endpoint import call_chunks, interleaved, make_scenario

from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._wire.ollama import OllamaEncoder

TARGET = 1.1
HEADERS = {"x-dsh-session-id": "bench"}
MESSAGES = [{"role": "user", "content": "benchmark"}]


def ndjson_bytes(chunks: list[dict[str, Any]]) -> bytes:
    """The lines the endpoint serves for ``chunks`` (Ollama's stream)."""
    encoder = OllamaEncoder(model="m")
    out = encoder.start()
    for chunk in chunks:
        out += encoder.finish(chunk["reason"]) if chunk["type"] == "finish" else encoder.feed(chunk)
    return out


def read_call(client: Any) -> int:
    """One streamed chat, every part read; the number of parts."""
    return sum(1 for _ in client.chat(model="m", messages=MESSAGES, stream=True))


def floor_client(body: bytes | list[bytes]) -> tuple[Any, Any]:
    """An ``ollama.Client`` answered by prebuilt NDJSON bytes (the floor), and its close.

    ``body`` answers every call, or a list of bodies answers the calls in turn.
    """
    import httpx  # the ollama client's own (plain httpx)

    bodies = itertools.cycle(body if isinstance(body, list) else [body])
    ndjson = {"content-type": "application/x-ndjson"}
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=ndjson, content=next(bodies))
    )
    client = ollama.Client(host="http://floor", transport=transport)
    return client, client.close


def endpoint_client(path: Path, root: Path) -> tuple[Any, Any]:
    """``DshReplay.client("ollama")`` on a replay of ``path``, and its close."""
    replay = DshReplay.open(path, workdir=root, compare_logs=False)
    return replay.client("ollama", headers=HEADERS), replay.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = make_scenario(root, args.calls)
        bodies = [ndjson_bytes(call_chunks(n)) for n in range(args.calls)]
        makers = {
            "floor": lambda: floor_client(bodies),
            "endpoint": lambda: endpoint_client(path, root),
        }
        samples = interleaved(args.calls, makers, read_call, args.repeat)
    per_pass = {
        name: [
            statistics.mean(values[k * args.calls : (k + 1) * args.calls])
            for k in range(args.repeat)
        ]
        for name, values in samples.items()
    }
    med = {name: statistics.median(values) for name, values in per_pass.items()}
    ratio = med["endpoint"] / med["floor"]
    print(
        json.dumps(
            {
                "benchmark": "ollama",
                "date": datetime.date.today().isoformat(),
                "calls": args.calls,
                "chunks_per_call": 50,
                "ndjson_bytes_per_call": len(bodies[0]),
                "ms_per_call": {name: round(value, 4) for name, value in med.items()},
                "endpoint_vs_floor": round(ratio, 3),
                "target_endpoint_vs_floor": TARGET,
                "met": ratio <= TARGET,
                "repeat": args.repeat,
                "python": platform.python_version(),
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
