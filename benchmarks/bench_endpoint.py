"""A replayed call through real SDK clients: the endpoint against the SDK's own floor.

Usage::

    pip install -r benchmarks/requirements.txt   # vcrpy + pytest-recording, benchmark-only
    python3 benchmarks/bench_endpoint.py          # 300 calls of 50 chunks, 7 passes

One scenario with one session of ``--calls`` recorded calls, each of 50 chunks (a text
block of 46 deltas, its end, usage, finish). Per call, the ``openai`` SDK streams one
chat completion (``stream=True``, usage included) and reads every chunk:

- ``floor``: the SDK parsing the same SSE bytes from a prebuilt ``httpx``
  ``MockTransport`` response (no replay at all: the least a replayed call can cost);
- ``endpoint``: ``DshReplay.openai_client()``: the in-process transport, the endpoint,
  binding, the replay model and the logging of the call into the test's session;
- ``vcr``: the same SDK call answered by a vcrpy cassette (what pytest-recording uses;
  recorded once from the endpoint over loopback HTTP), record mode ``none``;
- ``loopback``: the SDK on ``DshReplay.base_url`` (the threaded server on 127.0.0.1);
- ``socket_floor``: the SDK over loopback HTTP to a server that answers every request
  with the same prebuilt response bytes (reads the head and the body, parses nothing
  else): what the SDK's own HTTP stack and the sockets cost, the least a server can add.

Passes alternate; figures are medians of the CPU time per call of this process (every
thread: the loopback server's too), so other work on the machine does not count. Prints one
JSON line: ``endpoint_vs_floor`` (target <= 1.2), ``vcr_vs_endpoint`` (> 1 means the
endpoint is faster), ``loopback_added_ms`` (loopback minus in-process, per call) and
``socket_floor_added_ms`` (socket floor minus floor: the part of it no server can save).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import platform
import socketserver
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openai
import vcr

from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._format.events import SessionHeader
from pytest_dsh_replay._scripts.scenario import write_scenario
from pytest_dsh_replay._wire.base import httpx_module
from pytest_dsh_replay._wire.openai import OpenAIEncoder

TARGET = 1.2
HEADERS = {"x-dsh-session-id": "bench"}
MESSAGES = [{"role": "user", "content": "benchmark"}]


class _Log:
    def __init__(self, header: SessionHeader, events: list[dict[str, Any]]):
        self.header = header
        self.events = events


def call_chunks(n: int) -> list[dict[str, Any]]:
    deltas = [f"word{n}-{k} " for k in range(46)]
    return [
        {"type": "block-start", "index": 0, "blockType": "text"},
        *({"type": "text-delta", "index": 0, "text": d} for d in deltas),
        {"type": "block-end", "index": 0, "block": {"type": "text", "text": "".join(deltas)}},
        {"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 46}},
        {"type": "finish", "reason": {"kind": "stop"}},
    ]


def make_scenario(root: Path, calls: int) -> Path:
    events: list[dict[str, Any]] = []
    for n in range(calls):
        for chunk in call_chunks(n):
            events.append(
                {"type": "assistant/chunk", "data": {"turn": n + 1, "step": 1, "chunk": chunk}}
            )
    path = root / "bench"
    write_scenario(path, [_Log(SessionHeader(id="bench", created_at=1), events)])
    return path


def sse_bytes(chunks: list[dict[str, Any]], completion_id: str = "chatcmpl-1") -> bytes:
    """The frames the endpoint serves for ``chunks`` as the completion ``completion_id``."""
    encoder = OpenAIEncoder(model="m", completion_id=completion_id, include_usage=True)
    out = encoder.start()
    for chunk in chunks:
        out += encoder.finish(chunk["reason"]) if chunk["type"] == "finish" else encoder.feed(chunk)
    return out


def read_call(client: Any) -> int:
    stream = client.chat.completions.create(
        model="m",
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
        extra_headers=HEADERS,
    )
    return sum(1 for _ in stream)


def timed(calls: int, client_for_pass: Any, read: Any = read_call) -> float:
    """CPU ms per call of ``read`` on the client a pass gets from ``client_for_pass``."""
    client, done = client_for_pass()
    started = time.process_time()
    for _ in range(calls):
        read(client)
    elapsed = time.process_time() - started
    done()
    return elapsed / calls * 1000


def interleaved(
    calls: int, makers: dict[str, Any], read: Any, repeat: int
) -> dict[str, list[float]]:
    """CPU ms of every call, per maker, with the makers' calls alternating call by call.

    Each of ``repeat`` passes opens one client per maker (``makers[name]()`` gives
    ``(client, done)``), then makes ``calls`` calls on each, one maker after the other
    (the order reversed on every other call), so that drift in the machine's speed
    reaches every side alike. Returns the per-call samples of every pass.
    """
    samples: dict[str, list[float]] = {name: [] for name in makers}
    for _ in range(repeat):
        opened = {name: maker() for name, maker in makers.items()}
        names = list(opened)
        for n in range(calls):
            for name in names if n % 2 == 0 else reversed(names):
                client = opened[name][0]
                started = time.process_time()
                read(client)
                samples[name].append((time.process_time() - started) * 1000)
        for _client, done in opened.values():
            done()
    return samples


def floor_client(body: bytes | list[bytes]) -> tuple[Any, Any]:
    """An openai client answered by prebuilt SSE bytes (the floor), and its close.

    ``body`` answers every call, or a list of bodies answers the calls in turn (call
    ``n`` gets ``body[n % len(body)]``: the same events the endpoint serves it).
    """
    httpx = httpx_module()
    sse = {"content-type": "text/event-stream"}
    bodies = itertools.cycle(body if isinstance(body, list) else [body])
    transport = httpx.MockTransport(
        lambda request: httpx.Response(200, headers=sse, content=next(bodies))
    )
    client = openai.OpenAI(
        base_url="http://floor/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx.Client(transport=transport),
    )
    return client, client.close


class _CannedHandler(socketserver.StreamRequestHandler):
    """Answers each request on a keep-alive connection with the server's ``canned`` bytes."""

    def handle(self) -> None:
        canned: bytes = self.server.canned  # type: ignore[attr-defined]
        while True:
            length = 0
            while True:
                line = self.rfile.readline(65537)
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            self.rfile.read(length)
            self.wfile.write(canned)
            self.wfile.flush()


