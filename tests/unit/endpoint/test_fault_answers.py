"""Injected faults over HTTP: each wire's error shape, a cut body, a late answer (no pytester)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from support.scenarios import make_scenario

from pytest_dsh_replay import Fault
from pytest_dsh_replay._endpoint.endpoint import _raised
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._wire.base import httpx_module
from pytest_dsh_replay._wire.table import WIRES

M = "Rate limit reached, retry after 2 s (injected by dsh_replay.inject)"
_OPENAI = {
    "error": {
        "message": M,
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}
_ANTHROPIC = {"type": "error", "error": {"type": "rate_limit_error", "message": M}}
_GOOGLE = {"error": {"code": 429, "message": M, "status": "RESOURCE_EXHAUSTED"}}
_AWS = {"message": M}
RATE_LIMITED = {
    "openai": _OPENAI,
    "openai-responses": _OPENAI,
    "azure": {"error": {"code": "429", "message": M}},
    "azure-responses": _OPENAI,
    "anthropic": _ANTHROPIC,
    "anthropic-vertex": _ANTHROPIC,
    "gemini": _GOOGLE,
    "vertex": _GOOGLE,
    "bedrock": _AWS,
    "anthropic-bedrock": _AWS,
    "ollama": {"error": M},
}


def test_every_wire_is_listed() -> None:
    assert sorted(RATE_LIMITED) == sorted(wire.name for wire in WIRES)


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_a_rate_limit_is_each_providers_429_with_retry_after(wire: Any) -> None:
    error = wire.error(_raised(Fault.rate_limit(retry_after=2).error()))
    assert error.status == 429
    assert ("retry-after", "2") in error.headers
    assert ("retry-after-ms", "2000") in error.headers
    assert orjson.loads(error.body) == RATE_LIMITED[wire.name]
    aws = ("x-amzn-errortype", "ThrottlingException") in error.headers
    assert aws == (wire.name in ("bedrock", "anthropic-bedrock"))


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
def test_a_server_error_has_its_status_and_no_retry_after_unless_asked(wire: Any) -> None:
    plain = wire.error(_raised(Fault.server_error(502).error()))
    assert plain.status == 502
    assert not any(name.startswith("retry-after") for name, _ in plain.headers)
    asked = wire.error(_raised(Fault.server_error(503, retry_after=0).error()))
    assert (asked.status, ("retry-after", "0") in asked.headers) == (503, True)


BODY = {"model": "m", "messages": [{"role": "user", "content": "q"}]}


@pytest.fixture
def replay(tmp_path: Path) -> Any:
    scenario = make_scenario(tmp_path / "two", ask="q", primary=["first", "second"])
    work = tmp_path / "work"
    work.mkdir()
    opened = DshReplay.open(scenario, workdir=work, compare_logs=False)
    yield opened
    opened.close()


def http(replay: DshReplay, timeout: float | None = None) -> Any:
    httpx = httpx_module()
    transport = sync_transport(replay._endpoint)
    return httpx.Client(transport=transport, base_url="http://endpoint", timeout=timeout)


def test_over_http_a_fault_answers_the_attempt_and_the_retry_gets_the_recording(
    replay: DshReplay,
) -> None:
    replay.inject(Fault.rate_limit(retry_after=0.25))
    client = http(replay)
    limited = client.post("/v1/chat/completions", json=BODY)
    assert limited.status_code == 429
    assert (limited.headers["retry-after"], limited.headers["retry-after-ms"]) == ("0.25", "250")
    answered = client.post("/v1/chat/completions", json=BODY)  # the same request: a retry
    assert answered.json()["choices"][0]["message"]["content"] == "first"
    follow = {
        **BODY,
        "messages": [
            *BODY["messages"],
            {"role": "assistant", "content": "first"},
            {"role": "user", "content": "q"},
        ],
    }
    assert (
        client.post("/v1/chat/completions", json=follow).json()["choices"][0]["message"]["content"]
        == "second"
    )
    replay.finish()


def test_a_disconnect_cuts_the_stream_after_its_chunks_or_before_the_response(
    replay: DshReplay,
) -> None:
    httpx = httpx_module()
    replay.inject(Fault.disconnect())
    replay.inject(Fault.disconnect(after_chunks=2))
    client = http(replay)
    streamed = {**BODY, "stream": True}
    # 0 chunks: no response at all; either way the error names the injection as a cause
    with pytest.raises(httpx.RemoteProtocolError, match="Fault.disconnect injected"):
        client.post("/v1/chat/completions", json=streamed)
    got: list[bytes] = []
    with client.stream("POST", "/v1/chat/completions", json=streamed) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.ReadError, match="Fault.disconnect injected"):
            got.extend(response.iter_bytes())
    assert b'"content":"first"' in b"".join(got)
    assert b"[DONE]" not in b"".join(got)
    again = client.post("/v1/chat/completions", json=streamed)
    assert b"[DONE]" in again.content
    assert b'"content":"first"' in again.content


@pytest.mark.parametrize("stream", [False, True])
def test_a_latency_past_the_clients_read_timeout_is_its_read_timeout(
    replay: DshReplay, stream: bool
) -> None:
    httpx = httpx_module()
    replay.inject(Fault.latency(3600))
    client = http(replay, timeout=0.05)
    body = {**BODY, "stream": stream}
    with pytest.raises(httpx.ReadTimeout):
        client.post("/v1/chat/completions", json=body)
    answered = client.post("/v1/chat/completions", json=body)  # nothing was consumed
    assert b"first" in answered.content
    assert replay._http.take_errors() == []  # no replay error: the test does not fail


def test_a_non_streamed_disconnect_drops_the_connection(replay: DshReplay) -> None:
    httpx = httpx_module()
    replay.inject(Fault.disconnect(after_chunks=3))
    client = http(replay)
    with pytest.raises(httpx.RemoteProtocolError):
        client.post("/v1/chat/completions", json=BODY)
    answered = client.post("/v1/chat/completions", json=BODY)
    assert answered.json()["choices"][0]["message"]["content"] == "first"


def test_a_client_that_is_no_httpx_client_gets_the_built_in_errors(replay: DshReplay) -> None:
    from pytest_dsh_replay._endpoint.transport import _InProcess

    replay.inject(Fault.latency(3600))
    replay.inject(Fault.disconnect())
    replay.inject(Fault.rate_limit(retry_after=1))
    boto = _InProcess(replay._endpoint, None)  # what boto3's client sends through
    path = "/model/m/converse"
    body = orjson.dumps({"messages": [{"role": "user", "content": [{"text": "q"}]}]})
    with pytest.raises(TimeoutError):
        boto.send("POST", path, {}, body, timeout=0.05)
    with pytest.raises(ConnectionResetError):
        boto.send("POST", path, {}, body)
    limited = boto.send("POST", path, {}, body)
    assert limited.status == 429
    assert ("x-amzn-errortype", "ThrottlingException") in limited.headers
    answered = boto.send("POST", path, {}, body)
    assert b"first" in b"".join(answered.body)


def test_over_a_socket_a_disconnect_closes_the_connection_mid_body(replay: DshReplay) -> None:
    httpx = httpx_module()
    replay.inject(Fault.disconnect(after_chunks=2))
    replay.inject(Fault.rate_limit(retry_after=3))
    streamed = {**BODY, "stream": True}
    with httpx.Client(base_url=replay.base_url, timeout=10) as client:
        got: list[bytes] = []
        with client.stream("POST", "/v1/chat/completions", json=streamed) as response:
            assert response.status_code == 200
            with pytest.raises(httpx.RemoteProtocolError):  # the socket closed mid-body
                got.extend(response.iter_bytes())
        assert b'"content":"first"' in b"".join(got)
        limited = client.post("/v1/chat/completions", json=streamed)
        assert (limited.status_code, limited.headers["retry-after"]) == (429, "3")
        answered = client.post("/v1/chat/completions", json=streamed)
        assert b"[DONE]" in answered.content
