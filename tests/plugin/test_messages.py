"""What the plugin's messages tell a user who has to fix something (issue 25, point 6)."""

from __future__ import annotations

import pytest
from support.scenarios import make_scenario

AGENT = """
def run(model, session_id="live-1", parent=None):
    out = []
    chunks = model.stream({"messages": []}, session_id=session_id, parent_session_id=parent)
    for chunk in chunks:
        if chunk["type"] == "text-delta":
            out.append(chunk["text"])
    return "".join(out)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ndsh_snapshot_dir = recordings\n")
    pytester.makepyfile(agent=AGENT)
    return pytester


def test_an_exhausted_replay_names_the_quoted_re_record_command(
    project: pytest.Pytester,
) -> None:
    make_scenario(project.path / "recordings" / "one", primary=["hi"])
    project.makepyfile(
        test_more="""
        import pytest
        from agent import run

        @pytest.mark.parametrize("n", ["a b"])
        @pytest.mark.dsh_scenario("one")
        def test_one_call_too_many(dsh_replay, n):
            run(dsh_replay.model)
            run(dsh_replay.model)
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ReplayExhaustedError: *made more model calls than were recorded; "
            "re-record: pytest --dsh-record=all 'test_more.py::test_one_call_too_many[[]a b[]]', "
            "or keep the recorded calls and append the new ones: "
            "pytest --dsh-record=new 'test_more.py::test_one_call_too_many[[]a b[]]'"
        ]
    )


def test_an_unused_recording_says_re_record_once_with_the_command(
    project: pytest.Pytester,
) -> None:
    make_scenario(project.path / "recordings" / "two", primary=["hi", "again"])
    project.makepyfile(
        test_fewer="""
        import pytest
        from agent import run

        @pytest.mark.dsh_scenario("two")
        def test_one_call_too_few(dsh_replay):
            run(dsh_replay.model)
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    text = result.stdout.str().split("short test summary info")[0]  # the failure itself
    assert "made fewer model calls than were recorded\n" in text
    assert text.count("re-record") == 1, text
    result.stdout.fnmatch_lines(
        [
            "(if the new behaviour is right, re-record: "
            "pytest --dsh-record=all *test_one_call_too_few)"
        ]
    )


def test_an_unrecorded_session_names_the_quoted_re_record_command(
    project: pytest.Pytester,
) -> None:
    make_scenario(project.path / "recordings" / "one", primary=["hi"])
    project.makepyfile(
        test_extra="""
        import pytest
        from agent import run

        @pytest.mark.parametrize("n", ["x y"])
        @pytest.mark.dsh_scenario("one")
        def test_one_session_too_many(dsh_replay, n):
            run(dsh_replay.model)
            run(dsh_replay.model, session_id="live-2")
        """
    )
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ReplayBindingError: *more sessions than were recorded; re-record: pytest "
            "--dsh-record=all 'test_extra.py::test_one_session_too_many[[]x y[]]', or keep the "
            "recorded calls and append the new ones: "
            "pytest --dsh-record=new 'test_extra.py::test_one_session_too_many[[]x y[]]'"
        ]
    )


def test_a_missing_recording_names_the_record_variables(project: pytest.Pytester) -> None:
    project.makepyfile(test_new="def test_new(dsh_replay):\n    pass\n")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*recording calls the live model: set DSH_RECORD_BASE_URL and DSH_RECORD_API_KEY*"]
    )


def test_a_missing_recording_names_the_live_model_a_hook_already_gives(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(
        "def pytest_dsh_replay_live_model(config, scenario_path):\n    return None\n"
    )
    project.makepyfile(test_new="def test_new(dsh_replay):\n    pass\n")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*recording calls the live model that your pytest_dsh_replay_live_model hook gives*"]
    )
    result.stdout.no_fnmatch_line("*set DSH_RECORD_BASE_URL*")


def test_a_missing_recording_names_the_record_base_url_already_set(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DSH_RECORD_BASE_URL", "http://127.0.0.1:9/v1")
    project.makepyfile(test_new="def test_new(dsh_replay):\n    pass\n")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*the live model that DSH_RECORD_BASE_URL gives*"])


def test_a_mistyped_scenario_name_gets_the_closest_existing_one(
    project: pytest.Pytester,
) -> None:
    recordings = project.path / "recordings"
    make_scenario(recordings / "capital", primary=["Paris"])
    make_scenario(recordings / "weather", primary=["sunny"])
    project.makepyfile(
        test_typo="""
        import pytest

        @pytest.mark.dsh_scenario("captial")
        def test_typo(dsh_replay):
            pass

        @pytest.mark.dsh_scenario("unrelated-name")
        def test_new(dsh_replay):
            pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([f"*did you mean: {recordings / 'capital'}?"])
    # (the errors section only: newer pytest repeats whole messages in its short summary)
    errors = result.stdout.str().split("short test summary info")[0]
    assert errors.count("did you mean") == 1  # nothing close to the other