def socket_floor(body: bytes) -> tuple[Any, Any]:
    """An openai client on a loopback server answering ``body`` to every request, and its close."""
    head = (
        f"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _CannedHandler)
    server.daemon_threads = True
    server.canned = head.encode() + body  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=0)

    def done() -> None:
        client.close()
        server.shutdown()
        server.server_close()

    return client, done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = make_scenario(root, args.calls)
        body = sse_bytes(call_chunks(0))

        def floor() -> Any:
            return floor_client(body)

        def endpoint() -> Any:
            replay = DshReplay.open(path, workdir=root)
            client = replay.openai_client(max_retries=0)
            return client, replay.close

        def loopback() -> Any:
            replay = DshReplay.open(path, workdir=root)
            client = openai.OpenAI(base_url=f"{replay.base_url}/v1", api_key="k", max_retries=0)

            def done() -> None:
                client.close()
                replay.close()

            return client, done

        cassette = root / "cassette.yaml"
        replay = DshReplay.open(path, workdir=root)
        recorder = openai.OpenAI(base_url=f"{replay.base_url}/v1", api_key="k", max_retries=0)
        with vcr.use_cassette(
            str(cassette),
            record_mode="all",
            match_on=["method", "path"],
            allow_playback_repeats=True,
        ):
            read_call(recorder)
        recorder.close()
        replay.close()

        def cassette_pass() -> Any:
            context = vcr.use_cassette(
                str(cassette),
                record_mode="none",
                match_on=["method", "path"],
                allow_playback_repeats=True,
            )
            context.__enter__()
            client = openai.OpenAI(
                base_url=f"http://127.0.0.1:{_port(cassette)}/v1", api_key="k", max_retries=0
            )

            def done() -> None:
                client.close()
                context.__exit__(None, None, None)

            return client, done

        makers = {
            "floor": floor,
            "endpoint": endpoint,
            "vcr": cassette_pass,
            "loopback": loopback,
            "socket_floor": lambda: socket_floor(body),
        }
        runs: dict[str, list[float]] = {name: [] for name in makers}
        for r in range(args.repeat):
            order = list(makers) if r % 2 == 0 else list(reversed(makers))
            for name in order:
                runs[name].append(timed(args.calls, makers[name]))
    med = {name: statistics.median(values) for name, values in runs.items()}
    print(
        json.dumps(
            {
                "benchmark": "endpoint",
                "date": datetime.date.today().isoformat(),
                "calls": args.calls,
                "chunks_per_call": 50,
                "sse_bytes_per_call": len(body),
                "ms_per_call": {name: round(value, 4) for name, value in med.items()},
                "endpoint_vs_floor": round(med["endpoint"] / med["floor"], 3),
                "target_endpoint_vs_floor": TARGET,
                "met": med["endpoint"] / med["floor"] <= TARGET,
                "vcr_vs_endpoint": round(med["vcr"] / med["endpoint"], 3),
                "loopback_added_ms": round(med["loopback"] - med["endpoint"], 4),
                "socket_floor_added_ms": round(med["socket_floor"] - med["floor"], 4),
                "repeat": args.repeat,
                "python": platform.python_version(),
                "openai": openai.__version__,
            }
        )
    )
    sys.stdout.flush()


def _port(cassette: Path) -> str:
    text = cassette.read_text()
    start = text.index("http://127.0.0.1:") + len("http://127.0.0.1:")
    return text[start : text.index("/", start)]


if __name__ == "__main__":
    main()
