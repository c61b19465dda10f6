"""Any JSON body gets a typed answer from every wire, never the endpoint's own failure (issue 41).

An object ``role`` used to reach the recorder's conversation as a dict and fail the call
with ``400 EndpointError ... TypeError: unhashable type: 'dict'``: the answer meant for
a bug of the endpoint. Every wire refuses a role that is not a string with its 400,
naming the field; a bounded fuzz puts arbitrary JSON at any place of a realistic body
of each wire and requires that no answer is an ``EndpointError`` (60 examples a wire;
``DSH_REQUEST_FUZZ_EXAMPLES=2500`` runs more, as benchmarks/README.md reports).
"""

from __future__ import annotations

import copy
import itertools
import os
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.paths import EXAMPLES
from support.values import UTF8, json_paths, replace_at

from pytest_dsh_replay import DshReplayError
from pytest_dsh_replay._endpoint.transport import sync_transport
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._scripts.loading import ScenarioCache
from pytest_dsh_replay._wire.base import httpx_module

_CACHE = ScenarioCache()
_TOOL = {"type": "object", "properties": {"path": {"type": "string"}}}

BODIES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": (
        "/v1/chat/completions",
        {
            "model": "m",
            "stream": True,
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "ls", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "a b"},
            ],
            "tools": [{"type": "function", "function": {"name": "ls", "parameters": _TOOL}}],
        },
    ),
    "responses": (
        "/v1/responses",
        {
            "model": "m",
            "stream": True,
            "instructions": "be brief",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                {"type": "function_call", "call_id": "c1", "name": "ls", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "a b"},
            ],
            "tools": [{"type": "function", "name": "ls", "parameters": _TOOL}],
        },
    ),
    "messages": (
        "/v1/messages",
        {
            "model": "m",
            "max_tokens": 10,
            "stream": True,
            "system": [{"type": "text", "text": "be brief"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}],
                },
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a b"}],
                },
            ],
            "tools": [{"name": "ls", "input_schema": _TOOL}],
        },
    ),
    "gemini": (
        "/v1beta/models/m:streamGenerateContent",
        {
            "contents": [
                {"role": "user", "parts": [{"text": "hi"}]},
                {"role": "model", "parts": [{"functionCall": {"name": "ls", "args": {}}}]},
                {
                    "role": "user",
                    "parts": [{"functionResponse": {"name": "ls", "response": {"out": "a b"}}}],
                },
            ],
            "systemInstruction": {"parts": [{"text": "be brief"}]},
            "tools": [{"functionDeclarations": [{"name": "ls", "parameters": _TOOL}]}],
        },
    ),
}

_WORKDIRS = itertools.count()


def post(tmp_path: Path, path: str, body: Any) -> tuple[int, str]:
    """Post ``body`` to a fresh replay of the spawn example, with its recorder logging.

    Returns:
        The answer's status and text; the text of the typed error the replay keeps for
        the test's teardown (a replay error, a request the session store cannot log)
        follows it, so an ``EndpointError`` kept there is seen too.
    """
    workdir = tmp_path / f"w{next(_WORKDIRS)}"
    workdir.mkdir()
    replay = DshReplay.open(EXAMPLES / "spawn", workdir=workdir, cache=_CACHE)
    kept = ""
    try:
        transport = sync_transport(replay._endpoint)
        http = httpx_module().Client(transport=transport, base_url="http://t")
        response = http.post(path, content=orjson.dumps(body))
    finally:
        try:
            replay.close()
        except DshReplayError as err:  # typed: what the test's teardown would raise
            kept = f"{type(err).__name__}: {err}"
    return response.status_code, response.text + ("\n" + kept if kept else "")


def _role_path(wire: str) -> tuple[str, str]:
    """The list field whose elements carry roles, and its first element's role param."""
    field = {"chat": "messages", "responses": "input", "messages": "messages"}.get(wire, "contents")
    return field, f"{field}[0].role"


@pytest.mark.parametrize("wire", BODIES)
@pytest.mark.parametrize("role", [{"a": 1}, ["user"], 3, True])
def test_a_role_that_is_no_string_is_the_wires_400_naming_it(
    tmp_path: Path, wire: str, role: Any
) -> None:
    path, template = BODIES[wire]
    body = copy.deepcopy(template)
    field, param = _role_path(wire)
    body[field][0]["role"] = role
    status, text = post(tmp_path, path, body)
    assert status == 400
    assert "EndpointError" not in text
    error = orjson.loads(text.split("\n", 1)[0])["error"]
    assert f"Invalid type for '{param}': expected a string" in error["message"]
    if wire in ("chat", "responses"):
        assert error["param"] == param


def test_the_templates_are_answered(tmp_path: Path) -> None:
    # Each body as it is gets a replayed answer or a replay error: it reaches the replay.
    for path, body in BODIES.values():
        status, text = post(tmp_path, path, body)
        assert "EndpointError" not in text, text
        assert status in (200, 400), text


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(UTF8, max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(UTF8, max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


@pytest.mark.parametrize("wire", BODIES)
@settings(
    max_examples=int(os.environ.get("DSH_REQUEST_FUZZ_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_json_body_meets_an_endpoint_error(tmp_path: Path, wire: str, data: Any) -> None:
    path, template = BODIES[wire]
    body = copy.deepcopy(template)
    at = data.draw(st.sampled_from(list(json_paths(body))), label="place")
    body = replace_at(body, at, data.draw(_JSON, label="value"))
    status, text = post(tmp_path, path, body)
    assert "EndpointError" not in text, (at, body, text)
    assert status < 500, (at, body, text)
