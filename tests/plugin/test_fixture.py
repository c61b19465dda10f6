"""The dsh_replay fixture in replay mode, run through pytester as users run it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.scenarios import make_scenario

AGENT = """
def run(model, session_id="live-1"):
    out = []
    for chunk in model.stream({"messages": []}, session_id=session_id):
        if chunk["type"] == "text-delta":
            out.append(chunk["text"])
    return "".join(out)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(agent=AGENT)
    return pytester


def test_replays_a_recorded_scenario(project: pytest.Pytester) -> None:
    make_scenario(project.path / "recordings" / "hello", primary=["hi", "again"])
    project.makepyfile(
        """
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("hello")
        def test_hello(dsh_replay):
            assert dsh_replay.mode == "replay"
            assert dsh_replay.path.name == "hello"
            assert [s.file for s in dsh_replay.scenario.scripts] == ["session.jsonl"]
            assert run(dsh_replay.model) == "hi"
            assert run(dsh_replay.model) == "again"
            assert [s.id for s in dsh_replay.sessions.sessions()] == ["live-1"]
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing, 0 unused*"])


def test_missing_scenario_fails_with_the_path_and_the_record_command(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_missing="""
        def test_new_agent(dsh_replay):
            raise AssertionError("the test body must not run")
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)  # at set-up, with the real message
    result.stdout.fnmatch_lines(
        [
            "*no recorded dsh scenario for test_missing.py::test_new_agent",
            f"*looked at: {project.path / 'recordings' / 'test_missing.test_new_agent'}",
            "*record it: pytest --dsh-record=missing test_missing.py::test_new_agent",
        ]
    )
    assert "the test body must not run" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*scenarios: 0 replayed, 0 recorded, 1 missing*"])


def test_unused_calls_fail_the_test_not_error_it(project: pytest.Pytester) -> None:
    make_scenario(project.path / "recordings" / "two", primary=["a", "b", "c"], child1=["x"])
    project.makepyfile(
        """
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("two")
        def test_one_call(dsh_replay):
            run(dsh_replay.model)

        @pytest.mark.dsh_scenario("two")
        def test_explicit(dsh_replay):
            run(dsh_replay.model)
            dsh_replay.assert_consumed()
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=2)
    text = result.stdout.str()
    assert text.count("session live-1 consumed 1/3 recorded call(s)") >= 2 or re.search(
        r"live-1.*1.*3", text
    ), text
    assert "ERROR" not in text.split("short test summary")[-1]


def test_a_scenario_that_does_not_load_fails_with_the_core_message(
    project: pytest.Pytester,
) -> None:
    broken = project.path / "recordings" / "broken"
    broken.mkdir(parents=True)
    (broken / "session.jsonl").write_text('{"type":"session"}\n{"type": oops}\n')
    project.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("broken")
        def test_broken(dsh_replay):
            pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*does not load*",
            "*session.jsonl:2: invalid JSON*",
            # the way out: --dsh-record=missing would leave the broken recording as it is
            "*re-record it: pytest --dsh-record=all *.py::test_broken",
        ]
    )


def test_a_broken_override_sidecar_is_to_be_fixed_not_re_recorded(
    project: pytest.Pytester,
) -> None:
    # a re-record replaces the whole directory: the hand-written sidecar would be gone
    scenario = project.path / "recordings" / "ovr"
    make_scenario(scenario, primary=["hi"])
    (scenario / "replay.override.json").write_text('{"calls": {}, "bogus": 1}')
    project.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("ovr")
        def test_ovr(dsh_replay):
            pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*does not load*",
            "*replay.override.json: invalid override*",
            "*fix the sidecar (the docs' Override sidecars section of the Scenarios page); "
            "re-recording would delete it with the old recording",
        ]
    )
    assert "--dsh-record" not in result.stdout.str()


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["serial", "xdist"])
def test_the_summary_counts_a_scenario_that_does_not_load(
    project: pytest.Pytester, workers: list[str]
) -> None:
    if workers:
        pytest.importorskip("xdist")
    make_scenario(project.path / "recordings" / "good", primary=["hi"])
    gap = make_scenario(project.path / "recordings" / "gap", primary=["a"], child1=["x"])
    (gap / "session.1.jsonl").rename(gap / "session.2.jsonl")  # children must be contiguous
    project.makepyfile(
        test_three="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("good")
        def test_good(dsh_replay):
            assert run(dsh_replay.model) == "hi"

        @pytest.mark.dsh_scenario("absent")
        def test_absent(dsh_replay):
            pass

        @pytest.mark.dsh_scenario("gap")
        def test_gap(dsh_replay):
            pass
        """
    )
    result = project.runpytest(*workers, "test_three.py")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*child session logs must be contiguous*",
            "*scenarios: 1 replayed, 0 recorded, 1 missing, 1 broken (the recording does "
            "not load)*",
        ],
        consecutive=False,
    )


