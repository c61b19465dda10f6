"""The public names are one list: ``_MODULE_OF`` in ``__init__.py``; the rest follow it.

``__all__`` is derived from it; the imports type checkers read and the API reference
(docs/api/*.md) are checked against it here.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys

from support.paths import REPO

import pytest_dsh_replay

INIT = REPO / "pytest_dsh_replay" / "__init__.py"
API_PAGES = REPO / "docs" / "api"
_ENTRY = re.compile(r"^::: pytest_dsh_replay\.(\w+)\s*$", re.M)


def _typed_imports(source: str) -> dict[str, str]:
    """The names ``__init__.py`` imports for type checkers, each with its module."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom), ast.unparse(statement)
                for alias in statement.names:
                    # `X as X`: an explicit re-export, as strict type checkers require
                    assert alias.asname == alias.name, ast.unparse(statement)
                    found[alias.name] = str(statement.module)
    return found


def _drift(typed: dict[str, str], module_of: dict[str, str]) -> list[str]:
    """Where the imports for type checkers differ from the one list."""
    names = sorted(set(typed) | set(module_of))
    return [
        f"{name}: imported from {typed.get(name)}, listed in {module_of.get(name)}"
        for name in names
        if typed.get(name) != module_of.get(name)
    ]


def test_all_is_the_one_list_sorted() -> None:
    assert pytest_dsh_replay.__all__ == sorted(pytest_dsh_replay._MODULE_OF)


def test_the_imports_for_type_checkers_are_the_one_list() -> None:
    typed = _typed_imports(INIT.read_text(encoding="utf-8"))
    assert _drift(typed, pytest_dsh_replay._MODULE_OF) == []


def test_a_name_missing_from_the_imports_or_the_list_is_named() -> None:
    source = INIT.read_text(encoding="utf-8")
    dropped = source.replace("    from ._store.store import SessionStore as SessionStore\n", "")
    assert dropped != source
    assert _drift(_typed_imports(dropped), pytest_dsh_replay._MODULE_OF) == [
        "SessionStore: imported from None, listed in _store.store"
    ]
    module_of = {**pytest_dsh_replay._MODULE_OF, "SessionStore": "_store.session"}
    assert _drift(_typed_imports(source), module_of) == [
        "SessionStore: imported from _store.store, listed in _store.session"
    ]


def test_the_api_reference_documents_exactly_the_public_names() -> None:
    pages = sorted(API_PAGES.glob("*.md"))
    assert pages, "no API reference pages"
    entries = [e for page in pages for e in _ENTRY.findall(page.read_text(encoding="utf-8"))]
    assert len(entries) == len(set(entries)), "an entry is written twice"
    modules = {"hookspecs", "syrupy_ext", "cli"}  # the hooks, the extensions, the command
    assert set(entries) - modules == set(pytest_dsh_replay.__all__)
    assert modules <= set(entries)


def test_the_snapshot_extensions_module_is_an_attribute_of_the_package() -> None:
    # docs/guide/ci.md writes pytest_dsh_replay.syrupy_ext.DshLogExtension after a plain
    # `import pytest_dsh_replay`: it failed unless something had imported the module.
    code = (
        "import sys, pytest_dsh_replay\n"
        "assert 'pytest_dsh_replay.syrupy_ext' not in sys.modules\n"
        "print(pytest_dsh_replay.syrupy_ext.DshLogExtension.__name__)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert (result.returncode, result.stdout, result.stderr) == (0, "DshLogExtension\n", "")
