"""--dsh-record: recordings are written only for passing tests, atomically, redacted."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.scenarios import make_scenario

from pytest_dsh_replay import load_scenario

# A fake live model: answers "live: <last user text>", or delegates to children when
# the prompt says "spawn N". It leaks a secret when asked to.
CONFTEST = """
import pytest

SECRET_IN_REPLY = "sk-liveleak" + "0123456789abcdefghij"

class FakeLive:
    def stream(self, request, **kwargs):
        text = request["messages"][-1]["content"]
        reply = SECRET_IN_REPLY if "leak" in text else "live: " + text
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        for i in range(0, len(reply), 4):
            yield {"type": "text-delta", "index": 0, "text": reply[i:i + 4]}
        yield {"type": "block-end", "index": 0, "block": {"type": "text", "text": reply}}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return FakeLive()
"""

AGENT = """
import uuid

def ask(model, text, session_id, parent=None):
    chunks = model.stream(
        {"messages": [{"role": "user", "content": text}]},
        session_id=session_id, parent_session_id=parent,
    )
    return "".join(c["text"] for c in chunks if c["type"] == "text-delta")

def run(model, prompt, children=0):
    parent = "parent-" + uuid.uuid4().hex
    answers = [ask(model, prompt, parent)]
    for n in range(children):
        answers.append(ask(model, f"child {n}", "child-" + uuid.uuid4().hex, parent))
    return answers
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(agent=AGENT)
    return pytester


def digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def test_record_then_replay_round_trip(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_rt="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("tree")
        def test_tree(dsh_replay):
            assert run(dsh_replay.model, "hello", children=2) == [
                "live: hello", "live: child 0", "live: child 1"
            ]
        """
    )
    recorded = project.runpytest("--dsh-record")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(
        [
            "*scenarios: 0 replayed, 1 recorded, 0 missing*",
            "recorded *tree: 3 sessions, 3 model calls",
        ]
    )
    files = sorted(p.name for p in (project.path / "recordings" / "tree").iterdir())
    assert files == ["session.1.jsonl", "session.2.jsonl", "session.jsonl"]
    # Keyless replay of what was just recorded; the live model is never asked.
    project.makeconftest("")
    replayed = project.runpytest()
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing*"])


def test_a_failing_test_leaves_the_previous_recording_byte_for_byte(
    project: pytest.Pytester,
) -> None:
    old = make_scenario(project.path / "recordings" / "keep", primary=["old"], child1=["c"])
    before = digest(old)
    project.makepyfile(
        test_fail="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("keep")
        def test_fails_after_calls(dsh_replay):
            run(dsh_replay.model, "new answer")
            assert False, "the agent misbehaved"
        """
    )
    result = project.runpytest("--dsh-record")
    result.assert_outcomes(failed=1)
    assert digest(old) == before
    assert not [p for p in old.parent.iterdir() if p.name.startswith(".")]


# A live model whose block-end carries no block, and an agent that carries on after errors.
BAD_CHUNK_CONFTEST = """
class Live:
    def stream(self, request, **kwargs):
        yield {"type": "block-start", "index": 0, "blockType": "text"}
        yield {"type": "text-delta", "index": 0, "text": "hi"}
        yield {"type": "block-end", "index": 0}
        yield {"type": "finish", "reason": {"kind": "stop"}}

def pytest_dsh_replay_live_model(config, scenario_path):
    return Live()
"""
SWALLOWING_TEST = """
import pytest

@pytest.mark.dsh_scenario("keep")
def test_agent_that_swallows_errors(dsh_replay):
    try:
        list(dsh_replay.model.stream({"messages": [{"role": "user", "content": "x"}]}))
    except Exception:
        pass
"""


def test_a_live_chunk_the_loader_refuses_fails_the_recording_even_when_swallowed(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(BAD_CHUNK_CONFTEST)
    project.makepyfile(test_swallow=SWALLOWING_TEST)
    before = digest(make_scenario(project.path / "recordings" / "keep", primary=["old"]))
    result = project.runpytest("--dsh-record")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*RecordingError: the live model streamed a chunk that the recording cannot hold*"
         "a block-end chunk needs block: a content block object; it has none*"]
    )  # fmt: skip
    assert digest(project.path / "recordings" / "keep") == before  # byte for byte


