"""Replaying recorded calls: ReplayModel against vcrpy + httpx (what users would otherwise pick).

Usage::

    pip install -r benchmarks/requirements.txt       # vcrpy and httpx, benchmark-only
    python3 benchmarks/bench_vcr.py                   # calls of benchmarks/data/large
    python3 benchmarks/bench_vcr.py --calls 500 PATH  # another scenario

The first ``--calls`` recorded calls of the scenario are turned into the equivalent
OpenAI-compatible streaming chat-completion responses (``text/event-stream``, one
``chat.completion.chunk`` per text, reasoning or tool-call delta, the finish reason, the
usage, ``[DONE]``). A server on 127.0.0.1 serves them while vcrpy records a cassette
through httpx; the server then stops. Per call, the replay then:

- vcrpy: the cassette (record mode ``none``) answers an ``httpx.Client`` streaming POST;
  the body is read line by line and every ``data:`` event parsed into a dict;
- ReplayModel: ``stream()`` yields the recorded chunks as new dicts.

Both read every chunk of every call; ``--repeat`` passes over all calls alternate, and
the figures are medians of the time per call. ``ratio`` is vcrpy / ReplayModel.

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import orjson

from pytest_dsh_replay import load_scenario
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript

HERE = Path(__file__).resolve().parent
DEFAULT_LARGE = HERE / "data" / "large"
REQUEST: dict[str, Any] = {
    "model": "bench-1",
    "stream": True,
    "messages": [{"role": "user", "content": "benchmark"}],
}


def sse_body(chunks: list[dict[str, Any]], call: int) -> bytes:
    """The OpenAI-compatible event stream equivalent to one recorded call."""
    head = {"id": f"chatcmpl-{call}", "object": "chat.completion.chunk", "created": 1}
    head["model"] = "bench-1"
    events: list[bytes] = []

    def emit(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> None:
        body = {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        body.update(extra)
        events.append(b"data: " + orjson.dumps(body) + b"\n\n")

    for chunk in chunks:
        kind = chunk["type"]
        if kind == "text-delta":
            emit({"content": chunk["text"]})
        elif kind == "reasoning-delta":
            emit({"reasoning_content": chunk["text"]})
        elif kind == "tool-call-delta":
            function: dict[str, Any] = {"arguments": chunk["argumentsDelta"]}
            if "name" in chunk:
                function["name"] = chunk["name"]
            emit({"tool_calls": [{"index": 0, "id": chunk["id"], "function": function}]})
        elif kind == "usage":
            usage = chunk["usage"]
            tokens = {
                "prompt_tokens": usage.get("inputTokens", 0),
                "completion_tokens": usage.get("outputTokens", 0),
            }
            events.append(b"data: " + orjson.dumps({**head, "choices": [], "usage": tokens}))
            events[-1] += b"\n\n"
        elif kind == "finish":
            reason = chunk["reason"].get("kind", "stop")
            emit({}, "tool_calls" if reason == "tool-calls" else "stop")
    events.append(b"data: [DONE]\n\n")
    return b"".join(events)


class _Handler(BaseHTTPRequestHandler):
    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        self.rfile.read(length)
        call = int(parse_qs(urlparse(self.path).query)["call"][0])
        body = self.bodies[call]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def record_cassette(cassette: Path, bodies: list[bytes]) -> tuple[float, int]:
    """Record every call through vcrpy against a local server; return (seconds, port)."""
    import httpx
    import vcr

    _Handler.bodies = bodies
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = int(server.server_address[1])
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    start = time.perf_counter()
    try:
        with vcr.use_cassette(str(cassette), record_mode="all"), httpx.Client() as client:
            for n in range(len(bodies)):
                with client.stream("POST", f"{url}?call={n}", json=REQUEST) as response:
                    for _ in response.iter_lines():
                        pass
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    return time.perf_counter() - start, port


def vcr_pass(cassette: Path, calls: int, port: int) -> tuple[float, int]:
    """Replay every call from the cassette; return (seconds, chunks read)."""
    import httpx
    import vcr

    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    loads = orjson.loads
    chunks = 0
    with (
        vcr.use_cassette(str(cassette), record_mode="none", allow_playback_repeats=True),
        httpx.Client() as client,
    ):
        start = time.perf_counter()
        for n in range(calls):
            with client.stream("POST", f"{url}?call={n}", json=REQUEST) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        loads(line[6:])
                        chunks += 1
        return time.perf_counter() - start, chunks


def model_pass(scenario: Scenario) -> tuple[float, int]:
    """Replay every call through a new ReplayModel; return (seconds, chunks read)."""
    start = time.perf_counter()
    model = ReplayModel(scenario)
    stream = model.stream
    chunks = 0
    for _ in scenario.primary.entries:
        for _chunk in stream(REQUEST, session_id="bench"):
            chunks += 1
    return time.perf_counter() - start, chunks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", type=Path, default=DEFAULT_LARGE)
    parser.add_argument("--calls", type=int, default=300, help="recorded calls to replay (300)")
    parser.add_argument("--repeat", type=int, default=5, help="passes of each (5)")
    args = parser.parse_args(argv)
    try:
        import httpx  # noqa: F401
        import vcr  # noqa: F401
    except ImportError:
        print("bench_vcr: pip install -r benchmarks/requirements.txt", file=sys.stderr)
        return 2
    loaded = load_scenario(args.path)
    entries = [
        e
        for s in loaded.scripts
        for e in s.entries
        if isinstance(e, ChunksEntry) and not e.has_placeholders
    ][: args.calls]
    script = SessionScript(
        file="session.jsonl",
        recorded_id="bench",
        created_at=0,
        seed_length=0,
        parent_session=None,
        primary=True,
        entries=tuple(entries),
    )
    scenario = Scenario(path=args.path, scripts=(script,))
    bodies = [sse_body(e.chunks, n) for n, e in enumerate(entries)]
    with tempfile.TemporaryDirectory() as tmp:
        cassette = Path(tmp) / "cassette.yaml"
        record_s, port = record_cassette(cassette, bodies)
        vcr_times: list[float] = []
        model_times: list[float] = []
        vcr_chunks = model_chunks = 0
        for i in range(args.repeat):
            order = ("vcr", "model") if i % 2 == 0 else ("model", "vcr")
            for side in order:
                if side == "vcr":
                    seconds, vcr_chunks = vcr_pass(cassette, len(entries), port)
                    vcr_times.append(seconds / len(entries))
                else:
                    seconds, model_chunks = model_pass(scenario)
                    model_times.append(seconds / len(entries))
        cassette_mb = cassette.stat().st_size / 1e6
    vcr_call = statistics.median(vcr_times)
    model_call = statistics.median(model_times)
    result = {
        "benchmark": "vcr",
        "date": datetime.date.today().isoformat(),
        "scenario": str(args.path),
        "calls": len(entries),
        "chunks_per_pass": model_chunks,
        "vcr_events_per_pass": vcr_chunks,
        "cassette_mb": round(cassette_mb, 2),
        "record_s": round(record_s, 2),
        "vcr_ms_per_call": round(vcr_call * 1e3, 4),
        "model_ms_per_call": round(model_call * 1e3, 4),
        "ratio": round(vcr_call / model_call, 1),
        "target_ratio": 10,
        "met": vcr_call / model_call >= 10,
        "repeat": args.repeat,
        "python": platform.python_version(),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
