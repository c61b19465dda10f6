"""Inner pytest runs that record: through the recording proxy, and the logs they wrote."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_dsh_replay import ReceivedRequest, ScriptedModel


def record_through_proxy(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    model: ScriptedModel,
    *args: str,
    key: str,
    passed: int,
    before: Callable[[str], None] | None = None,
) -> list[ReceivedRequest]:
    """Run ``pytest *args`` (a ``--dsh-record`` run) in ``project``, its proxy to ``model``.

    ``model`` is served on 127.0.0.1 (docs/recording.md#scripted-server) for the run
    only; ``DSH_RECORD_BASE_URL`` and ``DSH_RECORD_API_KEY`` (``key``) are set for it and
    unset after it, so what follows replays with no live model. ``before``, when given,
    is called with the server's base URL before the run (to set more variables).

    Returns:
        Every request the served model received, in arrival order, once ``passed``
        tests passed (and nothing else happened).
    """
    with model.serve(idle_timeout=120) as server:
        monkeypatch.setenv("DSH_RECORD_BASE_URL", server.base_url + "/v1")
        monkeypatch.setenv("DSH_RECORD_API_KEY", key)
        if before is not None:
            before(server.base_url)
        project.runpytest(*args).assert_outcomes(passed=passed)
        requests = list(server.requests)
    monkeypatch.delenv("DSH_RECORD_BASE_URL")
    monkeypatch.delenv("DSH_RECORD_API_KEY")
    return requests


def recorded_logs(project: pytest.Pytester, root: str = "recordings") -> dict[str, str]:
    """Every ``.jsonl`` log under ``project/root``: its path below ``root`` -> its text."""
    base = project.path / root
    return {str(p.relative_to(base)): p.read_text("utf-8") for p in sorted(base.rglob("*.jsonl"))}


def recording_project(pytester: pytest.Pytester, tests: str, *, ini: str = "") -> pytest.Pytester:
    """``pytester`` with ``tests`` as ``test_user.py``, recordings under ``recordings/``.

    Args:
        pytester: The inner run's project.
        tests: The test module's source.
        ini: More ``[pytest]`` lines (``asyncio_mode = strict``, ...).
    """
    pytester.makeini(f"[pytest]\ndsh_snapshot_dir = recordings\n{ini}")
    pytester.makepyfile(test_user=tests)
    return pytester
