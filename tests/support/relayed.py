"""A live provider stream relayed by the recording proxy, the provider an httpx mock."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pytest_dsh_replay._recording.proxy import Relay, proxy_stream
from pytest_dsh_replay._wire.base import Wire


def relay_live(
    wire: Wire,
    path: str,
    live: bytes,
    *,
    cuts: tuple[int, int],
    base_url: str,
    body: bytes = b'{"messages": []}',
    headers: Mapping[str, str] | None = None,
    model: str | None = None,
    httpx: Any,
) -> tuple[list[Any], Relay, list[Any]]:
    """Relay ``live`` (answered by the provider in three reads, cut at ``cuts``) for ``path``.

    Returns:
        The chunks the proxy decoded, its `Relay` (what it passed on), and the requests
        the provider got.
    """
    seen: list[Any] = []
    first, second = cuts

    class Pieces(httpx.ByteStream):  # type: ignore[misc]
        def __iter__(self) -> Iterator[bytes]:
            yield from (live[:first], live[first:second], live[second:])

    def provider(request: Any) -> Any:
        seen.append(request)
        return httpx.Response(
            200, headers={"content-type": wire.framing.media_type}, stream=Pieces(b"")
        )

    relay = Relay(wire, body, dict(headers or {"authorization": "AWS4 dummy"}), path)
    chunks = list(
        proxy_stream(
            relay,
            client=httpx.Client(transport=httpx.MockTransport(provider)),
            base_url=base_url,
            api_key="unused-key-0123",
            model=model,
            timeout=5,
            on_network_error=lambda message: None,
        )
    )
    return chunks, relay, seen
