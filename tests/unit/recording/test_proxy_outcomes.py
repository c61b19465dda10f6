"""What an SDK gets through the recording proxy is what it gets when the recording replays.

Each test records one call through the proxy from a loopback provider that sends the
exact bytes of an unusual answer (cut, truncated mid-event, without a finish, silent,
trickling, with bytes that are not UTF-8, a JSON error for a streamed call), captures
what the SDK returned or raised while recording, replays the written recording with the
same SDK call and compares (docs/recording.md#upstream-answers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from support.upstream import (
    DONE,
    MESSAGE_STOP,
    SILENT,
    Reply,
    Upstream,
    chat_events,
    messages_events,
    pieces,
)

from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._recording.live_openai import OpenAICompatibleModel
from pytest_dsh_replay._scripts.loading import load_scenario

KEY = "sk-test-proxy-outcome-0000000000"
IDLE_S = 0.2  # the idle timeout of the recordings here
TRICKLE_IDLE_S = 0.2  # ... of the trickling one, which takes longer than this in all
OVERLOADED = "the model is overloaded, try later"
PROMPT = [{"role": "user", "content": "hi"}]

Outcome = tuple[str, str | None]  # the text the SDK handed out, and what it raised


def chat_call(client: Any) -> Outcome:
    """One streamed chat completion: its text, and the exception that ended it."""
    text: list[str] = []
    try:
        stream = client.chat.completions.create(model="m", messages=PROMPT, stream=True)
        for chunk in stream:
            if chunk.choices:
                text.append(chunk.choices[0].delta.content or "")
    except Exception as error:
        return "".join(text), f"{type(error).__name__}: {error}"
    return "".join(text), None


def messages_call(client: Any) -> Outcome:
    """One streamed Anthropic message: its text, and the exception that ended it."""
    text: list[str] = []
    try:
        stream = client.messages.create(model="m", max_tokens=16, messages=PROMPT, stream=True)
        for event in stream:
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                text.append(event.delta.text)
    except Exception as error:
        return "".join(text), f"{type(error).__name__}: {error}"
    return "".join(text), None


CALLS: dict[str, tuple[str, Callable[[Any], Outcome]]] = {
    "openai": ("openai_client", chat_call),
    "anthropic": ("anthropic_client", messages_call),
}


def round_trip(tmp_path: Path, sdk: str, reply: Reply, timeout: float = IDLE_S) -> Outcome:
    """Record one call through the proxy, replay it; both outcomes must be the same."""
    client_of, call = CALLS[sdk]
    path = tmp_path / "scenario"
    with Upstream(reply) as upstream:
        live = OpenAICompatibleModel(base_url=upstream.base_url, api_key=KEY, timeout=timeout)
        recording = DshReplay.record(path, live=live, workdir=tmp_path / "rec")
        try:
            recorded = call(getattr(recording, client_of)(max_retries=0))
            recording.finish()
        finally:
            recording.close()
            live.close()
    load_scenario(path)  # what was written loads
    replay = DshReplay.open(path, workdir=tmp_path / "rep")
    try:
        replayed = call(getattr(replay, client_of)(max_retries=0))
        replay.finish()
    finally:
        replay.close()
    assert replayed == recorded
    return recorded


def chat(*steps: object) -> Reply:
    return Reply(list(steps))


# --- the shapes ------------------------------------------------------------------------


def truncated(sdk: str) -> Reply:
    """Two events, then half of the third, then the connection closes."""
    if sdk == "openai":
        events = chat_events("Hel", "lo", "wor")[:4]  # the role delta first
    else:
        events = messages_events("Hel", "lo", "wor")[:5]  # message and block starts first
    *whole, last = events
    return Reply([*whole, last[: len(last) // 2]])


def cut(sdk: str) -> Reply:
    """Some events, then the connection closes: no finish, no end marker."""
    if sdk == "openai":
        return Reply(chat_events("Hel", "lo", finish=None))
    return Reply(messages_events("Hel", "lo")[:4])


def finishless(sdk: str) -> Reply:
    """A complete stream but for its finish: no finish_reason, no stop reason."""
    if sdk == "openai":
        return Reply([*chat_events("Hel", "lo", finish=None), DONE])
    return Reply([*messages_events("Hel", "lo", stop=None), MESSAGE_STOP])


def silent(sdk: str) -> Reply:
    """Some events, then nothing: the provider never ends its answer."""
    if sdk == "openai":
        return Reply([*chat_events("Hel", "lo", finish=None), SILENT])
    return Reply([*messages_events("Hel", "lo")[:4], SILENT])


def trickling(sdk: str) -> Reply:
    """A whole answer (CRLF lines) in 7-byte pieces: slower in all than the idle timeout."""
    crlf = b"\r\n"
    if sdk == "openai":
        body = b"".join(chat_events("Hel", "lo", newline=crlf)) + b"data: [DONE]\r\n\r\n"
    else:
        body = b"".join(messages_events("Hel", "lo", newline=crlf)) + MESSAGE_STOP.replace(
            b"\n", crlf
        )
    return Reply(pieces(body, 7, TRICKLE_IDLE_S * 1.5 / (len(body) // 7)))


def not_utf8(sdk: str) -> Reply:
    """A text delta holding a byte that is not UTF-8 (Latin-1 ``é``)."""
    if sdk == "openai":
        events = chat_events("caf", "X")
        events[2] = events[2].replace(b'"X"', b'"\xe9"')
        return Reply([*events, DONE])
    events = messages_events("caf", "X")
    events[3] = events[3].replace(b'"X"', b'"\xe9"')
    return Reply([*events, MESSAGE_STOP])


def json_error(sdk: str) -> Reply:
    """A streamed call answered 200 with a JSON error body instead of a stream."""
    body: dict[str, object]
    if sdk == "openai":
        body = {"error": {"message": OVERLOADED, "type": "server_error", "code": "overloaded"}}
    else:
        body = {"type": "error", "error": {"type": "overloaded_error", "message": OVERLOADED}}
    return Reply([orjson.dumps(body)], content_type="application/json")


SDKS = pytest.mark.parametrize("sdk", ["openai", "anthropic"])


@SDKS
def test_a_stream_truncated_mid_event_replays_as_it_was_received(tmp_path: Path, sdk: str) -> None:
    text, raised = round_trip(tmp_path, sdk, truncated(sdk))
    assert (text, raised) == ("Hello", None)  # the half event never reached the client


@SDKS
def test_a_stream_cut_before_its_end_replays_as_it_was_received(tmp_path: Path, sdk: str) -> None:
    text, raised = round_trip(tmp_path, sdk, cut(sdk))
    assert (text, raised) == ("Hello", None)


@SDKS
def test_a_stream_whose_connection_breaks_mid_body_is_recorded_as_cut(
    tmp_path: Path, sdk: str
) -> None:
    # An incomplete chunked body (the provider's connection broke) failed the test with
    # "cannot reach the live model" and was never recorded, though the client had the
    # answer's start: it is a stream cut before its end, as a clean close is.
    reply = cut(sdk)
    text, raised = round_trip(tmp_path, sdk, Reply(reply.steps, chunked_cut=True))
    assert (text, raised) == ("Hello", None)


def raised_alike(tmp_path: Path, sdk: str, reply: Reply) -> tuple[str, str]:
    """:func:`round_trip` of a call that raised: its text and what it raised (both modes)."""
    text, raised = round_trip(tmp_path, sdk, reply)
    assert raised is not None
    return text, raised


@SDKS
def test_a_stream_without_a_finish_replays_as_it_was_received(tmp_path: Path, sdk: str) -> None:
    text, _ = raised_alike(tmp_path, sdk, finishless(sdk))  # the recorded failure, in both
    assert text == "Hello"


@SDKS
def test_a_silent_stream_ends_at_the_idle_timeout_and_replays_alike(
    tmp_path: Path, sdk: str
) -> None:
    text, raised = raised_alike(tmp_path, sdk, silent(sdk))
    assert (text, "Connection" in raised) == ("Hello", True)  # the connection dropped


@SDKS
def test_a_trickling_stream_is_not_cut_and_replays_alike(tmp_path: Path, sdk: str) -> None:
    assert round_trip(tmp_path, sdk, trickling(sdk), TRICKLE_IDLE_S) == ("Hello", None)


@SDKS
def test_bytes_that_are_not_utf8_reach_the_client_as_they_replay(tmp_path: Path, sdk: str) -> None:
    assert round_trip(tmp_path, sdk, not_utf8(sdk)) == ("caf\ufffd", None)


@SDKS
def test_a_json_error_for_a_streamed_call_keeps_the_providers_message(
    tmp_path: Path, sdk: str
) -> None:
    text, raised = raised_alike(tmp_path, sdk, json_error(sdk))
    assert (text, OVERLOADED in raised) == ("", True)


def test_an_answer_that_never_starts_names_the_idle_timeout_not_a_server_down(
    tmp_path: Path,
) -> None:
    # It said "cannot reach the live model: ReadTimeout: timed out; check that the live
    # model's server is running", though the server was reached.
    from pytest_dsh_replay._errors import RecordingError

    path = tmp_path / "scenario"
    with Upstream(Reply([], silent_head=True)) as upstream:
        live = OpenAICompatibleModel(base_url=upstream.base_url, api_key=KEY, timeout=IDLE_S)
        recording = DshReplay.record(path, live=live, workdir=tmp_path / "rec")
        try:
            chat_call(recording.openai_client(max_retries=0))
            with pytest.raises(RecordingError) as info:
                recording.finish()
        finally:
            recording.close()
            live.close()
    message = str(info.value)
    assert f"did not start its answer within {IDLE_S:g} s (the idle timeout, " in message
    assert "DSH_RECORD_TIMEOUT" in message
    assert "server is running" not in message


def test_the_in_process_adapter_names_the_idle_timeout_too(tmp_path: Path) -> None:
    with Upstream(Reply([], silent_head=True)) as upstream:
        live = OpenAICompatibleModel(base_url=upstream.base_url, api_key=KEY, timeout=IDLE_S)
        try:
            chunks = list(live.stream({"model": "m", "messages": PROMPT}))
        finally:
            live.close()
    assert chunks[-1]["type"] == "finish"
    (message,) = live.network_failures
    assert f"did not start its answer within {IDLE_S:g} s (the idle timeout, " in message
