"""Options, ini keys, marker and fixture docs, run the way users run pytest."""

from __future__ import annotations

import pytest


def test_help_lists_the_group_and_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "dsh-replay (replay and record dsh agent sessions):",
            "*--dsh-record=[[]all|missing|new[]]*",
            "*record scenarios against the live model*",
            "*--dsh-fail-unused*fail the run when a complete run*",
            "*dsh_compare_logs (bool):*",
            "*dsh_snapshot_dir (string):*",
        ]
    )


def test_marker_is_registered_with_its_description(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.dsh_scenario(name_or_path=None, *, compare_logs=True, record=True, "
            "max_age=None, pace=None): *"
        ]
    )


def test_fixture_is_documented_in_one_line(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--fixtures")
    result.stdout.fnmatch_lines(["dsh_replay*", "*Replay this test's recorded dsh scenario*"])


@pytest.mark.parametrize("value", ["sometimes", "ALL", ""])
def test_bad_record_mode_is_a_usage_error_naming_accepted_values(
    pytester: pytest.Pytester, value: str
) -> None:
    result = pytester.runpytest(f"--dsh-record={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--dsh-record accepts all or missing or new*"])


def test_record_mode_swallowing_a_test_path_says_how_to_write_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(): pass")
    result = pytester.runpytest("--dsh-record", "test_a.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*write --dsh-record=all test_a.py*"])


def test_strict_markers_and_config_accept_the_plugin(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("x")
        def test_marked():
            pass
        """
    )
    result = pytester.runpytest("--strict-markers", "--strict-config", "-W", "error")
    result.assert_outcomes(passed=1)


def test_marker_on_a_non_test_function_is_harmless(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("helper")
        def helper():
            return 1

        def test_uses_helper():
            assert helper() == 1
        """
    )
    result = pytester.runpytest("--strict-markers")
    result.assert_outcomes(passed=1)


def test_marker_with_bad_arguments_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("a", "b")
        def test_x(dsh_replay):
            pass
        """
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*dsh_scenario takes one scenario name or path*"])
    assert result.ret != 0


def test_marker_name_cannot_leave_the_snapshot_root(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.dsh_scenario("../../etc")
        def test_x(dsh_replay):
            pass
        """
    )
    result = pytester.runpytest()
    result.stdout.fnmatch_lines(["*leaves the snapshot root*"])
    assert result.ret != 0


def test_marker_names_the_scenario_by_keyword_too_and_checks_keywords_without_a_name(
    pytester: pytest.Pytester,
) -> None:
    # name_or_path= (as --markers shows it) was ignored, and keywords were not checked
    # when the marker had no name: a typo silently left the log check on.
    pytester.makepyfile(
        test_kw="""
        import pytest

        @pytest.mark.dsh_scenario(name_or_path="named")
        def test_by_keyword(dsh_replay):
            pass

        @pytest.mark.dsh_scenario(compare_log=False)
        def test_typo(dsh_replay):
            pass
        """
    )
    result = pytester.runpytest("-rE")
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "no recorded dsh scenario for test_kw.py::test_by_keyword",
            "  looked at: */dsh_snapshots/named",
            "*dsh_scenario accepts the keywords compare_logs, max_age, pace, record, "
            "got compare_log*",
        ],
        consecutive=False,
    )
    assert "fixturedef" not in result.stdout.str()  # one line, not the fixture's source
