"""This project's own pytest configuration reports what it should."""

from __future__ import annotations

import pytest
from support.paths import PYPROJECT


def test_a_failing_property_test_is_reported_as_a_failure(pytester: pytest.Pytester) -> None:
    tomllib = pytest.importorskip("tomllib")
    options = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["pytest"]
    ini = options["ini_options"]
    scope = ini["asyncio_default_fixture_loop_scope"]  # unset, pytest-asyncio warns
    pytester.makeini(
        "[pytest]\n"
        f"asyncio_default_fixture_loop_scope = {scope}\n"
        "filterwarnings =\n" + "".join(f"    {f}\n" for f in ini["filterwarnings"])
    )
    pytester.makepyfile(
        test_property="""
        from hypothesis import given, settings, strategies as st

        @settings(database=None, derandomize=True)
        @given(st.integers())
        def test_small(n):
            assert n < 5
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:benchmark"
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert 5 < 5*"])  # the shrunk failing example
