"""JSON values as JavaScript reads them: the one place for what "lossless" means.

The dsh harness and runtime are JavaScript. A parsed JSON value reads back the same there
only when its integers are *safe* (``|n| <= 2**53 - 1``) and its floats finite; the
session store is stricter still for the data it is given to write (no ``-0.0``, no lone
surrogates, plain ``dict``/``list``/scalar types only). This module holds those rules and
the small helpers every layer uses to apply them and to word messages about them:

- numbers: `is_safe_integer`, `as_safe_integer`, `is_count`,
  `is_json_number`;
- whole values: `is_lossless` and its C-speed precheck `surely_lossless`
  (parsed values, the runtime's rule), `json_copy` (any Python value, the store's
  rule, with an error naming the offending path), `plain_json` (never an error:
  what a value is closest to in lossless JSON);
- messages: `describe_json`, `js_string`, `js_json`;
- `ABSENT`, the one "no value here" sentinel (a key that is not there, which is not
  the same as JSON ``null``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import orjson

from .._errors import SessionStoreError

__all__ = [
    "ABSENT",
    "MAX_NESTING",
    "MAX_SAFE_INTEGER",
    "PLAIN_ONLY",
    "Absent",
    "as_safe_integer",
    "describe_json",
    "holds_lone_surrogate",
    "holds_non_finite",
    "is_count",
    "is_json_number",
    "is_lossless",
    "is_safe_integer",
    "js_json",
    "js_string",
    "json_copy",
    "plain_json",
    "surely_lossless",
]


PLAIN_ONLY: Final = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)
"""``orjson`` options that refuse what is not plain JSON (subclasses, datetimes and
dataclasses raise ``TypeError`` instead of being serialized as JSON values)."""


class Absent(enum.Enum):
    """The type of `ABSENT` (an enum, so a type checker narrows ``x is ABSENT``)."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT
"""A value that is not there: a missing key, a field a line leaves out.

Not JSON ``null``, which is a value. Compare with ``is``; annotate as ``T | Absent``.
"""

MAX_SAFE_INTEGER: Final[int] = 2**53 - 1
"""The largest integer a JavaScript number holds exactly (``Number.MAX_SAFE_INTEGER``)."""

MAX_NESTING: Final[int] = 1024
"""The deepest nesting of arrays and objects a record may have: 1024 levels.

This is the JSON parser's own limit; a deeper record is refused, naming its line. (A
stream chunk that replay serves must also fit the serializer's limit of 254 levels, so
a chunk nested deeper than that is refused by the script builder, naming its line.)
Every walk over a parsed value is iterative, so a value up to this depth is read,
checked and shown without recursion ([docs/limits.md#nesting](../limits.md#nesting)).
"""


# --- numbers -------------------------------------------------------------------------------


def is_safe_integer(value: object) -> bool:
    """Tell whether ``value`` is a JavaScript safe integer (``Number.isSafeInteger``).

    Args:
        value: A parsed JSON value, of any type.

    Returns:
        ``True`` for an ``int`` (not ``bool``) or an integral ``float`` with
        ``|value| <= 2**53 - 1``; ``False`` otherwise. JSON ``3.0`` is an integer in
        JavaScript, so it counts.
    """
    if type(value) is int:  # the common case, first
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if isinstance(value, float):
        return math.isfinite(value) and value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return False


def as_safe_integer(value: object) -> int | None:
    """Return ``value`` as an ``int`` when `is_safe_integer` holds, else ``None``."""
    if type(value) is int:  # the common case, first
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else None
    if not is_safe_integer(value):
        return None
    assert isinstance(value, int | float)
    return int(value)


def is_count(value: object) -> bool:
    """Tell whether ``value`` is a non-negative safe integer and not ``-0.0``.

    The rule of counts, indexes and times that may not be negative (``createdAt``,
    ``delegationDepth``, ``seedLength``, a stream run's ``index``).
    """
    if type(value) is int:  # the common case, first
        return 0 <= value <= MAX_SAFE_INTEGER
    return (
        is_safe_integer(value)
        and value >= 0  # type: ignore[operator]
        and not (isinstance(value, float) and math.copysign(1.0, value) < 0)
    )


def is_json_number(value: object) -> bool:
    """Tell whether ``value`` is a JSON number as parsed: an ``int`` or ``float``, not ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


# --- whole values ----------------------------------------------------------------------------


def is_lossless(value: Any) -> bool:
    """Tell whether a parsed JSON value reads back unchanged in JavaScript.

    The dsh runtime's rule for a raw stream chunk: every integer is safe and every float
    finite, at any depth. Meant for values a JSON parser produced (string keys, plain
    types); for values built by code use `json_copy`, which is stricter.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        cls = item.__class__
        if cls is dict:
            stack.extend(item.values())
        elif cls is list:
            stack.extend(item)
        elif (cls is int and not is_safe_integer(item)) or (
            cls is float and not math.isfinite(item)
        ):
            return False
    return True


