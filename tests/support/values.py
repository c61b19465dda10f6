"""Comparing values as a copy or a normalization must keep them: types included."""

from __future__ import annotations

from typing import Any


def same_values(left: Any, right: Any) -> bool:
    """Equal values of equal types all the way down (nan equal to nan, -0.0 to -0.0 only)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same_values(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple):
        return len(left) == len(right) and all(map(same_values, left, right))
    return repr(left) == repr(right)
