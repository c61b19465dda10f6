r"""``{{fromRequest:<pattern>}}`` placeholders in replayed entries.

See [docs/placeholders.md#placeholders](../placeholders.md#placeholders).

A recorded entry can carry a value that only exists at replay time, such as an id the
code under test generates (``goal-3f2a...``). The entry spells it as
``{{fromRequest:<pattern>}}``; when the entry is served, the placeholder is replaced by
the last match of ``<pattern>`` in the live request's message text.

The rules ([docs/placeholders.md#resolution](../placeholders.md#resolution)):

- The **corpus** is every string leaf of ``request["messages"]``, collected depth-first
  (list items in order, then mapping values in insertion order), joined with ``"\n"``.
  Numbers, booleans and ``None`` are skipped; the system prompt and tools are not
  included.
- **Every string** of the entry is resolved (chunk fields, ``message``, ``code``,
  ``readyFile``); object keys are never changed. A string without the marker is kept.
- The **terminator** is the first ``}}`` after the marker, moved right while a further
  ``}`` follows: the last two braces of a run of ``}``. So
  ``{{fromRequest:id-[0-9a-f]{4}}}`` has the pattern ``id-[0-9a-f]{4}``.
- The **last** match wins (matches are found as JavaScript's global flag finds them);
  the replacement is group 1 when it took part in the match (an empty group 1 gives
  ``""``), else the whole match.
- A pattern that matches nothing in the live text is looked up again in that text as
  the recording would hold it (redacted,
  [docs/placeholders.md#resolution](../placeholders.md#resolution)): a pattern written
  against a recording that shows ``[REDACTED]`` resolves.
- Errors ([`PlaceholderError`][pytest_dsh_replay.PlaceholderError]): an unterminated
  placeholder, a pattern that does not compile, a pattern that matches nothing, and a
  search that runs longer than [`PATTERN_TIMEOUT_S`][pytest_dsh_replay.PATTERN_TIMEOUT_S]
  (catastrophic backtracking).

Patterns are written in JavaScript regular-expression syntax without flags (the
reference compiles them with ``new RegExp(pattern, "g")``);
`jsregex` translates them for the ``regex`` package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

import orjson

from .._errors import PlaceholderError
from .._format.json_values import map_strings
from .._wire.request import RequestView, request_corpus
from .jsregex import JsPatternError, translate_js_pattern

__all__ = [
    "MARKER",
    "PATTERN_TIMEOUT_S",
    "find_last_match",
    "request_corpus",
    "resolve_placeholders",
    "resolve_text",
]

MARKER: Final = "{{fromRequest:"
"""The text that opens a placeholder."""

PATTERN_TIMEOUT_S: Final = 1.0
"""The time budget, in seconds, for finding every match of one placeholder's pattern.

