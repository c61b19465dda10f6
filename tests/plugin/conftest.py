"""Plugin tests run pytest the way users do, through ``pytester``."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _quiet_third_party_config(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # pytest-asyncio warns at start-up when its loop scope is unset, and the outer run
    # turns warnings into errors: every inner run sets it, as a user's project would.
    # (Set after pytester, which clears PYTEST_ADDOPTS when it starts.)
    # pytest-benchmark, when installed, warns under xdist: keep it out of inner runs.
    # Hypothesis and pytest-recording (vcr) are not used by any inner run and cost about
    # a second of start-up in every inner subprocess and xdist worker: keep them out too.
    monkeypatch.setenv(
        "PYTEST_ADDOPTS",
        "-o asyncio_default_fixture_loop_scope=function"
        " -p no:benchmark -p no:hypothesispytest -p no:recording",
    )