def test_parametrized_and_odd_names_stay_inside_the_root_and_apart(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_names="""
        import pytest

        @pytest.mark.parametrize("x", ["a/b", "..", "../../etc", "ünï", "a_b", "x" * 300])
        def test_p(dsh_replay, x):
            pass

        class TestGroup:
            def test_p(self, dsh_replay):
                pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=7)
    # (Under CI pytest repeats each message in its short summary: count distinct paths.)
    looked = sorted(set(re.findall(r"looked at: (\S+)", result.stdout.str())))
    assert len(looked) == 7
    root = (project.path / "recordings").resolve()
    for path in looked:
        p = Path(path.strip())
        assert p.parent.resolve() == root, p
        assert len(p.name) <= 100
        assert not p.name.startswith(".")


def test_default_root_is_beside_the_test_module(pytester: pytest.Pytester) -> None:
    # The default name is <module>.<test>, so two modules side by side never collide.
    pytester.makepyfile(agent=AGENT)
    sub = pytester.mkpydir("pkg")
    make_scenario(sub / "dsh_snapshots" / "test_mod.test_here", primary=["ok"])
    (sub / "test_mod.py").write_text(
        "from agent import run\n\n"
        "def test_here(dsh_replay):\n"
        "    assert run(dsh_replay.model) == 'ok'\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--rootdir", str(pytester.path))
    result.assert_outcomes(passed=1)


def test_unused_scenarios_are_counted_only_on_a_complete_run(project: pytest.Pytester) -> None:
    make_scenario(project.path / "recordings" / "used", primary=["u"])
    make_scenario(project.path / "recordings" / "stale", primary=["s"])
    project.makepyfile(
        """
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("used")
        def test_used(dsh_replay):
            run(dsh_replay.model)

        def test_other():
            pass
        """
    )
    full = project.runpytest()
    full.assert_outcomes(passed=2)
    full.stdout.fnmatch_lines(["*1 replayed, 0 recorded, 0 missing, 1 unused", "*recordings/stale"])
    for subset in (
        ["-k", "used"],
        ["-k", "other"],
        ["test_unused_scenarios_are_counted_only_on_a_complete_run.py::test_used"],
    ):
        result = project.runpytest(*subset)
        assert not re.search(r"\d+ unused", result.stdout.str()), subset
    fail = project.runpytest("--dsh-fail-unused")
    assert fail.ret == pytest.ExitCode.TESTS_FAILED
    fail.stdout.fnmatch_lines(
        [
            "*unused scenarios (failing the run (--dsh-fail-unused)):*",
            "*recordings/stale",
            "FAIL: 1 unused scenario (--dsh-fail-unused): the run fails with exit status 1 *",
            "*= 2 passed in *",
        ]
    )
    assert "FAIL:" not in full.stdout.str()


def test_a_run_started_in_a_subdirectory_is_a_subset(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pytest chose the subdirectory as its argument: the other directories' recordings
    # were called unused, and --dsh-fail-unused failed the run.
    for name in ("a", "b"):
        make_scenario(project.path / "recordings" / name, primary=["u"])
        sub = project.mkpydir(f"tests_{name}")
        (sub / f"test_{name}.py").write_text(
            "import pytest\nfrom agent import run\n\n"
            f"@pytest.mark.dsh_scenario({name!r})\n"
            f"def test_{name}(dsh_replay):\n    run(dsh_replay.model)\n"
        )
    monkeypatch.chdir(project.path / "tests_a")
    result = project.runpytest("--dsh-fail-unused", "--rootdir", str(project.path))
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*scenarios: 1 replayed, 0 recorded, 0 missing*"])
    assert not re.search(r"\d+ unused", result.stdout.str())
    monkeypatch.chdir(project.path)  # the rootdir: every test, so a complete run
    result = project.runpytest("--dsh-fail-unused")
    result.stdout.fnmatch_lines(["*scenarios: 2 replayed, 0 recorded, 0 missing, 0 unused*"])


def test_a_skipped_tests_scenario_is_in_use_and_lf_or_ignore_runs_are_not_complete(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("used", "elsewhere", "other"):
        make_scenario(project.path / "recordings" / name, primary=["u"])
    project.makepyfile(
        test_a="""
        import os
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("used")
        def test_used(dsh_replay):
            run(dsh_replay.model)
            assert not os.environ.get("BREAK")

        @pytest.mark.skipif(True, reason="runs on another platform")
        @pytest.mark.dsh_scenario("elsewhere")
        def test_elsewhere(dsh_replay):
            run(dsh_replay.model)
        """,
        test_b="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("other")
        def test_other(dsh_replay):
            run(dsh_replay.model)
        """,
    )
    # a platform's skipped test still uses its recording (as syrupy keeps its snapshots)
    whole = project.runpytest("--dsh-fail-unused", "-p", "no:randomly")
    whole.assert_outcomes(passed=2, skipped=1)
    assert whole.ret == pytest.ExitCode.OK
    whole.stdout.fnmatch_lines(["scenarios: 2 replayed, 0 recorded, 0 missing, 0 unused"])
    monkeypatch.setenv("BREAK", "1")
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=1, failed=1, skipped=1)
    monkeypatch.delenv("BREAK")
    # --lf collects only the failed test's module; --ignore leaves a module out: neither
    # run is complete, so no recording is called unused
    for narrowed in (["--lf"], ["--ignore=test_b.py"]):
        result = project.runpytest("--dsh-fail-unused", "-p", "no:randomly", *narrowed)
        assert result.ret == pytest.ExitCode.OK, narrowed
        assert not re.search(r"\d+ unused", result.stdout.str()), narrowed


