"""What the scripted model and its server both check of their arguments.

The two modules share these without importing each other's privates: the server
serves a scripted model (`Scripted` marks one) and checks its own arguments as
the model checks its rules ([docs/recording.md#scripted-model](../recording.md#scripted-model)).
"""

from __future__ import annotations

import math

from .._errors import ScriptedModelError

__all__ = ["Scripted", "fail", "seconds"]


class Scripted:
    """Marks a scripted model: what a ``ScriptedServer`` serves."""

    __slots__ = ()


def fail(message: str) -> ScriptedModelError:
    """The error a scripted model or server raises for a bad argument."""
    return ScriptedModelError(message)


def seconds(value: object, what: str, *, zero: bool = True) -> float:
    """``value`` as seconds: finite, ``>= 0`` (``> 0`` when not ``zero``).

    Finite, so every wait a scripted model or server is given ends by itself.

    Raises:
        ScriptedModelError: ``value`` is not such a number (a bool, NaN, infinity, a
            negative); the message starts with ``what``.
    """
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and (value >= 0 if zero else value > 0)
    ):
        return float(value)
    raise fail(
        f"{what} takes a finite number of seconds {'>= 0' if zero else '> 0'}, got {value!r}"
    )
