"""The documentation stands on its own: every public name has its entry, citations resolve.

The site is ``mkdocs.yml`` with its pages in ``docs/``; ``.ci/run`` builds it with
``mkdocs build --strict``. These tests read the Markdown sources, so they need no build:
a page's anchors are its headings' explicit ``{#id}`` attributes, or else the slug
Python-Markdown's ``toc`` extension makes of the heading text, and the identifier of
every ``::: identifier`` (mkdocstrings) entry.
"""

from __future__ import annotations

import importlib
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path

from support.paths import README, REPO

import pytest_dsh_replay

DOCS = REPO / "docs"
PACKAGE = REPO / "pytest_dsh_replay"

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT = re.compile(r"\s*\{[^}]*#([\w.:-]+)[^}]*\}\s*$")
_ENTRY = re.compile(r"^:::\s+([\w.]+)\s*$")
# A citation of a page: docs/<page>.md, optionally with #<anchor>.
_CITATION = re.compile(r"\bdocs/([\w/-]+\.md)(?:#([\w.:-]*\w))?")  # no final "."
# A link from one page to another (relative to docs/): (page.md) or (page.md#anchor).
_PAGE_LINK = re.compile(r"\]\((?!https?:)([\w/-]+\.md)(?:#([\w.:-]+))?\)")
# A citation of a section of a private design document: its name, then a section number.
_PRIVATE_SECTION = re.compile(r"\b(?:SPEC|DESIGN|RUNTIME)(?:\.md)?\s*(?:section\s*|§\s*)?\d")
_PRIVATE_PATH = re.compile(r"\bpytest_dsh_replay\._(?!_)\w")  # not __all__


def _slug(text: str) -> str:
    """The anchor Python-Markdown's ``toc`` extension gives a heading without an ``{#id}``."""
    text = re.sub(r"`([^`]*)`", r"\1", text)  # code spans: their text
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _lines_outside_code(page: Path) -> Iterator[str]:
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield line


def _anchors(page: Path) -> set[str]:
    """Every anchor of a page: headings (explicit ids, else slugs) and API entries."""
    found: set[str] = set()
    for line in _lines_outside_code(page):
        entry = _ENTRY.match(line)
        if entry:
            found.add(entry.group(1))
            continue
        heading = _HEADING.match(line)
        if heading is None:
            continue
        text = heading.group(2)
        explicit = _EXPLICIT.search(text)
        if explicit:
            found.add(explicit.group(1))
            continue
        slug = base = _slug(text)
        n = 0
        while slug in found:  # a repeated heading gets _1, _2, ...
            n += 1
            slug = f"{base}_{n}"
        found.add(slug)
    return found


def _entries() -> set[str]:
    """The identifiers of every ``::: identifier`` entry of the site."""
    return {
        m.group(1)
        for page in sorted(DOCS.rglob("*.md"))
        for line in _lines_outside_code(page)
        if (m := _ENTRY.match(line))
    }


def _resolves(page: Path, anchor: str) -> bool:
    """Whether ``anchor`` is on ``page``: a heading, an entry, or a member of an entry."""
    anchors = _anchors(page)
    if anchor in anchors:
        return True
    owner, _, member = anchor.rpartition(".")
    if owner not in anchors or not owner.startswith("pytest_dsh_replay."):
        return False
    try:
        obj: object = importlib.import_module(owner)  # an entry for a module
    except ImportError:
        module, _, name = owner.rpartition(".")
        obj = getattr(importlib.import_module(module), name, None)
    return obj is not None and hasattr(obj, member)


def _cited(paths: list[Path]) -> list[tuple[str, int, str, str | None]]:
    """Every ``docs/<page>.md[#anchor]`` in the files: (file, line, page, anchor)."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for lineno, line in enumerate(text.splitlines(), start=1):
            for m in _CITATION.finditer(line):
                found.append((str(path.relative_to(REPO)), lineno, m.group(1), m.group(2)))
    return found


def _sources() -> list[Path]:
    """The package's, the tests' and the benchmarks' Python files."""
    return sorted(
        p
        for root in (PACKAGE, REPO / "tests", REPO / "benchmarks")
        for p in root.rglob("*.py")
        if "__pycache__" not in p.parts
    )


