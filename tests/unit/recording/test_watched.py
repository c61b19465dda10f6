"""The watched live model: calls pass through, what the live model raised is kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from pytest_dsh_replay import Redactor, ScriptedModelError
from pytest_dsh_replay._errors import RecordingError
from pytest_dsh_replay._identity.options import NO_OPTIONS, CallOptions
from pytest_dsh_replay._recording.proxy import Relay
from pytest_dsh_replay._recording.watched import LiveFailure, WatchedLive
from pytest_dsh_replay._wire.openai import WIRE

FINISH = {"type": "finish", "reason": {"kind": "stop"}}
SECRET = "sk-query-0123456789abcdefghij"


class Live:
    """Answers one text chunk and a finish, or raises ``error`` when called or mid-stream."""

    base_url = f"http://127.0.0.1:9/v1?api_key={SECRET}"

    def __init__(self, error: Exception | None = None, *, eager: bool = False):
        self.error, self.eager = error, eager
        self.calls: list[dict[str, Any]] = []

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.calls.append(kwargs)
        if self.error is not None and self.eager:
            raise self.error
        return self._chunks()

    def _chunks(self) -> Iterator[dict[str, Any]]:
        yield {"type": "text-delta", "index": 0, "text": "hi"}
        if self.error is not None:
            raise self.error
        yield FINISH


class AsyncLive(Live):
    async def astream(self, request: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.stream(request, **kwargs):
            yield chunk


def refused() -> RuntimeError:
    """What an SDK raises when the server is down: its own error, a refused connection under."""
    error = RuntimeError("Connection error.")
    error.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return error


def test_calls_pass_through_and_nothing_is_kept() -> None:
    live = Live()
    watched = WatchedLive(live, Redactor())
    assert list(watched.stream_call({}, CallOptions("s"))) == [
        {"type": "text-delta", "index": 0, "text": "hi"},
        FINISH,
    ]
    assert live.calls == [{"session_id": "s"}]
    assert watched.take_failures() == []
    assert watched.base_url == live.base_url  # every other attribute is the live model's
    with pytest.raises(AttributeError):
        watched.astream  # noqa: B018 - the live model has none


@pytest.mark.parametrize("eager", [True, False])
def test_a_network_error_reaches_the_caller_as_it_is_and_is_kept_redacted(eager: bool) -> None:
    error = refused()
    watched = WatchedLive(Live(error, eager=eager), Redactor())
    with pytest.raises(RuntimeError) as raised:
        list(watched.stream_call({}, NO_OPTIONS))
    assert raised.value is error
    (kept,) = watched.take_failures()
    assert kept == LiveFailure(
        "cannot reach the live model Live at http://127.0.0.1:9/v1?api_key=[REDACTED]: "
        "RuntimeError: Connection error. (ConnectionRefusedError: [Errno 111] Connection "
        "refused)",
        network=True,
    )
    assert watched.take_failures() == []  # taken once


def test_another_error_is_a_failure_of_the_live_model() -> None:
    watched = WatchedLive(Live(ValueError("bad request")), Redactor())
    with pytest.raises(ValueError, match="bad request"):
        list(watched.stream_call({}, NO_OPTIONS))
    (kept,) = watched.take_failures()
    assert not kept.network
    assert kept.message.endswith(" failed: ValueError: bad request")


def test_an_error_of_this_package_reports_itself() -> None:
    watched = WatchedLive(Live(ScriptedModelError("no rule answers")), Redactor())
    with pytest.raises(ScriptedModelError):
        list(watched.stream_call({}, NO_OPTIONS))
    assert watched.take_failures() == []


def test_a_call_over_http_starts_when_read_and_raises_a_recording_error() -> None:
    live = Live(refused(), eager=True)
    watched = WatchedLive(live, Redactor())
    relay = Relay(WIRE, b"{}", {}, "/v1/chat/completions")  # the endpoint's recording proxy
    chunks = watched.stream_call({}, CallOptions(relay=relay))
    assert live.calls == []  # not called yet: the endpoint answers what reading raises
    with pytest.raises(RecordingError, match="^cannot reach the live model Live at ") as raised:
        next(chunks)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert [f.network for f in watched.take_failures()] == [True]


def test_astream_is_watched_too() -> None:
    watched = WatchedLive(AsyncLive(refused()), Redactor())

    async def read() -> list[dict[str, Any]]:
        return [chunk async for chunk in watched.astream_call({}, NO_OPTIONS)]

    with pytest.raises(RuntimeError, match="Connection error"):
        asyncio.run(read())
    assert [f.network for f in watched.take_failures()] == [True]


def test_without_a_base_url_the_url_of_the_failed_request_is_shown() -> None:
    class Request:
        url = f"http://127.0.0.1:9/v1/chat/completions?key={SECRET}"

    class SdkError(Exception):
        request = Request()

    class Bare:
        def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
            raise SdkError("Connection error.") from OSError(111, "Connection refused")

    watched = WatchedLive(Bare(), Redactor())
    with pytest.raises(SdkError):
        watched.stream_call({}, NO_OPTIONS)
    (kept,) = watched.take_failures()
    shown = "http://127.0.0.1:9/v1/chat/completions?key=[REDACTED]"
    assert kept.message.startswith(f"cannot reach the live model Bare at {shown}: ")
    assert SECRET not in kept.message
