"""The record modes ``--dsh-record`` accepts, each defined once (pytest-free).

A `RecordMode` says what it does (does it replay a scenario that has a recording,
does it record one that has none), its command-line value and its help text; the
plugin's option, its messages and the policy ask the mode and never compare values.
`RECORD_MODES` is the table ([docs/recording.md#record-mode](../recording.md#record-mode)).
A new mode is one entry there, plus whatever it does beyond these two answers.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from .._errors import DshReplayError

__all__ = ["RECORD_MODES", "RecordMode", "RecordModeError", "RecordModes", "bad_record_mode"]


class RecordModeError(DshReplayError, ValueError):
    """``--dsh-record`` got a value that names no mode; the message says which it takes."""


@dataclass(frozen=True)
class RecordMode:
    """One ``--dsh-record`` mode.

    Attributes:
        value: Its command-line value (``--dsh-record=<value>``).
        help: What it records, for ``pytest --help`` (a phrase after the value).
        replays_recorded: A scenario that has a recording is replayed, not recorded
            again.
        records_missing: A scenario that has no recording is recorded.
        records_expired: A scenario whose recording is older than its test's largest
            age ([docs/recording.md#expiry](../recording.md#expiry)) is recorded again.
        appends_new: A scenario that has a recording, and is not recorded again, is
            replayed with its calls past the recording (and its sessions the recording
            lacks) sent to the live model and appended to its files
            ([docs/recording.md#record-new](../recording.md#record-new)).
    """

    value: str
    help: str
    replays_recorded: bool
    records_missing: bool
    records_expired: bool = True
    appends_new: bool = False

    def records(self, *, exists: bool, expired: bool = False) -> bool:
        """Whether a test records (rather than replays) a scenario.

        Args:
            exists: The scenario has a recording.
            expired: That recording is older than the test allows.
        """
        if not exists:
            return self.records_missing
        return not self.replays_recorded or (expired and self.records_expired)

    def appends(self, *, exists: bool, expired: bool = False) -> bool:
        """Whether a test replays a scenario and appends its new calls to the recording.

        Args:
            exists: The scenario has a recording.
            expired: That recording is older than the test allows.
        """
        return exists and self.appends_new and not self.records(exists=exists, expired=expired)


def bad_record_mode(value: str, modes: Sequence[str], default: str) -> str:
    """``--dsh-record`` got ``value``, none of ``modes``; a test path gets a hint.

    ``default`` is the mode a bare ``--dsh-record`` means.
    """
    hint = ""
    if "/" in value or os.sep in value or "::" in value or value.endswith(".py"):
        hint = f"; it looks like a test path: write --dsh-record={default} {value}"
    return (
        f"--dsh-record accepts {' or '.join(modes)} (a bare --dsh-record means {default}), "
        f"got {value!r}{hint}"
    )


@dataclass(frozen=True)
class RecordModes:
    """The modes ``--dsh-record`` accepts; the first is what a bare ``--dsh-record`` means."""

    modes: tuple[RecordMode, ...]

    @property
    def default(self) -> RecordMode:
        """The mode of a bare ``--dsh-record``."""
        return self.modes[0]

    @property
    def values(self) -> tuple[str, ...]:
        """The command-line values, in the table's order."""
        return tuple(mode.value for mode in self.modes)

    @property
    def metavar(self) -> str:
        """The option's value in ``pytest --help``: ``all|missing|new``."""
        return "|".join(self.values)

    @property
    def help(self) -> str:
        """The option's help text: what each mode records, the default first."""
        parts = [f"{self.default.value} (the default when no value is given) {self.default.help}"]
        parts += [f"{mode.value} {mode.help}" for mode in self.modes[1:]]
        return (
            "record scenarios against the live model instead of replaying them: "
            f"{', '.join(parts)}."
        )

    def parse(self, value: str) -> RecordMode:
        """The mode whose command-line value is ``value``.

        Raises:
            RecordModeError: No mode has that value; the message names the values and,
                when ``value`` looks like a test path, how to write the command.
        """
        for mode in self.modes:
            if mode.value == value:
                return mode
        raise RecordModeError(bad_record_mode(value, self.values, self.default.value))

    def to_record(self, *, exists: bool) -> RecordMode:
        """The mode a hint's command uses to record one scenario.

        For a scenario that has no recording, the first mode that records it and
        replays the recordings that exist (the least the command can touch); for one
        that has a recording, the first mode that records it again. The default mode
        when no mode is such.
        """
        for mode in self.modes:
            if mode.records(exists=exists) and (exists or mode.replays_recorded):
                return mode
        return self.default

    def to_append(self) -> RecordMode | None:
        """The mode a hint's command uses to append a recording's new calls, if any does."""
        return next((mode for mode in self.modes if mode.appends(exists=True)), None)


RECORD_MODES: Final = RecordModes(
    (
        RecordMode(
            "all",
            "re-records every selected scenario",
            replays_recorded=False,
            records_missing=True,
        ),
        RecordMode(
            "missing",
            "records only scenarios that have no recording yet, or one older than their max age",
            replays_recorded=True,
            records_missing=True,
        ),
        RecordMode(
            "new",
            "replays recorded calls and records only the calls and sessions past the "
            "recording, appended to its files (scenarios without a recording are recorded "
            "as by missing)",
            replays_recorded=True,
            records_missing=True,
            records_expired=False,
            appends_new=True,
        ),
    )
)
"""The modes ``--dsh-record`` accepts.

See [docs/recording.md#record-mode](../recording.md#record-mode).
"""
