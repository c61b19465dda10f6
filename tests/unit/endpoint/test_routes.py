"""The endpoint's routes: model lists and what an unserved route answers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest
from support.chunks import text_entry

from pytest_dsh_replay import UnservedRouteError
from pytest_dsh_replay._endpoint.endpoint import UNNAMED_MODEL, Endpoint
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.scenario import Scenario, SessionScript
from pytest_dsh_replay._wire.base import httpx_module
from pytest_dsh_replay._wire.table import closest_route, served_routes


def _endpoint(path: Path | None = None) -> Endpoint:
    script = SessionScript(
        file="session.jsonl",
        recorded_id="p",
        created_at=0,
        seed_length=0,
        parent_session=None,
        primary=True,
        entries=(text_entry("hi"),),
        path=path,
    )
    return Endpoint.replaying(ReplayModel(Scenario(Path("mem"), (script,))))


def _get(endpoint: Endpoint, path: str, **headers: str) -> tuple[int, Any]:
    response = endpoint.handle("GET", path, headers, b"")
    return response.status, json.loads(b"".join(response.body))


def test_unserved_route_lists_the_served_routes_and_the_closest() -> None:
    endpoint = _endpoint()
    response = endpoint.handle("POST", "/v1/assistants", {}, b"{}")
    assert response.status == 404
    assert ("x-should-retry", "false") in response.headers
    message = json.loads(b"".join(response.body))["error"]["message"]
    assert message.startswith("POST /v1/assistants is not served")
    assert "the closest is POST " in message
    for route in served_routes():
        assert route in message
    [error] = endpoint.errors
    assert isinstance(error, UnservedRouteError)
    assert str(error) == message


def test_a_served_path_with_another_method_is_405_and_no_test_failure() -> None:
    endpoint = _endpoint()
    assert endpoint.handle("GET", "/v1/chat/completions", {}, b"").status == 405
    assert endpoint.errors == []


REFUSING_ROUTES = [
    "/v1/chat/completions",
    "/v1/messages",
    "/v1beta/models/g:generateContent",
    "/model/m/converse",
    "/api/chat",
    "/openai/deployments/d/chat/completions?api-version=2024-10-21",
]


@pytest.mark.parametrize("path", REFUSING_ROUTES)
def test_a_request_refused_before_any_call_is_in_the_routes_error_shape(path: str) -> None:
    from pytest_dsh_replay._endpoint.endpoint import ENDED
    from pytest_dsh_replay._wire.table import wire_for

    wire = wire_for(path)
    assert wire is not None
    endpoint = _endpoint()
    cases = [
        ("POST", b"{not json", 400, "the body is not JSON: "),
        ("POST", b"[]", 400, "the body must be a JSON object"),
        ("GET", b"", 405, f"{path.split('?')[0]} takes POST, not GET"),
    ]
    for method, body, status, message in cases:
        response = endpoint.handle(method, path, {}, body)
        got = b"".join(response.body)
        expected = wire.refusal(status, message)
        assert response.status == status
        assert [h for h in response.headers if h[0] != "content-length"] == [
            h for h in expected.headers if h[0] != "content-length"
        ]
        if status != 400 or body == b"[]":  # the parser's own words follow the first
            assert got == expected.body
        assert message.encode() in got
    endpoint.close()
    response = endpoint.handle("POST", path, {}, b"{}")
    assert (response.status, b"".join(response.body)) == (503, wire.refusal(503, ENDED).body)


def test_closest_route_names_a_near_route() -> None:
    assert closest_route("POST", "/v1/chat/completion") == "POST /v1/chat/completions"
    assert closest_route("PUT", "/x") is None


def test_model_list_names_the_recorded_models(tmp_path: Path) -> None:
    log = tmp_path / "session.jsonl"
    events = [
        {"type": "session", "version": 0, "id": "p", "createdAt": 0},
        {
            "type": "request/header",
            "seq": 0,
            "time": 0,
            "data": {"header": {"config": {"provider": "x", "model": "deep-1"}}},
        },
        {
            "type": "assistant/message",
            "seq": 1,
            "time": 0,
            "data": {"message": {"role": "assistant", "content": [], "source": {"model": "b-2"}}},
        },
    ]
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    status, body = _get(_endpoint(log), "/v1/models")
    assert status == 200
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["b-2", "deep-1"]
    assert {m["object"] for m in body["data"]} == {"model"}
    status, anthropic_list = _get(_endpoint(log), "/v1/models", **{"anthropic-version": "x"})
    assert [m["id"] for m in anthropic_list["data"]] == ["b-2", "deep-1"]
    assert anthropic_list["first_id"] == "b-2"


def test_model_list_without_recorded_models_names_the_requested_ones() -> None:
    endpoint = _endpoint()
    assert _get(endpoint, "/models")[1]["data"][0]["id"] == UNNAMED_MODEL
    body = {"model": "asked-model", "messages": [{"role": "user", "content": "x"}]}
    endpoint.handle("POST", "/v1/chat/completions", {}, json.dumps(body).encode())
    assert [m["id"] for m in _get(endpoint, "/v1/models")[1]["data"]] == ["asked-model"]


def test_the_openai_sdk_lists_models_and_sees_the_unserved_route() -> None:
    endpoint = _endpoint()
    http = httpx_module().Client(transport=sync_transport(endpoint))
    client = openai.OpenAI(base_url="http://t/v1", api_key="k", http_client=http, max_retries=0)
    assert [m.id for m in client.models.list()] == [UNNAMED_MODEL]
    with pytest.raises(openai.NotFoundError, match="POST /v1/batches is not served"):
        client.batches.create(
            completion_window="24h", endpoint="/v1/chat/completions", input_file_id="f"
        )
