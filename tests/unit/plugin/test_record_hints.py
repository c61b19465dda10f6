"""What the plugin tells users about recordings: the hints, called without pytester."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.collected import collected, suite_state

from pytest_dsh_replay._plugin.collected import CollectedTest
from pytest_dsh_replay._plugin.messages import (
    HOW_TO_RECORD,
    bad_record_mode,
    call_failed_after,
    missing_recording,
    no_live_model,
    record_command,
)
from pytest_dsh_replay._plugin.modes import RECORD_MODES

ALL, MISSING = RECORD_MODES.parse("all"), RECORD_MODES.parse("missing")


def test_the_record_command_quotes_the_node_id_for_a_shell(tmp_path: Path) -> None:
    test = collected(tmp_path, "tests/test_m.py::test_x[a b]")
    command = record_command(test, tmp_path / "s", MISSING, suite_state(), [])
    assert command == "pytest --dsh-record=missing 'tests/test_m.py::test_x[a b]'"


def test_a_test_with_snapshots_records_them_with_its_scenario(tmp_path: Path) -> None:
    # Re-recorded without --snapshot-update, a changed transcript would fail the test and
    # nothing would be written: the command says both.
    for fixture in ("dsh_transcript", "snapshot"):
        test = collected(tmp_path, "tests/test_m.py::test_x", fixtures=("dsh_replay", fixture))
        command = record_command(test, tmp_path / "s", ALL, suite_state(), [])
        assert command == "pytest --dsh-record=all --snapshot-update tests/test_m.py::test_x"
    replayer = collected(
        tmp_path,
        "tests/test_m.py::test_replays",
        "shared",
        record=False,
        fixtures=("dsh_replay", "dsh_transcript"),
    )
    recorder = collected(tmp_path, "tests/test_m.py::test_records", "shared")
    command = record_command(
        replayer, tmp_path / "snaps/shared", ALL, suite_state(tmp_path / "snaps"), [recorder]
    )
    assert command == "pytest --dsh-record=all --snapshot-update tests/test_m.py::test_records"


def test_a_replay_only_test_names_the_test_that_records_its_scenario(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps")
    replayer = collected(tmp_path, "tests/test_m.py::test_replays", "shared", record=False)
    recorders = [
        collected(tmp_path, "tests/test_m.py::test_other", "other"),
        collected(tmp_path, "tests/test_m.py::test_records[x y]", "shared"),
    ]
    path = tmp_path / "snaps/shared"
    command = record_command(replayer, path, ALL, state, recorders)
    assert command == "pytest --dsh-record=all 'tests/test_m.py::test_records[x y]'"


def test_a_replay_only_test_without_a_recording_test_says_to_run_that_test(
    tmp_path: Path,
) -> None:
    replayer = collected(tmp_path, "tests/test_m.py::test_replays", "shared", record=False)
    path = tmp_path / "snaps/shared"
    command = record_command(replayer, path, MISSING, suite_state(tmp_path / "snaps"), [])
    assert command == (
        f"run the test that records {path} with --dsh-record=missing (not in this run; "
        "tests/test_m.py::test_replays only replays it: dsh_scenario(..., record=False))"
    )


def test_recorders_are_read_only_for_a_replay_only_test(tmp_path: Path) -> None:
    def never() -> Iterator[CollectedTest]:
        raise AssertionError("the recorders were read")
        yield  # a generator: it fails only when read

    test = collected(tmp_path, "tests/test_m.py::test_x")
    command = record_command(test, tmp_path / "s", ALL, suite_state(), never())
    assert command == "pytest --dsh-record=all tests/test_m.py::test_x"


def test_the_missing_recording_message_says_where_and_how(tmp_path: Path) -> None:
    message = missing_recording("t.py::test_x", tmp_path / "s", "pytest --dsh-record=missing x")
    assert message.splitlines() == [
        "no recorded dsh scenario for t.py::test_x",
        f"  looked at: {tmp_path / 's'}",
        "  record it: pytest --dsh-record=missing x",
        "  (recording calls the live model: set DSH_RECORD_BASE_URL and DSH_RECORD_API_KEY, "
        "and DSH_RECORD_MODEL to override the model, or implement the hook "
        "pytest_dsh_replay_live_model; see pytest --help, group dsh-replay)",
    ]


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("some", ""),
        ("tests/test_a.py", "; it looks like a test path: write --dsh-record=all tests/test_a.py"),
        (
            "test_a.py::test_x",
            "; it looks like a test path: write --dsh-record=all test_a.py::test_x",
        ),
    ],
)
def test_a_bad_record_mode_names_the_modes_and_spots_a_test_path(value: str, hint: str) -> None:
    assert bad_record_mode(value, ("all", "missing"), "all") == (
        f"--dsh-record accepts all or missing (a bare --dsh-record means all), got {value!r}{hint}"
    )


def test_without_a_live_model_the_message_says_how_to_get_one(tmp_path: Path) -> None:
    assert no_live_model(tmp_path) == f"no live model to record {tmp_path}: {HOW_TO_RECORD}"
    assert "DSH_RECORD_BASE_URL" in HOW_TO_RECORD
    assert "pytest_dsh_replay_live_model(config, scenario_path)" in HOW_TO_RECORD


def test_the_missing_recording_message_asks_about_a_close_name(tmp_path: Path) -> None:
    message = missing_recording("t.py::test_x", tmp_path / "captial", "cmd", tmp_path / "capital")
    assert f"  did you mean: {tmp_path / 'capital'}?" in message.splitlines()


def test_the_sdk_echo_of_a_failed_call_does_not_repeat_the_error() -> None:
    from pytest_dsh_replay import ReplayBindingError

    err = ReplayBindingError("session 's' made call #1, but no recorded session is left for it")
    raised = (
        "test_a.py:3: in test_a\n    ask()\n"
        f"E   openai.BadRequestError: Error code: 400 - ReplayBindingError: {err}"
    )
    text = call_failed_after(err, raised)
    assert text.count(str(err)) == 1  # the typed error, first
    assert text.endswith("Error code: 400 - ReplayBindingError: (the error above)")
    assert "test_a.py:3: in test_a\n    ask()" in text  # where the body raised stays


def test_a_multi_line_error_echoed_line_by_line_is_replaced_by_its_first_line() -> None:
    from pytest_dsh_replay import ReplayBindingError

    err = ReplayBindingError("no recorded session is left for call #1 of 'x'\nbound: a, b")
    raised = (
        "E   openai.BadRequestError: Error code: 400 - "
        "no recorded session is left for call #1 of 'x'\nE   bound: a, b"
    )
    text = call_failed_after(err, raised)
    assert "400 - (the error above)\nE   bound: a, b" in text


def test_a_short_error_text_is_left_in_the_echo() -> None:
    from pytest_dsh_replay import ReplayBindingError

    err = ReplayBindingError("no session\nmore")  # a first line this short could be anything
    raised = "E   SomeError: no session here"
    assert call_failed_after(err, raised).endswith("E   SomeError: no session here")
