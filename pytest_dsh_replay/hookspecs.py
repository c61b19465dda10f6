"""Hook specifications of pytest-dsh-replay (registered from ``pytest_addhooks``).

Implement them in a ``conftest.py`` or a plugin. The plugin always calls them with
keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._runtime import DshReplay


@pytest.hookspec(firstresult=True)
def pytest_dsh_replay_live_model(config: pytest.Config, scenario_path: Path) -> Any | None:
    """Provide the live model that ``--dsh-record`` records from.

    The first implementation that returns something other than ``None`` wins. A live
    model is any object with ``stream(request, **kwargs)`` returning an iterator of dsh
    stream chunks (and ``astream(request, **kwargs)`` returning an async iterator, for
    async callers); the recorder passes the caller's keyword arguments through. When
    no implementation answers, the built-in OpenAI-compatible adapter is used, configured
    by ``DSH_RECORD_BASE_URL``, ``DSH_RECORD_API_KEY`` and ``DSH_RECORD_MODEL``.

    Args:
        config: The pytest config.
        scenario_path: The scenario directory about to be recorded.

    Returns:
        The live model, or ``None`` to let another implementation (or the default) answer.
    """


@pytest.hookspec
def pytest_dsh_replay_redact(event: dict[str, Any]) -> None:
    """Redact an event before it is written to a recording.

    Called for every event of every recorded session, after the built-in rules have
    replaced API keys and bearer tokens. ``event`` is a copy owned by the plugin:
    change it in place (for example replace a customer name inside ``event["data"]``).
    Every implementation runs; they add to the built-in rules and cannot turn them off.
    The return value is ignored.

    Args:
        event: One session event, ``{"type", "seq", "time", "data", ...}``.
    """


@pytest.hookspec
def pytest_dsh_replay_configure(config: pytest.Config, replay: DshReplay) -> None:
    """Adjust a test's ``dsh_replay`` object right after the fixture creates it.

    For example, wrap ``replay.model``. Called once per test that uses the fixture,
    before the test body runs.

    Args:
        config: The pytest config.
        replay: The fixture's value for this test.
    """