def test_the_summary_says_old_recording_kept_only_when_there_was_one(
    project: pytest.Pytester,
) -> None:
    make_scenario(project.path / "recordings" / "keep", primary=["old"])
    project.makepyfile(
        test_fail="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("keep")
        def test_had_one(dsh_replay):
            run(dsh_replay.model, "new answer")
            assert False

        @pytest.mark.dsh_scenario("fresh")
        def test_had_none(dsh_replay):
            run(dsh_replay.model, "new answer")
            assert False
        """
    )
    result = project.runpytest("--dsh-record=missing")  # only test_had_none records
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        ["scenarios: *1 not recorded (the test did not pass; nothing was written)"]
    )
    assert "old recording kept" not in result.stdout.str()
    result = project.runpytest("--dsh-record=all")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(
        [
            "scenarios: *1 not re-recorded (the test did not pass; old recording kept), "
            "1 not recorded (the test did not pass; nothing was written)"
        ]
    )
    assert not (project.path / "recordings" / "fresh").exists()


def test_an_interrupted_recording_leaves_the_previous_recording(project: pytest.Pytester) -> None:
    old = make_scenario(project.path / "recordings" / "keep", primary=["old"])
    before = digest(old)
    project.makepyfile(
        test_interrupt="""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("keep")
        def test_interrupted(dsh_replay):
            stream = dsh_replay.model.stream(
                {"messages": [{"role": "user", "content": "x"}]}, session_id="s"
            )
            next(stream)
            raise KeyboardInterrupt
        """
    )
    result = project.runpytest_subprocess("--dsh-record")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert digest(old) == before


def test_an_erroring_teardown_writes_nothing(project: pytest.Pytester) -> None:
    old = make_scenario(project.path / "recordings" / "keep", primary=["old"])
    before = digest(old)
    project.makepyfile(
        test_teardown="""
        import pytest
        from agent import run

        @pytest.fixture
        def broken_teardown():
            yield
            raise RuntimeError("teardown failed")

        @pytest.mark.dsh_scenario("keep")
        def test_body_passes(broken_teardown, dsh_replay):
            run(dsh_replay.model, "new")
        """
    )
    result = project.runpytest("--dsh-record")
    result.assert_outcomes(passed=1, errors=1)
    assert digest(old) == before


def test_re_recording_with_fewer_children_removes_stale_files(project: pytest.Pytester) -> None:
    old = make_scenario(
        project.path / "recordings" / "shrink",
        primary=["p"],
        child1=["a"],
        child2=["b"],
        child3=["c"],
    )
    assert len(list(old.iterdir())) == 4
    project.makepyfile(
        test_shrink="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("shrink")
        def test_one_child(dsh_replay):
            run(dsh_replay.model, "p", children=1)
        """
    )
    project.runpytest("--dsh-record").assert_outcomes(passed=1)
    assert sorted(p.name for p in old.iterdir()) == ["session.1.jsonl", "session.jsonl"]
    project.makeconftest("")
    project.runpytest().assert_outcomes(passed=1)


