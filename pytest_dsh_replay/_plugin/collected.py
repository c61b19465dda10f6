"""What the plugin's policy knows of one collected test: plain values, no pytest objects."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

__all__ = ["SNAPSHOT_FIXTURES", "CollectedTest"]

SNAPSHOT_FIXTURES: Final = frozenset({"dsh_transcript", "snapshot"})
"""The fixtures that give a test syrupy snapshots (this plugin's and syrupy's own)."""


@dataclass(frozen=True)
class CollectedTest:
    """One collected test item, as plain values the policy reads.

    The plugin builds one from a ``pytest.Item`` when it needs the policy's answer, so
    the policy runs without pytest (and in a unit test, from literals).

    Attributes:
        nodeid: The test's node id (``tests/test_a.py::TestX::test_y[id]``).
        path: The test module's file, absolute.
        relpath: ``path`` relative to the rootdir, or ``None`` when it lies outside it.
        name: The test's name inside its module, classes included
            (``TestX::test_y[id]``).
        scenario_args: The positional arguments of the closest ``dsh_scenario`` marker
            (``()`` without one).
        scenario_kwargs: That marker's keyword arguments (empty without one).
        fixturenames: The fixtures the test requests, directly or through others.
    """

    nodeid: str
    path: Path
    relpath: Path | None
    name: str
    scenario_args: tuple[object, ...] = ()
    scenario_kwargs: Mapping[str, object] = field(default_factory=dict)
    fixturenames: tuple[str, ...] = ()

    @property
    def uses_replay(self) -> bool:
        """Whether the test requests the ``dsh_replay`` fixture."""
        return "dsh_replay" in self.fixturenames

    @property
    def uses_snapshots(self) -> bool:
        """Whether the test requests a syrupy snapshot (``dsh_transcript``, ``snapshot``).

        Its recording and its snapshots are made together: the command that
        (re-)records it adds ``--snapshot-update``.
        """
        return bool(SNAPSHOT_FIXTURES & set(self.fixturenames))

    @property
    def names_scenario(self) -> bool:
        """Whether its ``dsh_scenario`` marker names the scenario (else it is derived)."""
        return bool(self.scenario_args)

    @property
    def replay_only(self) -> bool:
        """Whether the marker says ``record=False`` (another test records the scenario)."""
        return self.scenario_kwargs.get("record", True) is False
