"""RecordingModel: every chunk the caller sees lands in the calling session's log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import chunks

from pytest_dsh_replay import (
    JsonlBackend,
    RecordingError,
    RecordingModel,
    SessionStore,
    completed_turn_prefix,
    derive_replay_script,
)

CALL = [
    {"type": "block-start", "index": 0, "blockType": "text"},
    {"type": "text-delta", "index": 0, "text": "he"},
    {"type": "text-delta", "index": 0, "text": "llo"},
    {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hello"}},
    {"type": "finish", "reason": {"kind": "stop"}},
]


class Boom(Exception):
    code = "RATE_LIMIT"
    status = 429


class Live:
    """A scripted live model: each call streams the next list; an exception raises."""

    def __init__(self, *calls: list[Any]):
        self.calls = list(calls)
        self.kwargs: list[dict[str, Any]] = []

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.kwargs.append(kwargs)
        for item in self.calls.pop(0):
            if isinstance(item, BaseException):
                raise item
            yield dict(item)


class AsyncLive(Live):
    async def astream(self, request: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.stream(request, **kwargs):
            await asyncio.sleep(0)
            yield chunk


@pytest.fixture
def store(tmp_path: Path) -> SessionStore:
    return SessionStore(JsonlBackend(tmp_path / "sessions"))


def chunks_of(store: SessionStore, session_id: str) -> list[dict[str, Any]]:
    session = store.get(session_id)
    assert session is not None
    return [e["data"] for e in session.events if e["type"] == "assistant/chunk"]


def test_chunks_are_logged_with_turn_and_step_and_derive_back(store: SessionStore) -> None:
    live = Live(CALL, CALL)
    model = RecordingModel(live, store)
    first = list(model.stream({"messages": []}, session_id="s", turn=3, step=2))
    second = list(model.stream({"messages": []}, session_id="s", turn=3, step=2))
    assert first == second == CALL
    logged = chunks_of(store, "s")
    assert {(d["turn"], d["step"]) for d in logged} == {(3, 2)}
    session = store.get("s")
    assert session is not None
    assert [e.to_json()["chunks"] for e in derive_replay_script(session.events)] == [CALL, CALL]
    assert live.kwargs[0] == {"session_id": "s", "turn": 3, "step": 2}  # passed through


def test_without_turn_and_step_each_call_is_a_new_turn(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL, CALL), store)
    for _ in range(2):
        list(model.stream({}, session_id="s"))
    assert [(d["turn"], d["step"]) for d in chunks_of(store, "s")][::5] == [(1, 1), (2, 1)]


def test_unknown_sessions_are_created_with_their_parent(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL, CALL, CALL), store)
    list(model.stream({}, session_id="parent"))
    list(model.stream({}, session_id="child", parent_session_id="parent"))
    list(model.stream({}))  # anonymous: one fresh session
    sessions = {s.id: s for s in store.sessions()}
    assert sessions["child"].header.parent_session == "parent"
    assert len(sessions) == 3


def test_replay_mode_logs_only_sessions_the_code_created(store: SessionStore) -> None:
    store.create("mine")
    model = RecordingModel(Live(CALL, CALL), store, create_sessions=False)
    list(model.stream({}, session_id="mine"))
    list(model.stream({}, session_id="not-in-the-store"))
    assert [s.id for s in store.sessions()] == ["mine"]
    assert len(chunks_of(store, "mine")) == len(CALL)


def test_a_raising_stream_is_logged_with_an_error_finish_and_re_raised(
    store: SessionStore,
) -> None:
    model = RecordingModel(Live([CALL[0], CALL[1], Boom("slow down")]), store)
    seen: list[dict[str, Any]] = []
    with pytest.raises(Boom):
        seen.extend(model.stream({}, session_id="s"))
    assert seen == CALL[:2]
    logged = [d["chunk"] for d in chunks_of(store, "s")]
    assert logged[:2] == CALL[:2]
    assert logged[2] == {
        "type": "finish",
        "reason": {
            "kind": "error",
            "failure": {"message": "slow down", "code": "RATE_LIMIT", "status": 429},
        },
    }
    session = store.get("s")
    assert session is not None
    (entry,) = derive_replay_script(session.events)
    assert entry.chunks == logged


def test_an_abandoned_stream_ends_with_an_aborted_finish(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL), store)
    stream = model.stream({}, session_id="s")
    assert isinstance(stream, Generator)
    next(stream)
    stream.close()
    logged = [d["chunk"] for d in chunks_of(store, "s")]
    assert logged[-1]["reason"]["kind"] == "aborted"
    assert logged[-1]["reason"]["failure"]["code"] == "ABORTED"


def test_a_stream_without_finish_is_a_recording_error(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL[:-1]), store)
    with pytest.raises(RecordingError, match="without a finish chunk"):
        list(model.stream({}, session_id="s"))


def test_consumers_mutating_chunks_do_not_change_the_log(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL), store)
    for chunk in model.stream({}, session_id="s"):
        chunk["type"] = "mutated"
    assert [d["chunk"] for d in chunks_of(store, "s")] == CALL


def test_async_callers_get_the_same_log(store: SessionStore) -> None:
    async def main() -> list[dict[str, Any]]:
        model = RecordingModel(AsyncLive(CALL, [CALL[0], Boom("x")]), store)
        got = [c async for c in model.astream({}, session_id="a")]
        with pytest.raises(Boom):
            async for _ in model.astream({}, session_id="a"):
                pass
        return got

    assert asyncio.run(main()) == CALL
    logged = [d["chunk"] for d in chunks_of(store, "a")]
    assert logged[: len(CALL)] == CALL
    assert logged[-1]["reason"]["kind"] == "error"


def test_async_callers_of_a_sync_only_model(store: SessionStore) -> None:
    async def main() -> list[dict[str, Any]]:
        model = RecordingModel(Live(CALL), store)
        return [c async for c in model.astream({}, session_id="a")]

    assert asyncio.run(main()) == CALL
    assert len(chunks_of(store, "a")) == len(CALL)


# --- the whole conversation, as the harness logs it ---------------------------------------


def text_call(text: str) -> list[dict[str, Any]]:
    return chunks.text_call(text, usage={"inputTokens": 3, "outputTokens": 1})


CALC = {"type": "tool-call", "id": "call-1", "name": "calc", "arguments": '{"q": "6*7"}'}
TOOL_CALLS = [
    {"type": "block-start", "index": 0, "blockType": "tool-call"},
    {"type": "tool-call-delta", "index": 0, "id": "call-1", "name": "calc", "argumentsDelta": ""},
    {"type": "tool-call-delta", "index": 0, "id": "call-1", "argumentsDelta": '{"q": "6*7"}'},
    {"type": "block-end", "index": 0, "block": CALC},
    {"type": "finish", "reason": {"kind": "tool-calls"}},
]
ERROR = [
    {"type": "finish", "reason": {"kind": "error", "failure": {"message": "x", "code": "SERVER"}}}
]
TOOLS = [{"type": "function", "function": {"name": "calc", "description": "d", "parameters": {}}}]


ABORTED = {
    "type": "finish",
    "reason": {
        "kind": "aborted",
        "failure": {"message": "the caller stopped reading the stream", "code": "ABORTED"},
    },
}


def openai_request(system: str, *turns: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": system}, *turns],
        "tools": TOOLS,
    }


ASK = {"role": "user", "content": "what is 6*7?"}
ECHO = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {"id": "call-1", "type": "function", "function": {"name": "calc", "arguments": "{}"}}
    ],
}
RESULT = {"role": "tool", "tool_call_id": "call-1", "content": "42"}


def types(store: SessionStore, session_id: str) -> list[str]:
    session = store.get(session_id)
    assert session is not None
    out: list[str] = []
    for event in session.events:
        kind = event["type"]
        if kind == "assistant/chunk":
            kind = "chunk:" + event["data"]["chunk"]["type"]
            run = out and out[-1].startswith("chunk:") and out[-1] != "chunk:finish"
            if run and kind != "chunk:finish":
                continue  # a call's chunks show as its first and its finish
        out.append(kind)
    return out


def test_a_tool_round_is_logged_as_the_harness_logs_it(store: SessionStore) -> None:
    model = RecordingModel(Live(TOOL_CALLS, text_call("42"), text_call("bye")), store)
    list(model.stream(openai_request("be exact", ASK), session_id="s"))
    list(model.stream(openai_request("be exact", ASK, ECHO, RESULT), session_id="s"))
    assert types(store, "s") == [
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "chunk:block-start",
        "chunk:finish",
        "assistant/message",
        "tool/call",
        "tool/result",
        "step/end",
        "step/start",
        "chunk:block-start",
        "chunk:finish",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    reply = {"role": "assistant", "content": "42"}
    later = {"role": "user", "content": "thanks"}
    list(model.stream(openai_request("be brief", ASK, ECHO, RESULT, reply, later), session_id="s"))
    session = store.get("s")
    assert session is not None
    events = list(session.events)
    assert types(store, "s")[16:] == [
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "chunk:block-start",
        "chunk:finish",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    headers = [e["data"] for e in events if e["type"] == "request/header"]
    assert [h["reason"] for h in headers] == ["initial", "change"]
    assert headers[0]["header"]["system"] == "be exact"
    assert headers[1]["header"]["system"] == "be brief"
    assert headers[0]["header"]["tools"] == [{"name": "calc", "description": "d", "parameters": {}}]
    users = [e["data"]["content"][0]["text"] for e in events if e["type"] == "user/message"]
    assert users == ["what is 6*7?", "thanks"]  # each message once
    (result,) = [e for e in events if e["type"] == "tool/result"]
    (call,) = [e for e in events if e["type"] == "tool/call"]
    assert result["sourceEventSeqs"] == [call["seq"]]
    assert result["data"]["message"]["content"][0]["content"] == [{"type": "text", "text": "42"}]
    first = next(e for e in events if e["type"] == "assistant/message")
    assert first["data"]["message"]["content"] == [CALC]
    assert first["data"]["message"]["source"] == {
        "kind": "model",
        "provider": "unknown",
        "model": "m",
    }
    chunk_seqs = [e["seq"] for e in events[: first["seq"]] if e["type"] == "assistant/chunk"]
    assert first["sourceEventSeqs"] == chunk_seqs
    ends = [e["data"]["reason"] for e in events if e["type"] == "turn/end"]
    assert ends == [{"kind": "completed"}, {"kind": "completed"}]
    assert [e.to_json()["chunks"][-1]["reason"]["kind"] for e in derive_replay_script(events)] == [
        "tool-calls",
        "stop",
        "stop",
    ]
    # Every turn is complete: a fork child can start from the whole log.
    assert completed_turn_prefix(events) == events


def test_a_repeated_request_after_an_error_is_a_retry_in_the_same_step(
    store: SessionStore,
) -> None:
    model = RecordingModel(Live(ERROR, text_call("ok"), ERROR), store)
    for _ in range(2):
        list(model.stream({"messages": [ASK]}, session_id="s"))
    assert types(store, "s") == [
        "turn/start",
        "step/start",
        "user/message",
        "chunk:finish",
        "chunk:block-start",
        "chunk:finish",
        "assistant/message",
        "step/end",
        "turn/end",
    ]
    # A turn whose last call failed is closed with the error when the run ends.
    list(
        model.stream(
            {"messages": [ASK, {"role": "assistant", "content": "ok"}, ASK]}, session_id="s"
        )
    )
    model.close_open_calls()
    session = store.get("s")
    assert session is not None
    assert session.events[-1]["data"]["reason"] == {
        "kind": "error",
        "error": {"message": "x", "code": "SERVER"},
    }
    assert session.events[-2]["type"] == "step/end"


def test_turns_the_code_under_test_runs_get_only_header_messages_and_chunks(
    store: SessionStore,
) -> None:
    session = store.create("mine")
    session.append("turn/start", {"turn": 7})
    session.append("step/start", {"turn": 7, "step": 2})
    session.append(
        "user/message",
        {
            "content": [{"type": "text", "text": "hi"}],
            "source": {"kind": "user"},
            "role": "user",
            "id": "u",
        },
        surfaceOp="append",
    )
    model = RecordingModel(Live(CALL), store)
    request = {"system": "s", "messages": [{"role": "user", "content": "hi"}]}
    list(model.stream(request, session_id="mine"))
    assert types(store, "mine") == [
        "turn/start",
        "step/start",
        "user/message",
        "request/header",
        "chunk:block-start",
        "chunk:finish",
    ]
    assert {(d["turn"], d["step"]) for d in chunks_of(store, "mine")} == {(7, 2)}


def test_a_request_that_rewrites_history_replaces_it_on_the_surface(
    store: SessionStore,
) -> None:
    model = RecordingModel(Live(text_call("a"), text_call("b"), text_call("c")), store)
    list(model.stream({"messages": [ASK]}, session_id="s"))
    summary = {"role": "user", "content": "summary of earlier work"}
    list(model.stream({"messages": [summary]}, session_id="s"))
    session = store.get("s")
    assert session is not None
    (_, replaced) = [e for e in session.events if e["type"] == "user/message"]
    shadowed = [
        e["seq"] for e in session.events[: replaced["seq"]] if e["type"].endswith("message")
    ]
    assert replaced["surfaceOp"] == {"op": "replace", "start": shadowed[0], "end": shadowed[-1]}
    assert replaced["sourceEventSeqs"] == shadowed
    # The next call builds on the rewritten history: nothing is logged twice.
    list(
        model.stream(
            {"messages": [summary, {"role": "assistant", "content": "b"}, ASK]}, session_id="s"
        )
    )
    users = [e for e in session.events if e["type"] == "user/message"]
    assert len(users) == 3


def test_a_fork_of_a_recorded_session_continues_its_turns(store: SessionStore) -> None:
    model = RecordingModel(Live(text_call("MARMALADE noted"), text_call("MARMALADE")), store)
    remember = {"role": "user", "content": "remember MARMALADE"}
    list(model.stream({"messages": [remember]}, session_id="main"))
    child = store.fork("main")  # the parent's turn is complete: no OPEN_TURN
    history = [remember, {"role": "assistant", "content": "MARMALADE noted"}]
    ask = {"role": "user", "content": "what was the word?"}
    list(model.stream({"messages": [*history, ask]}, session_id=child.id, parent_session_id="main"))
    own = child.events[child.seed_length :]
    assert [e["type"] for e in own][:4] == [
        "session/end-seed",
        "turn/start",
        "step/start",
        "user/message",
    ]
    assert own[1]["data"] == {"turn": 2}  # the child continues the parent's numbering
    assert own[3]["data"]["content"] == [{"type": "text", "text": "what was the word?"}]
    assert len(derive_replay_script(own)) == 1


# --- early exits: what the caller received, closed as a cancelled stream ------------------


def test_an_async_break_without_aclose_is_closed_at_the_session_s_next_call(
    store: SessionStore,
) -> None:
    more = {"type": "text-delta", "index": 0, "text": "more"}
    long = [*text_call("abc")[:2], more, *text_call("x")[2:]]

    async def main() -> list[dict[str, Any]]:
        model = RecordingModel(AsyncLive(long, text_call("next")), store)
        got = []
        stream = model.astream({"messages": [ASK]}, session_id="s")
        async for chunk in stream:
            got.append(chunk)
            if len(got) == 2:
                break  # no aclose(): the generator stays suspended
        got.extend([c async for c in model.astream({"messages": [ASK]}, session_id="s")])
        return got

    asyncio.run(main())
    session = store.get("s")
    assert session is not None
    entries = derive_replay_script(session.events)
    first = entries[0].to_json()["chunks"]
    assert first[:2] == long[:2]  # what the caller received, nothing more
    assert first[2]["reason"]["kind"] == "aborted"
    assert first[2]["reason"]["failure"]["code"] == "ABORTED"
    assert len(first) == 3
    assert entries[1].to_json()["chunks"] == text_call("next")
    interrupted = next(e for e in session.events if e["type"] == "assistant/message")
    assert interrupted["data"]["interrupted"] is True
    assert interrupted["data"]["message"]["content"] == [{"type": "text", "text": "abc"}]
    ends = [e["data"]["reason"] for e in session.events if e["type"] == "turn/end"]
    assert ends == [{"kind": "aborted", "reason": {"kind": "user"}}, {"kind": "completed"}]


def test_a_sync_stream_held_open_across_the_next_call(store: SessionStore) -> None:
    model = RecordingModel(Live(text_call("first"), text_call("second")), store)
    held = model.stream({"messages": [ASK]}, session_id="s")
    received = [next(held)]
    received.extend(model.stream({"messages": [ASK]}, session_id="s"))
    received.extend(held)  # read after the session moved on: served, not logged
    del held
    session = store.get("s")
    assert session is not None
    entries = [e.to_json()["chunks"] for e in derive_replay_script(session.events)]
    assert entries == [[text_call("first")[0], ABORTED], text_call("second")]
    assert received == [text_call("first")[0], *text_call("second"), *text_call("first")[1:]]


def test_a_stream_never_read_is_closed_when_the_run_ends(store: SessionStore) -> None:
    model = RecordingModel(Live(CALL), store)
    model.stream({"messages": [ASK]}, session_id="s")  # called, never read
    model.close_open_calls()
    session = store.get("s")
    assert session is not None
    (entry,) = derive_replay_script(session.events)
    assert entry.to_json()["chunks"] == [ABORTED]


def test_a_session_created_for_a_runtime_call_carries_its_working_directory(
    store: SessionStore,
) -> None:
    """The runtime names its cwd in every request: recordings then write it as {{cwd}}."""
    from pytest_dsh_replay._check.log_check import Redaction
    from pytest_dsh_replay._endpoint.routing import RUNTIME_SESSION_HEADER, Router
    from pytest_dsh_replay._format.redact import Redactor

    cwd = "/tmp/pytest-7/work"
    body = {
        "messages": [{"role": "user", "content": f'Runtime context: cwd "{cwd}".'}],
        "dsh_session_log": {"session": {"id": "c1", "cwd": cwd, "parentSession": "main"}},
    }
    route = Router().route({RUNTIME_SESSION_HEADER: "c1"}, body)
    assert (route.session_id, route.parent_session_id, route.cwd) == ("c1", "main", cwd)
    model = RecordingModel(Live(CALL, CALL), store)
    list(model.stream({"messages": []}, session_id="main"))
    list(model.stream(body, session_id="c1", parent_session_id="main", session_cwd=cwd))
    child = store.get("c1")
    assert child is not None
    assert (child.header.cwd, child.header.parent_session) == (cwd, "main")
    written = Redaction(Redactor()).apply(child.header, child.events)
    assert written.header.cwd == "{{cwd}}"
    assert cwd not in repr(written.events)
    assert '"{{cwd}}"' in repr(written.events)


# --- chunks handed over (the endpoint's calls) -------------------------------------------


def handed_log(read_only: bool, tmp_path: Path) -> tuple[list[Any], list[dict[str, Any]]]:
    """A tool round, an error, a retry and an abandoned stream, logged either way."""
    store = SessionStore(JsonlBackend(tmp_path / ("handed" if read_only else "eager")))
    live = Live(TOOL_CALLS, text_call("42"), ERROR, text_call("ok"), CALL)
    model = RecordingModel(live, store, parsed_chunks=True)
    list(model.stream(openai_request("be exact", ASK), session_id="s", read_only_chunks=read_only))
    request = openai_request("be exact", ASK, ECHO, RESULT)
    list(model.stream(request, session_id="s", read_only_chunks=read_only))
    for _ in range(2):
        list(model.stream({"messages": [ASK]}, session_id="t", read_only_chunks=read_only))
    stream = model.stream({"messages": [ASK]}, session_id="u", read_only_chunks=read_only)
    next(iter(stream))
    stream.close()  # type: ignore[attr-defined]
    model.close_open_calls()
    logs = []
    for sid in ("s", "t", "u"):
        session = store.get(sid)
        assert session is not None
        logs.append(
            [
                {k: v for k, v in e.items() if k != "time" and not _is_id(k)}
                | {"data": _without_ids(e["data"])}
                for e in session.events
            ]
        )
    return logs, live.kwargs


def _is_id(key: str) -> bool:
    return key == "id"


def _without_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_ids(v) for k, v in value.items() if k != "id"}
    if isinstance(value, list):
        return [_without_ids(v) for v in value]
    return value


def test_handed_chunks_give_the_log_of_copied_ones_and_the_keyword_stays_here(
    tmp_path: Path,
) -> None:
    handed, handed_kwargs = handed_log(True, tmp_path)
    eager, _ = handed_log(False, tmp_path)
    assert handed == eager
    assert [e["type"] for e in handed[0]].count("assistant/chunk") == len(TOOL_CALLS) + len(
        text_call("42")
    )
    assert all("read_only_chunks" not in kwargs for kwargs in handed_kwargs)
