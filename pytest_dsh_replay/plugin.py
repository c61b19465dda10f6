"""The pytest plugin (registered through the ``pytest11`` entry point ``dsh_replay``)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register the ``dsh-replay`` option group and ini keys."""
    parser.addini(
        "dsh_snapshot_dir",
        "Directory holding recorded dsh scenarios "
        "(default: dsh_snapshots beside each test module).",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``dsh_scenario`` marker."""
    config.addinivalue_line(
        "markers",
        "dsh_scenario(name_or_path): the recorded dsh scenario the dsh_replay fixture replays.",
    )
