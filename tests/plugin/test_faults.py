"""Injected faults (``dsh_replay.inject``) against the SDK clients' own retry logic (pytester).

Each inner test records first (an echoing live model: ``live: <last user text>``) and
then replays, with the same faults injected both times: a faulted attempt is never a
call, so neither run logs it, the retry gets the recorded answer and the log check of
the replay passes. The SDKs' retries are counted from their own log lines.
"""

from __future__ import annotations

import pytest
from support.inner_runs import ECHO_LIVE_CONFTEST

TESTS = """
import logging

import openai
import pytest
from pytest_dsh_replay import Fault

ASK = [{"role": "user", "content": "q"}]


def retries(caplog, logger):
    return sum("Retrying" in r.getMessage() for r in caplog.records if r.name.startswith(logger))


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch):
    # Without a Retry-After (a dropped connection, a timeout) the SDKs back off 0.5 s and
    # more: what is tested is that they retry, not how long they wait first.
    import anthropic._base_client

    for client in (openai._base_client, anthropic._base_client):
        monkeypatch.setattr(client, "INITIAL_RETRY_DELAY", 0.001)


@pytest.mark.dsh_scenario("openai")
def test_openai_retries_a_rate_limit_and_a_server_error(dsh_replay, caplog):
    caplog.set_level(logging.INFO)
    dsh_replay.inject(Fault.rate_limit(retry_after=0.001))
    dsh_replay.inject(Fault.server_error(503, retry_after=0.001))
    client = dsh_replay.openai_client()  # max_retries: the SDK's default, 2
    answer = client.chat.completions.create(model="m", messages=ASK)
    assert answer.choices[0].message.content == "live: q"
    assert retries(caplog, "openai") == 2


@pytest.mark.dsh_scenario("anthropic")
def test_anthropic_retries_a_rate_limit_and_a_server_error(dsh_replay, caplog):
    caplog.set_level(logging.INFO)
    dsh_replay.inject(Fault.rate_limit(retry_after=0.001))
    dsh_replay.inject(Fault.server_error(529, retry_after=0.001))
    client = dsh_replay.anthropic_client()
    answer = client.messages.create(model="m", max_tokens=10, messages=ASK)
    assert answer.content[0].text == "live: q"
    assert retries(caplog, "anthropic") == 2


@pytest.mark.dsh_scenario("gemini")
def test_google_genai_retries_with_its_http_retry_options(dsh_replay, caplog):
    from google.genai import types

    caplog.set_level(logging.INFO)
    dsh_replay.inject(Fault.rate_limit(retry_after=0.001))
    dsh_replay.inject(Fault.server_error(500))
    dsh_replay.inject(Fault.server_error(503))
    retry = types.HttpRetryOptions(attempts=4, initial_delay=0.0, max_delay=0.0, jitter=0.0)
    client = dsh_replay.gemini_client(http_options=types.HttpOptions(retry_options=retry))
    answer = client.models.generate_content(model="gemini-2.5-flash", contents="q")
    assert answer.text == "live: q"
    assert retries(caplog, "google_genai") == 3


def ask_streamed(client):
    stream = client.chat.completions.create(model="m", messages=ASK, stream=True)
    return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)


@pytest.mark.dsh_scenario("stream")
def test_openai_streams(dsh_replay):
    assert ask_streamed(dsh_replay.openai_client()) == "live: q"


@pytest.mark.dsh_scenario("stream", record=False)  # replays what the test above records
def test_openai_sees_a_disconnect_as_its_own_error(dsh_replay):
    dsh_replay.inject(Fault.disconnect(after_chunks=2))
    client = dsh_replay.openai_client()
    seen = []
    with pytest.raises(openai.APIConnectionError) as raised:  # the SDK's own error
        for chunk in client.chat.completions.create(model="m", messages=ASK, stream=True):
            seen.append(chunk.choices[0].delta.content or "")
    assert type(raised.value.__cause__).__name__ == "ReadError"  # httpx's, mid-body
    assert "".join(seen) == "live: q"  # the recorded answer's first chunks came first
    assert ask_streamed(client) == "live: q"  # the code's own retry: the recorded answer


@pytest.mark.dsh_scenario("openai", record=False)  # replays what the first test records
def test_openai_times_out_on_a_latency_and_its_retry_is_answered(dsh_replay, caplog):
    caplog.set_level(logging.INFO)
    dsh_replay.inject(Fault.latency(2))
    client = dsh_replay.openai_client(timeout=0.1, max_retries=1)
    answer = client.chat.completions.create(model="m", messages=ASK)
    assert answer.choices[0].message.content == "live: q"
    assert retries(caplog, "openai") == 1


@pytest.mark.dsh_scenario("anthropic", record=False)  # replays what the second test records
def test_anthropic_retries_a_dropped_connection_and_a_timed_out_latency(dsh_replay, caplog):
    caplog.set_level(logging.INFO)
    dsh_replay.inject(Fault.disconnect())  # before the response: the SDK retries it
    dsh_replay.inject(Fault.latency(2))
    client = dsh_replay.anthropic_client(timeout=0.1, max_retries=2)
    answer = client.messages.create(model="m", max_tokens=10, messages=ASK)
    assert answer.content[0].text == "live: q"
    assert retries(caplog, "anthropic") == 2  # one for the drop, one for the timeout


@pytest.mark.dsh_scenario("gemini", record=False)  # replays what the third test records
def test_google_genai_sees_a_dropped_connection_and_a_latency_past_its_timeout(dsh_replay):
    from google.genai import types

    dsh_replay.inject(Fault.disconnect())
    dsh_replay.inject(Fault.latency(2))
    client = dsh_replay.gemini_client(http_options=types.HttpOptions(timeout=100))  # ms
    # its retry options retry statuses, not transport errors: its HTTP library's own errors
    # (httpx's or httpx2's, whichever this google-genai is built on)
    for error in ("RemoteProtocolError", "ReadTimeout"):
        with pytest.raises(Exception) as raised:
            client.models.generate_content(model="gemini-2.5-flash", contents="q")
        assert type(raised.value).__name__ == error
    answer = client.models.generate_content(model="gemini-2.5-flash", contents="q")
    assert answer.text == "live: q"  # the code's own retry: the recorded answer
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    pytester.makeconftest(ECHO_LIVE_CONFTEST)
    pytester.makepyfile(test_agent=TESTS)
    return pytester


def test_faults_against_the_sdks_retry_logic_record_and_replay(project: pytest.Pytester) -> None:
    recorded = project.runpytest("--dsh-record=all", "-p", "no:randomly")
    recorded.assert_outcomes(passed=8)
    for name in ("openai", "anthropic", "gemini", "stream"):
        assert (project.path / "snaps" / name / "session.jsonl").exists(), name
    replayed = project.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=8)


UNFIRED = """
import pytest
from pytest_dsh_replay import Fault


@pytest.mark.dsh_scenario("openai", record=False)
def test_injects_for_a_call_never_made(dsh_replay):
    dsh_replay.inject(Fault.rate_limit(), call=2)
    answer = dsh_replay.openai_client().chat.completions.create(
        model="m", messages=[{"role": "user", "content": "q"}]
    )
    assert answer.choices[0].message.content == "live: q"
"""


def test_a_fault_that_never_happened_fails_as_the_tests_own_error_without_a_re_record_hint(
    project: pytest.Pytester,
) -> None:
    project.runpytest("--dsh-record=all", "-k", "openai_retries").assert_outcomes(passed=1)
    project.makepyfile(test_unfired=UNFIRED)
    result = project.runpytest("test_unfired.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*FaultError: 1 injected fault(s) never happened: Fault.rate_limit(*call 2*"]
    )
    assert "re-record" not in result.stdout.str()  # re-recording cannot make it happen
