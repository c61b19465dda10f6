"""A local Gemini API server for tests (loopback only, scripted, stops itself).

``GeminiServer`` is a real HTTP server (``http.server.ThreadingHTTPServer``) on 127.0.0.1
and an ephemeral port, serving ``POST /<version>/models/<model>:streamGenerateContent``
(SSE: ``data: {GenerateContentResponse}`` frames split by ``\\r\\n\\r\\n``, the last with
``finishReason`` and ``usageMetadata``) and ``...:generateContent`` (one object). It runs
in a daemon thread, stops when its ``with`` block ends, and stops by itself after
``idle_timeout`` seconds without a request.

The answers follow one script: a request whose last content answers a function call
gets the text :data:`ANSWER` (in three frames); any other request gets a thought and a
``functionCall`` of ``add`` with ``{"a": 2, "b": 3}`` and no id. Every request is kept
in ``server.requests`` as ``(path, lower-cased headers, parsed body)``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ANSWER", "GeminiServer"]

ANSWER = "It is 5."


def _answers_call(body: dict[str, Any]) -> bool:
    contents = body.get("contents") or []
    last = contents[-1] if contents else {}
    return any("functionResponse" in part for part in last.get("parts") or ())


def _frames(body: dict[str, Any]) -> list[dict[str, Any]]:
    if _answers_call(body):
        parts: list[list[dict[str, Any]]] = [[{"text": "It is "}], [{"text": "5"}], [{"text": "."}]]
    else:
        parts = [
            [{"text": "I will add.", "thought": True}],
            [{"functionCall": {"name": "add", "args": {"a": 2, "b": 3}}}],
        ]
    frames: list[dict[str, Any]] = [
        {"candidates": [{"content": {"role": "model", "parts": p}, "index": 0}]} for p in parts
    ]
    frames[-1]["candidates"][0]["finishReason"] = "STOP"
    frames[-1]["usageMetadata"] = {
        "promptTokenCount": 12,
        "candidatesTokenCount": 4,
        "thoughtsTokenCount": 2,
        "cachedContentTokenCount": 2,
        "totalTokenCount": 18,
    }
    for frame in frames:
        frame["modelVersion"] = "gemini-live-001"
        frame["responseId"] = "live-response"
    return frames


class GeminiServer:
    """The scripted Gemini server; ``base_url`` is ``http://127.0.0.1:<port>``."""

    def __init__(self, *, idle_timeout: float = 60.0):
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self._idle_timeout = idle_timeout
        self._last = time.monotonic()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                server._last = time.monotonic()
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                server.requests.append((self.path, headers, body))
                frames = _frames(body)
                if ":streamGenerateContent" in self.path:
                    data = b"".join(
                        b"data: " + json.dumps(f).encode() + b"\r\n\r\n" for f in frames
                    )
                    kind = "text/event-stream"
                else:
                    whole = frames[-1]
                    whole["candidates"][0]["content"] = {
                        "role": "model",
                        "parts": [
                            p for f in frames for p in f["candidates"][0]["content"]["parts"]
                        ],
                    }
                    data = json.dumps(whole).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._watch = threading.Thread(target=self._idle, daemon=True)
        self._stopped = threading.Event()

    @property
    def base_url(self) -> str:
        """The server's root URL."""
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}"

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def _idle(self) -> None:
        while not self._stopped.wait(0.2):
            if time.monotonic() - self._last > self._idle_timeout:
                self.stop()

    def start(self) -> GeminiServer:
        """Start serving (and the idle watch)."""
        self._thread.start()
        self._watch.start()
        return self

    def stop(self) -> None:
        """Stop serving; safe to call twice."""
        if not self._stopped.is_set():
            self._stopped.set()
            self._server.shutdown()
            self._server.server_close()

    def __enter__(self) -> GeminiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
