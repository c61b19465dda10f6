"""CI snapshot checks: the replayed-log check, transcripts through syrupy, unused lists."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from support.paths import EXAMPLES, SUPPORT

AGENT_TEST = """
import pytest
from support.example_agent import ExampleAgent, FACTS

PROMPT = '[[tool lookup {"key": "capital_of_france"}]][[tool add {"a": 2, "b": 3}]]'

@pytest.mark.dsh_scenario("tool-call"{marker})
def test_tool_call(dsh_replay, monkeypatch):
    {change}
    agent = ExampleAgent(dsh_replay.model, dsh_replay.sessions)
    agent.run(PROMPT)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    shutil.copytree(SUPPORT, pytester.path / "support")
    shutil.copytree(EXAMPLES / "tool-call", pytester.path / "recordings" / "tool-call")
    return pytester


def agent_test(change: str = "pass", marker: str = "") -> str:
    return AGENT_TEST.replace("{change}", change).replace("{marker}", marker)


def test_unchanged_behaviour_passes_the_replayed_log_check(project: pytest.Pytester) -> None:
    project.makepyfile(test_agent=agent_test())
    project.runpytest().assert_outcomes(passed=1)


def test_a_behaviour_change_fails_with_an_event_level_report(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_agent=agent_test('monkeypatch.setitem(FACTS, "capital_of_france", "Lyon")')
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "the replayed session log differs from the recording" in text
    assert "During handling of the above exception" not in text  # one clean message
    match = re.search(
        r"session\.jsonl: event #(\d+) \(tool/result, line (\d+)\): event differs", text
    )
    assert match, text
    # The line is the file's: an editor's "go to line" lands on the event.
    lines = (project.path / "recordings" / "tool-call" / "session.jsonl").read_text().splitlines()
    assert json.loads(lines[int(match.group(2)) - 1])["type"] == "tool/result"
    result.stdout.fnmatch_lines(
        [
            "*at $.data.message.content[[]0[]].content[[]0[]].text",
            '*recorded: "Paris"',
            '*replayed: "Lyon"',
            "*re-record: pytest --dsh-record=all test_agent.py::test_tool_call*",
        ]
    )


def test_the_check_can_be_turned_off_per_test_and_per_project(project: pytest.Pytester) -> None:
    change = 'monkeypatch.setitem(FACTS, "capital_of_france", "Lyon")'
    project.makepyfile(test_agent=agent_test(change, marker=", compare_logs=False"))
    project.runpytest().assert_outcomes(passed=1)
    project.makepyfile(test_agent=agent_test(change))
    project.makeini("[pytest]\ndsh_snapshot_dir = recordings\ndsh_compare_logs = false\n")
    project.runpytest().assert_outcomes(passed=1)


TRANSCRIPT_TESTS = """
import pytest
from support.example_agent import ExampleAgent

PROMPT = '[[tool lookup {{"key": "capital_of_france"}}]][[tool add {{"a": 2, "b": 3}}]]'

@pytest.mark.dsh_scenario("tool-call"{extra})
def test_first(dsh_replay, dsh_transcript):
    ExampleAgent(dsh_replay.model, dsh_replay.sessions).run(PROMPT)
    assert dsh_replay.transcript() == dsh_transcript

@pytest.mark.dsh_scenario("tool-call")
def test_second(dsh_replay, dsh_transcript):
    ExampleAgent(dsh_replay.model, dsh_replay.sessions).run(PROMPT)
    assert dsh_replay.transcript() == dsh_transcript
"""


def test_snapshot_update_creates_updates_and_keeps_other_transcripts(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_tr=TRANSCRIPT_TESTS.format(extra=""))
    snapshots = project.path / "__snapshots__" / "test_tr"
    missing = project.runpytest()
    missing.assert_outcomes(failed=2)
    created = project.runpytest("--snapshot-update")
    created.assert_outcomes(passed=2)
    assert sorted(p.name for p in snapshots.iterdir()) == ["test_first.md", "test_second.md"]
    first = (snapshots / "test_first.md").read_text()
    assert first.startswith("# Session {{id-1}} (primary)\n")
    assert "**Tool call** `lookup`" in first
    project.runpytest().assert_outcomes(passed=2)

    # A change in behaviour shows as a syrupy diff; --snapshot-update takes it.
    project.makepyfile(
        test_tr=TRANSCRIPT_TESTS.format(extra=", compare_logs=False").replace(
            "def test_first(dsh_replay, dsh_transcript):\n",
            "def test_first(dsh_replay, dsh_transcript, monkeypatch):\n"
            "    from support import example_agent\n"
            '    monkeypatch.setitem(example_agent.FACTS, "capital_of_france", "Lyon")\n',
        )
    )
    changed = project.runpytest("-k", "test_first")
    changed.assert_outcomes(failed=1, deselected=1)
    changed.stdout.fnmatch_lines(["*Lyon*"])
    updated = project.runpytest("-k", "test_first", "--snapshot-update")
    updated.assert_outcomes(passed=1, deselected=1)
    assert "Lyon" in (snapshots / "test_first.md").read_text()
    # The -k run never deleted the other test's transcript.
    assert (snapshots / "test_second.md").exists()


README_TRANSCRIPT_TEST = """
import pytest
from support.example_agent import ExampleAgent, FACTS

PROMPT = '[[tool lookup {"key": "capital_of_france"}]][[tool add {"a": 2, "b": 3}]]'

@pytest.mark.dsh_scenario("tool-call")
def test_agent(dsh_replay, dsh_transcript, monkeypatch):
    {change}
    ExampleAgent(dsh_replay.model, dsh_replay.sessions).run(PROMPT)
    assert dsh_replay.transcript() == dsh_transcript
"""

LYON = 'monkeypatch.setitem(FACTS, "capital_of_france", "Lyon")'


def transcript_project(project: pytest.Pytester, change: str = "pass") -> Path:
    """The README's transcript assert on the tool-call recording; its snapshot made."""
    project.makepyfile(test_tr=README_TRANSCRIPT_TEST.replace("{change}", "pass"))
    project.runpytest("--snapshot-update").assert_outcomes(passed=1)
    project.makepyfile(test_tr=README_TRANSCRIPT_TEST.replace("{change}", change))
    return project.path / "__snapshots__" / "test_tr" / "test_agent.md"


def test_a_drift_under_the_transcript_assert_shows_the_plugins_message(
    project: pytest.Pytester,
) -> None:
    transcript_project(project, LYON)
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    # syrupy's diff, then the plugin's verdict: the replay differs from its recording,
    # where, and the exact command that re-records the scenario and its transcript.
    result.stdout.fnmatch_lines(
        [
            "*Lyon*",
            "*- dsh-replay -*",
            "the snapshot differs because the replay differs from its recording:",
            "the replayed session log differs from the recording*session.jsonl:",
            "*(tool/result, line *): event differs",
            '*recorded: "Paris"',
            '*replayed: "Lyon"',
            "(if the new behaviour is right, re-record: "
            "pytest --dsh-record=all --snapshot-update test_tr.py::test_agent)",
        ]
    )


def test_a_stale_transcript_snapshot_is_told_from_a_drift(project: pytest.Pytester) -> None:
    snapshot = transcript_project(project)
    snapshot.write_text(snapshot.read_text().replace("Paris", "Rome"))
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- dsh-replay -*",
            "the replay matches its recording *tool-call (every call used, the logs as "
            "recorded): the snapshot is out of date, not the recording; update it: "
            "pytest --snapshot-update test_tr.py::test_agent",
        ]
    )
    assert "re-record" not in result.stdout.str()