def test_the_site_has_its_config_and_pages() -> None:
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    assert "docs_dir: docs" in config
    assert "mkdocstrings" in config
    for page in re.findall(r":\s*([\w/-]+\.md)\s*$", config, re.M):
        assert (DOCS / page).is_file(), page


def test_every_public_name_has_an_api_entry() -> None:
    entries = _entries()
    missing = [n for n in pytest_dsh_replay.__all__ if f"pytest_dsh_replay.{n}" not in entries]
    assert missing == []
    for module in ("hookspecs", "syrupy_ext", "cli"):  # the hooks, the extensions, the command
        assert f"pytest_dsh_replay.{module}" in entries, module


def test_every_cited_docs_anchor_exists() -> None:
    citations = _cited([*_sources(), README])
    assert citations, "nothing cites the docs: the pattern or the paths are wrong"
    broken = [
        f"{file}:{line}: docs/{page}" + (f"#{anchor}" if anchor else "")
        for file, line, page, anchor in citations
        if not (DOCS / page).is_file()
        or (anchor is not None and not _resolves(DOCS / page, anchor))
    ]
    assert broken == []


def test_the_pages_link_to_anchors_that_exist() -> None:
    broken = []
    for page in sorted(DOCS.rglob("*.md")):
        for line in _lines_outside_code(page):
            for m in _PAGE_LINK.finditer(line):
                target = (page.parent / m.group(1)).resolve()
                anchor = m.group(2)
                if not target.is_file() or (anchor and not _resolves(target, anchor)):
                    broken.append(f"{page.name}: {m.group(0)}")
    assert broken == []


def test_the_anchor_rule_reads_explicit_ids_slugs_and_entries(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "# Title {#top}\n"
        "## Stream `chunks` and more!\n"
        "## Stream `chunks` and more!\n"
        "```md\n## Not a heading {#no}\n```\n"
        "::: pytest_dsh_replay.ReplayModel\n",
        encoding="utf-8",
    )
    assert _anchors(page) == {
        "top",
        "stream-chunks-and-more",
        "stream-chunks-and-more_1",
        "pytest_dsh_replay.ReplayModel",
    }
    assert _resolves(page, "pytest_dsh_replay.ReplayModel.stream")
    assert not _resolves(page, "pytest_dsh_replay.ReplayModel.no_such_method")


def test_readme_and_pages_name_no_private_path() -> None:
    named = [
        f"{path.relative_to(REPO)}:{lineno}: {line.strip()}"
        for path in [README, *sorted(DOCS.rglob("*.md"))]
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _PRIVATE_PATH.search(line)
    ]
    assert named == []


def _private_citations(paths: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{lineno}: {line.strip()}"
        for path in paths
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if _PRIVATE_SECTION.search(line)
    ]


def test_tests_and_benchmarks_cite_no_private_design_document() -> None:
    paths = [p for p in _sources() if not p.is_relative_to(PACKAGE)]
    assert _private_citations(paths) == []


def test_the_package_cites_no_private_design_document() -> None:
    """Users have neither SPEC.md, DESIGN.md nor RUNTIME.md: comments cite docs/ pages."""
    paths = [p for p in _sources() if p.is_relative_to(PACKAGE)]
    assert _private_citations(paths) == []


def _limit_constants() -> list[str]:
    """The exported constants that bound input: ``MAX_*`` and ``*_TIMEOUT_S``."""
    return [
        name
        for name in pytest_dsh_replay.__all__
        if name.startswith("MAX_") or name.endswith("_TIMEOUT_S")
    ]


