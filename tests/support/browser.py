"""A headless Chromium for tests that render pages: find it, or skip with the install hint.

No network: the pages are local files, and Chromium's background services are off.
``DSH_DOCS_BROWSER`` names another browser binary.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
MISSING = "no Chromium here (apt-get install -y chromium; or set DSH_DOCS_BROWSER)"


def find_browser() -> str | None:
    """The browser to drive: ``DSH_DOCS_BROWSER``, else the first Chromium on PATH."""
    explicit = os.environ.get("DSH_DOCS_BROWSER")
    if explicit:
        return explicit
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def browser() -> str:
    """The browser to drive; skips the test with the install hint when there is none."""
    found = find_browser()
    if found is None:
        pytest.skip(MISSING)
    return found


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM of a local page after its scripts ran, as Chromium serializes it.

    Args:
        page: The HTML file.
        profile: An empty directory the browser may use as its profile.
    """
    dumped = subprocess.run(
        [browser(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return dumped.stdout


def screenshot(page: Path, out: Path, profile: Path, *, width: int, height: int) -> None:
    """A PNG of a local page at the given window size."""
    subprocess.run(
        [
            browser(),
            *FLAGS,
            f"--user-data-dir={profile}",
            "--hide-scrollbars",
            f"--window-size={width},{height}",
            f"--screenshot={out}",
            page.as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
