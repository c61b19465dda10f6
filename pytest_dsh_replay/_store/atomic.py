"""Replace a directory (or a file) as a whole, and recover after a crash mid-replacement.

A recording is written to a hidden sibling first, ``.<name>.tmp-<token>``, then put in
the place of ``<name>``:

- **Exchange** (Linux, ``renameat2(RENAME_EXCHANGE)``): the new directory and the old
  one swap names in one step, so ``<name>`` always exists and always holds a complete
  recording; the old one, now under the hidden name, is then deleted.
- **Portable fallback** (other systems, or file systems without the exchange): the old
  directory is renamed to ``.<name>.old-<token>`` and the new one renamed into place. A
  crash between the two renames leaves no ``<name>``; `recover` renames the old
  one back.

Every write holds an exclusive ``flock`` on the parent directory (where ``fcntl``
exists), from creating its hidden sibling until the swap is done, and so does
`recover`: recovery never touches a live writer's files, and a killed writer's
lock is released by the kernel. After a crash (``kill -9``, power loss) the leftovers
are hidden siblings matching `LEFTOVER`; `recover` restores the old
recording when ``<name>`` is missing and deletes every other leftover, so the next run
finds the old or the new recording, never a mix.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import secrets
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from .._format.jsonl import fsync_dir

__all__ = [
    "LEFTOVER",
    "Leftover",
    "Recovery",
    "StuckLeftover",
    "check_writable",
    "exchange_supported",
    "find_leftovers",
    "hidden_sibling",
    "recover",
    "recover_directory",
    "replace_path",
    "write_file_atomic",
]

LEFTOVER: Final = re.compile(r"\.(?P<name>.+)\.(?P<kind>tmp|old)-(?P<token>[0-9a-f]{12})")
"""The hidden sibling names a replacement uses: ``.<name>.tmp-<12 hex>`` (being written,
or the old copy after an exchange) and ``.<name>.old-<12 hex>`` (the old copy during a
portable replacement)."""


def hidden_sibling(
    target: str | os.PathLike[str], kind: Literal["tmp", "old"], token: str | None = None
) -> Path:
    """The hidden sibling a replacement of ``target`` uses (a name `LEFTOVER` matches).

    Every temporary name this package writes comes from here, so that what a killed
    writer leaves is recognized by its name alone (`find_leftovers`).

    Args:
        target: The file or directory being written or replaced.
        kind: ``"tmp"`` for the new copy being written, ``"old"`` for the previous
            version moved aside.
        token: 12 lower-case hex digits; ``None`` draws fresh ones.

    Returns:
        ``<parent>/.<name>.<kind>-<token>``.
    """
    p = Path(target)
    return p.with_name(f".{p.name}.{kind}-{token or secrets.token_hex(6)}")


USE_EXCHANGE: bool = True
"""Use ``renameat2(RENAME_EXCHANGE)`` where available (tests turn it off to run the
portable fallback)."""

_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2


@dataclass(frozen=True, slots=True)
class Leftover:
    """A hidden sibling left by an interrupted replacement.

    Attributes:
        path: The leftover itself (``.spawn.tmp-0123456789ab``).
        target: What it was replacing (``spawn``).
        kind: ``"tmp"`` (a copy being written, or the old copy after an exchange) or
            ``"old"`` (the previous version, moved aside by the portable fallback).
    """

    path: Path
    target: Path
    kind: Literal["tmp", "old"]

    def describe(self) -> str:
        """One line saying what the leftover is and what to do about it."""
        if self.kind == "old" and not os.path.lexists(self.target):
            return (
                f"{self.path}: the previous recording of {self.target}, moved aside by an "
                f"interrupted write; {self.target.name} itself is missing. The next pytest run "
                f"puts it back, or rename it to {self.target.name}"
            )
        return (
            f"{self.path}: leftover of an interrupted write of {self.target}; the next pytest "
            "run that uses it (or a write of it) removes it, or delete it"
        )


@dataclass(frozen=True, slots=True)
class StuckLeftover:
    """A leftover that recovery could not put back or remove: it is still there.

    Attributes:
        leftover: The leftover.
        action: What failed: ``"put back"`` (a previous recording whose target is
            missing; it is then left where it is, never deleted) or ``"removed"``.
        error: The operating system's error (a read-only file system, a permission).
    """

    leftover: Leftover
    action: Literal["put back", "removed"]
    error: OSError

    def describe(self) -> str:
        """One line: the leftover, what could not be done, the OS error, what to do."""
        reason = self.error.strerror or str(self.error)
        return (
            f"{self.leftover.path}: this leftover of an interrupted write of "
            f"{self.leftover.target} could not be {self.action}: {reason}; it is still "
            "there (make its directory writable and run dsh-replay fmt, or pytest, again)"
        )


@dataclass(frozen=True, slots=True)
class Recovery:
    """What a recovery did with the leftovers it found.

    Attributes:
        restored: Previous recordings put back in the place of their missing target.
        removed: Leftovers deleted.
        stuck: Leftovers still there: the rename or the deletion failed.
    """

    restored: tuple[Leftover, ...] = ()
    removed: tuple[Leftover, ...] = ()
    stuck: tuple[StuckLeftover, ...] = ()

    @property
    def done(self) -> int:
        """How many leftovers are gone: put back or removed."""
        return len(self.restored) + len(self.removed)

    @property
    def found(self) -> list[Leftover]:
        """Every leftover found, sorted by path."""
        stuck = [s.leftover for s in self.stuck]
        return sorted([*self.restored, *self.removed, *stuck], key=lambda left: left.path)


def find_leftovers(directory: str | os.PathLike[str], name: str | None = None) -> list[Leftover]:
    """List the leftovers of interrupted replacements in one directory.

    Args:
        directory: The directory to look in (not searched recursively).
        name: Only leftovers of this entry (``"spawn"``); ``None`` for every entry.

    Returns:
        The leftovers, sorted by path; ``[]`` when ``directory`` cannot be listed.
    """
    base = Path(directory)
    try:
        names = os.listdir(base)
    except OSError:
        return []
    found: list[Leftover] = []
    for entry in names:
        m = LEFTOVER.fullmatch(entry)
        if m is None or (name is not None and m.group("name") != name):
            continue
        kind: Literal["tmp", "old"] = "old" if m.group("kind") == "old" else "tmp"
        found.append(Leftover(base / entry, base / m.group("name"), kind))
    return sorted(found, key=lambda leftover: leftover.path)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``directory`` (no lock where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _remove(path: Path) -> None:
    """Delete ``path`` if possible (best effort: what stays is a leftover, reported later)."""
    with contextlib.suppress(OSError):
        _delete(path)


def _delete(path: Path) -> None:
    """Delete a file, a link or a whole directory.

    Raises:
        OSError: Something could not be deleted (``path`` may be partly gone).
    """
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _recover_locked(directory: Path, name: str | None) -> Recovery:
    leftovers = find_leftovers(directory, name)
    restored: list[Leftover] = []
    stuck: list[StuckLeftover] = []
    back: set[Path] = set()
    for leftover in reversed(leftovers):  # the newest token wins, if ever there are two
        target = leftover.target
        if leftover.kind == "old" and target not in back and not os.path.lexists(target):
            try:
                os.rename(leftover.path, target)
            except OSError as err:
                # The only copy of that recording: kept where it is, never deleted.
                stuck.append(StuckLeftover(leftover, "put back", err))
                back.add(target)
                continue
            back.add(target)
            restored.append(leftover)
    handled = {left.path for left in restored} | {s.leftover.path for s in stuck}
    removed: list[Leftover] = []
    for leftover in leftovers:
        if leftover.path in handled:
            continue
        try:
            _delete(leftover.path)
        except FileNotFoundError:
            pass  # gone meanwhile
        except OSError as err:
            stuck.append(StuckLeftover(leftover, "removed", err))
            continue
        removed.append(leftover)
    if leftovers:
        fsync_dir(directory)
    return Recovery(tuple(restored[::-1]), tuple(removed), tuple(stuck))


def _unlocked(leftovers: list[Leftover], err: OSError) -> Recovery:
    """Nothing done: the directory could not be locked (``err``), every leftover stays."""
    return Recovery(stuck=tuple(StuckLeftover(left, "removed", err) for left in leftovers))


def recover(target: str | os.PathLike[str]) -> Recovery:
    """Undo or clean up an interrupted replacement of ``target``.

    When ``target`` is missing and its previous version was moved aside (``.old-``),
    that version is put back; every other leftover of ``target`` is deleted. Waits for
    a replacement of anything in the same directory that is in progress in another
    process. What cannot be put back or removed (a read-only file system) stays, and
    the result says so with the OS error; a previous recording that cannot be put back
    is never deleted.

    Args:
        target: The directory or file that was being replaced.

    Returns:
        What was put back, removed, and what is still there; empty when there were no
        leftovers.
    """
    p = Path(target)
    leftovers = find_leftovers(p.parent, p.name)
    if not leftovers:
        return Recovery()
    try:
        with _locked(p.parent):
            return _recover_locked(p.parent, p.name)
    except OSError as err:
        return _unlocked(leftovers, err)


def recover_directory(directory: str | os.PathLike[str]) -> Recovery:
    """`recover` every entry of ``directory`` that has leftovers.

    Args:
        directory: A directory holding replaced entries (a snapshot root).

    Returns:
        What was put back, removed, and what is still there (see `recover`);
        empty when there were no leftovers or ``directory`` is missing.
    """
    d = Path(directory)
    leftovers = find_leftovers(d)
    if not leftovers:
        return Recovery()
    try:
        with _locked(d):
            return _recover_locked(d, None)
    except OSError as err:
        return _unlocked(leftovers, err)


_renameat2: Callable[[int, bytes, int, bytes, int], int] | Literal[False] | None = False


def _load_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    global _renameat2
    if _renameat2 is False:
        _renameat2 = None
        if sys.platform.startswith("linux"):
            try:
                fn = ctypes.CDLL(None, use_errno=True).renameat2  # glibc 2.28 or later
            except (AttributeError, OSError):
                pass
            else:
                fn.argtypes = [
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_uint,
                ]
                fn.restype = ctypes.c_int
                _renameat2 = fn
    return _renameat2


def exchange_supported() -> bool:
    """Whether this platform offers ``renameat2(RENAME_EXCHANGE)`` (and it is enabled)."""
    return USE_EXCHANGE and _load_renameat2() is not None


def _exchange(a: Path, b: Path) -> bool:
    """Swap the names of ``a`` and ``b`` in one step; ``False`` when not supported here.

    Raises:
        OSError: The exchange is supported but failed.
    """
    fn = _load_renameat2() if USE_EXCHANGE else None
    if fn is None:
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # an old kernel, or a file system without the exchange
    raise OSError(code, os.strerror(code), str(b))


def _swap_into_place(staging: Path, target: Path, token: str) -> None:
    if not os.path.lexists(target):
        os.rename(staging, target)
    elif _exchange(staging, target):
        fsync_dir(target.parent)
        _remove(staging)  # the old version, now under the hidden name
    else:
        retired = hidden_sibling(target, "old", token)
        os.rename(target, retired)
        try:
            os.rename(staging, target)
        except BaseException:
            os.rename(retired, target)
            raise
        fsync_dir(target.parent)
        _remove(retired)
    fsync_dir(target.parent)


def replace_path(
    target: str | os.PathLike[str], fill: Callable[[Path], None], *, directory: bool = True
) -> None:
    """Create ``target`` anew, or replace it as a whole, crash-safely.

    ``fill`` writes the new content into a hidden sibling (a fresh empty directory, or
    for ``directory=False`` the path of a file to create); its data and entries are
    flushed, then it takes the place of ``target`` (see the module docstring). Leftovers
    of an earlier interrupted replacement of ``target`` are recovered first. On any
    error, ``target`` is left exactly as it was and the sibling is removed.

    Args:
        target: The directory (or file) to create or replace.
        fill: Writes the new content; called with the sibling's path. It should flush
            the files it writes (``os.fsync``).
        directory: ``True`` to replace a directory, ``False`` for a single file.

    Raises:
        OSError: The parent cannot be created or locked, ``fill`` failed, or the swap
            failed; ``target`` is unchanged.
    """
    dest = Path(target)
    parent = dest.parent
    parent.mkdir(parents=True, exist_ok=True)
    with _locked(parent):
        _recover_locked(parent, dest.name)
        token = secrets.token_hex(6)
        staging = hidden_sibling(dest, "tmp", token)
        try:
            if directory:
                staging.mkdir()
            fill(staging)
            if directory:
                fsync_dir(staging)
            _swap_into_place(staging, dest, token)
        except BaseException:
            if os.path.lexists(staging):
                _remove(staging)
            raise


def check_writable(target: str | os.PathLike[str]) -> None:
    """Check that ``target`` could be created or replaced, trying what a replacement does.

    A hidden sibling is created and removed in the nearest existing ancestor directory,
    the way a replacement starts (no missing parent is created). When ``target`` exists,
    it is also renamed aside to its hidden ``.old-`` name and back, as the replacement
    will move it: a directory that cannot be moved (immutable, ``chattr +i``; a parent
    that refuses renames) fails here, not after the work that precedes the write. A
    crash between the two renames leaves what `recover` puts back. Holds the
    parent's lock (see the module docstring) while ``target`` is moved.

    Raises:
        OSError: A parent is not a directory, the directory is read-only, or ``target``
            cannot be moved (the error's ``filename`` names the directory that refused).
    """
    dest = Path(target)
    base, first = dest.parent, dest.name
    while not os.path.lexists(base) and base.parent != base:
        base, first = base.parent, base.name
    probe = hidden_sibling(base / first, "tmp")
    try:
        os.mkdir(probe)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(base)) from None
    os.rmdir(probe)
    if os.path.lexists(dest):
        _check_movable(dest)


def _check_movable(dest: Path) -> None:
    with _locked(dest.parent):
        aside = hidden_sibling(dest, "old")
        try:
            os.rename(dest, aside)
        except OSError as err:
            raise OSError(err.errno, err.strerror, str(dest)) from None
        try:
            os.rename(aside, dest)
        except OSError as err:  # pragma: no cover - it just moved; recovery puts it back
            _recover_locked(dest.parent, dest.name)
            raise OSError(err.errno, err.strerror, str(dest)) from None


def write_file_atomic(target: str | os.PathLike[str], data: bytes) -> None:
    """Replace a file's content as a whole (see `replace_path`).

    Raises:
        OSError: The file cannot be written; it is left as it was.
    """

    def fill(path: Path) -> None:
        with open(path, "xb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(OSError):
            shutil.copymode(target, path)  # keep the old file's permissions

    replace_path(target, fill, directory=False)
