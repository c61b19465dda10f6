"""A replayed call through a non-SSE wire's own client: the endpoint against the client's floor.

Usage::

    pip install ollama boto3 -r benchmarks/requirements.txt
    python3 benchmarks/bench_wire_floor.py --wire bedrock    # 300 calls of 50 chunks, 7 passes
    python3 benchmarks/bench_wire_floor.py --wire ollama --calls 100 --repeat 3

The scenario of ``bench_endpoint.py`` (one session of ``--calls`` recorded calls, each
of 50 chunks: a text block of 46 deltas, its end, usage, finish). Per call, the wire's
own client streams one answer and reads every part of it:

- ``bedrock``: boto3's ``bedrock-runtime`` ``converse_stream`` (the AWS event stream,
  ``POST /model/{model}/converse-stream``), every event read;
- ``ollama``: the ``ollama`` client's ``chat(stream=True)`` (NDJSON, ``POST /api/chat``),
  every part read.

Two sides:

- ``floor``: the client parsing the same bytes the endpoint serves, from a prebuilt
  response (boto3: a botocore ``before-send`` handler answering the signed request;
  ollama: an ``httpx`` ``MockTransport``): no replay at all, the least a replayed call
  can cost;
- ``endpoint``: ``DshReplay.client(wire)``: the in-process route to the endpoint,
  binding, the replay model and the logging of the call into the test's session.

Both clients are configured alike: each sends the ``x-dsh-session-id`` header the
endpoint routes by (boto3: added by a ``before-sign`` handler, so both sides sign it;
ollama: the client's ``headers``).

The two sides alternate call by call (the order reversed on every other call) in each
of ``--repeat`` passes; figures are medians of the per-pass CPU time per call of this
process. Prints one JSON line: ``endpoint_vs_floor`` (the target: at most 1.1).
Instruction counts, which do not move with the machine's load: ``bench_instructions.py
--workloads ollama_call,ollama_call_floor``.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_endpoint import call_chunks, interleaved, make_scenario

from pytest_dsh_replay._fixture.dsh_replay import DshReplay

TARGET = 1.1
SESSION = "bench"
MESSAGES = [{"role": "user", "content": "benchmark"}]
# Both sides send the call's session header: the endpoint routes by it, and the floor's
# client is configured the same way (the header built, and for boto3 signed, on both).
_SESSION_HEADERS = {"x-dsh-session-id": SESSION}

Opened = tuple[Any, Callable[[], object]]


@dataclass(frozen=True)
class Side:
    """What the benchmark needs of one wire's client."""

    encoded: Callable[[list[dict[str, Any]]], bytes]  # a call's chunks as the endpoint serves
    read_call: Callable[[Any], int]  # one streamed call, every part read
    floor: Callable[[list[bytes]], Opened]  # a client answered by prebuilt bytes
    endpoint: Callable[[DshReplay], Any]  # the client the fixture gives


def _encoded(encoder: Any, chunks: list[dict[str, Any]]) -> bytes:
    out = encoder.start()
    for chunk in chunks:
        out += encoder.finish(chunk["reason"]) if chunk["type"] == "finish" else encoder.feed(chunk)
    return out


# --- ollama ---------------------------------------------------------------------------------


def _ollama_encoded(chunks: list[dict[str, Any]]) -> bytes:
    from pytest_dsh_replay._wire.ollama import OllamaEncoder

    return _encoded(OllamaEncoder(model="m"), chunks)


def _ollama_read(client: Any) -> int:
    return sum(1 for _ in client.chat(model="m", messages=MESSAGES, stream=True))


def _ollama_floor(bodies: list[bytes]) -> Opened:
    import httpx  # the ollama client's own (plain httpx)
    import ollama

    cycle = itertools.cycle(bodies)
    ndjson = {"content-type": "application/x-ndjson"}
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=ndjson, content=next(cycle))
    )
    client = ollama.Client(host="http://floor", transport=transport, headers=_SESSION_HEADERS)
    return client, client.close


def _ollama_endpoint(replay: DshReplay) -> Any:
    return replay.client("ollama", headers=_SESSION_HEADERS)


# --- bedrock --------------------------------------------------------------------------------


def _bedrock_encoded(chunks: list[dict[str, Any]]) -> bytes:
    from pytest_dsh_replay._wire.bedrock import BedrockEncoder

    return _encoded(BedrockEncoder(), chunks)


_BEDROCK_MESSAGES = [{"role": "user", "content": [{"text": "benchmark"}]}]


def _bedrock_read(client: Any) -> int:
    answer = client.converse_stream(modelId="m", messages=_BEDROCK_MESSAGES)
    return sum(1 for _ in answer["stream"])


class _Body:
    """A prebuilt body as botocore reads a raw response."""

    def __init__(self, data: bytes):
        self._data = data

    def stream(self, *args: object, **kwargs: object) -> Iterator[bytes]:
        yield self._data

    def close(self) -> None:
        pass


def _bedrock_client(**options: Any) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(retries={"total_max_attempts": 1}),
        **options,
    )


def _bedrock_floor(bodies: list[bytes]) -> Opened:
    from botocore.awsrequest import AWSResponse

    cycle = itertools.cycle(bodies)
    headers = {"content-type": "application/vnd.amazon.eventstream"}
    client = _bedrock_client(endpoint_url="http://floor")
    client.meta.events.register("before-sign.bedrock-runtime", _session_header)
    client.meta.events.register(
        "before-send.bedrock-runtime",
        lambda request, **kwargs: AWSResponse(request.url, 200, headers, _Body(next(cycle))),
    )
    return client, client.close


def _session_header(request: Any, **kwargs: object) -> None:
    """The call's session header, added before signing: on both sides, so both sign it."""
    request.headers["x-dsh-session-id"] = SESSION


def _bedrock_endpoint(replay: DshReplay) -> Any:
    client = replay.client("bedrock")
    client.meta.events.register("before-sign.bedrock-runtime", _session_header)
    return client


SIDES: dict[str, Side] = {
    "ollama": Side(_ollama_encoded, _ollama_read, _ollama_floor, _ollama_endpoint),
    "bedrock": Side(_bedrock_encoded, _bedrock_read, _bedrock_floor, _bedrock_endpoint),
}


def _endpoint_client(side: Side, path: Path, root: Path) -> Opened:
    replay = DshReplay.open(path, workdir=root, compare_logs=False)
    return side.endpoint(replay), replay.close


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--wire", choices=sorted(SIDES), default="bedrock")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    side = SIDES[args.wire]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = make_scenario(root, args.calls)
        bodies = [side.encoded(call_chunks(n)) for n in range(args.calls)]
        makers = {
            "floor": lambda: side.floor(bodies),
            "endpoint": lambda: _endpoint_client(side, path, root),
        }
        samples = interleaved(args.calls, makers, side.read_call, args.repeat)
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
                "benchmark": "wire_floor",
                "wire": args.wire,
                "date": datetime.date.today().isoformat(),
                "calls": args.calls,
                "chunks_per_call": 50,
                "bytes_per_call": len(bodies[0]),
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
