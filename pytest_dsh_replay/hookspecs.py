"""Hook specifications of pytest-dsh-replay (registered from ``pytest_addhooks``).

Implement them in a ``conftest.py`` or a plugin. The plugin always calls them with
keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ._fixture.dsh_replay import DshReplay


@pytest.hookspec(firstresult=True)
def pytest_dsh_replay_live_model(config: pytest.Config, scenario_path: Path) -> Any | None:
    """Provide the live model that ``--dsh-record`` records from.

    The first implementation that returns something other than ``None`` wins; a
    ``conftest.py``'s implementation is asked only for the tests in its directory and
    below (as pytest asks a test's hooks). A live
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
def pytest_dsh_replay_redact(event: dict[str, Any] | None, header: dict[str, Any] | None) -> None:
    """Redact an event or a session header before it is written or shown.

    Called for every event of every session a recording writes (and that a transcript
    or the replayed-log check shows), after the built-in rules have replaced API keys,
    bearer tokens and the recording API key, and the working directory became
    ``{{cwd}}``. Change the value in place (for example replace a customer name
    inside ``event["data"]`` or ``header["meta"]``). Every implementation runs; they add
    to the built-in rules and cannot turn them off. The return value is ignored.

    Exactly one of the two arguments is given:

    - ``event``: one session event, ``{"type", "seq", "time", "data", ...}`` (``header``
      is ``None``);
    - ``header``: a session's header line, ``{"type": "session", "id", "createdAt",
      ...}`` with every extra field (``meta``, ``agentPreset``, ...) (``event`` is
      ``None``). Only implementations that declare a ``header`` argument are called for
      headers, so an implementation written as ``pytest_dsh_replay_redact(event)``
      keeps working unchanged.

    Args:
        event: A copy of one session event owned by the plugin, or ``None``.
        header: A copy of one session header owned by the plugin, or ``None``.
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
