"""The code blocks of README.md and the site's pages, as the tests that run them read them.

A page's Python blocks say what they are in their fence (README.md, *Developing*):

- ```` ```python title="test_agent.py" ````: a file of the page's example project, written
  under that name (a page's file names are unique);
- ```` ```python { .fragment } ````: an excerpt, not runnable alone: it must compile;
- ```` ```python { .e2e title="..." } ````: a file that needs the dsh runtime, run by a test
  of ``tests/e2e/`` that names the page.
"""

from __future__ import annotations

import ast
import importlib.util
import re
from dataclasses import dataclass
from pathlib import Path

from support.paths import README, REPO

DOCS = REPO / "docs"

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>.*)$")
_TITLE = re.compile(r'title="([^"]*)"')
_CLASS = re.compile(r"(?:^|\s)\.([\w-]+)")
PYTHON = frozenset({"python", "py"})


@dataclass(frozen=True)
class Block:
    """One fenced code block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    language: str
    title: str | None
    classes: frozenset[str]
    code: str

    @property
    def where(self) -> str:
        """``page:line``, relative to the repository."""
        return f"{self.page.relative_to(REPO)}:{self.line}"

    @property
    def is_file(self) -> bool:
        """A file of the page's example project (not a fragment, not an e2e file)."""
        return self.title is not None and not ({"fragment", "e2e"} & self.classes)


def _info(info: str) -> tuple[str, str | None, frozenset[str]]:
    """The language, title and classes of a fence's info string."""
    braces = re.search(r"\{([^}]*)\}", info)
    inside = braces.group(1) if braces else ""
    outside = info[: braces.start()] if braces else info
    words = outside.split()
    language = words[0].lstrip(".") if words and "=" not in words[0] else ""
    if not language:
        named = _CLASS.search(inside)
        language = named.group(1) if named else ""
    classes = frozenset(_CLASS.findall(inside)) - {language}
    title = _TITLE.search(info)
    return language.lower(), title.group(1) if title else None, classes


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, in order (indented fences included)."""
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        fence, indent = opened.group("fence"), opened.group("indent")
        language, title, classes = _info(opened.group("info"))
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        code = "\n".join(body) + "\n"
        found.append(Block(page, i + 1, language, title, classes, code))
        i = j + 1
    return found


def pages() -> list[Path]:
    """README.md and every page of the site."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def python_blocks(page: Path) -> list[Block]:
    """The page's Python blocks."""
    return [b for b in blocks(page) if b.language in PYTHON]


def page_files(page: Path) -> dict[str, str]:
    """The page's example project: ``{file name: code}``."""
    return {b.title: b.code for b in python_blocks(page) if b.is_file and b.title}


def titled(page: Path, title: str) -> str:
    """The code of the Python block titled ``title`` on ``page`` (fragments and e2e too)."""
    for block in python_blocks(page):
        if block.title == title:
            return block.code
    raise AssertionError(f"{page.relative_to(REPO)} lost its block titled {title!r}")


def imported_modules(code: str) -> set[str]:
    """The top-level packages ``code`` imports (absolute imports only)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def missing_modules(code: str) -> list[str]:
    """The top-level packages ``code`` imports that are not installed here."""
    return sorted(n for n in imported_modules(code) if importlib.util.find_spec(n) is None)


def section(page: Path, heading: str) -> str:
    """The text of ``page`` from ``heading`` to the next heading of the same level or above."""
    text = page.read_text(encoding="utf-8")
    level = len(heading) - len(heading.lstrip("#"))
    start = text.index(heading + "\n") if heading + "\n" in text else text.index(heading + " ")
    rest = text[start + len(heading) :]
    stop = re.search(rf"^#{{1,{level}}} ", rest, re.M)
    return rest[: stop.start()] if stop else rest