def test_snapshot_update_keeps_the_transcript_of_a_test_that_fails_the_log_check(
    project: pytest.Pytester,
) -> None:
    snapshot = transcript_project(project, LYON)
    before = (snapshot.read_bytes(), snapshot.stat().st_mtime_ns)
    result = project.runpytest("--snapshot-update")
    # The transcript assert took the new text; the log check then failed the test.
    result.assert_outcomes(failed=1)
    assert (snapshot.read_bytes(), snapshot.stat().st_mtime_ns) == before
    result.stdout.fnmatch_lines(
        [
            '*replayed: "Lyon"',
            "*re-record: pytest --dsh-record=all --snapshot-update test_tr.py::test_agent)",
        ]
    )
    report = result.stdout.str().split("snapshot report summary")[1]
    assert "updated" not in report
    assert "1 snapshot failed." in report
    # Without the drift the same command passes and the transcript stays as it is.
    project.makepyfile(test_tr=README_TRANSCRIPT_TEST.replace("{change}", "pass"))
    project.runpytest("--snapshot-update").assert_outcomes(passed=1)
    assert snapshot.read_bytes() == before[0]


def test_a_recording_whose_transcript_differs_says_to_record_with_snapshot_update(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        import os
        from pytest_dsh_replay import Answer, ScriptedModel

        def pytest_dsh_replay_live_model(config, scenario_path):
            return ScriptedModel([], default=Answer(text=os.environ.get("CAPITAL", "Paris")))
        """
    )
    pytester.makepyfile(
        test_capital="""
        import pytest

        @pytest.mark.dsh_scenario("capital")
        def test_capital(dsh_replay, dsh_transcript):
            list(dsh_replay.model.stream({"messages": [{"role": "user", "content": "Capital?"}]}))
            assert dsh_replay.transcript() == dsh_transcript
        """
    )
    pytester.runpytest("--dsh-record=all", "--snapshot-update").assert_outcomes(passed=1)
    log = pytester.path / "dsh_snapshots" / "capital" / "session.jsonl"
    recorded = log.read_bytes()
    pytester._monkeypatch.setenv("CAPITAL", "Lyon")
    result = pytester.runpytest("--dsh-record=all")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*- dsh-replay -*",
            "the snapshot differs from this recording run, so the test failed and nothing was "
            "recorded; record the new behaviour with its snapshots: "
            "pytest --dsh-record=all --snapshot-update test_capital.py::test_capital",
        ]
    )
    assert log.read_bytes() == recorded
    pytester.runpytest("--dsh-record=all", "--snapshot-update").assert_outcomes(passed=1)
    assert b"Lyon" in log.read_bytes()
    pytester.runpytest().assert_outcomes(passed=1)


def test_the_unused_list_is_the_same_with_and_without_xdist(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    for name in ("spawn", "fork", "retry", "tool-call"):
        shutil.copytree(EXAMPLES / name, pytester.path / "recordings" / name)
    shutil.copytree(SUPPORT, pytester.path / "support")
    pytester.makepyfile(
        """
        import pytest

        def test_unrelated():
            pass

        @pytest.mark.dsh_scenario("spawn", compare_logs=False)
        def test_spawn(dsh_replay):
            dsh_replay.model.assert_consumed = lambda: None  # only its use counts here

        @pytest.mark.dsh_scenario("retry", compare_logs=False)
        def test_retry(dsh_replay):
            dsh_replay.model.assert_consumed = lambda: None
        """
    )

    def unused(*args: str) -> list[str]:
        result = pytester.runpytest(*args)
        result.assert_outcomes(passed=3)
        return sorted(re.findall(r"^  (\S+)$", result.stdout.str(), re.M))

    serial = unused("-p", "no:randomly")
    assert [Path(p).name for p in serial] == ["fork", "tool-call"]
    assert unused("-n", "2") == serial


def test_raw_event_snapshots_with_the_log_extension(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_raw="""
        import pytest
        from support.example_agent import ExampleAgent
        from pytest_dsh_replay.syrupy_ext import DshLogExtension

        PROMPT = '[[tool lookup {"key": "capital_of_france"}]][[tool add {"a": 2, "b": 3}]]'

        VIEWS = {
            "fixture": lambda r: r,
            "store": lambda r: r.sessions,
            "list": lambda r: r.sessions.sessions(),
            "transcript": lambda r: r.transcript(),
        }

        @pytest.mark.parametrize("view", VIEWS)
        @pytest.mark.dsh_scenario("tool-call")
        def test_raw(dsh_replay, snapshot, view):
            ExampleAgent(dsh_replay.model, dsh_replay.sessions).run(PROMPT)
            assert VIEWS[view](dsh_replay) == snapshot(extension_class=DshLogExtension)
        """
    )
    result = project.runpytest("--snapshot-update")
    # A Markdown transcript is refused, not written into a .jsonl file.
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(["*TypeError: DshLogExtension stores session events*"])
    snapshots = project.path / "__snapshots__" / "test_raw"
    assert sorted(p.name for p in snapshots.iterdir()) == [
        "test_raw[fixture].jsonl",
        "test_raw[list].jsonl",
        "test_raw[store].jsonl",
    ]
    stored = (snapshots / "test_raw[fixture].jsonl").read_text()
    assert (snapshots / "test_raw[store].jsonl").read_text() == stored
    lines = stored.splitlines()
    assert lines[0].startswith('{"type":"session","version":0,"id":"{{id-1}}"')
    assert '"seq"' not in stored
    assert '"time"' not in stored
    assert any('"type":"tool/result"' in line for line in lines)
    project.runpytest().assert_outcomes(passed=3, failed=1)


# --- a test that could not record, load or replay keeps its snapshots ----------------------

KEPT_TESTS = """
import pytest
from pytest_dsh_replay.syrupy_ext import DshLogExtension

def ask(model):
    chunks = list(model.stream({"messages": [{"role": "user", "content": "hi"}]}))
    assert chunks[-1]["reason"]["kind"] == "stop", chunks[-1]  # the agent gives up
    return chunks

@pytest.mark.dsh_scenario("one")
def test_kept(dsh_replay, dsh_transcript, snapshot):
    ask(dsh_replay.model)
    assert dsh_replay.transcript() == dsh_transcript
    assert dsh_replay == snapshot(extension_class=DshLogExtension)

def test_plain(snapshot):
    assert "plain" == snapshot
"""


def committed_snapshots(pytester: pytest.Pytester) -> Path:
    """The module's snapshots: the test's transcript and events, an orphan, an .ambr."""
    snapshots = pytester.path / "__snapshots__" / "test_kept"
    snapshots.mkdir(parents=True)
    (snapshots / "test_kept.md").write_text("# Session {{id-1}} (primary)\n")
    (snapshots / "test_kept.jsonl").write_text('{"type":"session"}\n')
    (snapshots / "test_gone.md").write_text("# a test that no longer exists\n")
    (pytester.path / "__snapshots__" / "test_kept.ambr").write_text(
        "# serializer version: 1\n# name: test_plain\n  'plain'\n# ---\n"
    )
    return snapshots


def no_live_model_at(pytester: pytest.Pytester) -> None:
    """Point the built-in live model at a loopback port nothing listens on."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pytester._monkeypatch.setenv("DSH_RECORD_BASE_URL", f"http://127.0.0.1:{port}/v1")
    pytester._monkeypatch.setenv("DSH_RECORD_API_KEY", "sk-test-0123456789abcdef")
    pytester._monkeypatch.setenv("DSH_RECORD_MODEL", "m")


@pytest.mark.parametrize("flags", [(), ("--snapshot-update",)], ids=["plain", "update"])
def test_a_recording_that_failed_keeps_the_tests_snapshots(
    pytester: pytest.Pytester, flags: tuple[str, ...]
) -> None:
    from support.scenarios import make_scenario

    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    make_scenario(pytester.path / "snaps" / "one", ask="hi", primary=["Hello"])
    snapshots = committed_snapshots(pytester)
    pytester.makepyfile(test_kept=KEPT_TESTS)
    no_live_model_at(pytester)
    result = pytester.runpytest("--dsh-record=all", *flags, "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    text = result.stdout.str()
    assert "old recording kept" in text
    assert (snapshots / "test_kept.md").exists()
    assert (snapshots / "test_kept.jsonl").exists()
    # the module's other snapshots are handled as syrupy always does: only the orphan
    # test_gone.md is unused (and deleted under --snapshot-update)
    report = text.split("snapshot report summary")[1]
    assert ("1 unused snapshot deleted." if flags else "1 snapshot unused.") in report
    assert "Deleted test_kept" not in report
    assert (snapshots / "test_gone.md").exists() is not bool(flags)
    assert ("Deleted test_gone" in text) is bool(flags)
    assert (pytester.path / "__snapshots__" / "test_kept.ambr").exists()


@pytest.mark.parametrize(
    "flags", [(), ("--snapshot-update",), ("--snapshot-warn-unused",)], ids=str
)
def test_a_scenario_that_does_not_load_keeps_the_tests_snapshots(
    pytester: pytest.Pytester, flags: tuple[str, ...]
) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    (pytester.path / "snaps" / "one").mkdir(parents=True)
    (pytester.path / "snaps" / "one" / "session.jsonl").write_text("not json\n")
    snapshots = committed_snapshots(pytester)
    (snapshots / "test_gone.md").unlink()
    pytester.makepyfile(test_kept=KEPT_TESTS)
    result = pytester.runpytest(*flags, "-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*the dsh scenario for test_kept.py::test_kept does not load*"])
    text = result.stdout.str()
    assert (snapshots / "test_kept.md").exists()
    assert (snapshots / "test_kept.jsonl").exists()
    report = text.split("snapshot report summary")[1]
    # syrupy's words; the plugin's own summary ("0 unused" scenarios) may follow its report
    assert re.search(r"\d+ (unused )?snapshots? (unused|deleted)", report) is None, report
    assert "Deleted" not in report


def test_a_replay_error_keeps_the_tests_snapshots(pytester: pytest.Pytester) -> None:
    from support.scenarios import make_scenario

    pytester.makeini("[pytest]\ndsh_snapshot_dir = snaps\n")
    make_scenario(pytester.path / "snaps" / "one", ask="hi", primary=["Hello"])
    snapshots = committed_snapshots(pytester)
    (snapshots / "test_gone.md").unlink()
    twice = "    ask(dsh_replay.model)\n"  # one call more than recorded
    pytester.makepyfile(test_kept=KEPT_TESTS.replace(twice, twice * 2))
    result = pytester.runpytest("--snapshot-update", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ReplayExhaustedError*"])
    assert (snapshots / "test_kept.md").exists()
    assert (snapshots / "test_kept.jsonl").exists()
    assert "Deleted" not in result.stdout.str()


def test_parametrized_ids_that_would_share_a_transcript_file_fail_naming_each_other(
    pytester: pytest.Pytester,
) -> None:
    # syrupy drops '/' from file names: test_t[a/b] and test_t[ab] shared one file, and
    # one of them always failed (its "update it" hint only swapped which).
    pytester.makeconftest(
        "from pytest_dsh_replay import Answer, Rule, ScriptedModel\n\n"
        "MODEL = ScriptedModel([Rule(lambda r: Answer(text='echo ' + r.messages[-1][1]))])\n\n"
        "def pytest_dsh_replay_live_model(config, scenario_path):\n"
        "    return MODEL\n"
    )
    pytester.makepyfile(
        test_ids="""
        import pytest

        @pytest.mark.parametrize("q", ["a/b", "ab", "c"], ids=["a/b", "ab", "c"])
        def test_t(dsh_replay, dsh_transcript, q):
            request = {"messages": [{"role": "user", "content": "say " + q}]}
            list(dsh_replay.model.stream(request, session_id="main"))
            assert dsh_replay.transcript() == dsh_transcript
        """
    )
    result = pytester.runpytest("--dsh-record=missing", "--snapshot-update", "-p", "no:randomly")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "test_ids.py::test_t[[]a/b[]] and test_ids.py::test_t[[]ab[]] would share one "
            "dsh_transcript file (test_t[[]ab[]].md)*another parametrize id",
        ]
    )
