"""Conformance with the reference replay loader over every real recording.

``../shared/corpus/dsh-harness`` holds 121 scenarios recorded by the dsh harness, with
the reference implementation's own outputs: ``expected.json`` (the scenario-level
scripts) and ``expected-files.json`` (per log: header, event count, unsliced script).
Everything is compared as parsed JSON values.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.corpus_support import HARNESS, corpus_params, corpus_scenarios, require_corpus

from pytest_dsh_replay import (
    DshReplayError,
    derive_replay_script,
    load_scenario,
    parse_session_header,
    parse_session_log,
)
from pytest_dsh_replay._scripts.scenario import load_session_script

SCENARIOS = corpus_scenarios()


def test_corpus_is_complete() -> None:
    require_corpus()
    logs = sum(len(json.loads((p / "expected-files.json").read_text())) for p in SCENARIOS)
    assert (len(SCENARIOS), logs) == (121, 151)


@pytest.mark.parametrize("scenario_dir", corpus_params(SCENARIOS))
def test_scenario_scripts_match_reference(scenario_dir: Path | None) -> None:
    require_corpus()
    assert scenario_dir is not None
    expected = json.loads((scenario_dir / "expected.json").read_text(encoding="utf-8"))
    if expected["ok"]:
        assert load_scenario(scenario_dir).to_json()["scripts"] == expected["scripts"]
        return
    with pytest.raises(DshReplayError) as info:
        load_scenario(scenario_dir)
    message = str(info.value)
    reference = expected["error"]["message"]
    # The reference names the call as "model call <t>/<s>"; so must we.
    key = reference.split("model call ", 1)[1].split(" ", 1)[0]
    assert f"model call {key}" in message
    assert "replay.override.json" in message


@pytest.mark.parametrize("scenario_dir", corpus_params(SCENARIOS))
def test_every_log_matches_reference(scenario_dir: Path | None) -> None:
    require_corpus()
    assert scenario_dir is not None
    expected_files = json.loads((scenario_dir / "expected-files.json").read_text("utf-8"))
    for name, expected in expected_files.items():
        data = (scenario_dir / name).read_bytes()
        header = parse_session_header(data)
        assert expected["header"]["ok"]
        assert {
            "id": header.id,
            "createdAt": header.created_at,
            "seedLength": header.seed_length,
        } == expected["header"]["value"], name
        events = parse_session_log(data, source=name)
        assert len(events) == expected["eventCount"], name
        script = expected["script"]
        if script["ok"]:
            entries = [e.to_json() for e in derive_replay_script(events)]
            assert entries == script["entries"], name
            # The streaming reader used by load_scenario derives the same, unsliced.
            streamed = load_session_script(scenario_dir / name, primary=True)
            assert [e.to_json() for e in streamed.entries] == script["entries"], name
        else:
            assert script["stage"] == "deriveReplayScript"
            with pytest.raises(DshReplayError, match=r"replay\.override\.json"):
                derive_replay_script(events)


def test_fork_children_are_sliced_at_seed_length() -> None:
    require_corpus()
    fork = HARNESS / "examples__acp-agent__tests__snapshots__subagent-fork-in-process"
    child = load_session_script(fork / "session.1.jsonl", primary=False)
    whole = load_session_script(fork / "session.1.jsonl", primary=True)
    assert (child.seed_length, child.event_count) == (42, 99)
    assert (len(whole.entries), len(child.entries)) == (2, 1)
    # The inherited call is the parent's first call, not the child's own.
    parent = load_session_script(fork / "session.jsonl", primary=True)
    assert whole.entries[0] == parent.entries[0]
    assert child.entries[0] == whole.entries[1]
