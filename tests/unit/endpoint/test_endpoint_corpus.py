"""Every corpus call served over the HTTP routes and read back by a raw SSE (or NDJSON) reader.

For each corpus scenario that ``ReplayModel`` replays, every recorded call is made over
``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``, Azure's two routes
(``/openai/deployments/{deployment}/chat/completions``, ``/openai/responses``), Bedrock's
two streamed routes (``converse-stream``, ``invoke-with-response-stream``), Ollama's
``/api/chat`` and the two Vertex AI routes (Gemini's ``...:streamGenerateContent``,
Anthropic's ``...:streamRawPredict``) through the in-process transport with a plain
``httpx`` client (no SDK). The frames (SSE, the AWS event stream, Ollama's lines) are
parsed here and decoded with the wire decoders; the blocks (text, reasoning, tool
calls), usage and finish reassembled from them must equal the script's (on Ollama's
wire, which names tool calls by their content, takes arguments only as an object and
carries no cache counts: without the call ids, arguments that are no object as
``{}``, and without the cache-read tokens).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus

from pytest_dsh_replay import load_scenario
from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._errors import DshReplayError, ReplayCancelledError
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import HangEntry, ThrowEntry
from pytest_dsh_replay._wire.anthropic import AnthropicDecoder, anthropic_failure
from pytest_dsh_replay._wire.anthropic_bedrock import CHUNK_STREAM
from pytest_dsh_replay._wire.anthropic_bedrock import WIRE as ANTHROPIC_BEDROCK
from pytest_dsh_replay._wire.azure import AzureDecoder
from pytest_dsh_replay._wire.base import httpx_module
from pytest_dsh_replay._wire.bedrock import EVENT_STREAM, BedrockDecoder, bedrock_failure
from pytest_dsh_replay._wire.bedrock import WIRE as BEDROCK
from pytest_dsh_replay._wire.gemini import GeminiDecoder, gemini_failure
from pytest_dsh_replay._wire.ollama import OllamaDecoder, ollama_failure
from pytest_dsh_replay._wire.openai import OpenAIDecoder, openai_failure
from pytest_dsh_replay._wire.responses import ResponsesDecoder

GOAL = "goal-0c0ffee0-1234"
VERTEX_SCOPE = "/projects/p/locations/us-central1/publishers"


def _replayable() -> list[Path]:
    out = []
    for path in corpus_scenarios():
        if json.loads((path / "expected.json").read_text("utf-8"))["ok"]:
            out.append(path)
    return out


SCENARIOS = _replayable()
VERTEX_ROUTES = ("vertex", "anthropic-vertex")


def sse_frames(raw: bytes) -> list[tuple[str | None, str]]:
    """(event, data) of each SSE frame (the test's own reader)."""
    frames = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        event, data = None, []
        for line in block.decode().split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data:
            frames.append((event, "\n".join(data)))
    return frames


def read_call(client: Any, route: str, headers: dict[str, str], body: dict[str, Any]) -> list[Any]:
    """Make one streamed call with a raw httpx client; the dsh chunks decoded from it."""
    httpx = httpx_module()
    path = PATHS[route]
    decoder: Any = DECODERS[route]()
    try:
        with client.stream("POST", path, json=body, headers=headers) as response:
            raw = response.read()
            if response.status_code != 200:
                parsed = json.loads(raw)
                failure = FAILURES.get(route, openai_failure)(
                    response.status_code, parsed, response.headers
                )
                return [decoder.failed(failure)]
    except (httpx.ReadError, httpx.RemoteProtocolError):
        return [decoder.failed({"message": "dropped", "code": "TRANSPORT"})]
    if route in EVENT_STREAMS:
        return event_stream_chunks(raw, decoder, route)
    chunks: list[Any] = []
    numbers: list[int] = []  # the Responses events' sequence numbers, from 0
    frames = sse_frames(raw) if route != "ollama" else ndjson_lines(raw)
    for event, data in frames:
        if data == "[DONE]":
            break
        payload = json.loads(data)
        if route in RESPONSES:
            assert event == payload["type"]
            assert payload["sequence_number"] == len(numbers)
            numbers.append(payload["sequence_number"])
            if payload["type"] == "error":
                return [*chunks, decoder.failed({"message": payload["message"], "code": "X"})]
            chunks.extend(decoder.feed(payload))
        elif route in ANTHROPIC_ROUTES:
            assert event == payload["type"]
            chunks.extend(decoder.feed(payload))
        elif "error" in payload:
            error = payload["error"]
            message = error if isinstance(error, str) else error["message"]
            chunks.append(decoder.failed({"message": message, "code": "X"}))
            return chunks
        else:
            chunks.extend(decoder.feed(payload))
    chunks.extend(decoder.end())
    return chunks


def event_stream_chunks(raw: bytes, decoder: Any, route: str) -> list[Any]:
    """The chunks of a Bedrock event stream (botocore reads the messages, CRCs checked)."""
    chunks: list[Any] = []
    framing, wire = EVENT_STREAMS[route]
    splitter = framing.splitter()
    for frame in splitter.feed_raw(raw):
        event = json.loads(frame.data or "null")
        failure = wire.stream_failure(event)
        if failure is not None:
            return [*chunks, decoder.failed(failure)]
        chunks.extend(decoder.feed(event))
    assert splitter.pending == b""
    return [*chunks, *decoder.end()]


def ndjson_lines(raw: bytes) -> list[tuple[str | None, str]]:
    """(None, line) of each NDJSON line (Ollama's stream; every line ends in a newline)."""
    assert not raw or raw.endswith(b"\n")
    return [(None, line) for line in raw.decode().split("\n") if line]


PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "azure": "/openai/deployments/m/chat/completions?api-version=2024-10-21",
    "azure-responses": "/openai/responses?api-version=2024-10-21",
    "bedrock": "/model/m/converse-stream",
    "ollama": "/api/chat",
    "vertex": f"/v1beta1{VERTEX_SCOPE}/google/models/m:streamGenerateContent?alt=sse",
    "anthropic-vertex": f"/v1{VERTEX_SCOPE}/anthropic/models/m:streamRawPredict",
    "anthropic-bedrock": "/model/m:0/invoke-with-response-stream",
}
DECODERS: dict[str, Any] = {
    "openai": OpenAIDecoder,
    "responses": ResponsesDecoder,
    "anthropic": AnthropicDecoder,
    "azure": AzureDecoder,
    "azure-responses": ResponsesDecoder,
    "bedrock": BedrockDecoder,
    "ollama": OllamaDecoder,
    "vertex": GeminiDecoder,
    "anthropic-vertex": AnthropicDecoder,
    "anthropic-bedrock": AnthropicDecoder,
}
EVENT_STREAMS: dict[str, Any] = {
    "bedrock": (EVENT_STREAM, BEDROCK),
    "anthropic-bedrock": (CHUNK_STREAM, ANTHROPIC_BEDROCK),
}  # the routes answered in the AWS event stream: its framing and wire
RESPONSES = ("responses", "azure-responses")  # the routes of the Responses events
FAILURES: dict[str, Any] = {
    "anthropic": anthropic_failure,
    "anthropic-vertex": anthropic_failure,
    "vertex": gemini_failure,
    "bedrock": bedrock_failure,
    "anthropic-bedrock": bedrock_failure,
    "ollama": ollama_failure,
}
ANTHROPIC_ROUTES = ("anthropic", "anthropic-vertex")  # the Messages bodies and events


