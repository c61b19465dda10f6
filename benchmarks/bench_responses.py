"""A replayed OpenAI Responses call through ``openai_client()`` against the SDK's floor.

Usage::

    python3 benchmarks/bench_responses.py      # 300 calls of 50 chunks, 7 passes

The scenario of ``bench_endpoint.py`` (one session, ``--calls`` recorded calls of 50
chunks each). Per call, the ``openai`` SDK streams one Responses call
(``client.responses.create(..., stream=True)``) and reads every event:

- ``floor``: the SDK parsing the same event bytes from prebuilt ``httpx``
  ``MockTransport`` responses, call by call the bytes the endpoint serves that call
  (same ids, same text: no replay, the least a replayed call can cost);
- ``endpoint``: ``DshReplay.openai_client()``: the in-process transport, the endpoint
  (the request read into the in-process shape, routing, the events encoded), binding,
  the replay model and the logging of the call.

The two sides alternate call by call (after one warm-up call each: the SDK's first parse
of an event type builds its validators); figures are medians of this process's CPU time
per call, over every call of every pass. Prints one JSON line with ``endpoint_vs_floor``
(target <= 1.1) and the ratio of the means beside it.

Replayed calls are logged when their session is next read (docs/recording.md#lazy), and
nothing reads the session during a pass; at the end of each pass the benchmark reads
every session, which builds the logs of all its calls, and reports that CPU time per
call (``log_built_at_end_ms_per_call``) and the ratio with it added to the endpoint's
(``endpoint_with_log_vs_floor``): what a test pays that reads its sessions afterwards
(the plugin's log check does). Building them at once may start a full collection of
the process's heap, which then dominates that pass: the build's time per pass, and the
collector's share of it, are listed too.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_endpoint import HEADERS, call_chunks, floor_client, interleaved, make_scenario
from profile_test import _GcClock

from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._wire.responses import ResponsesEncoder, ResponsesWire

TARGET = 1.1


def event_bytes(chunks: list[dict[str, Any]], number: int = 1) -> bytes:
    """The events the endpoint serves for its call ``number`` (from 1) of ``chunks``."""
    encoder = ResponsesEncoder(model="m", response_id=ResponsesWire().call_id(number))
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
        bodies = [event_bytes(call_chunks(n), n + 1) for n in range(args.calls)]

        def floor() -> Any:
            return floor_client(bodies)

        logging: list[float] = []  # per pass: CPU ms per call to build the calls' logs
        collecting: list[float] = []  # per pass: of that, the garbage collector's
        clock = _GcClock()

        def endpoint() -> Any:
            replay = DshReplay.open(path, workdir=root)
            client = replay.openai_client(max_retries=0)

            def done() -> None:
                clock.seconds = 0.0
                gc.callbacks.append(clock)
                started = time.process_time()
                try:
                    built = sum(len(session.events) for session in replay.sessions.sessions())
                finally:
                    gc.callbacks.remove(clock)
                logging.append((time.process_time() - started) * 1000 / args.calls)
                collecting.append(clock.seconds * 1000 / args.calls)
                assert built > 0  # the calls were logged
                replay.close()

            return client, done

        makers = {"floor": floor, "endpoint": endpoint}
        interleaved(1, makers, read_call, 1)  # the SDK's first parse of each type (warm-up)
        logging.clear()
        collecting.clear()
        samples = interleaved(args.calls, makers, read_call, args.repeat)
    med = {name: statistics.median(values) for name, values in samples.items()}
    mean = {name: statistics.fmean(values) for name, values in samples.items()}
    ratio = med["endpoint"] / med["floor"]
    print(
        json.dumps(
            {
                "benchmark": "responses",
                "date": datetime.date.today().isoformat(),
                "calls": args.calls,
                "repeat": args.repeat,
                "chunks_per_call": 50,
                "event_bytes_per_call": round(statistics.fmean(map(len, bodies))),
                "ms_per_call": {name: round(value, 4) for name, value in med.items()},
                "mean_ms_per_call": {name: round(value, 4) for name, value in mean.items()},
                "endpoint_vs_floor": round(ratio, 3),
                "log_built_at_end_ms_per_call": round(statistics.median(logging), 4),
                "log_built_per_pass_ms_per_call": [round(v, 4) for v in logging],
                "collector_in_log_build_per_pass_ms_per_call": [round(v, 4) for v in collecting],
                "endpoint_with_log_vs_floor": round(
                    (med["endpoint"] + statistics.median(logging)) / med["floor"], 3
                ),
                "mean_endpoint_vs_floor": round(mean["endpoint"] / mean["floor"], 3),
                "target_endpoint_vs_floor": TARGET,
                "met": ratio <= TARGET,
            }
        )
    )


if __name__ == "__main__":
    main()
