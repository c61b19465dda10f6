"""A local OpenAI-compatible chat-completions server for tests (loopback only, scripted).

Only the built-in adapter's own tests (``tests/unit/recording/test_live_openai.py``) use
it: they need byte-level control of the chat-completions wire (no usage chunk,
interleaved tool-call deltas, provider error bodies with their ``type``/``code``, a
``Retry-After`` HTTP date, a held reply). Every other test records from the package's
scripted model (``ScriptedModel``, ``ScriptedServer``).

``OpenAIServer`` is a real HTTP server (``http.server.ThreadingHTTPServer``) bound to
127.0.0.1 on an ephemeral port, serving ``POST /v1/chat/completions`` both as SSE
(``"stream": true``: ``data: {chunk}`` events, then ``data: [DONE]``, chunked transfer
encoding) and as one JSON object, ``POST /v1/responses`` (the OpenAI Responses wire: its
typed events or one response object) and ``POST /v1/messages`` (the Anthropic Messages
wire: its events or one message object) from the same replies. It runs in a daemon thread,
stops when its ``with`` block ends, and stops by itself after ``idle_timeout`` seconds
without a request, so a forgotten server never outlives its test for long.

Replies are deterministic: a *responder* ``(request_json) -> Reply`` decides each one.
``Reply`` describes reasoning (sent as DeepSeek's ``reasoning_content``), text, tool
calls, usage, the finish reason, how many pieces each string is split into (so clients
see many deltas), or an HTTP error; a few fields inject faults (a mid-stream error event,
a cut connection, a reply held until the test releases it). Every request is kept in
``server.requests`` (method, path, lower-cased headers, parsed body) for assertions.
Nothing depends on arrival order: ``x-request-id`` and default tool-call ids are hashes
of the request, so concurrent callers get the same answers on every run.

``ScriptedResponder`` (the default) is a tiny script language read from the last user
message, for example agents::

    with OpenAIServer() as server:
        model = OpenAICompatibleModel(base_url=server.base_url, api_key="k", model="m")
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "HttpError",
    "OpenAIServer",
    "ReceivedRequest",
    "Reply",
    "Responder",
    "ScriptedResponder",
    "ToolCall",
    "replies",
]


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a reply. ``id=None`` derives a stable id from the request."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class HttpError:
    """An HTTP error reply: ``status`` with ``{"error": {"message", "type", "code"}}``.

    ``retry_after`` (a string, seconds or an HTTP date) is sent as ``Retry-After``.
    """

    status: int
    message: str
    retry_after: str | None = None
    type: str = "api_error"
    code: str | None = None


@dataclass(frozen=True)
class Reply:
    """What the server answers to one request.

    Attributes:
        text: The assistant text (``delta.content``).
        reasoning: Reasoning text, streamed first as ``delta.reasoning_content``.
        tool_calls: Tool calls, streamed after the text.
        finish_reason: ``None`` derives it (``"tool_calls"`` when there are tool calls,
            else ``"stop"``); ``""`` sends no finish reason at all.
        usage: The OpenAI ``usage`` object to send; ``None`` computes one from word
            counts (with ``completion_tokens_details.reasoning_tokens`` when there is
            reasoning).
        send_usage: Send the usage chunk when the client asked for it
            (``stream_options.include_usage``); ``False`` never sends usage.
        pieces: How many deltas each string (reasoning, text, each tool call's
            arguments) is split into, >= 1; shorter strings go one character a delta.
        interleave: Alternate the argument deltas of parallel tool calls.
        error: Answer with this HTTP error instead (nothing else is sent).
        stream_error: After the content, send an SSE error event with this message and
            end the stream (no finish reason, no ``[DONE]``).
        cut_off: After the content, close the connection mid-body (an incomplete
            chunked response).
        delay: Seconds to wait before answering (a race with the client: prefer ``hold``).
        hold: Answer only once this event is set (or after ``HOLD_CAP_S`` seconds, so
            the server stops by itself), for example after the client gave up waiting:
            an order the test decides rather than a race between delays.
    """

    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ToolCall] = ()
    finish_reason: str | None = None
    usage: Mapping[str, Any] | None = None
    send_usage: bool = True
    pieces: int = 3
    interleave: bool = False
    error: HttpError | None = None
    stream_error: str | None = None
    cut_off: bool = False
    delay: float = 0.0
    hold: threading.Event | None = field(default=None, compare=False)


HOLD_CAP_S = 30.0
"""The longest a held reply waits for its event, in seconds."""

Responder = Callable[[dict[str, Any]], Reply]
"""Decides the reply to one request; gets the parsed JSON body."""


@dataclass(frozen=True)
class ReceivedRequest:
    """A request the server received: ``headers`` has lower-cased names.

    ``response`` fills with every byte the server sent back for it (status line,
    headers, body as framed on the wire), for tests that check what a client made of it.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = field(repr=False)
    response: bytearray = field(default_factory=bytearray, repr=False, compare=False)


