"""The endpoint against what the real dsh runtime sent and received (runtime samples).

``../shared/runtime-samples`` holds real request/response pairs and v4 session logs of
one runtime run (t5: a primary that spawns a child and forks another). The logs are
laid out as a scenario in a temporary directory (read in place, never copied into the
repository); the runtime's own requests are replayed over ``/v1/messages`` with its
session headers, the live ids renamed so recorded ids must match as wildcards.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.corpus_support import CORPUS, require_corpus

from pytest_dsh_replay._endpoint.endpoint import Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._wire.anthropic import AnthropicDecoder, anthropic_failure
from pytest_dsh_replay._wire.base import SSEParser, httpx_module

SAMPLES = CORPUS.parent / "runtime-samples"
SESSION = "x-deepseek-harness-session-id"


def sample(name: str) -> dict[str, Any]:
    require_corpus(SAMPLES)
    data: dict[str, Any] = json.loads((SAMPLES / name).read_text("utf-8"))
    return data


@pytest.fixture
def t5(tmp_path: Path) -> Path:
    require_corpus(SAMPLES)
    for source, target in (
        ("t5-primary.session.v4.jsonl", "session.jsonl"),
        ("t5-spawn-child.session.v4.jsonl", "session.1.jsonl"),
        ("t5-fork-child.session.v4.jsonl", "session.2.jsonl"),
    ):
        shutil.copy(SAMPLES / source, tmp_path / target)
    return tmp_path


def renamed(value: Any) -> Any:
    """A request as a replay run would send it: other live ids than when recorded."""
    text = json.dumps(value).replace("sess-main", "live-main")
    text = text.replace("81c27db7-a960-47a9-a606-c3d9df0c6894", "live-fork")
    return json.loads(text)


def events(raw: bytes) -> list[tuple[str | None, dict[str, Any]]]:
    return [(name, json.loads(data)) for name, data in SSEParser().feed(raw)]


def test_the_runtimes_own_requests_replay_over_the_messages_route(t5: Path) -> None:
    from pytest_dsh_replay import load_scenario

    model = ReplayModel(load_scenario(t5))
    http = httpx_module().Client(
        transport=sync_transport(Endpoint.replaying(model)), base_url="http://t"
    )
    pair1, pair2 = (
        sample("pair1-t5-main-turn2-tool-use.json"),
        sample("pair2-t5-fork-child-first-call.json"),
    )
    main = {SESSION: "live-main"}
    first = renamed(pair1["request"]["body"])
    first["messages"] = first["messages"][:1]
    assert http.post("/v1/messages", json=first, headers=main).status_code == 200
    # Turn 2: the tool_use answer, event for event what the provider sent when recording.
    answer = http.post("/v1/messages", json=renamed(pair1["request"]["body"]), headers=main)
    sent = pair1["response"]["sse_events"]
    got = events(answer.content)
    assert [kind for kind, _ in got] == [e["type"] for e in sent]
    assert all(kind == data["type"] for kind, data in got)
    for (_, ours), theirs in zip(got, sent, strict=True):
        if theirs["type"] in ("content_block_start", "content_block_delta"):
            assert ours == theirs
    assert got[-2][1]["delta"]["stop_reason"] == "tool_use"
    # The fork child's first request, as the runtime sent it (seedLength 17).
    fork = http.post(
        "/v1/messages", json=renamed(pair2["request"]["body"]), headers={SESSION: "live-fork"}
    )
    decoder = AnthropicDecoder()
    chunks = [c for _, data in events(fork.content) for c in decoder.feed(data)]
    assert "".join(c["text"] for c in chunks if c["type"] == "text-delta") == "FORK_OK seen"
    assert model.bindings["live-fork"].file == "session.2.jsonl"
    assert model._sessions.live_parent("live-fork") == "live-main"


def test_runtime_failure_codes_from_the_samples() -> None:
    pair4 = sample("pair4-e1-http500.json")
    response = pair4["response"]
    failure = anthropic_failure(
        response["status"], response["json_body"], {"x-request-id": "req-500"}
    )
    assert failure == {
        "message": "boom 500",
        "code": "SERVER",
        "status": 500,
        "requestId": "req-500",
    }
    limited = anthropic_failure(429, {"error": {"message": "slow down"}}, {"retry-after": "1"})
    assert limited == {
        "message": "slow down",
        "code": "RATE_LIMIT",
        "status": 429,
        "providerRetryAfterMs": 1000,
    }


def test_thinking_and_cache_usage_decode_as_the_runtime_maps_them() -> None:
    pair5 = sample("pair5-e1-thinking.json")
    decoder = AnthropicDecoder()
    chunks = [c for event in pair5["response"]["sse_events"] for c in decoder.feed(event)]
    assert [c["type"] for c in chunks if c["type"] != "text-delta"][:5] == [
        "block-start",
        "reasoning-delta",
        "reasoning-delta",
        "reasoning-delta",
        "block-end",
    ]
    usage = next(c for c in chunks if c["type"] == "usage")["usage"]
    assert usage == {"inputTokens": 20, "outputTokens": 9, "totalTokens": 33, "cacheReadTokens": 4}
    assert chunks[-1] == {"type": "finish", "reason": {"kind": "stop"}}
