"""``dsh_replay.client(wire)``: any wire's in-process SDK client by the wire's name (pytester)."""

from __future__ import annotations

import pytest
from support.scenarios import make_scenario


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_scenario(pytester.path / "snaps" / "one", primary=["Hello"])
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    return pytester


def test_client_gives_each_wire_s_sdk_client(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import asyncio

        import anthropic
        import openai
        import pytest
        from google import genai

        @pytest.mark.dsh_scenario("one", compare_logs=False)  # a hand-made recording
        def test_openai_by_name(dsh_replay):
            client = dsh_replay.client("openai", max_retries=0)
            assert type(client) is openai.OpenAI
            assert client.max_retries == 0
            answer = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            assert answer.choices[0].message.content == "Hello"

        @pytest.mark.dsh_scenario("one", compare_logs=False)
        def test_async_openai_by_name(dsh_replay):
            client = dsh_replay.client("openai", async_=True)
            assert type(client) is openai.AsyncOpenAI

            async def ask():
                answer = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": "hi"}]
                )
                return answer.choices[0].message.content

            assert asyncio.run(ask()) == "Hello"

        @pytest.mark.dsh_scenario("one", compare_logs=False)
        def test_the_other_wires(dsh_replay):
            responses = dsh_replay.client("openai-responses")
            assert type(responses) is openai.OpenAI
            assert responses.responses.create(model="m", input="hi").output_text == "Hello"
            assert type(dsh_replay.client("anthropic")) is anthropic.Anthropic
            assert type(dsh_replay.client("anthropic", async_=True)) is anthropic.AsyncAnthropic
            assert type(dsh_replay.client("gemini")) is genai.Client
            assert type(dsh_replay.anthropic_client()) is anthropic.Anthropic
            assert type(dsh_replay.client("azure")) is openai.AzureOpenAI
            azure_async = dsh_replay.client("azure-responses", async_=True)
            assert type(azure_async) is openai.AsyncAzureOpenAI
            on_bedrock = dsh_replay.client("anthropic-bedrock", async_=True)
            assert type(on_bedrock) is anthropic.AsyncAnthropicBedrock

        @pytest.mark.dsh_scenario("one", compare_logs=False)
        def test_bedrock_invoke_model_reads_its_body(dsh_replay):
            import json

            body = json.dumps(
                {
                    "anthropic_version": "bedrock-2023-05-31",
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": "hi"}],
                }
            )
            answer = dsh_replay.client("bedrock").invoke_model(
                modelId="anthropic.claude-x-v1:0", body=body
            )
            stream = answer["body"]
            first = stream.read(5)
            assert len(first) == 5
            assert json.loads(first + stream.read())["content"][0]["text"] == "Hello"

        @pytest.mark.dsh_scenario("one", compare_logs=False)
        def test_an_unknown_wire(dsh_replay):
            from pytest_dsh_replay import DshReplayError
            from pytest_dsh_replay._wire.table import WIRES

            with pytest.raises(DshReplayError) as raised:
                dsh_replay.client("no-such-wire")
            assert isinstance(raised.value, LookupError)
            assert type(raised.value).__name__ == "UnknownWireError"
            assert str(raised.value).startswith(
                "no wire is called 'no-such-wire'; the wires are 'openai', "
                "'openai-responses', 'anthropic', 'gemini'"
            )
            assert all(repr(wire.name) in str(raised.value) for wire in WIRES)
            answer = dsh_replay.client("openai").chat.completions.create(
                model="m", messages=[{"role": "user", "content": "hi"}]
            )
            assert answer.choices[0].message.content == "Hello"
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=5)
