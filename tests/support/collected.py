"""Collected tests as the plugin's policy sees them, built from literals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pytest_dsh_replay._plugin.collected import CollectedTest
from pytest_dsh_replay._plugin.modes import RECORD_MODES
from pytest_dsh_replay._plugin.suite import SuiteState


def collected(
    rootdir: Path,
    nodeid: str,
    *args: Any,
    fixtures: tuple[str, ...] = ("dsh_replay",),
    **kwargs: Any,
) -> CollectedTest:
    """The test ``nodeid`` (``tests/test_m.py::test_x``) of a project at ``rootdir``.

    ``args`` and ``kwargs`` are its ``dsh_scenario`` marker's arguments.
    """
    module, _, name = nodeid.partition("::")
    return CollectedTest(
        nodeid=nodeid,
        path=rootdir / module,
        relpath=Path(module),
        name=name,
        scenario_args=args,
        scenario_kwargs=kwargs,
        fixturenames=fixtures,
    )


def suite_state(ini_root: Path | None = None, record: str | None = None) -> SuiteState:
    """A run's state as ``pytest_configure`` makes it, for the given options."""
    mode = None if record is None else RECORD_MODES.parse(record)
    return SuiteState(record=mode, ini_root=ini_root)
