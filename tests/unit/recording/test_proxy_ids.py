"""The recording proxy reads the live provider's id of every answer, whole ones too.

The endpoint keeps an answer under that id, so a later request that continues it by id
(``previous_message_id``, ``previous_response_id``) reads the conversation it continues
(docs/wires.md#anthropic-threads). A ``stream: false`` answer carries it in its body.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from pytest_dsh_replay._recording.proxy import Relay, proxy_stream
from pytest_dsh_replay._wire.anthropic import WIRE as ANTHROPIC
from pytest_dsh_replay._wire.base import Wire, httpx_module
from pytest_dsh_replay._wire.gemini import WIRE as GEMINI
from pytest_dsh_replay._wire.responses import WIRE as RESPONSES

MESSAGE = {
    "id": "msg_live_7",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "hi"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 1, "output_tokens": 1},
}
RESPONSE = {
    "id": "resp_live_7",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "id": "m1",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hi"}],
        }
    ],
}
GENERATED = {
    "responseId": "gem_live_7",
    "candidates": [
        {"content": {"role": "model", "parts": [{"text": "hi"}]}, "finishReason": "STOP"}
    ],
}


@pytest.mark.parametrize(
    ("wire", "path", "answer", "live_id"),
    [
        (ANTHROPIC, "/v1/messages", MESSAGE, "msg_live_7"),
        (RESPONSES, "/v1/responses", RESPONSE, "resp_live_7"),
        (GEMINI, "/v1beta/models/g:generateContent", GENERATED, "gem_live_7"),
    ],
    ids=["messages", "responses", "gemini"],
)
def test_a_whole_answer_s_live_id_is_read(
    wire: Wire, path: str, answer: dict[str, Any], live_id: str
) -> None:
    httpx = httpx_module()

    def provider(request: Any) -> Any:
        return httpx.Response(200, json=answer)

    relay = Relay(wire, b'{"model":"m"}', {"content-type": "application/json"}, path)
    chunks = list(
        proxy_stream(
            relay,
            client=httpx.Client(transport=httpx.MockTransport(provider)),
            base_url="http://upstream.invalid/v1",
            api_key="live-key",
            model=None,
            timeout=5,
            on_network_error=lambda message: None,
        )
    )
    assert relay.call_id == live_id
    assert chunks[-1]["type"] == "finish"
    assert orjson.loads(relay.take()) == answer  # passed on as it came
