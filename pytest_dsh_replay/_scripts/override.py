"""The override sidecar: entries a log cannot hold (``replay.override.json``).

``replay.override.json`` (the primary) and ``replay.<n>.override.json`` (child ``n``)
replace or patch a derived script with entries that cannot be derived from a log: a
``throw`` (a provider error before or during a stream) or a ``hang`` (a stream that is
cancelled). The document is either a bare array of entries (the whole script) or
``{"patches": [{"at": <call index>, "entry": <entry>}, ...]}``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import orjson

from .._errors import OverrideError
from .._format.json_values import is_safe_integer
from .entries import ReplayEntry, entry_from_json, invalid_entry

__all__ = ["Override", "apply_override", "load_override", "parse_override"]


@dataclass(frozen=True, slots=True)
class Override:
    """A parsed override sidecar ([docs/scenarios.md#overrides](../scenarios.md#overrides)).

    Attributes:
        path: The sidecar file (used in messages).
        replace: The whole replacement script, for the bare-array form; else ``None``.
        patches: ``(at, entry)`` pairs in file order, for the ``{patches}`` form.
    """

    path: str
    replace: tuple[ReplayEntry, ...] | None = None
    patches: tuple[tuple[int, ReplayEntry], ...] = ()


def parse_override(value: object, *, path: str) -> Override:
    """Validate a parsed sidecar document.

    See [docs/scenarios.md#overrides](../scenarios.md#overrides).

    Args:
        value: The parsed JSON: an array of entries, or ``{"patches": [{"at", "entry"}...]}``.
        path: The sidecar file, for messages.

    Raises:
        OverrideError: The first rule of
            [docs/scenarios.md#override-entries](../scenarios.md#override-entries) it breaks.
    """
    if isinstance(value, list):
        return Override(
            path=path,
            replace=tuple(
                entry_from_json(v, where=path, loc=f"entry {i}") for i, v in enumerate(value)
            ),
        )
    if (
        not isinstance(value, dict)
        or value.keys() != {"patches"}
        or not isinstance(value["patches"], list)
    ):
        raise invalid_entry(
            path, "document", "must be a ReplayEntry[] or { patches: [{at, entry}...] }"
        )
    patches: list[tuple[int, ReplayEntry]] = []
    for i, patch in enumerate(value["patches"]):
        if not isinstance(patch, dict) or patch.keys() != {"at", "entry"}:
            raise invalid_entry(path, f"patch {i}", "must contain exactly at and entry")
        at = patch["at"]
        if not is_safe_integer(at) or at < 0:
            raise invalid_entry(path, f"patch {i}", "at must be a non-negative safe integer")
        patches.append(
            (int(at), entry_from_json(patch["entry"], where=path, loc=f"patch {i}.entry"))
        )
    return Override(path=path, patches=tuple(patches))


def load_override(path: str | os.PathLike[str]) -> Override:
    """Read and validate an override sidecar file.

    See [docs/scenarios.md#overrides](../scenarios.md#overrides).

    Raises:
        OverrideError: The file cannot be read, is not valid JSON (with line and column),
            or fails validation.
    """
    where = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise OverrideError(
            f"cannot read override sidecar: {err.strerror or err}", path=where
        ) from None
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise OverrideError(
            f"invalid JSON ({err.msg} at column {err.colno}); expected a ReplayEntry[] "
            "or { patches: [...] } document",
            path=where,
            line=err.lineno,
        ) from None
    return parse_override(value, path=where)


def apply_override(derived: Sequence[ReplayEntry], override: Override) -> list[ReplayEntry]:
    """Apply a sidecar to a derived script.

    See [docs/scenarios.md#override-patches](../scenarios.md#override-patches).

    A bare array replaces the script. Patches apply in file order; ``at`` is checked
    against the length before any patch, so ``at == len(derived)`` appends one entry and
    nothing beyond it is allowed.

    Raises:
        OverrideError: A patch index is out of range or repeated.
    """
    if override.replace is not None:
        return list(override.replace)
    script = list(derived)
    n = len(derived)
    seen: set[int] = set()
    for at, entry in override.patches:
        if at > n:
            raise OverrideError(
                f"override patch index {at} out of range (derived script has {n} call(s); "
                f"at == {n} appends one call)",
                path=override.path,
            )
        if at in seen:
            raise OverrideError(f"duplicate override patch index {at}", path=override.path)
        seen.add(at)
        if at == len(script):
            script.append(entry)
        else:
            script[at].verify()  # the log's call is read all the same (docs/format.md#raw-payloads)
            script[at] = entry
    return script
