"""A replayed OpenAI Responses call through ``openai_client()`` against the SDK's floor.

Usage::

    python3 benchmarks/bench_responses.py      # 300 calls of 50 chunks, 7 passes

The scenario of ``bench_endpoint.py`` (one session, ``--calls`` recorded calls of 50
chunks each). Per call, the ``openai`` SDK streams one Responses call
(``client.responses.create(..., stream=True)``) and reads every event:

- ``floor``: the SDK parsing the same event bytes from a prebuilt ``httpx``
  ``MockTransport`` response (no replay: the least a replayed call can cost);
- ``endpoint``: ``DshReplay.openai_client()``: the in-process transport, the endpoint
  (the request read into the in-process shape, routing, the events encoded), binding,
  the replay model and the logging of the call.

Passes alternate; figures are medians of this process's CPU time per call. Prints one
JSON line with ``endpoint_vs_floor`` (target <= 1.1).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench_endpoint import HEADERS, call_chunks, floor_client, make_scenario, timed

from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._wire.responses import ResponsesEncoder

TARGET = 1.1


def event_bytes(chunks: list[dict[str, Any]]) -> bytes:
    encoder = ResponsesEncoder(model="m", response_id="resp_1")
    out = encoder.start()
    for chunk in chunks:
        out += encoder.finish(chunk["reason"]) if chunk["type"] == "finish" else encoder.feed(chunk)
    return out


def read_call(client: Any) -> int:
    stream = client.responses.create(
        model="m", input="benchmark", stream=True, extra_headers=HEADERS
    )
    return sum(1 for _ in stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = make_scenario(root, args.calls)
        body = event_bytes(call_chunks(0))

        def floor() -> Any:
            return floor_client(body)

        def endpoint() -> Any:
            replay = DshReplay.open(path, workdir=root)
            client = replay.openai_client(max_retries=0)
            return client, replay.close

        runs: dict[str, list[float]] = {"floor": [], "endpoint": []}
        makers = {"floor": floor, "endpoint": endpoint}
        for r in range(args.repeat):
            order = list(makers) if r % 2 == 0 else list(reversed(makers))
            for name in order:
                runs[name].append(timed(args.calls, makers[name], read_call))
    med = {name: statistics.median(values) for name, values in runs.items()}
    ratio = med["endpoint"] / med["floor"]
    print(
        json.dumps(
            {
                "benchmark": "responses",
                "date": datetime.date.today().isoformat(),
                "calls": args.calls,
                "chunks_per_call": 50,
                "event_bytes_per_call": len(body),
                "ms_per_call": {name: round(value, 4) for name, value in med.items()},
                "endpoint_vs_floor": round(ratio, 3),
                "target_endpoint_vs_floor": TARGET,
                "met": ratio <= TARGET,
            }
        )
    )


if __name__ == "__main__":
    main()