def replies(*script: Reply) -> Responder:
    """A responder that answers with ``script`` in order; an extra request gets a 500."""
    queue = list(script)
    lock = threading.Lock()

    def respond(request: dict[str, Any]) -> Reply:
        with lock:
            if queue:
                return queue.pop(0)
        return Reply(error=HttpError(500, "the scripted replies are used up"))

    return respond


# --- the default script ----------------------------------------------------------------

_DIRECTIVE = re.compile(r"\[\[(tool|fail|think)\b\s*(.*?)\]\]", re.DOTALL)

_FAILURES = {
    400: (
        "This model's maximum context length is 8192 tokens. However, you requested "
        "9000 tokens. Please reduce the length of the messages.",
        None,
    ),
    401: ("Authentication failed: the API key is invalid.", None),
    429: ("Rate limit reached for requests.", "1"),
    503: ("The server is overloaded, please try again later.", None),
}


class ScriptedResponder:
    """The default responder: a small script read from the request's last message.

    - The last message is a ``tool`` result: reply with the text
      ``"tool results: <result>; <result>"`` (every trailing tool message, in order).
    - Otherwise the last message's text (a string, or its text parts) is the prompt,
      and these directives in it apply (they never reach the reply text):

      - ``[[tool NAME {"json": "arguments"}]]``: call tool ``NAME`` (arguments default
        to ``{}``); several directives make parallel calls. The reply has reasoning
        ``"calling NAME"`` and no text; ids are stable hashes of the request.
      - ``[[fail STATUS]]``: the first request with this prompt fails with HTTP
        ``STATUS`` (400 is a context-length error, 401 auth, 429 rate limit with
        ``Retry-After: 1``, 503 overloaded, others a generic error); later ones go on.
      - ``[[think TEXT]]``: the reply has reasoning ``TEXT``.
      - otherwise the reply is ``"echo: <prompt>"`` (directives removed), ``stop``.

    Replies split every string into ``pieces`` deltas. Thread-safe.
    """

    def __init__(self, *, pieces: int = 3):
        self.pieces = pieces
        self._failed: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Reply:
        messages = request.get("messages") or []
        last = messages[-1] if messages else {}
        content = last.get("content")
        if last.get("role") == "user" and isinstance(content, list):  # Anthropic tool results
            results: list[str] = [
                _text_of(block.get("content"))
                for block in content
                if isinstance(block, dict) and block.get("type") == "tool_result"
            ]
            if results:
                return Reply(text="tool results: " + "; ".join(results), pieces=self.pieces)
        if last.get("role") == "tool":
            results = []
            for message in reversed(messages):
                if message.get("role") != "tool":
                    break
                results.insert(0, _text_of(message.get("content")))
            return Reply(text="tool results: " + "; ".join(results), pieces=self.pieces)
        prompt = _text_of(last.get("content"))
        directives = _DIRECTIVE.findall(prompt)
        plain = " ".join(_DIRECTIVE.sub(" ", prompt).split())
        for kind, argument in directives:
            if kind == "fail":
                with self._lock:
                    first = prompt not in self._failed
                    self._failed.add(prompt)
                if first:
                    status = int(argument.strip() or "500")
                    message, retry_after = _FAILURES.get(
                        status, (f"Scripted failure (HTTP {status}).", None)
                    )
                    return Reply(error=HttpError(status, message, retry_after=retry_after))
        calls = []
        for kind, argument in directives:
            if kind == "tool":
                name, _, arguments = argument.strip().partition(" ")
                calls.append(ToolCall(name, arguments.strip() or "{}"))
        if calls:
            reasoning = "; ".join(f"calling {call.name}" for call in calls)
            return Reply(reasoning=reasoning, tool_calls=calls, pieces=self.pieces)
        reasoning = " ".join(arg.strip() for kind, arg in directives if kind == "think")
        return Reply(text=f"echo: {plain}", reasoning=reasoning, pieces=self.pieces)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


