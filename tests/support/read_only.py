"""A read-only file system for the leftovers of interrupted writes, without root tricks.

The tests may run as root, where a directory's mode refuses nothing, and mounting a
read-only file system needs privileges: so renaming and deleting the hidden leftovers
(``.<name>.tmp-<hex>``, ``.<name>.old-<hex>``) fails here as a read-only mount makes it
fail (``EROFS``), and every other path is left alone.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_dsh_replay._store.atomic import LEFTOVER


def _leftover(*paths: Any) -> str | None:
    for path in paths:
        if isinstance(path, str | os.PathLike) and LEFTOVER.fullmatch(Path(path).name):
            return os.fspath(path)
    return None


def refuse_leftover_writes(
    monkeypatch: pytest.MonkeyPatch, *, rename: bool = True, delete: bool = True
) -> None:
    """Make ``os.rename`` (``rename``) and ``os.unlink``/``shutil.rmtree`` (``delete``) of a
    leftover raise ``OSError(EROFS)`` naming it, for the rest of the test."""

    def refuse(path: str) -> OSError:
        return OSError(errno.EROFS, os.strerror(errno.EROFS), path)

    if rename:
        real_rename = os.rename

        def renaming(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
            hit = _leftover(src, dst)
            if hit is not None:
                raise refuse(hit)
            real_rename(src, dst, *args, **kwargs)

        monkeypatch.setattr(os, "rename", renaming)
    if delete:
        real_unlink, real_rmtree = os.unlink, shutil.rmtree

        def unlinking(path: Any, *args: Any, **kwargs: Any) -> None:
            hit = _leftover(path)
            if hit is not None:
                raise refuse(hit)
            real_unlink(path, *args, **kwargs)

        def removing_tree(path: Any, *args: Any, **kwargs: Any) -> None:
            hit = _leftover(path)
            if hit is not None:
                raise refuse(hit)
            real_rmtree(path, *args, **kwargs)

        monkeypatch.setattr(os, "unlink", unlinking)
        monkeypatch.setattr(shutil, "rmtree", removing_tree)
