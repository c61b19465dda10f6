"""The built Getting started page, as a browser renders it: its code blocks and navigation.

Builds the site with ``mkdocs build --strict`` (without its plugins) into a temporary
directory, then has a headless Chromium load the page from disk and dump the DOM after
its scripts ran. Skips
with the reason where mkdocs or a Chromium is missing (``apt-get install -y chromium``
brings one on Debian). No network: the page is a local file, and Chromium's background
services are off.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser

import pytest
from support.browser import browser, dump_dom
from support.doc_examples import DOCS, page_files
from support.paths import REPO


class _Dom(HTMLParser):
    """What the test reads of a page: code block titles and code, and the links' texts."""

    def __init__(self) -> None:
        super().__init__()
        self.filenames: list[str] = []
        self.code: list[str] = []
        self.links: dict[str, str] = {}  # text -> href
        self._in: list[str] = []  # "filename", "code", "a"
        self._text: list[str] = []
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "span" and "filename" in classes:
            self._open("filename")
        elif tag == "code" and self._in[-1:] != ["code"]:
            self._open("code")
        elif tag == "a":
            self._href = dict(attrs).get("href") or ""
            self._open("a")

    def _open(self, kind: str) -> None:
        self._in.append(kind)
        self._text = []

    def handle_data(self, data: str) -> None:
        if self._in:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        kinds = {"span": "filename", "code": "code", "a": "a"}
        if not self._in or kinds.get(tag) != self._in[-1]:
            return
        kind = self._in.pop()
        text = "".join(self._text)
        if kind == "filename":
            self.filenames.append(text.strip())
        elif kind == "code":
            self.code.append(text)
        else:
            self.links.setdefault(" ".join(text.split()), self._href)


@pytest.fixture(scope="module")
def getting_started_dom(tmp_path_factory: pytest.TempPathFactory) -> _Dom:
    pytest.importorskip("mkdocs", reason="the docs extra (mkdocs) is not installed")
    browser()  # skips with the install hint when there is none
    site = tmp_path_factory.mktemp("site")
    # The project's configuration less its plugins: the page's code blocks and navigation
    # come from the theme and the Markdown extensions; the API reference's rendering
    # (mkdocstrings) and the search index, three quarters of a full build's time, are not
    # on this page (CI's `mkdocs build --strict` builds the whole site).
    config = tmp_path_factory.mktemp("mkdocs") / "mkdocs.yml"
    config.write_text(
        f"INHERIT: {REPO / 'mkdocs.yml'}\ndocs_dir: {REPO / 'docs'}\nplugins: []\n",
        encoding="utf-8",
    )
    build = ["build", "--strict", "--quiet", "--config-file", str(config), "--site-dir", str(site)]
    subprocess.run(
        [sys.executable, "-m", "mkdocs", *build],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    page = site / "getting-started" / "index.html"
    assert page.is_file()
    profile = tmp_path_factory.mktemp("chromium-profile")
    dumped = dump_dom(page, profile)
    dom = _Dom()
    dom.feed(dumped)
    return dom


def test_the_rendered_getting_started_page_shows_its_files(getting_started_dom: _Dom) -> None:
    files = page_files(DOCS / "getting-started.md")
    assert set(files) <= set(getting_started_dom.filenames)
    for name, code in files.items():
        first_line = next(line for line in code.splitlines() if line.strip())
        assert any(first_line in shown for shown in getting_started_dom.code), name
    assert any("--dsh-record=missing" in shown for shown in getting_started_dom.code)


def test_the_rendered_getting_started_page_has_its_navigation(getting_started_dom: _Dom) -> None:
    links = getting_started_dom.links
    for text in ("Getting started", "Guide", "Troubleshooting", "API reference"):
        assert text in links, sorted(links)
    guide = links["Guide"]
    assert guide.endswith(("guide/", "guide/index.html")), guide
    troubleshooting = links["Troubleshooting"]
    assert "guide/troubleshooting" in troubleshooting, troubleshooting


def test_the_dom_reader_finds_titles_code_and_links() -> None:
    dom = _Dom()
    dom.feed(
        '<nav><a href="../guide/">Guide</a></nav>'
        '<div class="highlight"><span class="filename">agent.py</span>'
        "<pre><code><span>import</span> json\n</code></pre></div>"
    )
    assert dom.filenames == ["agent.py"]
    assert dom.code == ["import json\n"]
    assert dom.links == {"Guide": "../guide/"}
