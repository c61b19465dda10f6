"""Which recorded session a new live session is: matching first user messages.

A new live session is told apart from its siblings by its first user message. The live
request and the recording do not agree byte for byte, so the comparison allows for
what legitimately differs:

- **Where the message ends.** A request's first user message may be followed by more
  user content in the same turn (the dsh runtime adds a runtime-context message, which
  holds the working directory; on the Anthropic route it is merged into the same
  message as a further text block). The recorded message must equal the text of the
  request's leading user content up to a block or message boundary.
- **Session ids.** A child's first message may name its parent's live id ("Your parent
  agent id is ..."); ids differ between recording and replay. Every recorded session id
  of the scenario that occurs in a recorded message is a wildcard matching one id-like
  value (no white space, no quote), the same value at each of its occurrences in that
  message.
- **Text blocks** are joined without a separator, as on the wire.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

__all__ = [
    "FirstMessage",
    "opening_texts",
    "opening_units",
    "seed_messages",
    "shared_start",
    "trim",
]

_ID_VALUE: Final = r"[^\s\"'`]+"
_PATH_VALUE: Final = r"/[^\n\"'`]*?"
_TRIM: Final = 80
_MAX_RUN: Final = 16  # trailing user messages considered


def shared_start(a: str, b: str) -> int:
    """How many leading characters ``a`` and ``b`` have in common."""
    return next(
        (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def trim(text: str | None, limit: int = _TRIM, *, near: str | None = None) -> str:
    """``text`` quoted for a message, cut to ``limit`` characters (``(none)`` for None).

    With ``near`` (another text the reader compares it with), a text that starts like
    ``near`` is shown from a little before the first character where the two differ,
    so two long messages never look alike only because both were cut.
    """
    if text is None:
        return "(none)"
    text = " ".join(text.split())
    start = 0
    if near is not None:
        same = shared_start(text, " ".join(near.split()))
        if same > limit // 2:
            start = same - limit // 4
    shown = text[start : start + limit - (3 if start else 0)]
    if start:
        shown = "..." + shown
    if len(text) - start > len(shown) - (3 if start else 0):
        shown = shown[: limit - 3] + "..."
    return repr(shown)


def _units(message: Mapping[str, object]) -> list[str]:
    content = message.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, Sequence):
        return [
            block["text"]
            for block in content
            if isinstance(block, Mapping)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ]
    return []


def _trailing_user(messages: object) -> int:
    """The index where the request's trailing run of user messages starts (-1: none)."""
    if isinstance(messages, str) or not isinstance(messages, Sequence):
        return -1
    start = len(messages)
    while start > 0:
        message = messages[start - 1]
        if not (isinstance(message, Mapping) and message.get("role") == "user"):
            break
        start -= 1
    return start if start < len(messages) else -1


def _run(messages: object) -> list[list[str]]:
    start = _trailing_user(messages)
    if start < 0:
        return []
    assert isinstance(messages, Sequence)
    return [_units(message) for message in messages[start:]]


def opening_units(messages: object) -> list[str]:
    """The text units (string contents and text blocks) of the trailing user messages.

    Args:
        messages: A request's ``messages`` (dsh, OpenAI or Anthropic shapes).

    Returns:
        In order; ``[]`` when the request does not end with user messages.
    """
    return [unit for units in _run(messages) for unit in units]


def opening_texts(messages: object) -> list[str]:
    """The texts a recorded first user message may equal, the whole run last.

    Starting at each of the trailing user messages (a request may put other user
    messages first), the joined text units up to each block or message boundary.
    """
    run = _run(messages)[-_MAX_RUN:]
    texts: list[str] = []
    for first in range(len(run)):
        joined = ""
        for units in run[first:]:
            for unit in units:
                joined += unit
                texts.append(joined)
    whole = "".join(unit for units in run for unit in units)
    if texts and texts[-1] != whole:
        texts.append(whole)
    return texts


def seed_messages(messages: object) -> list[object]:
    """The messages before the trailing user messages: a fork child's inherited part.

    Leading system messages alone are no seed (``[]``).
    """
    start = _trailing_user(messages)
    if start <= 0:
        return []
    assert isinstance(messages, Sequence)
    seed = list(messages[:start])
    if all(isinstance(m, Mapping) and m.get("role") == "system" for m in seed):
        return []
    return seed


class FirstMessage:
    """A recorded first user message, compiled for matching live requests.

    Args:
        text: The recorded message's text (blocks joined without a separator).
        session_ids: Recorded session ids that act as wildcards inside ``text`` (ids
            shorter than 4 characters are ignored: they would match ordinary words).
        paths: Recorded working directories (and their ``{{cwd}}`` token) that act as
            wildcards too: a runtime's context message names the directory it runs in,
            which differs between the recording and the replay.
    """

    __slots__ = ("_pattern", "text")

    def __init__(self, text: str, session_ids: Iterable[str] = (), paths: Iterable[str] = ()):
        self.text = text
        values = {i: _ID_VALUE for i in session_ids if len(i) >= 4 and i in text}
        values.update({p: _PATH_VALUE for p in paths if len(p) >= 2 and p in text})
        if not values:
            self._pattern: re.Pattern[str] | None = None
            return
        finder = re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
        parts: list[str] = []
        groups: dict[str, str] = {}
        end = 0
        for found in finder.finditer(text):
            parts.append(re.escape(text[end : found.start()]))
            name = groups.get(found.group())
            if name is None:
                name = groups[found.group()] = f"w{len(groups)}"
                parts.append(f"(?P<{name}>{values[found.group()]})")
            else:
                parts.append(f"(?P={name})")
            end = found.end()
        parts.append(re.escape(text[end:]))
        self._pattern = re.compile("".join(parts), re.DOTALL)

    def matches(self, openings: Sequence[str]) -> bool:
        """Whether one of a request's :func:`opening_texts` is this message."""
        if self._pattern is None:
            return self.text in openings
        return any(self._pattern.fullmatch(text) is not None for text in openings)
