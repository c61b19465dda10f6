"""Appending to a scenario directory: new calls after the recorded ones, new child files.

What ``--dsh-record=new`` writes ([docs/recording.md#record-new](../recording.md#record-new)):
every byte of the recording stays where it is. A recorded log that gained calls is
rewritten as its old bytes followed by the new events' lines (in the committed form);
a session the recording lacks becomes a new child file numbered after the existing
ones; every other file is copied as it is. The directory is replaced as a whole, as
[`write_scenario`][pytest_dsh_replay.write_scenario] replaces it: a failure leaves the
recording exactly as it was.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

from .._errors import DshReplayError, RecordingError
from .._format.events import Event, SessionLike
from .._format.jsonl import dump_session_log, read_session_log
from .._format.log_names import parse_log_name
from .scenario import refuse_nested

__all__ = ["append_scenario", "appended_log", "check_appendable"]


def appended_log(file: Path, events: Sequence[Event]) -> bytes:
    """The bytes of the log ``file`` with ``events`` after its own: its bytes, then theirs.

    Args:
        file: A recorded log in the committed form (as this plugin writes it).
        events: Events that follow the log's (with ``seq`` and ``time``).

    Raises:
        RecordingError: The log cannot be read, or is not in the committed form (another
            program wrote it): appending would change its recorded bytes.
    """
    try:
        old = file.read_bytes()
        log = read_session_log(file)
        new = dump_session_log(log.header, [*log.events, *events], envelope=False)
    except (OSError, DshReplayError) as err:
        raise RecordingError(f"cannot append to {file}: {err}") from None
    if not new.startswith(old):
        raise RecordingError(
            f"cannot append to {file}: it is not in the committed form this plugin writes "
            "(another program wrote it), so the new calls cannot follow its bytes unchanged; "
            f"rewrite it once with `dsh-replay fmt {file.parent}`, or re-record the scenario "
            "with --dsh-record=all"
        )
    return new


def check_appendable(directory: Path, files: Sequence[str]) -> None:
    """Refuse a recording whose logs could not keep their bytes when calls are appended.

    Args:
        directory: The scenario directory.
        files: Its logs' file names.

    Raises:
        RecordingError: As `appended_log` does for the first log that is not in the
            committed form (or cannot be read).
    """
    for name in files:
        appended_log(directory / name, ())


def _child_names(directory: Path, count: int) -> list[str]:
    """``count`` new child log names after the highest child number in ``directory``."""
    numbers = [0]
    for name in os.listdir(directory):
        parsed = parse_log_name(name)
        if parsed is not None and parsed.child is not None:
            numbers.append(parsed.child)
    first = max(numbers) + 1
    return [f"session.{n}.jsonl" for n in range(first, first + count)]


def _write(path: Path, data: bytes, mode: str) -> None:
    with open(path, mode) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def append_scenario(
    path: str | os.PathLike[str],
    appended: Sequence[tuple[str, Sequence[Event]]],
    children: Sequence[SessionLike],
) -> list[Path]:
    """Append new calls and new child sessions to a recorded scenario directory.

    Args:
        path: The scenario directory (it exists, in the committed form).
        appended: ``(log file name, events)``: each log gains those events after its own.
        children: New child sessions, in the order they are numbered (after the
            directory's highest child number).

    Returns:
        The files written: the logs that gained events, then the new children.

    Raises:
        RecordingError: A log cannot take the events unchanged (`appended_log`), or
            the directory cannot be replaced; it is left as it was.
    """
    from .._store.atomic import replace_path  # writing only

    target = Path(path)
    refuse_nested(target)
    blobs = {name: appended_log(target / name, events) for name, events in appended}
    for name, child in zip(_child_names(target, len(children)), children, strict=True):
        blobs[name] = dump_session_log(child.header, child.events, envelope=False)

    def fill(staging: Path) -> None:
        for entry in os.scandir(target):
            if entry.name in blobs:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.copytree(entry.path, staging / entry.name, symlinks=True)
            else:
                shutil.copy2(entry.path, staging / entry.name, follow_symlinks=False)
        for name, blob in blobs.items():
            _write(staging / name, blob, "xb")

    try:
        replace_path(target, fill)
    except OSError as err:
        raise RecordingError(f"cannot write scenario {target}: {err}") from err
    return [target / name for name in blobs]
