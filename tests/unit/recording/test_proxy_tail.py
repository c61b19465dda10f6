"""Recording through the proxy when the provider's whole answer arrives in one read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._recording.live_openai import OpenAICompatibleModel
from pytest_dsh_replay._scripts.loading import load_scenario

KEY = "sk-test-proxy-tail-000000000000"


def _openai_body() -> bytes:
    base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    deltas = [{"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}]
    events = [{**base, "choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + (
        b"data: [DONE]\n\n"
    )


def _anthropic_body() -> bytes:
    events = [
        ("message_start", {"type": "message_start", "message": {
            "id": "m1", "type": "message", "role": "assistant", "model": "m", "content": [],
            "stop_reason": None, "usage": {"input_tokens": 3, "output_tokens": 0}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "Hello"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 2}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


class _OneWrite(BaseHTTPRequestHandler):
    """Answers every call with its whole SSE body in one write (a fast provider)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        body = _anthropic_body() if self.path.endswith("/messages") else _openai_body()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)  # content, finish and the end marker in one piece
        self.wfile.flush()


@pytest.fixture
def provider() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OneWrite)
    # shutdown() returns once the serving loop looks again: every 10 ms, not the default 0.5 s
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _finishes(path: Path) -> list[Any]:
    (script,) = load_scenario(path).scripts
    return [entry.chunks[-1]["reason"]["kind"] for entry in script.entries]


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_call_whose_end_comes_in_the_same_read_is_recorded_whole(
    tmp_path: Path, provider: str, sdk: str
) -> None:
    path = tmp_path / "scenario"
    live = OpenAICompatibleModel(base_url=provider, api_key=KEY)
    recording = DshReplay.record(path, live=live, workdir=tmp_path / "work")
    if sdk == "openai":
        client = recording.openai_client(max_retries=0)
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    else:
        anthropic = recording.anthropic_client(max_retries=0)
        with anthropic.messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as answer:
            text = "".join(answer.text_stream)
    assert text == "Hello"
    recording.finish()
    recording.close()
    assert _finishes(path) == ["stop"]  # not "aborted": the client's close came after

    replay = DshReplay.open(path, workdir=tmp_path / "work2")
    if sdk == "openai":
        stream = replay.openai_client(max_retries=0).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == text
    else:
        with replay.anthropic_client(max_retries=0).messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as answer:
            assert "".join(answer.text_stream) == text
    replay.finish()
    replay.close()
