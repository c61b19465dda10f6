"""One recording of a scenario at a time, across processes.

Two processes that record one scenario at once (two terminals, two CI jobs on one
checkout) would each write a whole recording, and the last writer would win silently.
`hold_recording` takes an exclusive lock for the recording's whole run, from
before the live model is asked until the recording is written or given up: an
operating-system file lock (``flock``) on a hidden file beside the scenario,
``.<name>.lock``, holding the owner's process id and name. A second recorder is refused
at once with a [`RecordingError`][pytest_dsh_replay.RecordingError] naming the scenario and that
process. The kernel releases the lock of a process that dies (``kill -9``, a power
cut), so a lock file left behind never blocks: the next recorder takes it over, and
removes it when it is done ([docs/recording.md#one-recorder](../recording.md#one-recorder)).

The lock file is created, read, taken over and removed while the directory's own lock
is held (the one replacements and crash recovery take, see `atomic`), so a reader
never sees a half-written owner and no recorder ever locks a file another one is
removing. Where ``fcntl`` is missing (Windows) nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from .._errors import RecordingError
from .atomic import _locked

__all__ = ["RecordingLock", "hold_recording", "lock_path", "remove_stale_lock", "stale_lock"]


def lock_path(target: str | os.PathLike[str]) -> Path:
    """The lock file of recording ``target``: ``<parent>/.<name>.lock``."""
    p = Path(target)
    return p.with_name(f".{p.name}.lock")


@dataclass
class RecordingLock:
    """A held lock on recording one scenario (see `hold_recording`).

    Attributes:
        path: The lock file, or ``None`` where nothing could be locked (no ``fcntl``).
    """

    path: Path | None
    _fd: int | None = field(default=None, repr=False)
    _created: tuple[Path, ...] = field(default=(), repr=False)

    def release(self) -> None:
        """Let another recorder in: the lock file is removed, then the lock released.

        Directories `hold_recording` created for the lock file are removed again
        when they are empty (nothing was recorded into them). Safe to call twice.
        """
        fd, self._fd = self._fd, None
        if fd is None or self.path is None:
            return
        try:
            with _locked(self.path.parent):
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
                os.close(fd)
                fd = None
        finally:
            if fd is not None:  # the directory could not be locked: the lock still goes
                os.close(fd)
        _remove_dirs(self._created)  # only if empty: a written recording stays


def hold_recording(target: str | os.PathLike[str], owner: str) -> RecordingLock:
    """Take the exclusive lock on recording ``target``, for this process.

    Missing parent directories are created (the lock file lives beside the scenario);
    the lock is held until `RecordingLock.release`, or until this process ends.

    Args:
        target: The scenario directory about to be recorded.
        owner: Who records it, for the message another recorder gets (the test's node
            id).

    Returns:
        The held lock.

    Raises:
        RecordingError: Another process holds the lock: the message names ``target``,
            that process's id and its ``owner``.
        OSError: The parent directories or the lock file cannot be created (a
            read-only place; the caller says why it cannot record there).
    """
    try:
        import fcntl  # noqa: F401 - only where it exists
    except ImportError:  # pragma: no cover - not POSIX
        return RecordingLock(None)
    dest = Path(target)
    for attempt in range(3):
        created = _make_dirs(dest.parent)
        try:
            return _take(dest, owner, created)
        except FileNotFoundError:  # a releasing recorder removed the empty parent meanwhile
            if attempt == 2:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _take(dest: Path, owner: str, created: list[Path]) -> RecordingLock:
    """Create or take over ``dest``'s lock file and lock it (see `hold_recording`)."""
    import fcntl

    path = lock_path(dest)
    try:
        with _locked(dest.parent):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise RecordingError(
                    f"cannot record {dest}: another process ({holder}) is recording it right "
                    "now, and two recordings of one scenario would overwrite each other; "
                    "nothing was recorded (the live model was not called) and that recording "
                    "is left alone. Record it once, when the other run has ended"
                ) from None
            except BaseException:
                os.close(fd)
                raise
            try:  # free, or left by a process that died: ours now
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n{owner}\n".encode("utf-8", "replace"))
            except BaseException:
                os.close(fd)
                raise
    except BaseException:
        _remove_dirs(created)
        raise
    return RecordingLock(path, fd, tuple(created))


def stale_lock(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a lock file no process holds: left by a killed recorder.

    The kernel released its lock, but a recorder killed with ``SIGTERM`` or ``kill -9``
    never removed the file. ``False`` for a held lock, a missing file, and where nothing
    is locked (no ``fcntl``).
    """
    return _free(Path(path), remove=False)


def remove_stale_lock(target: str | os.PathLike[str]) -> bool:
    """Remove the lock file of recording ``target`` when no process holds it.

    Done under the directory's lock, as recorders take and release it, so a recorder
    that starts meanwhile is never robbed of its file.

    Returns:
        Whether a stale lock file was removed.
    """
    return _free(lock_path(target), remove=True)


def _free(path: Path, *, remove: bool) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        return False
    if not path.is_file():
        return False
    try:
        with _locked(path.parent):
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # held: a recorder is at work
            else:
                if remove:
                    os.unlink(path)
            finally:
                os.close(fd)
    except OSError:
        return False
    return True


def _holder(fd: int) -> str:
    """``pid <n>: <owner>`` from a held lock file (its holder wrote it under the dir lock)."""
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 4096).decode("utf-8", "replace")
    pid, _, rest = text.partition("\n")
    owner = rest.strip()
    if not pid.strip().isdigit():
        return "an unknown process"
    return f"pid {pid.strip()}: {owner}" if owner else f"pid {pid.strip()}"


def _make_dirs(directory: Path) -> list[Path]:
    """Create ``directory`` and its missing parents; the ones created, outermost first.

    Raises:
        OSError: One cannot be created; those created before it are removed again.
    """
    missing: list[Path] = []
    current = directory
    while not os.path.lexists(current) and current.parent != current:
        missing.append(current)
        current = current.parent
    created: list[Path] = []
    try:
        for path in reversed(missing):
            try:
                os.mkdir(path)
            except FileExistsError:
                continue  # made meanwhile by another process: not ours to remove
            created.append(path)
    except BaseException:
        _remove_dirs(created)
        raise
    return created


def _remove_dirs(created: list[Path] | tuple[Path, ...]) -> None:
    """Remove the directories `_make_dirs` created, innermost first, if empty."""
    for directory in reversed(created):
        with contextlib.suppress(OSError):
            os.rmdir(directory)