# --- the server ------------------------------------------------------------------------


class OpenAIServer:
    """A loopback OpenAI-compatible server; use it as a context manager.

    Args:
        responder: Decides each reply; a :class:`ScriptedResponder` by default.
        api_key: When set, a request whose ``Authorization`` is not
            ``Bearer <api_key>`` gets a 401 (before the responder is asked).
        idle_timeout: Seconds without any request after which the server stops by
            itself (> 0).

    Attributes:
        requests: Every request received, in arrival order.
        base_url: ``http://127.0.0.1:<port>/v1`` (the client's ``base_url``).
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        api_key: str | None = None,
        idle_timeout: float = 30.0,
    ):
        if not idle_timeout > 0:
            raise ValueError(f"idle_timeout must be > 0 seconds, got {idle_timeout!r}")
        self.responder: Responder = responder or ScriptedResponder()
        self.api_key = api_key
        self.idle_timeout = idle_timeout
        self.requests: list[ReceivedRequest] = []
        self._lock = threading.Lock()
        self._active = 0
        self._last_activity = time.monotonic()
        self._stop = threading.Event()
        self._httpd = _Httpd(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._serve, name="openai-server", daemon=True)

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1."""
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """The client base URL, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the serving thread is alive."""
        return self._thread.is_alive()

    def start(self) -> OpenAIServer:
        """Start serving in a daemon thread; returns ``self``."""
        self._last_activity = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket (idempotent; waits <= 1 s)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=1.0)
        else:
            self._httpd.server_close()

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _serve(self) -> None:
        self._httpd.timeout = 0.02
        try:
            while not self._stop.is_set():
                self._httpd.handle_request()
                with self._lock:
                    idle = self._active == 0 and (
                        time.monotonic() - self._last_activity > self.idle_timeout
                    )
                if idle:
                    break
        finally:
            self._stop.set()
            self._httpd.server_close()

    def _begin(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)
            self._active += 1
            self._last_activity = time.monotonic()

    def _end(self) -> None:
        with self._lock:
            self._active -= 1
            self._last_activity = time.monotonic()


class _Tee:
    """A write-only stream that also keeps what goes through it."""

    def __init__(self, raw: Any, kept: bytearray):
        self._raw = raw
        self._kept = kept

    def write(self, data: bytes) -> int:
        self._kept.extend(data)
        return int(self._raw.write(data))

    def flush(self) -> None:
        self._raw.flush()