def holds_non_finite(value: object) -> bool:
    """Tell whether a float in ``value``, at any depth, is NaN or infinite.

    JSON has no form for those, and ``orjson`` writes them as ``null``; so a value whose
    serialized text holds no ``null`` holds none (callers check the text first, and walk
    only when it does). Mappings are walked by value, lists and tuples by item.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def surely_lossless(value: object) -> bool:
    """`is_lossless`, decided in C where that is certain.

    The serializer refuses unsafe integers; a non-finite float would be written as
    ``null``, so a value whose text holds ``null`` anywhere gives ``False`` too, as does
    anything the serializer refuses. ``True`` therefore implies `is_lossless`;
    ``False`` means "not certain": ask `is_lossless`.
    """
    try:
        return b"null" not in orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except TypeError:  # orjson.JSONEncodeError included
        return False


def json_copy(value: object, where: str) -> Any:
    """Return a deep copy of ``value`` if it is lossless JSON, as the session store requires.

    Lossless means what survives ``JSON.stringify`` / ``JSON.parse`` unchanged: ``None``,
    ``bool``, strings without lone surrogates, safe integers, finite floats other than
    ``-0.0``, lists and string-keyed dicts of those. Subclasses of ``str``, ``int`` and
    ``float`` (enums and the like) are copied as the plain value.

    Args:
        value: A Python value, of any type.
        where: How messages name the value (``"user/message data"``); nested values are
            named by their path below it (``data.items[2]``).

    Returns:
        The copy: plain ``dict``, ``list`` and scalar objects only.

    Raises:
        SessionStoreError: The value is not lossless JSON; the message names the path
            of the first offending value and why (the store refuses what it cannot
            read back the same).
    """
    if value.__class__ is dict or value.__class__ is list:
        # The common case in C: a serializer that refuses lone surrogates, non-string
        # keys and unsafe integers, then a parse. What it cannot refuse is caught after:
        # -0.0 by its text, NaN and infinities (written as null), tuples and objects it
        # serializes (enums, UUIDs, dates, dataclasses) by comparing the copy with the
        # value. Anything doubtful takes the walk below, which names the problem.
        try:
            blob = orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
        except TypeError:  # orjson.JSONEncodeError included
            blob = b"-0.0"
        if b"-0.0" not in blob:
            copy = orjson.loads(blob)
            if copy == value:
                return copy
    return _json_walk(value, where)


def _not_lossless(where: str, why: str) -> SessionStoreError:
    return SessionStoreError(f"{where} is not lossless JSON: {why}")


def holds_lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate: text UTF-8 (a file, a database) cannot hold."""
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _walk_str(value: str, where: str) -> str:
    if holds_lone_surrogate(value):
        raise _not_lossless(where, "a string holds a lone surrogate")
    return value


def _walk_scalar(value: object, where: str) -> Any:
    return value


def _walk_int(value: int, where: str) -> int:
    if not is_safe_integer(value):
        raise _not_lossless(
            where,
            f"integer {value} is outside the safe range +-(2**53 - 1) a JSON reader keeps exactly",
        )
    return value


def _walk_float(value: float, where: str) -> float:
    if not math.isfinite(value):
        raise _not_lossless(where, f"{value!r} has no JSON form")
    if value == 0.0 and math.copysign(1.0, value) < 0:
        raise _not_lossless(where, "-0.0 reads back as 0")
    return value


_SCALAR_WALKERS: Final[dict[type, Callable[[Any, str], Any]]] = {
    str: _walk_str,
    type(None): _walk_scalar,
    bool: _walk_scalar,
    int: _walk_int,
    float: _walk_float,
}
"""How `_json_walk` copies a scalar of each exact JSON type."""


class _Copying:
    """A dict or list being copied by `_json_walk`: its copy, and what is left of it."""

    __slots__ = ("members", "out")

    def __init__(self, out: dict[str, Any] | list[Any], members: Iterator[tuple[Any, Any, str]]):
        self.out = out
        self.members = members  # (key, or None in a list; value; its path)


def _dict_members(value: Mapping[Any, Any], where: str) -> Iterator[tuple[Any, Any, str]]:
    for k, v in value.items():
        if k.__class__ is not str:
            raise _not_lossless(where, f"object key {k!r} is not a string")
        _walk_str(k, f"{where} (an object key)")
        yield k, v, f"{where}.{k}"


