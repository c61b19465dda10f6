"""The recording proxy passes on and prints no secret: not the live key, not a URL's."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_dsh_replay._format.redact import REDACTED, shown_url
from pytest_dsh_replay._recording.proxy import Relay, SecretScrub, proxy_stream
from pytest_dsh_replay._wire.anthropic import messages_url
from pytest_dsh_replay._wire.base import httpx_module, join_path
from pytest_dsh_replay._wire.gemini import gemini_upstream
from pytest_dsh_replay._wire.openai import WIRE

LIVE_KEY = "live-" + "key-" + "7f3a9c1e"  # no known shape: only the proxy knows it
SHAPED = "sk-" + "upstream" + "X" * 20
REQUEST = b'{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}'


def relayed(
    handler: Any, base_url: str = "http://upstream.invalid/v1"
) -> tuple[bytes, list[dict[str, Any]], list[str]]:
    raw, chunks, printed, _ = relayed_with_headers(handler, base_url)
    return raw, chunks, printed


def relayed_with_headers(
    handler: Any, base_url: str = "http://upstream.invalid/v1"
) -> tuple[bytes, list[dict[str, Any]], list[str], list[tuple[str, str]]]:
    httpx = httpx_module()
    client = httpx.Client(transport=httpx.MockTransport(handler))
    relay = Relay(WIRE, REQUEST, {"content-type": "application/json"}, "/v1/chat/completions")
    printed: list[str] = []
    chunks = list(
        proxy_stream(
            relay,
            client=client,
            base_url=base_url,
            api_key=LIVE_KEY,
            model=None,
            timeout=5,
            on_network_error=printed.append,
        )
    )
    # The events, then the one that ended the answer (an error event is kept apart).
    return relay.take() + relay.take_ending(), chunks, printed, relay.response_headers


def sse_response(pieces: list[bytes]) -> Any:
    """A streamed answer read in ``pieces`` (one read each)."""
    httpx = httpx_module()

    class Pieces(httpx.ByteStream):  # type: ignore[misc, name-defined]
        def __iter__(self) -> Any:
            yield from pieces

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Pieces(b""))


def test_an_error_body_that_echoes_the_key_reaches_the_client_redacted() -> None:
    def handler(request: Any) -> Any:
        assert request.headers["authorization"] == f"Bearer {LIVE_KEY}"  # it was sent
        body = {"error": {"message": f"bad key {LIVE_KEY} (also {SHAPED})", "type": "auth"}}
        return httpx_module().Response(401, json=body)

    raw, chunks, _ = relayed(handler)
    assert LIVE_KEY.encode() not in raw
    assert SHAPED.encode() not in raw
    assert REDACTED.encode() in raw
    message = chunks[-1]["reason"]["failure"]["message"]
    assert LIVE_KEY not in message
    assert SHAPED not in message


def test_an_sse_error_event_split_through_the_key_reaches_the_client_redacted() -> None:
    event = f'data: {{"error": {{"message": "key {LIVE_KEY} revoked"}}}}\n\n'.encode()
    cut = event.index(LIVE_KEY.encode()) + 6  # the key is split between two reads

    def handler(request: Any) -> Any:
        return sse_response([event[:cut], event[cut:]])

    raw, chunks, _ = relayed(handler)
    assert LIVE_KEY.encode() not in raw
    assert raw == event.replace(LIVE_KEY.encode(), REDACTED.encode())
    assert chunks[-1]["reason"]["kind"] == "error"


@pytest.mark.parametrize("cut", range(1, 12))
def test_the_key_scrub_finds_the_key_wherever_the_stream_splits_it(cut: int) -> None:
    stream = b"a " + LIVE_KEY.encode() + b" b " + LIVE_KEY.encode()[:5]
    scrub = SecretScrub([LIVE_KEY])
    out = scrub.feed(stream[:cut]) + scrub.feed(stream[cut:]) + scrub.end()
    assert out == b"a [REDACTED] b " + LIVE_KEY.encode()[:5]  # a mere start is kept


def test_a_network_error_names_the_url_without_its_credentials() -> None:
    def handler(request: Any) -> Any:
        raise httpx_module().ConnectError(f"refused for {request.url}")

    base = f"http://user:{LIVE_KEY}@upstream.invalid/v1?key={SHAPED}"
    _, chunks, printed = relayed(handler, base)
    shown = printed[0] + chunks[-1]["reason"]["failure"]["message"]
    assert "upstream.invalid/v1/chat/completions" in shown
    assert LIVE_KEY not in shown
    assert SHAPED not in shown


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw-secret-1@h:8/v1", "http://[REDACTED]@h:8/v1"),
        ("http://h/v1?key=abc123&x=1", "http://h/v1?key=[REDACTED]&x=1"),
        (
            "http://h/v1?api_token=t&access_key=k",
            "http://h/v1?api_token=[REDACTED]&access_key=[REDACTED]",
        ),
        ("http://h/v1", "http://h/v1"),
    ],
)
def test_a_shown_url_holds_no_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_paths_are_joined_before_the_query() -> None:
    assert (
        join_path("http://h/v1?key=x", "/chat/completions") == "http://h/v1/chat/completions?key=x"
    )
    assert join_path("http://h/v1/", "/responses") == "http://h/v1/responses"
    assert messages_url("http://h/v1?key=x") == "http://h/v1/messages?key=x"
    assert messages_url("http://h?key=x") == "http://h/v1/messages?key=x"
    assert (
        gemini_upstream("http://h/v1beta?key=x", "/v1beta/models/g:streamGenerateContent", None)
        == "http://h/v1beta/models/g:streamGenerateContent?key=x&alt=sse"
    )


def test_forwarded_headers_hold_no_key() -> None:
    def handler(request: Any) -> Any:
        headers = {"x-debug-auth": f"Bearer {LIVE_KEY}", "x-request-id": "req-1"}
        return httpx_module().Response(200, json={"choices": []}, headers=headers)

    _, _, _, headers = relayed_with_headers(handler)
    shown = dict(headers)
    assert LIVE_KEY not in shown["x-debug-auth"]
    assert shown["x-request-id"] == "req-1"


def test_an_sse_error_event_with_a_secret_shape_reaches_the_client_redacted() -> None:
    event = f'data: {{"error": {{"message": "quota of {SHAPED} used up"}}}}\n\n'.encode()

    def handler(request: Any) -> Any:
        return sse_response([event])

    raw, chunks, _ = relayed(handler)
    assert SHAPED.encode() not in raw
    assert b"quota of [REDACTED] used up" in raw
    assert SHAPED not in chunks[-1]["reason"]["failure"]["message"]


def test_the_base_urls_credentials_are_never_relayed() -> None:
    password, query_key = "url-" + "pass" * 3, "query-" + "key" * 4

    def handler(request: Any) -> Any:
        assert request.url.params["key"] == query_key  # the upstream got its query
        text = f"denied for {password} and {query_key}; model output {query_key}"
        return httpx_module().Response(403, json={"error": {"message": text}})

    raw, chunks, _ = relayed(handler, f"http://u:{password}@upstream.invalid/v1?key={query_key}")
    message = chunks[-1]["reason"]["failure"]["message"]
    for secret in (password, query_key):
        assert secret.encode() not in raw
        assert secret not in message
