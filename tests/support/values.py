"""Comparing values as a copy or a normalization must keep them: types included."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

UTF8 = st.characters(exclude_categories=["Cs"])
"""Every character UTF-8 encodes (all but the surrogates): ``st.text()``'s own alphabet.

``st.text(UTF8)`` draws the very examples ``st.text()`` draws, without the table of the
codec that the default alphabet (``characters(codec="utf-8")``) makes Hypothesis build by
encoding each of the 1.1 million code points, about 1.4 s of CPU in every process whose
``.hypothesis/`` directory does not hold it yet: each xdist worker of a fresh clone.
"""


def same_values(left: Any, right: Any) -> bool:
    """Equal values of equal types all the way down (nan equal to nan, -0.0 to -0.0 only)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same_values(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(same_values, left, right))
    return repr(left) == repr(right)


def json_paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path into a JSON value (the value itself included), depth first."""
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from json_paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from json_paths(v, (*path, i))


def replace_at(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """``value`` with ``new`` at ``path`` (in place; the root itself is replaced by a new one)."""
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return value