def _copy_or_open(value: object, where: str) -> Any:
    """A scalar's copy, or a `_Copying` for a dict or list (subclasses too)."""
    walker = _SCALAR_WALKERS.get(value.__class__)
    if walker is not None:
        return walker(value, where)
    # Subclasses: containers are walked, scalars (enums and the like) give their plain value.
    if isinstance(value, dict):
        return _Copying({}, _dict_members(value, where))
    if isinstance(value, list):
        return _Copying([], ((None, v, f"{where}[{i}]") for i, v in enumerate(value)))
    if isinstance(value, str):
        return _walk_str(str.__str__(value), where)
    if isinstance(value, int):
        return _walk_int(int(value), where)
    if isinstance(value, float):
        return _walk_float(float(value), where)
    raise _not_lossless(
        where,
        f"{type(value).__name__} values have no exact JSON form (use dict, list, str, int, "
        "float, bool or None)",
    )


def _json_walk(value: object, where: str) -> Any:
    """`json_copy`, one value at a time (the slow path, which names a problem).

    Iterative, so any depth is walked without recursion; a value nested deeper than
    [`MAX_NESTING`][pytest_dsh_replay.MAX_NESTING] is refused, as no reader reads it back.
    """
    first = _copy_or_open(value, where)
    if not isinstance(first, _Copying):
        return first
    stack = [first]
    while stack:
        top = stack[-1]
        member = next(top.members, None)
        if member is None:
            stack.pop()
            continue
        key, item, path = member
        copied = _copy_or_open(item, path)
        if isinstance(copied, _Copying):
            if len(stack) >= MAX_NESTING:
                raise _not_lossless(
                    path,
                    f"it nests arrays and objects deeper than {MAX_NESTING} levels, which "
                    "no JSON reader here reads back",
                )
            stack.append(copied)
            copied = copied.out
        out = top.out
        if isinstance(out, list):
            out.append(copied)
        else:
            out[key] = copied
    return first.out


def map_strings(value: object, change: Callable[[str], object]) -> Any:
    """A copy of the JSON value ``value`` with each string passed through ``change``.

    Dicts and lists are copied (keys kept as they are), strings replaced by what
    ``change`` returns, every other value kept. ``value`` is not modified.
    """
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [map_strings(v, change) for v in value]
    return value


def plain_json(value: object) -> Any:
    """``value`` as the nearest JSON value, for logging what a caller sent: never an error.

    ``None``, ``bool`` and strings stay; an integer outside the safe range becomes its
    decimal string; a NaN or infinite float becomes ``None``; a mapping becomes a dict
    with string keys (``str(key)``), a list or tuple a list; anything else its
    ``str()``. Unlike `json_copy` this keeps ``-0.0`` and strings as they are.
    """
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER else str(value)
    if isinstance(value, float):
        return value if value == value and value not in (math.inf, -math.inf) else None
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    return str(value)


# --- messages -------------------------------------------------------------------------------


def describe_json(value: object) -> str:
    """How a message names the kind of a parsed JSON value (``a string``, ``null``, ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _js_scalar(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value)) if abs(value) < 1e21 else repr(value)
    if isinstance(value, int | float | str):
        return str(value)
    return "[object Object]"


def js_string(value: object) -> str:
    """A parsed JSON value as JavaScript's ``String(value)`` (or a template literal) prints it.

    ``null``, ``true``/``false``, integral numbers without a fraction (``3.0`` is ``3``),
    strings as they are, objects as ``[object Object]``; arrays join their elements with
    ``,`` (``null`` elements empty), nested arrays too, at any depth. Other floats print
    as Python writes them, which matches JavaScript for the values logs hold.
    """
    if not isinstance(value, list):
        return _js_scalar(value)
    stack: list[tuple[Iterator[Any], list[str]]] = [(iter(value), [])]
    while True:
        items, parts = stack[-1]
        for item in items:
            if isinstance(item, list):
                stack.append((iter(item), []))
                break
            parts.append("" if item is None else _js_scalar(item))
        else:
            stack.pop()
            text = ",".join(parts)
            if not stack:
                return text
            stack[-1][1].append(text)


def js_json(value: object) -> str:
    """``value`` as ``JSON.stringify`` writes it: ``undefined`` for `ABSENT`.

    A value the serializer refuses reads ``[unprintable]``.
    """
    if value is ABSENT:
        return "undefined"
    try:
        return orjson.dumps(value).decode("utf-8")
    except TypeError:
        return "[unprintable]"
