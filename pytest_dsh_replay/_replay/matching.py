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
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = ["FirstMessage", "shared_start", "trim"]

_ID_VALUE: Final = r"[^\s\"'`]+"
_PATH_VALUE: Final = r"/[^\n\"'`]*?"
_TRIM: Final = 80


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
        """Whether one of a request's `opening_texts` is this message."""
        if self._pattern is None:
            return self.text in openings
        return any(self._pattern.fullmatch(text) is not None for text in openings)
