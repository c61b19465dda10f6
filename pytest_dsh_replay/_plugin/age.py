"""How old a recording may be before its replay warns (pytest-free).

A recording's age is read from the recording itself: its primary session's header
``createdAt``, the time the recorded run started, never the file's modification time
(a git checkout sets that to the time of the checkout). A test's largest age comes from
its ``dsh_scenario`` marker's ``max_age=``, else the ``dsh_max_age`` ini key
([docs/recording.md#expiry](../recording.md#expiry)).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from .._errors import DshReplayError

__all__ = ["Expiry", "MaxAgeError", "describe_age", "expiry", "parse_max_age"]


class MaxAgeError(DshReplayError, ValueError):
    """A ``max_age`` (marker keyword or ``dsh_max_age`` ini key) that names no duration.

    The message quotes the value and the form it takes (``30d``, ``12h``, ``1d12h``).
    """


_UNITS: Final = {"w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1}
_PART: Final = re.compile(r"(\d+)([wdhms])")
_WHOLE: Final = re.compile(r"(?:\d+[wdhms])+")
_FORM: Final = (
    "a duration such as 30d, 12h or 1d12h (units: w weeks, d days, h hours, m minutes, s seconds)"
)


def parse_max_age(value: object, where: str) -> timedelta | None:
    """A largest recording age from ``value``; ``None`` when it sets none.

    Args:
        value: ``None`` or ``""`` (no limit), a `datetime.timedelta`, or a string of one
            or more ``<count><unit>`` parts, units ``w``, ``d``, ``h``, ``m``, ``s``
            (``"30d"``, ``"12h"``, ``"1d12h"``; spaces around the value are ignored).
        where: Where the value comes from, for the message (``"dsh_max_age"``, a test's
            node id and its marker).

    Returns:
        The duration (positive), or ``None`` for no limit.

    Raises:
        MaxAgeError: Anything else, a duration of zero, or one longer than
            `datetime.timedelta` holds (999,999,999 days).
    """
    if value is None:
        return None
    if isinstance(value, timedelta):
        age = value
    elif isinstance(value, str):
        text = value.strip().lower()
        if not text:
            return None
        if "M" in value:  # months to many readers: m is minutes here, and no unit is months
            raise MaxAgeError(
                f"{where}: max age {value!r} uses M, which is not a unit here (m is "
                f"minutes; write months as days, 180d); it takes {_FORM}"
            )
        if _WHOLE.fullmatch(text) is None:
            raise MaxAgeError(f"{where}: max age {value!r} is not {_FORM}")
        seconds = sum(int(n) * _UNITS[u] for n, u in _PART.findall(text))
        try:
            age = timedelta(seconds=seconds)
        except OverflowError:  # past timedelta's 999,999,999 days
            raise MaxAgeError(
                f"{where}: max age {value!r} is longer than a duration can be "
                f"({timedelta.max.days:,} days at most)"
            ) from None
    else:
        raise MaxAgeError(f"{where}: max age takes {_FORM} or a timedelta, got {value!r}")
    if age <= timedelta(0):
        raise MaxAgeError(f"{where}: max age {value!r} must be longer than zero")
    return age


@dataclass(frozen=True)
class Expiry:
    """A recording older than its test allows.

    Attributes:
        age: How long ago the recording was made (from its primary's ``createdAt``).
        max_age: The largest age its test allows.
    """

    age: timedelta
    max_age: timedelta

    def describe(self) -> str:
        """``"recorded 41 days ago, older than the 30 days allowed"``."""
        return (
            f"recorded {describe_age(self.age)} ago, older than the "
            f"{describe_age(self.max_age, exact=True)} allowed"
        )


def expiry(created_at_ms: int, max_age: timedelta | None, now_ms: int) -> Expiry | None:
    """The expiry of a recording made at ``created_at_ms``, or ``None`` when it is young enough.

    Args:
        created_at_ms: The primary's header ``createdAt``, Unix milliseconds. A value of
            0 or less says the recording holds no time (a header without one): such a
            recording never expires.
        max_age: The largest age allowed; ``None`` allows any.
        now_ms: The current time, Unix milliseconds.
    """
    if max_age is None or created_at_ms <= 0:
        return None
    age = timedelta(milliseconds=max(0, now_ms - created_at_ms))
    return Expiry(age, max_age) if age > max_age else None


def describe_age(age: timedelta, *, exact: bool = False) -> str:
    """An age in its largest whole unit: ``"41 days"``, ``"13 hours"``, ``"1 minute"``.

    ``exact``: in the largest unit that divides it (``36h`` is ``"36 hours"``, not ``"1
    day"``): a configured limit is shown as it was set.
    """
    seconds = int(age.total_seconds())
    for name, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and (not exact or seconds % size == 0):
            count = seconds // size
            return f"{count} {name}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"
