r"""JavaScript regular expressions for the ``regex`` package.

Placeholder patterns are written in **JavaScript** regular-expression syntax without
flags (the dsh harness compiles them with ``new RegExp(pattern, "g")``).
`translate_js_pattern` rewrites one into an equivalent pattern for the ``regex``
package. What differs from Python and is translated:

- named groups ``(?<name>...)`` and back references ``\k<name>``;
- ``.`` matches anything but ``\n``, ``\r``, U+2028 and U+2029;
- ``\d``, ``\w``, ``\b``, ``\B`` are ASCII-only; ``\s`` is JavaScript's white-space set;
- ``$`` matches only at the very end of the text (never before a final ``\n``);
- ``[]`` matches nothing and ``[^]`` matches any character; ``]`` right after ``[`` closes
  the class;
- a back reference to a group that has not matched (yet) matches the empty string;
- Annex B leniency: identity escapes (``\a`` is ``a``), ``\cX`` controls, legacy octal
  escapes, and a ``{`` that does not start a quantifier is a literal; ``{,n}`` is literal
  text, not a quantifier;
- Python-only syntax (``(?P<n>)``, ``(?i)``, ``(?>...)``, possessive ``a*+``) is rejected
  as JavaScript rejects it.

Not emulated: JavaScript without the ``u`` flag matches UTF-16 code units, so a pattern
can match half of a character outside the Basic Multilingual Plane; here characters are
whole code points.
"""

from __future__ import annotations

from typing import Final

__all__ = ["JsPatternError", "translate_js_pattern"]


class JsPatternError(ValueError):
    """A pattern is not a valid JavaScript regular expression (or cannot be translated).

    Attributes:
        pattern: The JavaScript pattern source.
        position: The 0-based offset in ``pattern`` where the problem was found, or
            ``None`` when it is not tied to one place.
    """

    def __init__(self, reason: str, pattern: str, position: int | None = None):
        self.pattern = pattern
        self.position = position
        where = "" if position is None else f" at offset {position}"
        super().__init__(f"{reason}{where}")


# --- JavaScript pattern -> regex pattern --------------------------------------------------

_MAX_CP: Final = 0x10FFFF
_Ranges = tuple[tuple[int, int], ...]

_DIGIT: Final[_Ranges] = ((0x30, 0x39),)
_WORD: Final[_Ranges] = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# ECMAScript WhiteSpace and LineTerminator code points (what \s matches).
_SPACE: Final[_Ranges] = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
_LINE_TERMINATORS: Final[_Ranges] = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))


def _complement(ranges: _Ranges) -> _Ranges:
    out: list[tuple[int, int]] = []
    lo = 0
    for a, b in sorted(ranges):
        if a > lo:
            out.append((lo, a - 1))
        lo = max(lo, b + 1)
    if lo <= _MAX_CP:
        out.append((lo, _MAX_CP))
    return tuple(out)


def _cp(code: int) -> str:
    """One code point, written so that it means itself anywhere in a pattern."""
    if code < 0x80 and (chr(code).isalnum() or code == 0x5F):
        return chr(code)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _ranges_body(ranges: _Ranges) -> str:
    return "".join(_cp(a) if a == b else f"{_cp(a)}-{_cp(b)}" for a, b in ranges)


def _class(ranges: _Ranges, *, negate: bool = False) -> str:
    return f"[{'^' if negate else ''}{_ranges_body(ranges)}]"


_SHORTHAND: Final[dict[str, _Ranges]] = {
    "d": _DIGIT,
    "D": _complement(_DIGIT),
    "w": _WORD,
    "W": _complement(_WORD),
    "s": _SPACE,
    "S": _complement(_SPACE),
}
_DOT: Final = _class(_LINE_TERMINATORS, negate=True)
_W: Final = _class(_WORD)
_WORD_BOUNDARY: Final = f"(?:(?<={_W})(?!{_W})|(?<!{_W})(?={_W}))"
_NOT_WORD_BOUNDARY: Final = f"(?:(?<={_W})(?={_W})|(?<!{_W})(?!{_W}))"
_CONTROL_ESCAPES: Final = {"t": 0x09, "n": 0x0A, "v": 0x0B, "f": 0x0C, "r": 0x0D}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _is_id_start(ch: str) -> bool:
    return ch in "$_" or ch.isidentifier()