class _Httpd(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: OpenAIServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that went away (a timeout test, an abandoned stream)."""
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5.0  # an idle keep-alive connection frees its thread after this
    server: _Httpd

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def do_GET(self) -> None:
        self._handle(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self._handle(self.rfile.read(length) if length else b"")

    def _handle(self, raw: bytes) -> None:
        owner = self.server.owner
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = {name.lower(): value for name, value in self.headers.items()}
        received = ReceivedRequest(self.command, self.path, headers, body, raw)
        owner._begin(received)
        wire = self.wfile
        self.wfile = _Tee(wire, received.response)  # type: ignore[assignment]
        request_id = "req-" + hashlib.sha256(raw).hexdigest()[:12]  # stable across runs
        try:
            route = self.path.partition("?")[0].rstrip("/")  # a query (?key=...) is kept
            self.messages_route = route == "/v1/messages"
            self.responses_route = route == "/v1/responses"
            if self.command != "POST" or route not in _ROUTES:
                self._error(HttpError(404, f"no route {self.command} {self.path}"), request_id)
            elif owner.api_key is not None and (
                headers.get("x-api-key") if self.messages_route else headers.get("authorization")
            ) != (owner.api_key if self.messages_route else f"Bearer {owner.api_key}"):
                error = HttpError(401, "Incorrect API key provided.", code="invalid_api_key")
                self._error(error, request_id)
            elif not isinstance(body, dict):
                self._error(HttpError(400, "the request body is not a JSON object"), request_id)
            else:
                self._answer(owner, body, request_id)
        finally:
            self.wfile = wire
            owner._end()

    def _answer(self, owner: OpenAIServer, body: dict[str, Any], request_id: str) -> None:
        try:
            reply = owner.responder(_as_chat(body) if self.responses_route else body)
        except Exception as error:  # a broken test responder: show it to the client
            self._error(HttpError(500, f"responder failed: {error!r}"), request_id)
            return
        if reply.hold is not None:
            reply.hold.wait(HOLD_CAP_S)
        if reply.delay > 0:
            time.sleep(reply.delay)
        if reply.error is not None:
            self._error(reply.error, request_id)
            return
        stable = hashlib.sha256(
            json.dumps(body.get("messages", body.get("input")), sort_keys=True).encode()
        ).hexdigest()[:16]
        calls = [
            ToolCall(call.name, call.arguments, call.id or f"call_{stable}_{k}")
            for k, call in enumerate(reply.tool_calls)
        ]
        finish = reply.finish_reason
        if finish is None:
            finish = "tool_calls" if calls else "stop"
        usage = dict(reply.usage) if reply.usage is not None else _usage(body, reply)
        model = str(body.get("model", ""))
        if self.messages_route:
            self._messages(reply, calls, finish, usage, model, request_id, bool(body.get("stream")))
        elif self.responses_route:
            self._responses(
                reply, calls, finish, usage, model, request_id, bool(body.get("stream"))
            )
        elif body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            self._stream(reply, calls, finish, usage if include_usage else None, model, request_id)
        else:
            self._complete(reply, calls, finish, usage, model, request_id)

    # --- writers -----------------------------------------------------------------------

    def _json(self, status: int, payload: Any, headers: Mapping[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, error: HttpError, request_id: str) -> None:
        headers = {"x-request-id": request_id}
        if error.retry_after is not None:
            headers["Retry-After"] = error.retry_after
        payload: dict[str, Any] = {
            "error": {"message": error.message, "type": error.type, "code": error.code}
        }
        if getattr(self, "messages_route", False):
            kind = _ANTHROPIC_ERRORS.get(error.status, "api_error")
            payload = {"type": "error", "error": {"type": kind, "message": error.message}}
        self._json(error.status, payload, headers)

    def _messages(
        self,
        reply: Reply,
        calls: list[ToolCall],
        finish: str,
        usage: dict[str, Any],
        model: str,
        request_id: str,
        stream: bool,
    ) -> None:
        """An Anthropic Messages answer: one message object, or its SSE events."""
        blocks: list[dict[str, Any]] = []
        if reply.reasoning:
            blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig"})
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        for call in calls:
            arguments = json.loads(call.arguments or "{}")
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": arguments}
            )
        stop = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}.get(
            finish, "end_turn"
        )
        wire_usage = {
            "input_tokens": usage.get("prompt_tokens", 0),
            "output_tokens": usage.get("completion_tokens", 0),
        }
        if not stream:
            payload = {
                "id": f"msg-{request_id}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": wire_usage,
            }
            self._json(200, payload, {"x-request-id": request_id})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", request_id)
        self.end_headers()

        def send(kind: str, data: dict[str, Any]) -> None:
            event = f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()

        pieces = max(reply.pieces, 1)
        start: dict[str, Any] = {
            "id": f"msg-{request_id}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": wire_usage["input_tokens"], "output_tokens": 0},
        }
        send("message_start", {"message": start})
        for index, block in enumerate(blocks):
            if block["type"] == "tool_use":
                opening = {**block, "input": {}}
                send("content_block_start", {"index": index, "content_block": opening})
                text = json.dumps(block["input"])
                for piece in _split(text, pieces):
                    delta = {"type": "input_json_delta", "partial_json": piece}
                    send("content_block_delta", {"index": index, "delta": delta})
            else:
                key = "thinking" if block["type"] == "thinking" else "text"
                opening = {"type": block["type"], key: ""}
                send("content_block_start", {"index": index, "content_block": opening})
                for piece in _split(block[key], pieces):
                    delta = {"type": f"{key}_delta", key: piece}
                    send("content_block_delta", {"index": index, "delta": delta})
            send("content_block_stop", {"index": index})
        send("message_delta", {"delta": {"stop_reason": stop}, "usage": wire_usage})
        send("message_stop", {})
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _responses(
        self,
        reply: Reply,
        calls: list[ToolCall],
        finish: str,
        usage: dict[str, Any],
        model: str,
        request_id: str,
        stream: bool,
    ) -> None:
        """An OpenAI Responses answer: one response object, or its typed SSE events."""
        items: list[dict[str, Any]] = []
        if reply.reasoning:
            summary = [{"type": "summary_text", "text": reply.reasoning}]
            items.append({"id": f"rs_{request_id}", "type": "reasoning", "summary": summary})
        if reply.text:
            part = {"type": "output_text", "text": reply.text, "annotations": []}
            items.append(
                {
                    "id": f"msg_{request_id}",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [part],
                }
            )
        for k, call in enumerate(calls):
            items.append(
                {
                    "id": f"fc_{request_id}_{k}",
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
        wire_usage = {
            "input_tokens": usage.get("prompt_tokens", 0),
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage.get("completion_tokens", 0),
            "output_tokens_details": {"reasoning_tokens": len(reply.reasoning.split())},
            "total_tokens": usage.get("total_tokens", 0),
        }
        status = "incomplete" if finish == "length" else "completed"
        response: dict[str, Any] = {
            "id": f"resp_{request_id}",
            "object": "response",
            "created_at": 0,
            "status": status,
            "model": model,
            "output": items,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": wire_usage,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status != "completed"
            else None,
        }
        if not stream:
            self._json(200, response, {"x-request-id": request_id})
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", request_id)
        self.end_headers()
        number = iter(range(1 << 30))

        def send(kind: str, data: dict[str, Any]) -> None:
            payload = {"type": kind, "sequence_number": next(number), **data}
            event = f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()

        pieces = max(reply.pieces, 1)
        opening = {**response, "status": "in_progress", "output": [], "usage": None}
        send("response.created", {"response": opening})
        for index, item in enumerate(items):
            base = {"output_index": index, "item_id": item["id"]}
            if item["type"] == "function_call":
                send(
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "arguments": ""}},
                )
                for piece in _split(item["arguments"], pieces):
                    send("response.function_call_arguments.delta", {**base, "delta": piece})
                send(
                    "response.function_call_arguments.done",
                    {**base, "arguments": item["arguments"]},
                )
            elif item["type"] == "reasoning":
                send(
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "summary": []}},
                )
                for piece in _split(reply.reasoning, pieces):
                    send(
                        "response.reasoning_summary_text.delta",
                        {**base, "summary_index": 0, "delta": piece},
                    )
            else:
                send(
                    "response.output_item.added",
                    {"output_index": index, "item": {**item, "content": []}},
                )
                for piece in _split(reply.text, pieces):
                    send("response.output_text.delta", {**base, "content_index": 0, "delta": piece})
            send("response.output_item.done", {"output_index": index, "item": item})
        if reply.cut_off:
            self.close_connection = True  # no terminating chunk: an incomplete body
            return
        if reply.stream_error is not None:
            send("error", {"code": "server_error", "message": reply.stream_error, "param": None})
        else:
            send(
                "response.completed" if status == "completed" else "response.incomplete",
                {"response": response},
            )
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _complete(
        self,
        reply: Reply,
        calls: list[ToolCall],
        finish: str,
        usage: dict[str, Any],
        model: str,
        request_id: str,
    ) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in calls
            ]
        payload: dict[str, Any] = {
            "id": f"chatcmpl-{request_id}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish or None}],
        }
        if reply.send_usage:
            payload["usage"] = usage
        self._json(200, payload, {"x-request-id": request_id})

    def _stream(
        self,
        reply: Reply,
        calls: list[ToolCall],
        finish: str,
        usage: dict[str, Any] | None,
        model: str,
        request_id: str,
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", request_id)
        self.end_headers()

        def send(data: str) -> None:
            event = f"data: {data}\n\n".encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
            send(
                json.dumps(
                    {
                        "id": f"chatcmpl-{request_id}",
                        "object": "chat.completion.chunk",
                        "created": 0,
                        "model": model,
                        "choices": [choice],
                    }
                )
            )

        pieces = max(reply.pieces, 1)
        chunk({"role": "assistant", "content": ""})
        for piece in _split(reply.reasoning, pieces):
            chunk({"content": None, "reasoning_content": piece})
        for piece in _split(reply.text, pieces):
            chunk({"content": piece})
        for delta in _tool_call_deltas(reply, calls, pieces):
            chunk({"tool_calls": [delta]})
        if reply.cut_off:
            self.close_connection = True  # no terminating chunk: an incomplete body
            return
        if reply.stream_error is not None:
            send(json.dumps({"error": {"message": reply.stream_error, "type": "server_error"}}))
        else:
            if finish:
                chunk({}, finish)
            if usage is not None and reply.send_usage:
                send(
                    json.dumps(
                        {
                            "id": f"chatcmpl-{request_id}",
                            "object": "chat.completion.chunk",
                            "created": 0,
                            "model": model,
                            "choices": [],
                            "usage": usage,
                        }
                    )
                )
            send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


_ROUTES = ("/v1/chat/completions", "/v1/responses", "/v1/messages")


def _as_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A Responses body as the chat-completions messages the responder reads (the last
    message is what matters: a user text, or the trailing function call outputs)."""
    raw = body.get("input")
    items = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    messages: list[dict[str, Any]] = []
    for item in items:
        if isinstance(item, str):
            messages.append({"role": "user", "content": item})
        elif isinstance(item, dict) and item.get("type") == "function_call_output":
            messages.append({"role": "tool", "content": str(item.get("output", ""))})
        elif isinstance(item, dict) and item.get("role") in ("user", "system", "developer"):
            content = item.get("content")
            if isinstance(content, list):
                content = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
            messages.append({"role": item["role"], "content": content})
        elif isinstance(item, dict):
            messages.append({"role": "assistant", "content": None})
    return {**body, "messages": messages}


_ANTHROPIC_ERRORS = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def _tool_call_deltas(reply: Reply, calls: list[ToolCall], pieces: int) -> Iterator[dict[str, Any]]:
    """The streamed ``tool_calls`` deltas: each call's opening delta, then its arguments in
    ``pieces`` parts (after all openings and round-robin over the calls when
    ``reply.interleave``)."""
    for k, call in enumerate(calls):
        yield {
            "index": k,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        if not reply.interleave:
            for piece in _split(call.arguments, pieces):
                yield {"index": k, "function": {"arguments": piece}}
    if reply.interleave:
        split = [_split(call.arguments, pieces) for call in calls]
        for round_no in range(max((len(s) for s in split), default=0)):
            for k, parts in enumerate(split):
                if round_no < len(parts):
                    yield {"index": k, "function": {"arguments": parts[round_no]}}


def _split(text: str, pieces: int) -> list[str]:
    """``text`` in ``pieces`` nearly equal parts (fewer for short text; none for "")."""
    if not text:
        return []
    size = -(-len(text) // pieces)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    prompt = len(json.dumps(body.get("messages"), ensure_ascii=False).split())
    reasoning = len(reply.reasoning.split())
    output = (
        reasoning
        + len(reply.text.split())
        + sum(len(call.arguments.split()) + 1 for call in reply.tool_calls)
    )
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
    }
    if reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage
