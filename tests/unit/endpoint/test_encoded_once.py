"""A replayed call's wire encoding is built once per entry and served again.

See docs/wires.md#encoded-once: the bytes, the ids, the model echoed from the request,
the endpoint's bookkeeping and every failure stay exactly what encoding the chunks
afresh gives; entries with placeholders are never kept.
"""

from __future__ import annotations

import copy
import gc
import json
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.chunks import text_entry
from support.corpus_support import corpus_params, corpus_scenarios, require_corpus
from support.scenarios import one_session

from pytest_dsh_replay import load_scenario
from pytest_dsh_replay._endpoint.endpoint import _KEPT, Endpoint
from pytest_dsh_replay._endpoint.response import DroppedConnection
from pytest_dsh_replay._errors import ReplayCancelledError
from pytest_dsh_replay._replay.model import ReplayModel
from pytest_dsh_replay._scripts.entries import ChunksEntry, HangEntry, ThrowEntry
from pytest_dsh_replay._scripts.scenario import Scenario
from pytest_dsh_replay._wire import openai

GOAL = "goal-0c0ffee0-1234"
PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/m:streamGenerateContent?alt=sse",
}


def _body(route: str, text: str, model: str = "m", **extra: Any) -> bytes:
    messages: list[Any] = [{"role": "user", "content": f"work on {GOAL}"}]
    messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
    body: dict[str, Any]
    if route == "responses":
        body = {"model": model, "input": [{**m, "type": "message"} for m in messages]}
    elif route == "gemini":
        body = {"contents": [{"role": "user", "parts": [{"text": f"{GOAL} {text}"}]}]}
    else:
        body = {"model": model, "messages": messages}
        body["max_tokens" if route == "anthropic" else "stream_options"] = (
            100 if route == "anthropic" else {"include_usage": True}
        )
    body["stream"] = True
    return orjson.dumps({**body, **extra})


class _Waits:
    """The replay's live sessions, but every call may wait: the per-chunk path."""

    def __init__(self, sessions: Any):
        self._sessions = sessions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sessions, name)

    def may_wait(self, session_id: str | None) -> bool:
        return True


def _read(response: Any) -> tuple[Any, ...]:
    pieces: list[bytes] = []
    dropped = False
    try:
        for piece in response.body:
            pieces.append(piece)
    except DroppedConnection:
        dropped = True
    return response.status, response.headers, b"".join(pieces), dropped, response.drop


def serve(scenario: Scenario, route: str, workdir: Path, *, per_chunk: bool = False) -> list[Any]:
    """Every call of ``scenario`` over ``route``, read whole; and what the endpoint kept.

    A ``hang`` entry's ready file is written into ``workdir`` (the test's own temporary
    directory: never the shared corpus).
    """
    model = ReplayModel(scenario, workdir=workdir)
    endpoint = Endpoint.replaying(model)
    if per_chunk:
        endpoint.sessions = _Waits(endpoint.sessions)
    live = {script.recorded_id: f"live-{i}" for i, script in enumerate(scenario.scripts)}
    out: list[Any] = []
    for i, script in enumerate(scenario.scripts):
        headers = {"x-dsh-session-id": f"live-{i}"}
        parent = live.get(script.parent_session or "")
        if parent is not None and not script.primary:
            headers["x-dsh-parent-session-id"] = parent
        for entry in script.entries:
            if isinstance(entry, HangEntry):  # not served at once: cancelled here
                cancelled = threading.Event()
                cancelled.set()
                with pytest.raises(ReplayCancelledError):
                    list(
                        model.stream(
                            {"messages": []},
                            session_id=f"live-{i}",
                            parent_session_id=parent,
                            cancel=cancelled,
                            by_content=True,
                        )
                    )
                continue
            body = _body(route, script.first_user_text or "no message")
            out.append(_read(endpoint.handle("POST", PATHS[route], headers, body)))
    router = endpoint.router
    out.append(copy.deepcopy((router._waiting, router._failed, router._served)))
    out.append({k: (endpoint.conversation(k), list(v.chunks)) for k, v in endpoint._served.items()})
    out.append([repr(e) for e in endpoint.errors])
    return out


@pytest.mark.parametrize("route", list(PATHS))
@pytest.mark.parametrize("path", corpus_params(corpus_scenarios()))
def test_every_corpus_call_served_again_is_what_encoding_it_afresh_gives(
    path: Path | None, route: str, tmp_path: Path
) -> None:
    require_corpus()
    assert path is not None
    if not json.loads((path / "expected.json").read_text("utf-8"))["ok"]:
        pytest.skip("the scenario does not replay")
    expected = serve(load_scenario(path), route, tmp_path, per_chunk=True)  # encoded chunk by chunk
    shared = load_scenario(path)
    assert serve(shared, route, tmp_path) == expected  # encoded and kept
    kept = [
        _KEPT.of(e)
        for s in shared.scripts
        for e in s.entries
        if isinstance(e, ChunksEntry | ThrowEntry) and not e.has_placeholders
    ]
    held = [dict(k) for k in kept]  # the answers encoded at once (not HTTP errors)
    assert serve(shared, route, tmp_path) == expected  # served from what was kept
    assert serve(shared, route, tmp_path) == expected
    assert [dict(k) for k in kept] == held  # nothing encoded again


def _call(scenario: Scenario, body: bytes, *, first: int = 1) -> bytes:
    endpoint = Endpoint.replaying(ReplayModel(scenario))
    endpoint._count = first - 1  # the endpoint's numbering: this call is number `first`
    response = endpoint.handle("POST", PATHS["openai"], {"x-dsh-session-id": "s"}, body)
    return _read(response)[2]  # type: ignore[no-any-return]


def test_a_second_test_serving_an_entry_does_not_encode_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scenario = one_session(text_entry("hello there"))
    started: list[Any] = []
    start = openai.OpenAIEncoder.start

    def counted(self: Any) -> bytes:
        started.append(self)
        return start(self)

    monkeypatch.setattr(openai.OpenAIEncoder, "start", counted)
    first = _call(scenario, _body("openai", "hi"))
    again = _call(scenario, _body("openai", "hi"))
    assert again == first
    assert b'"content":"hello there"' in first
    assert len(started) == 1


def test_ids_the_model_and_options_each_get_their_own_encoding() -> None:
    scenario = one_session(text_entry("hello", usage={"inputTokens": 2, "outputTokens": 1}))
    plain = _call(scenario, _body("openai", "hi"))
    assert b'"id":"chatcmpl-dsh-replay-1"' in plain
    fifth = _call(scenario, _body("openai", "hi"), first=5)  # the numbering of that test
    assert fifth == plain.replace(b"chatcmpl-dsh-replay-1", b"chatcmpl-dsh-replay-5")
    other = _call(scenario, _body("openai", "hi", model='gpt-"x"'))  # echoed, escaped
    assert other == plain.replace(b'"model":"m"', b'"model":"gpt-\\"x\\""')
    no_usage = _call(scenario, _body("openai", "hi", stream_options={"include_usage": False}))
    assert b'"usage"' in plain
    assert b'"usage"' not in no_usage
    assert _call(scenario, _body("openai", "hi")) == plain
    entry = scenario.scripts[0].entries[0]
    assert isinstance(entry, ChunksEntry)
    assert len(_KEPT.of(entry)) == 4  # at most: the oldest go


def test_an_entry_with_placeholders_is_encoded_for_every_request() -> None:
    entry = text_entry("on {{fromRequest:goal-[0-9a-f-]+}} now")
    scenario = one_session(entry)
    assert entry.has_placeholders
    first = _call(scenario, _body("openai", "hi"))
    other = orjson.loads(_body("openai", "hi"))
    other["messages"][0]["content"] = "work on goal-00000000-ffff"
    second = _call(scenario, orjson.dumps(other))
    assert GOAL.encode() in first
    assert b"goal-00000000-ffff" in second
    assert _KEPT.of(entry) == {}


def test_a_recorded_provider_id_is_served_from_the_kept_encoding() -> None:
    chunks = text_entry("hi").chunks
    state = {"response": {"kind": "pi-ai", "responseId": "chatcmpl-recorded-7"}}
    chunks[-1] = {**chunks[-1], "replayState": state}
    scenario = one_session(ChunksEntry(chunks))
    first = _call(scenario, _body("openai", "hi"))
    assert b'"id":"chatcmpl-recorded-7"' in first
    assert _call(scenario, _body("openai", "hi"), first=3) == first


def test_an_entrys_encodings_go_with_the_entry() -> None:
    scenario = one_session(text_entry("hello there"))
    entry = scenario.scripts[0].entries[0]
    assert isinstance(entry, ChunksEntry)
    first = _call(scenario, _body("openai", "hi"))
    assert len(_KEPT.of(entry)) == 1
    key = id(entry)
    assert key in _KEPT._kept
    del scenario, entry
    gc.collect()
    assert key not in _KEPT._kept  # nothing outlives the loaded scenario
    again = _call(one_session(text_entry("hello there")), _body("openai", "hi"))
    assert again == first
