"""The logs the real dsh runtime writes load as what its model sent, chunk for chunk.

The runtime (the ``e2e`` extra) runs the delegating and the retrying scenario against
the package's scripted model on loopback (``ScriptedServer``) directly, writing its logs
the way it does by default (``session.v4.jsonl.zstd``, one zstd frame per write batch).
``load_scenario(root, session_id)`` must then give, per session, one entry per HTTP
answer the server sent to that session, in order: the same text, thinking and
tool-argument deltas, the same stop reason, and an error entry with the status and
message of each HTTP error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.runtime_agent import (
    PRIMARY_ID,
    SCENARIOS,
    RuntimeDriver,
    runtime_missing,
    runtime_model,
)

from pytest_dsh_replay import ReceivedRequest, load_scenario
from pytest_dsh_replay._wire.base import SSEParser

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(runtime_missing() is not None, reason=str(runtime_missing())),
]

_STOPS = {"end_turn": "stop", "tool_use": "tool-calls", "max_tokens": "max-tokens"}


def sent(request: ReceivedRequest) -> dict[str, Any]:
    """What the server answered one request, as the runtime's chunks would show it."""
    body = bytes(request.response)
    if request.status != 200:
        return {"status": request.status, "message": orjson.loads(body)["error"]["message"]}
    deltas: list[tuple[str, str]] = []
    stop = None
    for _, data in SSEParser().feed(body):
        event = orjson.loads(data)
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            deltas.append(("tool-call-delta", ""))  # the runtime opens a call with its name
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "signature_delta":
                continue
            kind, field = {
                "text_delta": ("text-delta", "text"),
                "thinking_delta": ("reasoning-delta", "thinking"),
                "input_json_delta": ("tool-call-delta", "partial_json"),
            }[delta["type"]]
            deltas.append((kind, delta[field]))
        elif event["type"] == "message_delta":
            stop = _STOPS[event["delta"]["stop_reason"]]
    return {"deltas": deltas, "stop": stop}


def loaded(entry: Any) -> dict[str, Any]:
    """One replay entry the same way."""
    chunks = entry.chunks
    reason = chunks[-1]["reason"]
    if reason["kind"] == "error":
        failure = reason["failure"]
        return {"status": failure.get("status"), "message": failure["message"]}
    deltas = [
        (c["type"], c.get("text", c.get("argumentsDelta")))
        for c in chunks
        if c["type"] in ("text-delta", "reasoning-delta", "tool-call-delta")
    ]
    return {"deltas": deltas, "stop": reason["kind"]}


def test_zstd_logs_load_as_the_server_sent_them(tmp_path: Path) -> None:
    # One run: a 429 on the warm-up, a spawn and a fork child at once, a child whose
    # first call fails with a 500. Each failure asks for a 50 ms wait (Retry-After),
    # which the runtime keeps instead of 1 s (the 429's default here) or its own backoff.
    prompts = [*SCENARIOS["runtime-retry"][:1], *SCENARIOS["runtime-mixed"][1:]]
    prompts += SCENARIOS["runtime-retry"][1:]
    with runtime_model(retry_after={429: 0.05, 500: 0.05}).serve() as server:
        with RuntimeDriver(server.base_url, tmp_path, compression="zstd") as runtime:
            runtime.run(prompts)
        requests = list(server.requests)
    logs = sorted(p.name for p in runtime.root.rglob("session.*"))
    assert set(logs) == {"session.v4.jsonl.zstd", "session.lock"}
    scenario = load_scenario(runtime.root, PRIMARY_ID)
    assert len(scenario.scripts) == 1 + len(runtime.children)
    for script in scenario.scripts:
        answers = [
            sent(r)
            for r in requests
            if r.headers.get("x-deepseek-harness-session-id") == script.recorded_id
        ]
        assert answers, script.file
        assert [loaded(e) for e in script.entries] == answers, script.file
    assert len(runtime.children) == 3
    statuses = [a.get("status") for s in scenario.scripts for a in map(loaded, s.entries)]
    assert {429, 500} <= set(statuses)
