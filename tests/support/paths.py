"""Where the repository's parts are, for tests at any depth of ``tests/``."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
SUPPORT = TESTS / "support"
EXAMPLES = REPO / "example_snapshots"
README = REPO / "README.md"
PYPROJECT = REPO / "pyproject.toml"
