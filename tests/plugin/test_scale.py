"""What keeps a large suite cheap: state dropped after each test, shared scenarios,
collection kept out of the recordings, unused scenarios found without resolving each."""

from __future__ import annotations

import pytest
from support.scenarios import make_scenario


def test_a_finished_test_keeps_no_replay_alive(pytester: pytest.Pytester) -> None:
    make_scenario(pytester.path / "dsh_snapshots" / "shared", primary=["hi"])
    pytester.makeconftest(
        """
        import weakref

        REPLAYS = []

        def pytest_dsh_replay_configure(config, replay):
            REPLAYS.append(weakref.ref(replay))
        """
    )
    pytester.makepyfile(
        """
        import gc
        import pytest
        from conftest import REPLAYS

        @pytest.mark.dsh_scenario("shared")
        @pytest.mark.parametrize("n", [1, 2])
        def test_replay(n, dsh_replay):
            list(dsh_replay.model.stream({"messages": []}))

        def test_earlier_replays_are_gone():
            gc.collect()
            assert len(REPLAYS) == 2
            assert [ref() for ref in REPLAYS] == [None, None]
        """
    )
    # In a subprocess: pytester's in-process runs record every hook call's arguments.
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_a_finished_test_keeps_no_fixture_request_alive(pytester: pytest.Pytester) -> None:
    # pytest keeps, until the session ends, a finalizer of each function-scoped fixture
    # on every session-scoped fixture it requests, holding that test's fixture request:
    # dsh_replay requests none (docs/scenarios.md#memory-per-test).
    make_scenario(pytester.path / "dsh_snapshots" / "shared", primary=["hi"])
    pytester.makeconftest(
        """
        import weakref

        REQUESTS = []

        def pytest_fixture_post_finalizer(fixturedef, request):
            if fixturedef.argname == "dsh_replay" and fixturedef.cached_result is not None:
                REQUESTS.append(weakref.ref(request))
        """
    )
    pytester.makepyfile(
        """
        import gc
        import pytest
        from conftest import REQUESTS

        @pytest.mark.dsh_scenario("shared")
        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_replay(n, dsh_replay):
            list(dsh_replay.model.stream({"messages": []}))

        def test_earlier_requests_are_gone():
            gc.collect()
            assert len(REQUESTS) == 3
            # The first made the run's temporary base: the session keeps that one.
            assert [ref() for ref in REQUESTS[1:]] == [None, None]
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=4)


def test_tests_replaying_one_scenario_share_it_and_see_a_rewrite(
    pytester: pytest.Pytester,
) -> None:
    make_scenario(pytester.path / "dsh_snapshots" / "shared", primary=["first"])
    pytester.makepyfile(
        """
        import pytest
        from support.scenarios import make_scenario

        SEEN = []

        def replay_text(dsh_replay):
            chunks = list(dsh_replay.model.stream({"messages": []}))
            chunks[1]["text"] = "changed by the test"  # must not reach the next test
            return dsh_replay.scenario.primary.entries[0].chunks[1]["text"]

        @pytest.mark.dsh_scenario("shared")
        def test_a(dsh_replay):
            SEEN.append(dsh_replay.scenario)
            assert replay_text(dsh_replay) == "first"

        @pytest.mark.dsh_scenario("shared", compare_logs=False)  # it rewrites the recording
        def test_b(dsh_replay, request):
            assert dsh_replay.scenario is SEEN[0]  # loaded once
            assert replay_text(dsh_replay) == "first"
            make_scenario(request.config.rootpath / "dsh_snapshots" / "shared", primary=["new"])

        @pytest.mark.dsh_scenario("shared", compare_logs=False)
        def test_c(dsh_replay):
            assert dsh_replay.scenario is not SEEN[0]  # its files changed: loaded again
            assert replay_text(dsh_replay) == "new"
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=3)


def test_collection_does_not_walk_into_scenario_directories(pytester: pytest.Pytester) -> None:
    scenario = make_scenario(pytester.path / "dsh_snapshots" / "group" / "s1", primary=["hi"])
    (scenario / "test_inside.py").write_text("def test_inside():\n    raise AssertionError\n")
    (pytester.path / "dsh_snapshots" / "group" / "test_grouping.py").write_text(
        "def test_grouping():\n    pass\n"
    )
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("group/s1")
        def test_replay(dsh_replay):
            list(dsh_replay.model.stream({"messages": []}))
        """
    )
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(passed=2)  # test_replay and the grouping directory's test


def test_unused_scenarios_through_a_root_written_with_dot_dot(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = tests/../recordings\n")
    make_scenario(pytester.path / "recordings" / "used", primary=["hi"])
    make_scenario(pytester.path / "recordings" / "stale", primary=["hi"])
    pytester.mkdir("tests")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("used")
        def test_used(dsh_replay):
            list(dsh_replay.model.stream({"messages": []}))
        """
    )
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*1 replayed, 0 recorded, 0 missing, 1 unused", "*recordings/stale"]
    )
