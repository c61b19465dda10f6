"""One test's run of the fixture, set-up to teardown: the policy, called without pytester."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest
from support.collected import collected, suite_state
from support.inbox_logs import two_workers, write_scenario_dir
from support.paths import EXAMPLES

from pytest_dsh_replay import RecordingError
from pytest_dsh_replay._fixture.dsh_replay import DshReplay
from pytest_dsh_replay._format.redact import recording_redactor
from pytest_dsh_replay._plugin import runs
from pytest_dsh_replay._plugin.collected import CollectedTest

if TYPE_CHECKING:
    from pytest_dsh_replay._plugin.suite import Redaction, SuiteState

NODE = "tests/test_m.py::test_x"


class Scripted:
    """A live model answering every call with one text block."""

    def stream(self, request: Any, **kwargs: Any) -> Iterator[dict[str, Any]]:
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "hi"}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": "hi"}}
        yield {"type": "finish", "reason": {"kind": "stop"}}


def redaction() -> Redaction:
    def ignore(value: dict[str, Any]) -> None:
        pass

    return recording_redactor(), ignore, ignore


def start(
    tmp_path: Path,
    test: CollectedTest,
    state: SuiteState,
    *,
    layout_problem: str | None = None,
    live: Any = None,
    recorders: tuple[CollectedTest, ...] = (),
) -> DshReplay:
    return runs.start(
        test,
        state,
        layout_problem=layout_problem,
        workbase=lambda: tmp_path / "work",
        redaction=redaction,
        live=lambda path: live,
        recorders=recorders,
    )


def test_a_recorded_scenario_opens_for_replay_and_is_counted(tmp_path: Path) -> None:
    state = suite_state(EXAMPLES)
    replay = start(tmp_path, collected(tmp_path, NODE, "tool-call"), state)
    assert (replay.mode, replay.path) == ("replay", EXAMPLES / "tool-call")
    assert (state.replayed, state.runs, state.used) == (1, 1, {str(EXAMPLES / "tool-call")})
    assert state.workbase == tmp_path / "work"
    assert replay.workdir == tmp_path / "work" / "1"
    assert runs.close(replay) is None
    second = start(tmp_path, collected(tmp_path, NODE, "tool-call", compare_logs=False), state)
    assert second.workdir == tmp_path / "work" / "2"
    assert not second.compare_logs
    assert state.cache is not None  # one cache for the run


def test_a_replay_that_left_calls_unused_names_the_re_record_command(tmp_path: Path) -> None:
    state = suite_state(EXAMPLES)
    test = collected(tmp_path, NODE, "tool-call")
    replay = start(tmp_path, test, state)
    problem = runs.check_replayed(test, state, replay, [])
    assert problem is not None
    assert "was never replayed" in problem
    assert problem.endswith(
        "\n(if the new behaviour is right, re-record: pytest --dsh-record=all "
        "tests/test_m.py::test_x)"
    )


def test_a_replay_that_met_a_race_inside_the_runtime_names_it_and_advises_no_re_record(
    tmp_path: Path,
) -> None:
    # The recording shows both workers' notices opening one turn; in this run the
    # runtime took the second into a step of its own (issue 40): a race, not a change.
    write_scenario_dir(tmp_path / "snapshots" / "race", two_workers(together=True))
    root = tmp_path / "sessions"
    for log in two_workers():
        log.write(root / "--work--" / log.id / "session.v4.jsonl")
    state = suite_state(tmp_path / "snapshots")
    test = collected(tmp_path, NODE, "race")
    replay = start(tmp_path, test, state)
    replay.use_sessions(root, "sess-main")
    problem = runs.check_replayed(test, state, replay, [])
    assert problem is not None
    assert "this replay met a race inside the dsh runtime" in problem
    assert "opened one turn together" in problem
    assert "Re-recording does not fix a race" in problem
    assert "re-record:" not in problem


def test_a_missing_recording_fails_with_where_and_how_and_is_counted(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps")
    replayer = collected(tmp_path, NODE, "shared", record=False)
    recorder = collected(tmp_path, "tests/test_m.py::test_records", "shared")
    with pytest.raises(runs.ScenarioUnavailable) as caught:
        start(tmp_path, replayer, state, recorders=(recorder,))
    assert str(caught.value).splitlines() == [
        f"no recorded dsh scenario for {NODE}",
        f"  looked at: {tmp_path / 'snaps/shared'}",
        "  record it: pytest --dsh-record=missing tests/test_m.py::test_records",
        "  (recording calls the live model: set DSH_RECORD_BASE_URL and DSH_RECORD_API_KEY, "
        "and DSH_RECORD_MODEL to override the model, or implement the hook "
        "pytest_dsh_replay_live_model; see pytest --help, group dsh-replay)",
    ]
    assert (state.missing, state.replayed, state.broken) == (1, 0, 0)


def test_a_recording_that_does_not_load_fails_and_is_counted(tmp_path: Path) -> None:
    broken = tmp_path / "snaps" / "broken"
    broken.mkdir(parents=True)
    (broken / "session.jsonl").write_text("not json\n", encoding="utf-8")
    state = suite_state(tmp_path / "snaps")
    with pytest.raises(runs.ScenarioUnavailable) as caught:
        start(tmp_path, collected(tmp_path, NODE, "broken"), state)
    assert str(caught.value).startswith(f"the dsh scenario for {NODE} does not load:\n  ")
    assert (state.broken, state.replayed) == (1, 0)


def test_a_refused_layout_fails_the_test_before_anything_opens(tmp_path: Path) -> None:
    state = suite_state(EXAMPLES)
    with pytest.raises(runs.ScenarioUnavailable, match="^they collide$"):
        start(
            tmp_path, collected(tmp_path, NODE, "tool-call"), state, layout_problem="they collide"
        )
    assert (state.replayed, state.runs) == (0, 1)  # used, so not reported as unused
    assert state.used == {str(EXAMPLES / "tool-call")}


def test_record_mode_records_and_counts_the_calls_written(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps", record="all")
    replay = start(tmp_path, collected(tmp_path, NODE, "new"), state, live=Scripted())
    assert replay.mode == "record"
    ask = {"messages": [{"role": "user", "content": "hello"}]}
    list(replay.model.stream(ask, session_id="main"))
    list(replay.model.stream(ask, session_id="main"))
    assert runs.end_recording(NODE, state, replay, passed=True) is None
    assert (tmp_path / "snaps/new/session.jsonl").is_file()
    assert state.recordings == [(str(tmp_path / "snaps/new"), 1, 2, False, 0, "")]
    assert (state.kept, state.unwritten) == (0, 0)


def test_a_recording_whose_test_failed_is_not_written(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps", record="all")
    replay = start(tmp_path, collected(tmp_path, NODE, "new"), state, live=Scripted())
    list(replay.model.stream({"messages": [{"role": "user", "content": "hello"}]}))
    assert runs.end_recording(NODE, state, replay, passed=False) is None
    assert not (tmp_path / "snaps/new").exists()
    # No old recording was there to keep: counted apart from one that was kept.
    assert (state.kept, state.not_recorded, state.recordings) == (0, 1, [])
    (tmp_path / "snaps/old").mkdir(parents=True)
    replay = start(tmp_path, collected(tmp_path, NODE, "old"), state, live=Scripted())
    assert runs.end_recording(NODE, state, replay, passed=False) is None
    assert (state.kept, state.not_recorded) == (1, 1)


def test_a_recording_that_cannot_be_saved_says_so_and_is_counted(tmp_path: Path) -> None:
    state = suite_state(tmp_path / "snaps", record="all")
    replay = start(tmp_path, collected(tmp_path, NODE, "new"), state, live=Scripted())
    problem = runs.end_recording(NODE, state, replay, passed=True)  # the test wrote no session
    assert problem is not None
    assert problem.startswith(f"the recording of {NODE} was not written: ")
    assert problem.endswith("; there was no recording before, and there is none now")
    assert (state.unwritten, state.unwritten_new, state.recordings) == (0, 1, [])
    (tmp_path / "snaps/old").mkdir(parents=True)
    replay = start(tmp_path, collected(tmp_path, NODE, "old"), state, live=Scripted())
    problem = runs.end_recording(NODE, state, replay, passed=True)
    assert problem is not None
    assert problem.endswith("; the previous recording is kept")
    assert (state.unwritten, state.unwritten_new) == (1, 1)


def test_a_scenario_that_cannot_be_recorded_fails_at_set_up(tmp_path: Path) -> None:
    (tmp_path / "snaps").mkdir()
    (tmp_path / "snaps" / "file.jsonl").write_text("", encoding="utf-8")
    state = suite_state(tmp_path / "snaps", record="all")
    with pytest.raises(runs.ScenarioUnavailable) as caught:
        start(tmp_path, collected(tmp_path, NODE, "file.jsonl"), state, live=Scripted())
    assert str(caught.value).startswith(
        f"cannot record the dsh scenario for {NODE}:\n  cannot record into "
    )


def test_a_replay_only_test_replays_under_record_mode(tmp_path: Path) -> None:
    state = suite_state(EXAMPLES, record="all")
    test = collected(tmp_path, NODE, "tool-call", record=False)
    assert start(tmp_path, test, state, live=Scripted()).mode == "replay"


def test_recorded_calls_leave_out_what_a_fork_inherited() -> None:
    def finish(kind: str = "finish") -> dict[str, Any]:
        return {"type": "assistant/chunk", "data": {"chunk": {"type": kind}}}

    fork = SimpleNamespace(events=[finish(), finish("text-delta"), finish()], seed_length=1)
    primary = SimpleNamespace(
        events=[finish(), {"type": "user/message", "data": {}}], seed_length=0
    )
    store = SimpleNamespace(sessions=lambda: [primary, fork])
    assert runs.recorded_calls(store) == 2


class Closing:
    """A replay whose endpoint met ``error`` (what ``DshReplay.close`` raises)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def close(self) -> None:
        raise self.error


def test_closing_reports_what_an_http_call_met() -> None:
    failed = runs.close(Closing(runs.ScenarioUnavailable("boom")))  # type: ignore[arg-type]
    assert failed == (
        "ScenarioUnavailable: boom\n"
        "(a model call to the model endpoint met this error: "
        "its client got a 400 with this message)"
    )
    unreachable = runs.close(Closing(RecordingError("no server")))  # type: ignore[arg-type]
    assert unreachable == "RecordingError: no server"