A pattern that backtracks catastrophically on the request text fails with a
[`PlaceholderError`][pytest_dsh_replay.PlaceholderError] instead of hanging the test.
"""

_TERMINATOR: Final = "}}"


@lru_cache(maxsize=256)
def _compile(pattern: str) -> Any:
    try:
        translated = translate_js_pattern(pattern)
    except JsPatternError as err:
        raise PlaceholderError(_invalid(pattern, str(err))) from None
    import regex  # type: ignore[import-untyped, unused-ignore]  # only when a placeholder is met

    try:
        return regex.compile(translated, regex.V0)
    except regex.error as err:  # pragma: no cover - the translator rejects these first
        raise PlaceholderError(_invalid(pattern, str(err))) from None


def _quote(text: str) -> str:
    return orjson.dumps(text).decode()


def _invalid(pattern: str, reason: str) -> str:
    return (
        f"fromRequest has an invalid pattern {_quote(pattern)}: {reason} "
        "(patterns use JavaScript regular-expression syntax)"
    )


def find_last_match(pattern: str, corpus: str, *, timeout: float = PATTERN_TIMEOUT_S) -> str | None:
    """Find the replacement for one placeholder: the last match of ``pattern``.

    Matches are enumerated as JavaScript's ``g`` flag does: each search starts where
    the previous match ended, one character further after an empty match.

    Args:
        pattern: The JavaScript pattern.
        corpus: The text to search (`request_corpus`).
        timeout: The budget for the whole search, in seconds (> 0).

    Returns:
        Group 1 of the last match when that group took part in it (possibly ``""``),
        else the whole last match; ``None`` when nothing matches.

    Raises:
        PlaceholderError: ``pattern`` is invalid, or the search ran out of time.
    """
    compiled = _compile(pattern)
    deadline = time.monotonic() + timeout
    last: Any = None
    pos = 0
    end = len(corpus)
    try:
        while pos <= end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            # finditer runs in C. It differs from JavaScript's global matching in one
            # case only: after an empty match at p it may still take a non-empty match
            # at p, where JavaScript moves on to p + 1. Restart there when that happens.
            restart = -1
            empty_at = -1
            for m in compiled.finditer(corpus, pos, timeout=remaining):
                start = m.start()
                if start == empty_at:
                    restart = start + 1
                    break
                last = m
                empty_at = start if m.end() == start else -1
            if restart < 0:
                break
            pos = restart
    except TimeoutError:
        raise PlaceholderError(
            f"fromRequest pattern {_quote(pattern)} took longer than {timeout:g} s to search "
            f"the request's {len(corpus)} characters of message text: it backtracks "
            "catastrophically (nested quantifiers such as (a+)+) or matches at almost every "
            "position; write a pattern that is anchored by literal text, such as "
            "goal-[0-9a-f-]+"
        ) from None
    if last is None:
        return None
    if compiled.groups >= 1:
        group = last.group(1)
        if group is not None:
            return str(group)
    return str(last.group(0))


def resolve_text(
    text: str,
    corpus: str | Callable[[], str],
    *,
    timeout: float = PATTERN_TIMEOUT_S,
    redacted: str | Callable[[], str] | None = None,
) -> str:
    """Replace every placeholder in one string.

    See [docs/placeholders.md#resolution](../placeholders.md#resolution).

    Args:
        text: The string; returned as it is when it holds no marker.
        corpus: The request corpus, or a function that builds it (called at most once,
            and only when ``text`` holds a marker).
        timeout: The search budget per placeholder, in seconds.
        redacted: The corpus as the recording would hold it (secrets redacted), or a
            function that builds it (called only when a pattern matches nothing in
            ``corpus``): searched when ``corpus`` has no match. ``None``: not searched.

    Returns:
        ``text`` with each placeholder replaced; replacements are not searched again.

    Raises:
        PlaceholderError: An unterminated placeholder, an invalid pattern, a pattern
            that matches nothing, or a search that ran out of time.
    """
    found = text.find(MARKER)
    if found < 0:
        return text
    haystack = corpus if isinstance(corpus, str) else corpus()
    parts: list[str] = []
    pos = 0
    while found >= 0:
        body = found + len(MARKER)
        close = text.find(_TERMINATOR, body)
        if close < 0:
            raise PlaceholderError(
                f"fromRequest placeholder is unterminated in {_quote(text)}: expected "
                f'"}}}}" after "{MARKER}"'
            )
        while close + 2 < len(text) and text[close + 2] == "}":
            close += 1
        pattern = text[body:close]
        value = find_last_match(pattern, haystack, timeout=timeout)
        if value is None and redacted is not None:
            redacted = redacted if isinstance(redacted, str) else redacted()
            if redacted != haystack:
                value = find_last_match(pattern, redacted, timeout=timeout)
        if value is None:
            raise PlaceholderError(
                f"fromRequest pattern {_quote(pattern)} matched nothing in the request "
                f"({len(haystack)} characters of message text searched); the live request "
                "does not carry the value this recorded entry expects"
            )
        parts.append(text[pos:found])
        parts.append(value)
        pos = close + 2
        found = text.find(MARKER, pos)
    parts.append(text[pos:])
    return "".join(parts)


def resolve_placeholders(
    value: Any,
    source: object,
    *,
    timeout: float = PATTERN_TIMEOUT_S,
    redact: Callable[[str], str] | None = None,
) -> Any:
    """Resolve every placeholder in every string of a JSON value.

    See [docs/placeholders.md#placeholders](../placeholders.md#placeholders).

    Args:
        value: A JSON value: an entry's wire form, a chunk list, a string. Mapping keys
            are never changed.
        source: The live request's `RequestView`
            (its `corpus`), or the
            request's ``messages`` themselves; the corpus is read only if a placeholder
            is found.
        timeout: The search budget per placeholder, in seconds.
        redact: The recording's redaction of a text: a pattern that matches nothing in
            the corpus is looked up in the redacted corpus (``None``: it is not).

    Returns:
        A value of the same shape. Containers holding a placeholder are new objects;
        the rest is returned as given (not copied).

    Raises:
        PlaceholderError: See `resolve_text`.
    """
    cache: list[str] = []
    redacted_cache: list[str] = []

    def corpus() -> str:
        if not cache:
            found = source.corpus if isinstance(source, RequestView) else request_corpus(source)
            cache.append(found)
        return cache[0]

    def redacted() -> str:
        if not redacted_cache:
            assert redact is not None
            redacted_cache.append(redact(corpus()))
        return redacted_cache[0]

    fallback = None if redact is None else redacted

    def resolve(text: str) -> str:
        if MARKER not in text:
            return text
        return resolve_text(text, corpus, timeout=timeout, redacted=fallback)

    return map_strings(value, resolve)