def _is_id_continue(ch: str) -> bool:
    return ch in "$_\u200c\u200d" or ("a" + ch).isidentifier()


class _Translator:
    """A single-pass translator for one JavaScript pattern (no flags, Annex B grammar)."""

    def __init__(self, source: str):
        self.src = source
        self.pos = 0
        self.out: list[str] = []
        # JS group name -> Python group name, assigned in order of appearance by a first
        # pass, because a back reference may name a group that is opened later.
        self.names: dict[str, str] = {}
        self.numbers: dict[str, int] = {}  # JS group name -> capture number
        self.group_count = self._scan_groups()
        # The groups opened and not yet closed: (kind, capture number or 0).
        self.open: list[tuple[str, int]] = []
        self.opened = 0  # capturing groups opened so far

    def fail(self, reason: str, position: int | None = None) -> JsPatternError:
        return JsPatternError(reason, self.src, self.pos if position is None else position)

    def _scan_groups(self) -> int:
        src, i, n = self.src, 0, len(self.src)
        count = 0
        in_class = False
        while i < n:
            ch = src[i]
            if ch == "\\":
                i += 2
                continue
            if in_class:
                if ch == "]":
                    in_class = False
            elif ch == "[":
                in_class = True
                if src.startswith(("[]", "[^]"), i):
                    i = src.index("]", i) + 1
                    in_class = False
                    continue
            elif ch == "(":
                if not src.startswith("(?", i):
                    count += 1
                elif src.startswith("(?<", i) and not src.startswith(("(?<=", "(?<!"), i):
                    count += 1
                    name, _ = self._group_name(i + 3)
                    if name in self.names:
                        raise self.fail(f"duplicate capture group name {name!r}", i)
                    self.names[name] = f"n{len(self.names)}"
                    self.numbers[name] = count
            i += 1
        return count

    def translate(self) -> str:
        src = self.src
        n = len(src)
        # Whether the last item can take a quantifier (JS: an atom, not an assertion).
        quantifiable = False
        while self.pos < n:
            ch = src[self.pos]
            if ch == "\\":
                quantifiable = self._escape()
            elif ch == "[":
                self._char_class()
                quantifiable = True
            elif ch == "(":
                self._group_open()
                quantifiable = False
            elif ch == ")":
                if not self.open:
                    raise self.fail("unmatched ')'")
                kind, _ = self.open.pop()
                self.out.append(")")
                self.pos += 1
                # Annex B lets a lookahead take a quantifier, never a lookbehind.
                quantifiable = kind not in ("(?<=", "(?<!")
            elif ch in "*+?" or (ch == "{" and self._braces() is not None):
                if not quantifiable:
                    raise self.fail("nothing to repeat")
                self._quantifier()
                quantifiable = False
            elif ch == "|":
                self.out.append("|")
                self.pos += 1
                quantifiable = False
            elif ch == ".":
                self.out.append(_DOT)
                self.pos += 1
                quantifiable = True
            elif ch == "^":
                self.out.append("^")
                self.pos += 1
                quantifiable = False
            elif ch == "$":
                self.out.append(r"\Z")
                self.pos += 1
                quantifiable = False
            else:  # a literal, including "{", "}" and "]" that start no construct
                self.out.append(_cp(ord(ch)))
                self.pos += 1
                quantifiable = True
        if self.open:
            raise self.fail("unterminated group")
        return "".join(self.out)

    def _quantifier(self) -> None:
        src = self.src
        if src[self.pos] == "{":
            bounds = self._braces()
            assert bounds is not None
            low, high, end = bounds
            if high is not None and high < low:
                raise self.fail("numbers out of order in {} quantifier")
            self.out.append(src[self.pos : end])
            self.pos = end
        else:
            self.out.append(src[self.pos])
            self.pos += 1
        if self.pos < len(src) and src[self.pos] == "?":
            self.out.append("?")
            self.pos += 1
        # JS has no possessive (a*+) or stacked (a**) quantifiers.
        if self.pos < len(src) and (
            src[self.pos] in "*+?" or (src[self.pos] == "{" and self._braces() is not None)
        ):
            raise self.fail("nothing to repeat")

    def _braces(self) -> tuple[int, int | None, int] | None:
        """Parse ``{n}``, ``{n,}`` or ``{n,m}`` at the cursor; ``None`` if it is not one."""
        src, n = self.src, len(self.src)
        i = j = self.pos + 1
        while j < n and "0" <= src[j] <= "9":
            j += 1
        if j == i:
            return None
        low = int(src[i:j])
        if j < n and src[j] == "}":
            return low, low, j + 1
        if j >= n or src[j] != ",":
            return None
        k = j + 1
        while k < n and "0" <= src[k] <= "9":
            k += 1
        if k >= n or src[k] != "}":
            return None
        return low, (int(src[j + 1 : k]) if k > j + 1 else None), k + 1

    def _group_open(self) -> None:
        src, i = self.src, self.pos
        if not src.startswith("(?", i):
            self.opened += 1
            self.open.append(("(", self.opened))
            self.out.append("(")
            self.pos += 1
            return
        for opener in ("(?:", "(?=", "(?!", "(?<=", "(?<!"):
            if src.startswith(opener, i):
                self.open.append((opener, 0))
                self.out.append(opener)
                self.pos += len(opener)
                return
        if src.startswith("(?<", i):
            name, end = self._group_name(i + 3)
            self.opened += 1
            self.open.append(("(", self.opened))
            self.out.append(f"(?P<{self.names[name]}>")
            self.pos = end
            return
        raise self.fail("invalid group (JavaScript has no such '(?' syntax)")

    def _group_name(self, i: int) -> tuple[str, int]:
        """Read ``name>`` at ``i``; return the name and the offset after ``>``."""
        src = self.src
        end = src.find(">", i)
        name = src[i:end] if end >= 0 else ""
        if not name or not _is_id_start(name[0]) or not all(_is_id_continue(c) for c in name[1:]):
            raise self.fail("invalid capture group name", i)
        return name, end + 1

    def _backreference(self, number: int, group: str) -> str:
        # JavaScript: a reference to a group that has not matched (yet) matches "", and
        # so does a reference from inside the group itself.
        if any(number == open_number for _, open_number in self.open):
            return "(?:)"
        ref = f"\\{group}" if group.isdigit() else f"(?P={group})"
        return f"(?({group}){ref})"

    def _escape(self) -> bool:
        """Translate the escape at the cursor (outside a class); return quantifiable."""
        src, i, n = self.src, self.pos, len(self.src)
        if i + 1 >= n:
            raise self.fail("\\ at end of pattern")
        ch = src[i + 1]
        if ch in _SHORTHAND:
            self.pos = i + 2
            self.out.append(_class(_SHORTHAND[ch]))
            return True
        if ch in "bB":
            self.pos = i + 2
            self.out.append(_WORD_BOUNDARY if ch == "b" else _NOT_WORD_BOUNDARY)
            return False
        if "1" <= ch <= "9":
            j = i + 1
            while j < n and "0" <= src[j] <= "9":
                j += 1
            number = int(src[i + 1 : j])
            if number <= self.group_count:
                self.pos = j
                self.out.append(self._backreference(number, str(number)))
                return True
            # Annex B: not a back reference; "\8" and "\9" are the digits, else octal.
        if ch == "k" and self.names:
            if not src.startswith("k<", i + 1):
                raise self.fail("invalid named reference")
            name, end = self._group_name(i + 3)
            if name not in self.names:
                raise self.fail(f"invalid named capture referenced {name!r}", i)
            self.pos = end
            py_name = self.names[name]
            self.out.append(self._backreference(self.numbers[name], py_name))
            return True
        self.out.append(_cp(self._char_escape(in_class=False)))
        return True

    def _char_escape(self, *, in_class: bool) -> int:
        """Read a character escape at the cursor (on the backslash); return its code."""
        src, i, n = self.src, self.pos, len(self.src)
        if i + 1 >= n:
            raise self.fail("\\ at end of pattern")
        ch = src[i + 1]
        self.pos = i + 2
        if ch in _CONTROL_ESCAPES:
            return _CONTROL_ESCAPES[ch]
        if ch == "b" and in_class:
            return 0x08
        if ch == "c":
            nxt = src[i + 2] if i + 2 < n else ""
            if nxt.isascii() and (nxt.isalpha() or (in_class and (nxt.isdigit() or nxt == "_"))):
                self.pos = i + 3
                return ord(nxt) % 32
            self.pos = i + 1  # Annex B: a lone "\c" is a backslash, and "c" follows
            return ord("\\")
        if ch == "x" and i + 4 <= n and set(src[i + 2 : i + 4]) <= _HEX:
            self.pos = i + 4
            return int(src[i + 2 : i + 4], 16)
        if ch == "u" and i + 6 <= n and set(src[i + 2 : i + 6]) <= _HEX:
            self.pos = i + 6
            return int(src[i + 2 : i + 6], 16)
        if "0" <= ch <= "7":
            # "\0" not followed by a digit is NUL; else a legacy octal escape (<= 0o377).
            j = i + 1
            value = 0
            while j < n and j < i + 4 and "0" <= src[j] <= "7":
                if value * 8 + int(src[j]) > 0o377:
                    break
                value = value * 8 + int(src[j])
                j += 1
            self.pos = j
            return value
        return ord(ch)  # an identity escape: the character itself

    def _char_class(self) -> None:
        src, n = self.src, len(self.src)
        start = self.pos
        self.pos += 1
        negate = self.pos < n and src[self.pos] == "^"
        if negate:
            self.pos += 1
        ranges: list[tuple[int, int]] = []
        while True:
            if self.pos >= n:
                raise self.fail("unterminated character class", start)
            if src[self.pos] == "]":
                self.pos += 1
                break
            first = self._class_atom()
            if not (self.pos + 1 < n and src[self.pos] == "-" and src[self.pos + 1] != "]"):
                ranges.extend(((first, first),) if isinstance(first, int) else first)
                continue
            dash = self.pos
            self.pos += 1
            second = self._class_atom()
            if isinstance(first, int) and isinstance(second, int):
                if second < first:
                    raise self.fail("range out of order in character class", dash)
                ranges.append((first, second))
                continue
            # Annex B: a class escape (\d, \w, ...) at either end makes "-" a literal.
            for atom in (first, 0x2D, second):
                ranges.extend(((atom, atom),) if isinstance(atom, int) else atom)
        if not ranges:
            # "[]" matches nothing; "[^]" matches any character.
            self.out.append(_class(((0, _MAX_CP),)) if negate else "(?!)")
            return
        self.out.append(_class(tuple(ranges), negate=negate))

    def _class_atom(self) -> int | _Ranges:
        src = self.src
        ch = src[self.pos]
        if ch != "\\":
            self.pos += 1
            return ord(ch)
        nxt = src[self.pos + 1] if self.pos + 1 < len(src) else ""
        if nxt and nxt in _SHORTHAND:
            self.pos += 2
            return _SHORTHAND[nxt]
        return self._char_escape(in_class=True)


def translate_js_pattern(pattern: str) -> str:
    """Translate a JavaScript regular expression (no flags) into a ``regex`` pattern.

    The result has the same capturing groups in the same order (named groups are
    renamed, which does not change their numbers) and, searched with
    ``regex.compile(result, regex.V0)``, finds the same matches as
    ``new RegExp(pattern)`` in JavaScript, for text of whole code points. See the module
    docstring for every difference handled.

    Args:
        pattern: The JavaScript pattern source (what goes between the slashes).

    Returns:
        The translated pattern source.

    Raises:
        JsPatternError: ``pattern`` is not valid JavaScript syntax (an unmatched or
            unterminated group, a quantifier with nothing to repeat, an unterminated
            class, a bad range, a bad group name, a trailing backslash, Python-only
            syntax). The message says what and where.
    """
    return _Translator(pattern).translate()
