"""What a session log's file name says: ``session[.<n>][.v<N>].jsonl[.zst|.zstd]``.

A scenario directory names its primary ``session.jsonl`` and its children
``session.<n>.jsonl``; a name may carry the log format's generation (``session.v4.jsonl``)
and the zstd suffix. `parse_log_name` reads a name once (cached: a corpus load asks
for the same few names again and again); `check_log_name` refuses a log whose name
and header disagree on the format version.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from .._errors import SessionLogError
from .events import SessionHeader

__all__ = ["LogName", "check_log_name", "entry_log_name", "parse_log_name"]

LOG_NAME_PATTERN: Final = (
    r"session(?:\.(?P<child>[1-9][0-9]*))?(?:\.v(?P<version>[1-9][0-9]*))?\.jsonl"
    r"(?P<zstd>\.zst|\.zstd)?"
)
"""What `parse_log_name` accepts, as a regular expression (it reads names without one:
compiling this costs more than a cold start reads)."""


@dataclass(frozen=True, slots=True)
class LogName:
    """What a log file's name says.

    Attributes:
        child: The child number of a scenario's ``session.<n>.jsonl``; ``None`` for the
            primary (``session.jsonl``) and for the runtime's session directories.
        version: The format generation the name carries: ``session.v4.jsonl`` is 4;
            ``None`` for a name without one (``session.jsonl``: format 0, or a newer
            header that parses as its own format).
        compressed: Whether the name ends in ``.zst`` or ``.zstd``.
    """

    child: int | None
    version: int | None
    compressed: bool


@lru_cache(maxsize=1024)
def parse_log_name(name: str) -> LogName | None:
    """Read a log file name: ``session[.<n>][.v<N>].jsonl[.zst|.zstd]``; ``None`` otherwise.

    Numbers have no leading zeros; ``.v0`` is not a generation name (format 0 is plain
    ``session.jsonl``).
    """
    compressed = name.endswith((".zst", ".zstd"))
    stem = name[: name.rindex(".")] if compressed else name
    if not (stem.startswith("session") and stem.endswith(".jsonl")):
        return None
    middle = stem[7:-6]  # "", ".<n>", ".v<N>" or ".<n>.v<N>"
    child = version = None
    if middle:
        parts = middle.split(".")
        if parts[0] or not 2 <= len(parts) <= 3:
            return None
        if parts[-1].startswith("v") and _is_number(parts[-1][1:]):
            version = int(parts.pop()[1:])
        if len(parts) == 2:
            if not _is_number(parts[1]):
                return None
            child = int(parts[1])
        elif len(parts) > 2 or version is None:
            return None
    return LogName(child=child, version=version, compressed=compressed)


def entry_log_name(name: str) -> LogName | None:
    """`parse_log_name` of any directory entry, read only when it starts with ``session.``.

    The one check a directory listing's names go through: the many that are no log never
    reach (nor fill) the parse's cache.
    """
    return parse_log_name(name) if name.startswith("session.") else None


def _is_number(text: str) -> bool:  # [1-9][0-9]*
    return text.isascii() and text.isdigit() and text[0] != "0"


def check_log_name(header: SessionHeader, source: str, line: int) -> None:
    """Refuse a log whose name's generation disagrees with its header's version.

    Raises:
        SessionLogError: ``session.vN.jsonl`` holds a header of another version.
    """
    named = parse_log_name(os.path.basename(source))
    if named is not None and named.version is not None and named.version != header.format:
        raise SessionLogError(
            f"the file name says log format v{named.version} but its header says "
            f"v{header.format}; a log's name and header version must agree",
            path=source,
            line=line,
        )