def test_xdist_workers_report_to_the_controller(project: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    for n in range(4):
        make_scenario(project.path / "recordings" / f"s{n}", primary=[f"t{n}"])
    make_scenario(project.path / "recordings" / "stale", primary=["s"])
    project.makepyfile(
        test_xd="""
        import pytest
        from agent import run

        CASES = [pytest.param(n, marks=pytest.mark.dsh_scenario(f"s{n}")) for n in range(4)]

        @pytest.mark.parametrize("n", CASES)
        def test_each(dsh_replay, n):
            assert run(dsh_replay.model) == f"t{n}"
        """
    )
    serial = project.runpytest("-p", "no:randomly", "test_xd.py")
    serial.assert_outcomes(passed=4)
    result = project.runpytest("-n", "2", "test_xd.py")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*scenarios: 4 replayed, 0 recorded, 0 missing*"])


def test_async_tests_use_astream(project: pytest.Pytester) -> None:
    make_scenario(project.path / "recordings" / "aio", primary=["async hello"])
    project.makepyfile(
        """
        import pytest

        async def arun(model):
            stream = model.astream({"messages": []}, session_id="a")
            return "".join([c["text"] async for c in stream if c["type"] == "text-delta"])

        @pytest.mark.asyncio
        @pytest.mark.dsh_scenario("aio")
        async def test_asyncio(dsh_replay):
            assert await arun(dsh_replay.model) == "async hello"

        @pytest.mark.anyio
        @pytest.mark.dsh_scenario("aio")
        async def test_anyio(dsh_replay):
            assert await arun(dsh_replay.model) == "async hello"

        @pytest.fixture
        def anyio_backend():
            return "asyncio"
        """
    )
    result = project.runpytest("-p", "anyio")  # inner runs leave it out (inner_runs.py)
    result.assert_outcomes(passed=2)


def test_configure_hook_sees_every_fixture_value(project: pytest.Pytester) -> None:
    make_scenario(project.path / "recordings" / "hooked", primary=["x"])
    project.makeconftest(
        """
        seen = []

        def pytest_dsh_replay_configure(config, replay):
            seen.append(replay.path.name)
            replay.configured_by_conftest = True
        """
    )
    project.makepyfile(
        """
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("hooked")
        def test_hooked(dsh_replay):
            assert dsh_replay.configured_by_conftest
            run(dsh_replay.model)
        """
    )
    project.runpytest().assert_outcomes(passed=1)


def test_errors_surface_at_set_up_also_through_another_fixture(
    project: pytest.Pytester,
) -> None:
    broken = project.path / "recordings" / "broken"
    broken.mkdir(parents=True)
    (broken / "session.jsonl").write_text('{"type":"session"}\n{"type": oops}\n')
    project.makepyfile(
        test_indirect="""
        import pytest

        @pytest.fixture
        def agent_model(dsh_replay):
            return dsh_replay.model

        @pytest.mark.dsh_scenario("nowhere")
        def test_missing(agent_model):
            pass

        @pytest.mark.dsh_scenario("broken")
        def test_broken(agent_model):
            pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*no recorded dsh scenario for test_indirect.py::test_missing",
            "*record it: pytest --dsh-record=missing test_indirect.py::test_missing",
            "*does not load*",
            "*session.jsonl:2: invalid JSON*",
        ],
        consecutive=False,
    )
    text = result.stdout.str()
    assert "NoneType" not in text
    assert "AttributeError" not in text


HINT_TESTS = """
import pytest
from agent import run

@pytest.mark.parametrize("n", [1])
@pytest.mark.dsh_scenario("shared")
def test_records(dsh_replay, n):
    run(dsh_replay.model)

@pytest.mark.dsh_scenario("shared", record=False)
def test_replays_too_little(dsh_replay):
    pass

@pytest.mark.parametrize("n", ["a b"])
@pytest.mark.dsh_scenario("fresh")
def test_records_fresh(dsh_replay, n):
    run(dsh_replay.model)

@pytest.mark.dsh_scenario("fresh", record=False)
def test_replays_fresh(dsh_replay):
    run(dsh_replay.model)
"""


def test_hints_of_a_replay_only_test_name_the_test_that_records(
    project: pytest.Pytester,
) -> None:
    make_scenario(project.path / "recordings" / "shared", primary=["hi"])
    project.makepyfile(test_hint=HINT_TESTS)
    result = project.runpytest("-k", "replays")
    result.assert_outcomes(failed=1, errors=1, deselected=2)
    result.stdout.fnmatch_lines(
        [
            # Node ids are quoted: zsh reads [...] as a glob.
            "*record it: pytest --dsh-record=missing 'test_hint.py::test_records_fresh[[]a b[]]'",
            "*re-record: pytest --dsh-record=all 'test_hint.py::test_records[[]1[]]')",
        ],
        consecutive=False,
    )
    # When the recording test is not collected, the hint says what to do instead.
    alone = project.runpytest("test_hint.py::test_replays_too_little")
    alone.assert_outcomes(failed=1)
    alone.stdout.fnmatch_lines(
        ["*run the test that records *shared with --dsh-record=all (not in this run; "
         "test_hint.py::test_replays_too_little only replays it: dsh_scenario(*"]
    )  # fmt: skip
    assert "--dsh-record=all test_hint.py::test_replays_too_little" not in alone.stdout.str()
    # said once (no append half); newer pytest repeats whole messages in the summary
    assert alone.stdout.str().split("short test summary")[0].count("only replays it") == 1


def test_collect_only_passes_and_reports_no_leftover_scenario_or_snapshot(
    project: pytest.Pytester,
) -> None:
    make_scenario(project.path / "recordings" / "used", primary=["u"])
    project.makepyfile(
        """
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("used")
        def test_used(dsh_replay, dsh_transcript):
            run(dsh_replay.model)
            assert dsh_replay.transcript() == dsh_transcript
        """
    )
    project.runpytest("--snapshot-update").assert_outcomes(passed=1)
    assert project.runpytest().ret == pytest.ExitCode.OK  # the snapshot is used
    for extra in ([], ["--dsh-fail-unused"]):
        collected = project.runpytest("--co", *extra)
        assert collected.ret == pytest.ExitCode.OK, collected.stdout.str()
        out = collected.stdout.str()
        assert not re.search(r"\d+ unused|snapshots? unused", out), out
        assert "-- dsh-replay --" not in out  # nothing ran: no summary


def test_a_test_looks_its_marker_up_once_from_set_up_to_its_check(
    project: pytest.Pytester,
) -> None:
    # Collection reads every item once; then set-up resolves the scenario and the
    # end-of-test check (and a failure's re-record command) reuse what set-up read.
    make_scenario(project.path / "recordings" / "hello", primary=["hi"])
    project.makeconftest(
        """
        import json
        import pytest

        LOOKUPS = {}

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_setup(item):
            real = item.get_closest_marker

            def counted(name, default=None):
                if name == "dsh_scenario":
                    LOOKUPS[item.name] = LOOKUPS.get(item.name, 0) + 1
                return real(name, default)

            item.get_closest_marker = counted

        def pytest_sessionfinish(session):
            (session.config.rootpath / "lookups.json").write_text(json.dumps(LOOKUPS))
        """
    )
    project.makepyfile(
        """
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("hello")
        def test_passes(dsh_replay):
            assert run(dsh_replay.model) == "hi"

        @pytest.mark.dsh_scenario("hello")
        def test_leaves_a_call(dsh_replay):
            pass
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*--dsh-record=all*test_leaves_a_call*"])
    lookups = json.loads((project.path / "lookups.json").read_text())
    assert lookups == {"test_passes": 1, "test_leaves_a_call": 1}


def test_a_hang_entrys_ready_file_appears_in_the_fixtures_workdir(
    project: pytest.Pytester,
) -> None:
    # docs/scenarios.md#entry-replay: wait for dsh_replay.workdir / readyFile, then cancel
    scenario = project.path / "recordings" / "hang"
    make_scenario(scenario, primary=["hi"])
    (scenario / "replay.override.json").write_text(
        '[{"kind": "hang", "readyFile": ".stream-ready"}]'
    )
    project.makepyfile(
        """
        import threading
        import time

        import pytest
        from pytest_dsh_replay import ReplayCancelledError

        @pytest.mark.dsh_scenario("hang", compare_logs=False)
        def test_ready(dsh_replay, tmp_path):
            stream = dsh_replay.model.stream({"messages": []}, session_id="main")
            outcome = []

            def read():
                try:
                    list(stream)
                except ReplayCancelledError as error:
                    outcome.append(error)

            reader = threading.Thread(target=read)
            reader.start()
            ready = dsh_replay.workdir / ".stream-ready"
            deadline = time.monotonic() + 30
            while not ready.exists() and time.monotonic() < deadline:
                reader.join(0.01)  # the reader blocks in the hang once the file is there
            assert ready.exists()
            dsh_replay.model.cancel("main")
            reader.join(30)
            assert outcome and not reader.is_alive()
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