def test_secrets_in_responses_and_requests_are_never_written(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_RECORD_API_KEY", "configured-key-value-123")
    project.makeconftest(
        CONFTEST
        + """
def pytest_dsh_replay_redact(event):
    data = event.get("data")
    if isinstance(data, dict) and data.get("customer") == "ACME Corp":
        data["customer"] = "<customer>"
"""
    )
    project.makepyfile(
        test_secret="""
        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("secret")
        def test_leaky(dsh_replay):
            s = dsh_replay.sessions.create("primary")
            s.append("note", {"auth": "Bearer abcdefghijklmnop1234", "customer": "ACME Corp",
                              "key": "configured-key-value-123", "aws": "AKIAABCDEFGHIJKLMNOP",
                              "gh": "ghp_" + "a" * 36})
            answer = ask(dsh_replay.model, "please leak", "primary")
            assert answer.startswith("sk-liveleak")
        """
    )
    project.runpytest("--dsh-record").assert_outcomes(passed=1)
    written = (project.path / "recordings" / "secret" / "session.jsonl").read_text()
    for secret in (
        "sk-liveleak",
        "0123456789abcdefghij",
        "abcdefghijklmnop1234",
        "configured-key-value-123",
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_aaaa",
        "ACME",
    ):
        assert secret not in written, secret
    assert "[REDACTED]" in written
    assert "<customer>" in written


def test_record_missing_only_records_what_is_missing(project: pytest.Pytester) -> None:
    existing = make_scenario(
        project.path / "recordings" / "have", ask="have", primary=["live: have"]
    )
    before = digest(existing)
    project.makepyfile(
        test_missing="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("have")
        def test_have(dsh_replay):
            assert dsh_replay.mode == "replay"
            run(dsh_replay.model, "have")

        @pytest.mark.dsh_scenario("new")
        def test_new(dsh_replay):
            assert dsh_replay.mode == "record"
            run(dsh_replay.model, "new")
        """
    )
    result = project.runpytest("--dsh-record=missing")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*1 replayed, 1 recorded, 0 missing*"])
    assert digest(existing) == before
    assert (project.path / "recordings" / "new" / "session.jsonl").exists()


def test_keyword_subsets_never_delete_recordings(project: pytest.Pytester) -> None:
    keep = make_scenario(project.path / "recordings" / "other", primary=["o"])
    before = digest(keep)
    project.makepyfile(
        test_subset="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("mine")
        def test_mine(dsh_replay):
            run(dsh_replay.model, "m")

        @pytest.mark.dsh_scenario("other")
        def test_other(dsh_replay):
            run(dsh_replay.model, "o")
        """
    )
    project.runpytest("--dsh-record", "-k", "mine").assert_outcomes(passed=1, deselected=1)
    assert digest(keep) == before


def test_two_tests_recording_one_scenario_is_an_error(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_dup="""
        import pytest

        @pytest.mark.dsh_scenario("same")
        def test_a(dsh_replay):
            pass

        @pytest.mark.dsh_scenario("same")
        def test_b(dsh_replay):
            pass

        @pytest.mark.dsh_scenario("same", record=False)
        def test_replay_only(dsh_replay):
            pass
        """
    )
    result = project.runpytest("--dsh-record")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*test_dup.py::test_a and test_dup.py::test_b would both record*"])


_TWO_RECORDERS = """
import pytest

@pytest.mark.dsh_scenario("same")
def test_a(dsh_replay):
    pass

@pytest.mark.dsh_scenario("same")
def test_b(dsh_replay):
    pass
"""


@pytest.mark.parametrize(
    ("module", "exit_code"),
    [
        (_TWO_RECORDERS, pytest.ExitCode.USAGE_ERROR),  # the plugin stops the run
        ("def test_broken(:\n", pytest.ExitCode.INTERRUPTED),  # a collection error
    ],
    ids=["usage-error", "collection-error"],
)
def test_a_run_stopped_after_collection_deletes_no_snapshot(
    project: pytest.Pytester, module: str, exit_code: pytest.ExitCode
) -> None:
    # syrupy takes every snapshot of a run stopped after collection for unused, and
    # --snapshot-update (in every re-record command with transcripts) deletes them
    snapshots = project.path / "__snapshots__" / "test_kept"
    snapshots.mkdir(parents=True)
    (snapshots / "test_kept.ambr").write_text("# serializer version: 1\n")
    project.makepyfile(
        test_kept="""
        def test_kept(snapshot):
            assert snapshot == "kept"
        """,
        test_stops=module,
    )
    result = project.runpytest("--dsh-record=all", "--snapshot-update")
    assert result.ret == exit_code
    if exit_code == pytest.ExitCode.USAGE_ERROR:
        result.stderr.fnmatch_lines(["*would both record*"])
    assert (snapshots / "test_kept.ambr").read_text() == "# serializer version: 1\n"


def test_xdist_workers_record_in_parallel(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    project.makepyfile(
        test_par="""
        import pytest
        from agent import run

        CASES = [pytest.param(n, marks=pytest.mark.dsh_scenario(f"p{n}")) for n in range(6)]

        @pytest.mark.parametrize("n", CASES)
        def test_record(dsh_replay, n):
            assert run(dsh_replay.model, f"q{n}", children=n % 2) [0] == f"live: q{n}"
        """
    )
    result = project.runpytest("-n", "2", "--dsh-record")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*0 replayed, 6 recorded, 0 missing*"])
    for n in range(6):
        assert (project.path / "recordings" / f"p{n}" / "session.jsonl").exists()
    # What the workers wrote replays (keyless); replaying on workers is checked by
    # test_endpoint_plugin.py and test_fixture.py, so one serial run is enough here.
    project.makeconftest("")
    replayed = project.runpytest("-p", "no:randomly")
    replayed.assert_outcomes(passed=6)
    replayed.stdout.fnmatch_lines(["*6 replayed, 0 recorded, 0 missing*"])


def test_record_without_a_live_model_stops_at_start_up(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_x(dsh_replay): pass")
    for name in ("DSH_RECORD_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_MODEL"):
        pytester._monkeypatch.delenv(name, raising=False)
    result = pytester.runpytest("--dsh-record")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--dsh-record needs a live model: set DSH_RECORD_BASE_URL, DSH_RECORD_API_KEY*"]
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "    ScriptedModel([Rule(Answer(text='hi'))])  # the return forgotten",
            "*pytest_dsh_replay_live_model (*conftest.py:3) returned None; return the live "
            "model (an object with stream(request, **options))*",
        ),
        (
            "    return Answer(text='hi')  # the answer, not a model",
            "*pytest_dsh_replay_live_model returned Answer (Answer(text='hi'*) to record "
            "*; expected a live model: an object with stream(request, **options)*",
        ),
    ],
    ids=["returns-none", "returns-an-answer"],
)
def test_a_live_model_hook_that_gives_no_model_is_named(
    pytester: pytest.Pytester, body: str, expected: str
) -> None:
    for name in ("DSH_RECORD_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_MODEL"):
        pytester._monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(
        "from pytest_dsh_replay import Answer, Rule, ScriptedModel\n\n"
        "def pytest_dsh_replay_live_model(config, scenario_path):\n" + body + "\n"
    )
    pytester.makepyfile(
        "def test_x(dsh_replay):\n"
        "    list(dsh_replay.model.stream({'messages': [{'role': 'user', 'content': 'q'}]}))\n"
    )
    result = pytester.runpytest("--dsh-record=missing")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([expected])


