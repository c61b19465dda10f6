"""Scenario names and paths: from a test's name, or a ``dsh_scenario`` marker argument."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from .._errors import ScenarioError
from .._scripts.scenario import iter_scenario_dirs

__all__ = [
    "MAX_SCENARIO_NAME",
    "SCENARIO_RULE",
    "find_scenario_dirs",
    "inside_root",
    "resolve_scenario",
    "scenario_name",
]

MAX_SCENARIO_NAME: Final = 100
"""The longest scenario directory name derived from a test name, in characters."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._\[\]-]")


def scenario_name(test_name: str) -> str:
    """Derive a scenario directory name from a test's name.

    Args:
        test_name: The test's name inside its module as pytest spells it, classes
            included: ``test_spawn``, ``TestAgent::test_fork[gpt/4-x]``.

    Returns:
        A single path segment made of ``A-Z a-z 0-9 . _ - [ ]`` that never starts with
        ``.`` and is at most `MAX_SCENARIO_NAME` characters. ``::`` becomes ``.``.
        A name that had to be changed in any other way (a ``.`` of its own, ``/``,
        ``..``, spaces, non-ASCII) or shortened gets a hash of the original appended,
        so the mapping is injective: two different test names never share a directory.
        (Names that differ only in letter case are distinct here but share a directory
        on case-insensitive file systems; the plugin refuses such pairs.)
    """
    readable = test_name.replace("::", ".")
    safe = _UNSAFE.sub("_", readable).lstrip(".") or "_"
    # A "." of the name's own would read back as "::": only "::" may become ".".
    ambiguous = "." in test_name.replace("::", "")
    if ambiguous or safe != readable or len(safe) > MAX_SCENARIO_NAME:
        digest = hashlib.sha256(test_name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        safe = f"{safe[: MAX_SCENARIO_NAME - len(digest) - 1]}-{digest}"
    return safe


SCENARIO_RULE: Final = (
    "a scenario must be a directory strictly inside the snapshot root (recording replaces "
    "that whole directory)"
)
"""The rule every ``dsh_scenario`` name follows; quoted by each refusal.

See [docs/limits.md#paths](../limits.md#paths).
"""


def resolve_scenario(
    root: Path, name_or_path: str | os.PathLike[str], *, resolved_root: str | None = None
) -> Path:
    """Resolve a ``dsh_scenario`` marker argument to a scenario path.

    Args:
        root: The snapshot root (``dsh_snapshot_dir``).
        name_or_path: An absolute path (used as it is; `inside_root` says whether it
            may be recorded), or a name relative to ``root`` (``"spawn"``,
            ``"agents/fork"``).
        resolved_root: ``str(root.resolve())`` when the caller knows it already (the
            plugin resolves each root once per run); a one-part name that is not a
            symbolic link is then checked without resolving anything.

    Returns:
        The scenario path: ``root / name`` for a relative name.

    Raises:
        ScenarioError: A part of the name or path is longer than 237 bytes (what leaves
            room in a directory name for the hidden copy a recording writes); a
            relative name is empty, holds a NUL byte, or does not resolve
            (``..``, symbolic links followed) to a directory strictly inside ``root``:
            ``"."``, ``"./"`` and ``"a/.."`` name the root itself, ``"../x"`` leaves it.
            The message quotes the name and `SCENARIO_RULE`.
    """
    text = os.fspath(name_or_path)
    if "\x00" in text:
        raise ScenarioError(f"a scenario name cannot contain a NUL byte: {text!r}", path=str(root))
    if len(text) > _MAX_PART_BYTES // 4:  # shorter, no part can exceed the bytes
        _refuse_long_parts(root, text)
    candidate = Path(text)
    if candidate.is_absolute():
        return candidate
    if not text.strip():
        raise ScenarioError(f"scenario name {text!r} is empty: {SCENARIO_RULE}", path=str(root))
    parts = candidate.parts
    if (
        resolved_root is not None
        and len(parts) == 1
        and parts[0] not in (".", "..")
        and not os.path.islink(root / candidate)
    ):
        return root / candidate  # directly inside the root: it cannot leave it
    resolved = (root / candidate).resolve()
    base = root.resolve() if resolved_root is None else Path(resolved_root)
    if resolved == base:
        raise ScenarioError(
            f"scenario name {text!r} names the snapshot root itself: {SCENARIO_RULE}; "
            "use a name such as 'agents/spawn'",
            path=str(root),
        )
    if base not in resolved.parents:
        raise ScenarioError(
            f"scenario name {text!r} leaves the snapshot root (it resolves to {resolved}): "
            f"{SCENARIO_RULE}; use a name inside it (an absolute path is replayed as it is)",
            path=str(root),
        )
    return root / candidate


_MAX_PART_BYTES: Final = 255 - len(".tmp-0123456789ab") - 1
"""The longest scenario name part, in bytes (UTF-8): 237, so that the hidden siblings a
recording writes beside it (``.<name>.tmp-<12 hex>``, ``.<name>.lock``) still fit in the
255 bytes most file systems take for a name."""


def _refuse_long_parts(root: Path, text: str) -> None:
    """Refuse a scenario name or path with a part longer than a directory name can be.

    Raises:
        ScenarioError: Quoting the start of the part, its length and the limit.
    """
    for part in Path(text).parts:
        size = len(part.encode("utf-8", "surrogatepass"))
        if size > _MAX_PART_BYTES:
            raise ScenarioError(
                f"scenario name {part[:40]!r}... is {size} bytes long, and a scenario name "
                f"holds at most {_MAX_PART_BYTES} bytes (a directory name's 255, less what "
                "the hidden copy a recording writes beside it adds): use a shorter name",
                path=str(root),
            )


def inside_root(root: Path, path: Path, *, resolved_root: str | None = None) -> bool:
    """Whether ``path`` resolves (symbolic links followed) to a place strictly inside ``root``.

    Args:
        root: The snapshot root.
        path: A scenario path (absolute, as a marker may give it).
        resolved_root: ``str(root.resolve())`` when the caller knows it already.
    """
    base = root.resolve() if resolved_root is None else Path(resolved_root)
    return base in path.resolve().parents


def find_scenario_dirs(root: Path) -> Iterator[Path]:
    """Yield every scenario directory under ``root`` (none when ``root`` is missing)."""
    if root.is_dir():
        yield from iter_scenario_dirs(root)
