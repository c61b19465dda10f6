"""docs/architecture.md stays in step with the package and its import contract."""

from __future__ import annotations

import re

import pytest
from support.paths import REPO

PACKAGE = REPO / "pytest_dsh_replay"
PAGE = REPO / "docs" / "architecture.md"
_PATH = re.compile(r"`((?:_?\w+/)*(?:\w+\.py|_\w+/))`")  # `_wire/request.py`, `_format/`


def _text() -> str:
    return PAGE.read_text(encoding="utf-8")


def _layers_table(text: str) -> list[list[str]]:
    """The packages of each row of the Layers table, top first."""
    section = text.split("## Layers {#layers}", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ")]
    return [re.findall(r"`(\w+)`", row[2]) for row in rows if "`" in row[2]]  # no header


def _contract_layers() -> list[list[str]]:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = config["tool"]["importlinter"]["contracts"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


def test_the_layers_table_is_the_import_contracts_layers_in_order() -> None:
    assert _layers_table(_text()) == _contract_layers()


def test_every_subpackage_and_top_level_module_is_named() -> None:
    text = _text()
    named = set(re.findall(r"`([\w.]+)(?:/[^`]*)?`", text))
    tops = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    tops |= {p.name for p in PACKAGE.glob("*.py")}
    missing = [
        top for top in sorted(tops) if top not in named and top.removesuffix(".py") not in named
    ]
    assert missing == []


def test_every_module_the_page_names_exists() -> None:
    paths = _PATH.findall(_text())
    assert "_wire/request.py" in paths  # the pattern finds what the page names
    # package paths (`_wire/request.py`), or the repository's (`tests/...`)
    assert [p for p in paths if not (PACKAGE / p).exists() and not (REPO / p).exists()] == []
    for row in _layers_table(_text()):
        for name in row:
            assert (PACKAGE / name).is_dir() or (PACKAGE / f"{name}.py").is_file(), name