def test_first_live_model_hook_answer_wins(project: pytest.Pytester) -> None:
    project.makeconftest(
        CONFTEST
        + """
class Special(FakeLive):
    def stream(self, request, **kwargs):
        yield from super().stream({"messages": [{"content": "special"}]})

class SpecialScenarios:
    @pytest.hookimpl(tryfirst=True)
    def pytest_dsh_replay_live_model(self, config, scenario_path):
        return Special() if scenario_path.name == "special" else None

def pytest_configure(config):
    config.pluginmanager.register(SpecialScenarios())
"""
    )
    project.makepyfile(
        test_hooks="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("special")
        def test_special(dsh_replay):
            assert run(dsh_replay.model, "x") == ["live: special"]

        @pytest.mark.dsh_scenario("plain")
        def test_plain(dsh_replay):
            assert run(dsh_replay.model, "x") == ["live: x"]
        """
    )
    project.runpytest("--dsh-record").assert_outcomes(passed=2)


def test_a_plain_agent_s_children_bind_by_task_in_any_order(project: pytest.Pytester) -> None:
    # The agent never touches dsh_replay.sessions; the recorder keeps each child's task
    # (its first user message), so a replay that starts the children in the other order
    # still gives each child its own answers.
    project.makepyfile(
        test_plain="""
        import uuid
        import pytest
        from agent import ask

        def run(model, order):
            parent = "p-" + uuid.uuid4().hex
            ask(model, "plan", parent)
            return {task: ask(model, task, "c-" + uuid.uuid4().hex, parent) for task in order}

        @pytest.mark.dsh_scenario("plain")
        def test_plain(dsh_replay):
            order = ["alpha", "beta"]
            if dsh_replay.mode == "replay":
                order.reverse()
            assert run(dsh_replay.model, order) == {"alpha": "live: alpha", "beta": "live: beta"}

        @pytest.mark.dsh_scenario("plain", record=False)
        def test_transcript(dsh_replay, dsh_transcript):
            run(dsh_replay.model, ["alpha", "beta"])
            assert dsh_replay.transcript() == dsh_transcript
        """
    )
    project.runpytest("--dsh-record", "-k", "not transcript").assert_outcomes(
        passed=1, deselected=1
    )
    project.makeconftest("")
    project.runpytest("--snapshot-update").assert_outcomes(passed=2)
    transcript = (project.path / "__snapshots__" / "test_plain" / "test_transcript.md").read_text()
    # Sessions are numbered as the recording stores them (docs/checks.md#session-order):
    # {{id-2}} is the child in session.1.jsonl, whichever of the two that is.
    first_child = load_scenario(project.path / "recordings" / "plain").scripts[1].first_user_text
    assert first_child in ("alpha", "beta")
    heading = "# Session {{id-2}} (child of {{id-1}}, spawn)\n\n## Turn 1\n\n**User**\n\n> "
    assert heading + first_child in transcript
    assert "> live: alpha" in transcript
    project.runpytest().assert_outcomes(passed=2)


def test_modules_side_by_side_never_share_a_default_scenario(pytester: pytest.Pytester) -> None:
    for module in ("test_one", "test_two"):
        pytester.makepyfile(**{module: "def test_same(dsh_replay):\n    pass\n"})
    result = pytester.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*looked at: */dsh_snapshots/test_one.test_same",
            "*looked at: */dsh_snapshots/test_two.test_same",
        ],
        consecutive=False,
    )


def test_no_summary_when_no_test_uses_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "scenarios:" not in result.stdout.str()


def test_recording_over_a_single_log_file_is_refused(project: pytest.Pytester) -> None:
    log = make_scenario(project.path / "recordings" / "d", primary=["x"]) / "session.jsonl"
    before = log.read_bytes()
    project.makepyfile(
        test_file=f"""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario({str(log)!r})
        def test_file(dsh_replay):
            run(dsh_replay.model, "x")
        """
    )
    result = project.runpytest("--dsh-record")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*cannot record into*: it is a file*"])
    assert log.read_bytes() == before


def test_recording_into_a_directory_of_other_files_is_refused_and_deletes_nothing(
    project: pytest.Pytester,
) -> None:
    docs = project.path / "recordings" / "docs"  # inside the snapshot root
    (docs / "img").mkdir(parents=True)
    (docs / "README.md").write_text("keep me")
    (docs / "img" / "a.png").write_bytes(b"png")
    project.makepyfile(
        test_into_docs="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("docs")
        def test_docs(dsh_replay):
            run(dsh_replay.model, "x")
        """
    )
    result = project.runpytest("--dsh-record=all")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*cannot write scenario *docs: the directory holds README.md, img, which are no*"]
    )
    assert (docs / "README.md").read_text() == "keep me"
    assert sorted(p.name for p in docs.rglob("*")) == ["README.md", "a.png", "img"]


