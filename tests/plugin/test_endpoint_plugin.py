"""The model endpoint through the fixture, as users run it (pytester)."""

from __future__ import annotations

import pytest
from support.paths import README
from support.scenarios import make_scenario


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_scenario(pytester.path / "snaps" / "one", primary=["Hello"])
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    return pytester


def test_a_replay_error_over_http_fails_the_test_with_the_typed_error(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        """
        import openai
        import pytest

        def ask(client, *texts):
            messages = []
            for text in texts:
                messages.append({"role": "user", "content": text})
                messages.append({"role": "assistant", "content": "Hello"})
            return client.chat.completions.create(
                model="m", messages=messages[:-1]
            ).choices[0].message.content

        @pytest.mark.dsh_scenario("one")
        def test_swallowed(dsh_replay):
            client = dsh_replay.openai_client()
            assert ask(client, "hi") == "Hello"
            try:
                ask(client, "hi", "hi again")  # one call more than recorded
            except openai.InternalServerError:
                pass  # an agent that swallows errors still fails the test

        @pytest.mark.dsh_scenario("one")
        def test_raised(dsh_replay):
            client = dsh_replay.openai_client()
            ask(client, "hi")
            ask(client, "hi", "hi again")
        """
    )
    result = project.runpytest("-p", "no:randomly")
    # test_raised fails in its body (the SDK's own error) and errors at teardown.
    result.assert_outcomes(failed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_raised*",
            "*a model call over HTTP failed (the client got a 500 with this message):*",
            "*ReplayExhaustedError: session '*' (first user message 'hi') asked for call #2*",
            "*_ test_swallowed _*",
            "session '*' (first user message 'hi') asked for call #2, but its recording*",
        ]
    )


def test_env_points_an_agent_process_at_the_endpoint(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import os
        import subprocess
        import sys

        import pytest

        AGENT = '''
        import os, openai
        client = openai.OpenAI()
        answer = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "hi"}], stream=True)
        print("".join(c.choices[0].delta.content or "" for c in answer if c.choices))
        '''

        @pytest.mark.dsh_scenario("one", compare_logs=False)  # a hand-made recording
        def test_process(dsh_replay):
            env = {**os.environ, **dsh_replay.env}
            assert env["OPENAI_BASE_URL"] == dsh_replay.base_url + "/v1"
            assert dsh_replay.base_url.startswith("http://127.0.0.1:")
            out = subprocess.run(
                [sys.executable, "-c", AGENT.replace("\\n        ", "\\n")],
                env=env, capture_output=True, text=True, timeout=60, check=True,
            )
            assert out.stdout.strip() == "Hello"
        """
    )
    project.runpytest().assert_outcomes(passed=1)


def test_recording_with_the_server_down_names_the_url_and_the_error(
    pytester: pytest.Pytester,
) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    pytester._monkeypatch.setenv("DSH_RECORD_BASE_URL", url)
    pytester._monkeypatch.setenv("DSH_RECORD_API_KEY", "sk-test-0123456789abcdef")
    pytester._monkeypatch.setenv("DSH_RECORD_MODEL", "m")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    pytester.makepyfile(
        """
        import openai

        def test_in_process(dsh_replay):
            request = {"messages": [{"role": "user", "content": "hi"}]}
            chunks = list(dsh_replay.model.stream(request))
            assert chunks[-1]["reason"]["failure"]["code"] == "NETWORK"  # ignored by the agent

        def test_through_the_proxy(dsh_replay):
            client = dsh_replay.openai_client(max_retries=0)
            try:
                client.chat.completions.create(model="m", messages=[])
            except openai.APIStatusError as error:
                assert error.status_code == 502
                assert "cannot reach the live model at" in error.message
        """
    )
    result = pytester.runpytest("--dsh-record", "-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_in_process*",
            f"RecordingError: recording * failed: cannot reach the live model at {url}: *Connect*",
            "*ERROR at teardown of test_through_the_proxy*",
            f"RecordingError: recording * failed: cannot reach the live model at {url}/chat/comp*",
        ]
    )
    assert not (pytester.path / "snaps").exists()


FAKE_LIVE = """
class Live:
    def stream(self, request, **kwargs):
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for piece in ["The capital ", "is Paris."]:
            yield {"type": "text-delta", "index": 0, "text": piece}
        yield {"type": "block-end", "index": 0,
               "block": {"type": "text", "text": "The capital is Paris."}}
        yield {"type": "usage", "usage": {"inputTokens": 9, "outputTokens": 5}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""


@pytest.mark.parametrize("heading", ["### The openai SDK", "### The anthropic SDK"])
def test_readme_sdk_first_tests_record_then_replay(pytester: pytest.Pytester, heading: str) -> None:
    section = README.read_text(encoding="utf-8").split(heading, 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    pytester.makepyfile(test_capital=code)
    pytester.makeconftest(FAKE_LIVE)
    pytester.runpytest("--dsh-record=missing").assert_outcomes(passed=1)
    pytester.makeconftest("")
    pytester.runpytest().assert_outcomes(passed=1)
