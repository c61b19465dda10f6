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
            "re-record: pytest --dsh-record=all 'test_more.py::test_one_call_too_many[[]a b[]]'"
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
            "--dsh-record=all 'test_extra.py::test_one_session_too_many[[]x y[]]'"
        ]
    )