def test_a_replay_error_in_process_the_test_never_saw_is_its_failure_first(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(
        test_threads="""
        import os
        import threading

        import pytest
        from agent import ask

        @pytest.mark.dsh_scenario("threads")
        def test_swallowed(dsh_replay):
            ask(dsh_replay.model, "main", "parent")
            for n in range(int(os.environ.get("KIDS", "1"))):
                try:
                    ask(dsh_replay.model, f"kid {n}", f"kid-{n}", "parent")
                except Exception:
                    pass  # an agent that swallows what its model raised

        @pytest.mark.dsh_scenario("threaded")
        def test_threaded(dsh_replay):
            answers = []
            ask(dsh_replay.model, "main", "parent")
            kids = [
                threading.Thread(
                    target=lambda n=n: answers.append(
                        ask(dsh_replay.model, f"kid {n}", f"kid-{n}", "parent")
                    )
                )
                for n in range(int(os.environ.get("KIDS", "1")))
            ]
            for kid in kids:
                kid.start()
            for kid in kids:
                kid.join()
            assert len(answers) == len(kids)  # the agent's own check fails after
        """
    )
    project.runpytest("--dsh-record=all", "-p", "no:randomly").assert_outcomes(passed=2)
    monkeypatch.setenv("KIDS", "2")
    result = project.runpytest("-p", "no:randomly", "-W", "ignore")
    result.assert_outcomes(failed=2)
    for name in ("test_swallowed", "test_threaded"):
        section = result.stdout.str().split(f"_ {name} _")[1].split("short test summary")[0]
        lines = [line for line in section.splitlines() if line.strip("_ ")]
        assert lines[0].startswith("ReplayBindingError: session 'kid-1'"), section
        assert "(a model call in process met this error, and the code under test did not" in (
            section
        )


def test_a_re_record_says_which_override_sidecars_it_replaced(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_side="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("side")
        def test_side(dsh_replay):
            run(dsh_replay.model, "x")
        """
    )
    project.runpytest("--dsh-record=all").assert_outcomes(passed=1)
    scenario = project.path / "recordings" / "side"
    (scenario / "replay.override.json").write_text('{"patches": []}')
    project.runpytest().assert_outcomes(passed=1)
    result = project.runpytest("--dsh-record=all")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"recorded {scenario}: 1 session, 1 model call",
            "  the new recording replaced the directory and its override sidecars "
            "(replay.override.json): add them back from version control if they still apply*",
        ]
    )
    assert sorted(p.name for p in scenario.iterdir()) == ["session.jsonl"]


@pytest.mark.parametrize("when", ["before-the-swap", "after-the-swap"])
def test_ctrl_c_while_the_recording_is_written_keeps_the_transcript_it_goes_with(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    from pytest_dsh_replay._store import atomic

    project.makepyfile(
        test_q="""
        import os

        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("q")
        def test_q(dsh_replay, dsh_transcript):
            run(dsh_replay.model, os.environ.get("QUESTION", "first"))
            assert dsh_replay.transcript() == dsh_transcript
        """
    )
    flags = ("--dsh-record=all", "--snapshot-update", "-p", "no:randomly", "-p", "no:cacheprovider")
    project.runpytest(*flags).assert_outcomes(passed=1)
    (transcript,) = (project.path / "__snapshots__").rglob("*.md")
    recording = project.path / "recordings" / "q" / "session.jsonl"
    before = (transcript.read_bytes(), recording.read_bytes())
    assert b"first" in before[0]

    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C in the middle of the write: the old stays

    exchange = atomic._exchange

    def interrupted_after(*args: Any) -> bool:
        if not exchange(*args):  # the new recording takes its place, then Ctrl-C
            pytest.skip("this file system cannot exchange two directories")
        raise KeyboardInterrupt

    if when == "before-the-swap":
        monkeypatch.setattr(atomic, "_swap_into_place", interrupted)
    else:
        monkeypatch.setattr(atomic, "_exchange", interrupted_after)
    monkeypatch.setenv("QUESTION", "second")
    result = project.runpytest_inprocess(*flags, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    after = (transcript.read_bytes(), recording.read_bytes())
    if when == "before-the-swap":
        assert after == before
        result.stdout.fnmatch_lines(["*1 not written*old recording kept*"])
    else:  # both new: the transcript goes with the recording in place
        assert b"second" in after[0]
        assert b"second" in after[1]
        result.stdout.fnmatch_lines(["*1 recorded*"])


@pytest.mark.parametrize("flags", [(), ("--dsh-record=all",)], ids=["replay", "record"])
def test_a_scenario_name_too_long_for_a_directory_fails_its_test_only(
    project: pytest.Pytester, flags: tuple[str, ...]
) -> None:
    project.makepyfile(
        test_long="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("x" * 300)
        def test_long(dsh_replay):
            run(dsh_replay.model, "x")

        def test_other():
            pass
        """
    )
    result = project.runpytest(*flags)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*'xxxx*... is 300 bytes long, and a scenario name holds*"])
    assert "INTERNALERROR" not in result.stdout.str()


def test_an_interrupted_run_deletes_no_transcript_and_calls_no_scenario_unused(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(
        test_two="""
        import os

        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("first")
        def test_first(dsh_replay, dsh_transcript):
            run(dsh_replay.model, "one")
            if os.environ.get("INTERRUPT"):
                raise KeyboardInterrupt  # Ctrl-C while the test runs
            assert dsh_replay.transcript() == dsh_transcript

        @pytest.mark.dsh_scenario("second")
        def test_second(dsh_replay, dsh_transcript):
            run(dsh_replay.model, "two")
            assert dsh_replay.transcript() == dsh_transcript
        """
    )
    flags = ("--snapshot-update", "-p", "no:randomly", "-p", "no:cacheprovider")
    project.runpytest("--dsh-record=all", *flags).assert_outcomes(passed=2)
    snapshots = sorted(p.name for p in (project.path / "__snapshots__").rglob("*.md"))
    assert snapshots == ["test_first.md", "test_second.md"]
    monkeypatch.setenv("INTERRUPT", "1")
    # (no_reraise_ctrlc: the inner run's interrupt must not interrupt this test's run)
    result = project.runpytest_inprocess("--dsh-fail-unused", *flags, no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert sorted(p.name for p in (project.path / "__snapshots__").rglob("*.md")) == snapshots
    assert "deleted" not in result.stdout.str()
    assert "unused scenarios" not in result.stdout.str()
    assert "FAIL:" not in result.stdout.str()


def test_re_recording_unchanged_behaviour_keeps_the_files(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_stable="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("stable")
        def test_stable(dsh_replay):
            run(dsh_replay.model, "same question")
        """
    )
    project.runpytest("--dsh-record").assert_outcomes(passed=1)
    scenario = project.path / "recordings" / "stable"
    before = digest(scenario)
    again = project.runpytest("--dsh-record")  # new session ids and times, same behaviour
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(
        ["recorded *stable: 1 session, 1 model call, unchanged (files kept as they were)"]
    )
    assert digest(scenario) == before


def test_a_replay_after_a_recording_in_the_same_run_replays_the_new_recording(
    project: pytest.Pytester,
) -> None:
    # The run loads a scenario once (docs/scenarios.md#loaded-once); a recording in the
    # run must drop what was loaded before it, for the replay and for the log check.
    make_scenario(project.path / "recordings" / "again", ask="hello", primary=["old answer"])
    project.makepyfile(
        test_again="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("again", record=False)
        def test_1_before(dsh_replay):
            assert run(dsh_replay.model, "hello") == ["old answer"]

        @pytest.mark.dsh_scenario("again")
        def test_2_records(dsh_replay):
            assert run(dsh_replay.model, "hello") == ["live: hello"]

        @pytest.mark.dsh_scenario("again", record=False)
        def test_3_after(dsh_replay):
            assert run(dsh_replay.model, "hello") == ["live: hello"]
        """
    )
    result = project.runpytest("--dsh-record", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*scenarios: 2 replayed, 1 recorded, 0 missing*"])


# The first recorder says, through a pipe, that it is inside its live call, then waits
# for the test to let it go; any later recorder answers at once.
RACING_LIVE = """
import os

from pytest_dsh_replay import Answer, ScriptedModel

def answer(request):
    ready, go = os.environ.pop("RACE_READY_FD", None), os.environ.pop("RACE_GO_FD", None)
    if ready is not None:
        os.write(int(ready), b"recording\\n")
        os.close(int(ready))
        os.read(int(go), 1)  # returns when the test writes or closes its end
    return Answer(text=f"recorded by {os.getpid()}")

def pytest_dsh_replay_live_model(config, scenario_path):
    return ScriptedModel(default=answer)
"""


def test_two_processes_recording_one_scenario_one_records_the_other_is_refused(
    project: pytest.Pytester,
) -> None:
    # Both once reported "1 recorded", and the last writer won silently.
    pytest.importorskip("fcntl", reason="the recording lock is an flock (POSIX only)")
    project.makeconftest(RACING_LIVE)
    project.makepyfile(
        test_shared="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("shared")
        def test_shared(dsh_replay):
            run(dsh_replay.model, "q")
        """
    )
    command = [sys.executable, "-m", "pytest", "--dsh-record=all", "-p", "no:cacheprovider"]
    command += ["-p", "no:randomly", "test_shared.py"]
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    env = {**os.environ, "RACE_READY_FD": str(ready_w), "RACE_GO_FD": str(go_r)}
    first = subprocess.Popen(
        command,
        cwd=project.path,
        env=env,
        pass_fds=(ready_w, go_r),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    os.close(ready_w)
    os.close(go_r)
    try:
        with os.fdopen(ready_r, "rb") as ready:  # EOF, not a hang, if the first one died
            assert ready.readline() == b"recording\n", "the first recorder never got to its call"
        second = subprocess.run(
            command, cwd=project.path, capture_output=True, text=True, timeout=300
        )
    finally:
        os.close(go_w)  # the first recorder goes on
        out, _ = first.communicate(timeout=300)
    pytest.LineMatcher(out.splitlines()).fnmatch_lines(
        ["scenarios: 0 replayed, 1 recorded, 0 missing*", "*1 passed*"]
    )
    pytest.LineMatcher(second.stdout.splitlines()).fnmatch_lines(
        [
            "cannot record the dsh scenario for test_shared.py::test_shared:",
            f"  cannot record */recordings/shared: another process (pid {first.pid}: "
            "test_shared.py::test_shared) is recording it right now*",
            "scenarios: 0 replayed, 0 recorded, 0 missing*",
            "*1 error*",
        ]
    )
    assert "recorded by" not in second.stdout  # its live model was never called
    scenario = project.path / "recordings" / "shared"
    assert f"recorded by {first.pid}".encode() in (scenario / "session.jsonl").read_bytes()
    assert sorted(p.name for p in scenario.parent.iterdir()) == ["shared"]  # no lock left


def test_a_replay_only_tests_hints_name_the_recording_test_with_its_flags(
    pytester: pytest.Pytester,
) -> None:
    # the recording test has a transcript: both of the hints record it with
    # --snapshot-update, and both name it (the collected tests were read by one of them)
    pytester.makeconftest(
        """
        from pytest_dsh_replay import Answer, ScriptedModel

        def pytest_dsh_replay_live_model(config, scenario_path):
            return ScriptedModel([], default=Answer(text="ok"))
        """
    )
    pytester.makepyfile(
        test_rec="""
        import pytest

        REQUEST = {"messages": [{"role": "user", "content": "hi"}]}

        @pytest.mark.dsh_scenario("multi")
        def test_multi(dsh_replay, dsh_transcript):
            list(dsh_replay.model.stream(REQUEST))
            assert dsh_replay.transcript() == dsh_transcript
        """,
        test_only="""
        import pytest
        from test_rec import REQUEST

        @pytest.mark.dsh_scenario("multi", record=False)
        def test_more(dsh_replay):
            for _ in range(2):
                list(dsh_replay.model.stream(REQUEST))
        """,
    )
    pytester.makeini("[pytest]\npythonpath = .\n")
    recorded = pytester.runpytest("--dsh-record=all", "--snapshot-update", "test_rec.py")
    recorded.assert_outcomes(passed=1)
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ReplayExhaustedError:*re-record: pytest --dsh-record=all --snapshot-update "
            "test_rec.py::test_multi, or keep the recorded calls and append the new ones: "
            "pytest --dsh-record=new --snapshot-update test_rec.py::test_multi*"
        ]
    )


def test_a_conftest_s_live_model_hook_answers_for_its_own_directory(
    pytester: pytest.Pytester,
) -> None:
    # Each package's conftest gave a model; the last one registered answered for both,
    # so package a's test was recorded from package b's model.
    for name in ("DSH_RECORD_BASE_URL", "DSH_RECORD_API_KEY", "DSH_RECORD_MODEL"):
        pytester._monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(
        "import pytest\n\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_dsh_replay_live_model(config, scenario_path):\n"
        "    return None\n"
    )
    for name in ("a", "b"):
        package = pytester.mkpydir(f"pkg_{name}")
        (package / "conftest.py").write_text(
            "from pytest_dsh_replay import Answer, ScriptedModel\n\n"
            f"MODEL = ScriptedModel([], default=Answer(text='model of {name}'))\n\n"
            "def pytest_dsh_replay_live_model(config, scenario_path):\n"
            "    return MODEL\n"
        )
        (package / f"test_{name}.py").write_text(
            f"def test_{name}(dsh_replay):\n"
            "    request = {'messages': [{'role': 'user', 'content': 'who?'}]}\n"
            "    chunks = dsh_replay.model.stream(request, session_id='s')\n"
            "    text = ''.join(c.get('text', '') for c in chunks if c['type'] == 'text-delta')\n"
            f"    assert text == 'model of {name}'\n"
        )
    result = pytester.runpytest("--dsh-record=missing", "pkg_a", "pkg_b")
    result.assert_outcomes(passed=2)


def test_a_model_call_in_a_fixture_s_teardown_is_not_recorded_and_says_why(
    project: pytest.Pytester,
) -> None:
    # The recording held the teardown's call, and its very first replay failed: the
    # calls are checked when the body ends, before any teardown.
    project.makepyfile(
        test_late="""
        import pytest
        from agent import run

        @pytest.fixture
        def agent(dsh_replay):
            yield dsh_replay
            run(dsh_replay.model, "summarize")

        @pytest.mark.dsh_scenario("late")
        def test_late(agent):
            run(agent.model, "q")
        """
    )
    result = project.runpytest("--dsh-record")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "test_late.py::test_late: 1 model call(s) were made after the test body ended "
            "(in a fixture's teardown), so */recordings/late was not recorded*",
            "*1 not recorded (the test did not pass; nothing was written)*",
        ]
    )
    assert not (project.path / "recordings" / "late").exists()


def test_a_test_that_skips_itself_after_its_model_calls_is_recorded_and_replays(
    project: pytest.Pytester,
) -> None:
    # It was never recorded ("the test did not pass"), and its replay then asked to record
    # it with a command that could not.
    project.makepyfile(
        test_skips="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("skips")
        def test_skips(dsh_replay):
            run(dsh_replay.model, "q")
            pytest.skip("the feature flag is off")

        @pytest.mark.xfail(reason="a known bug")
        @pytest.mark.dsh_scenario("fails")
        def test_fails(dsh_replay):
            run(dsh_replay.model, "q")
            assert False

        @pytest.mark.dsh_scenario("not-here")
        def test_not_here(dsh_replay):
            pytest.skip("not on this platform")  # before any call: nothing to record
        """
    )
    recorded = project.runpytest("--dsh-record", "-rs")
    recorded.assert_outcomes(skipped=2, xfailed=1)
    recorded.stdout.fnmatch_lines(["*recorded */recordings/skips: 1 session, 1 model call*"])
    assert (project.path / "recordings" / "skips" / "session.jsonl").exists()
    assert not (project.path / "recordings" / "fails").exists()
    assert not (project.path / "recordings" / "not-here").exists()
    replayed = project.runpytest("-p", "no:randomly", "-k", "not not_here")
    replayed.assert_outcomes(skipped=1, xfailed=1)