def _args(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def summary(chunks: list[Any], route: str) -> dict[str, Any]:
    """What a call means: blocks in order, usage, finish (wire-independent parts).

    A block's content is its deltas joined (what the wire carries), else its
    ``block-end`` (a block recorded without deltas). Tool arguments compare as JSON.
    """
    blocks: dict[int, dict[str, Any]] = {}
    usage: dict[str, Any] | None = None
    finish: Any = None
    for chunk in chunks:
        kind = chunk["type"]
        if kind == "block-start":
            blocks.setdefault(chunk["index"], {"type": chunk["blockType"], "parts": []})
        elif kind in ("text-delta", "reasoning-delta", "tool-call-delta"):
            block = blocks.setdefault(chunk["index"], {"type": kind[:-6], "parts": []})
            block["parts"].append(chunk.get("text", chunk.get("argumentsDelta", "")))
            if kind == "tool-call-delta":
                block.setdefault("id", chunk.get("id"))
                if chunk.get("name"):
                    block.setdefault("name", chunk["name"])
        elif kind == "block-end":
            block = blocks.setdefault(chunk["index"], {"type": chunk["block"]["type"], "parts": []})
            block["end"] = chunk["block"]
        elif kind == "usage":
            usage = chunk["usage"]
        elif kind == "finish":
            finish = chunk["reason"]
    out_blocks: list[Any] = []
    for block in blocks.values():
        end = block.get("end", {})
        if block["type"] == "tool-call":
            arguments = "".join(block["parts"]) or end.get("arguments", "")
            name = end.get("name", block.get("name"))
            call_id, args = end.get("id", block.get("id")), _args(arguments)
            if route == "ollama":  # arguments are an object there (cut ones: {})
                call_id, args = None, args if isinstance(args, dict) else {}
            if route == "vertex" and not isinstance(args, dict):
                args = {}  # Gemini's `args` is an object: other arguments are sent as {}
            out_blocks.append(("tool-call", call_id, name, args))
        else:
            text = "".join(block["parts"]) or end.get("text", "")
            if text:
                out_blocks.append((block["type"], text))
    done = "error" if finish is None or finish["kind"] in ("error", "aborted") else finish["kind"]
    return {
        "blocks": out_blocks,
        "usage": _usage(usage, route) if done != "error" else None,
        "finish": done,
    }


def _usage(usage: dict[str, Any] | None, route: str) -> Any:
    if route == "ollama":  # the counts of every done line: no cache reads
        usage = usage or {}
        return (usage.get("inputTokens", 0) + usage.get("cacheWriteTokens", 0),
                usage.get("outputTokens", 0))  # fmt: skip
    separate = route in (*ANTHROPIC_ROUTES, "bedrock", "anthropic-bedrock")  # cache writes apart
    if usage is None:  # Messages and Converse always carry usage: zeros when none was recorded
        return (0, 0, 0, 0) if separate else None
    read = usage.get("cacheReadTokens", 0)
    write = usage.get("cacheWriteTokens", 0)
    if not separate:  # cache writes count as input on the OpenAI wires
        return (usage.get("inputTokens", 0) + write, usage.get("outputTokens", 0), read)
    return (usage.get("inputTokens", 0), usage.get("outputTokens", 0), read, write)


def request_body(route: str, first: str | None, number: int) -> dict[str, Any]:
    text = first if first is not None else "no message"
    messages: list[Any] = [{"role": "user", "content": f"work on {GOAL}"}]
    messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
    if route == "ollama":  # its messages' content is a string
        return {"model": "m", "messages": [messages[0], {"role": "user", "content": text}]}
    if route in RESPONSES:
        return {
            "model": "m",
            "input": [{**m, "type": "message"} for m in messages],
            "stream": True,
        }
    if route == "bedrock":
        texts = [f"work on {GOAL}", text]
        return {"messages": [{"role": "user", "content": [{"text": t}]} for t in texts]}
    if route == "vertex":  # the Gemini bodies; the model is the path's
        return {
            "contents": [
                {"role": "user", "parts": [{"text": t}]} for t in (messages[0]["content"], text)
            ]
        }
    if route == "anthropic-bedrock":  # the model is the path's, the route streams
        return {"anthropic_version": "bedrock-2023-05-31", "max_tokens": 100, "messages": messages}
    body: dict[str, Any] = {"model": "m", "messages": messages, "stream": True}
    if route in ("openai", "azure"):
        body["stream_options"] = {"include_usage": True}
    else:
        body["max_tokens"] = 100
    if route == "anthropic-vertex":  # the model is the path's, the version the body's
        del body["model"]
        body["anthropic_version"] = "vertex-2023-10-16"
    return body


@pytest.mark.parametrize(
    "route",
    ["openai", "responses", "anthropic", "azure", "azure-responses", "bedrock",
     "anthropic-bedrock", "ollama", *VERTEX_ROUTES],
)  # fmt: skip
@pytest.mark.parametrize("path", corpus_params(SCENARIOS))
def test_every_corpus_call_round_trips_over_http(
    path: Path | None, route: str, tmp_path: Path
) -> None:
    require_corpus()
    assert path is not None
    scenario = load_scenario(path)
    model = ReplayModel(scenario, workdir=tmp_path)  # ready files: never into the corpus
    endpoint = Endpoint.replaying(model)
    client = httpx_module().Client(transport=sync_transport(endpoint), base_url="http://t")
    live = {script.recorded_id: f"live-{i}" for i, script in enumerate(scenario.scripts)}
    for i, script in enumerate(scenario.scripts):
        headers = {"x-dsh-session-id": f"live-{i}"}
        parent = live.get(script.parent_session or "")
        if parent is not None and not script.primary:
            headers["x-dsh-parent-session-id"] = parent
        for number, entry in enumerate(script.entries):
            body = request_body(route, script.first_user_text, number)
            if isinstance(entry, HangEntry):  # hangs have their own test: skip the call
                cancelled = threading.Event()
                cancelled.set()
                kwargs: dict[str, Any] = {
                    "parent_session_id": parent,
                    "cancel": cancelled,
                    "by_content": True,
                }
                with pytest.raises(ReplayCancelledError):
                    list(model.stream(body, session_id=f"live-{i}", **kwargs))
                continue
            got = read_call(client, route, headers, body)
            if isinstance(entry, ThrowEntry):
                assert summary(got, route)["finish"] == "error"
                continue
            chunks = json.loads(
                json.dumps(entry.chunks).replace("{{fromRequest:goal-[0-9a-f-]+}}", GOAL)
            )
            assert summary(got, route) == summary(chunks, route), (script.file, number)
    assert endpoint.errors == []
    try:
        model.assert_consumed()
    except DshReplayError as error:  # pragma: no cover - the message says which
        pytest.fail(str(error))