def test_every_limit_is_on_the_limits_page() -> None:
    # docs/limits.md's table lists every limit with its constant (as a link to its API
    # entry); README points there.
    limits = list(_lines_outside_code(DOCS / "limits.md"))
    table = [line for line in limits if line.startswith("| ")]
    constants = _limit_constants()
    assert {"MAX_DECOMPRESSED_BYTES", "MAX_NESTING", "MAX_LINE_BYTES"} <= set(constants)
    for name in constants:
        assert any(f"[pytest_dsh_replay.{name}]" in row for row in table), name
    assert "](docs/limits.md)" in README.read_text(encoding="utf-8")


def _public_errors() -> list[str]:
    return [
        name
        for name in pytest_dsh_replay.__all__
        if isinstance(obj := getattr(pytest_dsh_replay, name), type)
        and issubclass(obj, pytest_dsh_replay.DshReplayError)
        and obj is not pytest_dsh_replay.DshReplayError
    ]


def test_every_typed_error_has_a_troubleshooting_entry() -> None:
    # Each public DshReplayError subclass: a heading of its own (anchor: its name) with
    # what it means and what to do.
    page = DOCS / "guide" / "troubleshooting.md"
    anchors = _anchors(page)
    errors = _public_errors()
    assert len(errors) >= 19
    missing = [name for name in errors if name not in anchors]
    assert missing == []
    headings = [line for line in _lines_outside_code(page) if _HEADING.match(line)]
    for name in errors:
        (heading,) = [h for h in headings if h.startswith(f"### {name} ")]
        assert heading == f"### {name} {{#{name}}}"


def test_the_troubleshooting_rule_sees_a_missing_entry(tmp_path: Path) -> None:
    page = tmp_path / "t.md"
    page.write_text("### ReplayBindingError {#ReplayBindingError}\ntext\n", encoding="utf-8")
    assert "ReplayBindingError" in _anchors(page)
    assert "ReplayExhaustedError" not in _anchors(page)


# pytest's registrations in plugin.py: group.addoption("--x", ...), parser.addini("x", ...).
_REGISTERED = re.compile(r"\.add(?:option|ini)\(\s*\"([\w-]+)\"")


def test_every_option_and_ini_key_is_documented() -> None:
    source = (PACKAGE / "plugin.py").read_text(encoding="utf-8")
    names = _REGISTERED.findall(source)
    assert {"--dsh-record", "--dsh-fail-unused", "dsh_snapshot_dir", "dsh_compare_logs"} <= set(
        names
    )
    site = "\n".join(page.read_text(encoding="utf-8") for page in sorted(DOCS.rglob("*.md")))
    assert [name for name in names if f"`{name}" not in site] == []


def test_the_site_config_has_its_address_repository_dark_mode_and_mermaid() -> None:
    config = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    site_url = re.search(r"^site_url: (https://\S+/)$", config, re.M)
    repo_url = re.search(r"^repo_url: (https://github\.com/([\w-]+)/([\w-]+))$", config, re.M)
    assert site_url
    assert repo_url
    owner, name = repo_url.group(2), repo_url.group(3)
    assert site_url.group(1) == f"https://{owner}.github.io/{name}/"
    assert f"repo_name: {owner}/{name}" in config
    assert "scheme: slate" in config  # the dark palette, with its toggle
    assert config.count("toggle:") == 2
    assert "name: mermaid" in config
    assert "pymdownx.superfences.fence_code_format" in config
    nav = config.split("\nnav:\n", 1)[1].split("\n\n", 1)[0]
    tops = re.findall(r"^  - ([^:]+):", nav, re.M)
    assert tops == ["Home", "Getting started", "Guide", "Reference", "API reference"]


def test_readme_links_the_site_by_relative_paths_that_exist() -> None:
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 350
    links = re.findall(r"\]\((docs/[\w/.-]+\.md)(?:#[\w-]+)?\)", readme)
    assert "docs/getting-started.md" in links
    assert [link for link in links if not (REPO / link).is_file()] == []
    guide = {p.name for p in (DOCS / "guide").glob("*.md")} - {"index.md"}
    linked = {Path(link).name for link in links if link.startswith("docs/guide/")}
    assert guide - linked == set()  # one line per stack and per task page
